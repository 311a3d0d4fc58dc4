//! The paths a run keeps its evidence under (`--out`, `--state`,
//! `--audit-log`): local paths only. A URL given there (`s3://bucket/x`,
//! `postgres://…`) would otherwise be taken as a relative path and quietly
//! create a directory named `s3:` in the working directory; it is refused
//! as a configuration error (78) naming the flag, before anything happens.

use std::path::Path;

/// The scheme of `text` when it is a URL (`s3` of `s3://bucket/x`);
/// `None` for a path, even one holding `://` after something that cannot
/// be a scheme (`./a://b`).
pub(crate) fn url_scheme(text: &str) -> Option<&str> {
    let (scheme, _) = text.split_once("://")?;
    let is_scheme = scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    is_scheme.then_some(scheme)
}

/// `Err` naming `flag` when `path` is a URL rather than a local path.
pub fn require_local(flag: &str, path: &Path) -> Result<(), String> {
    let text = path.to_string_lossy();
    let Some(scheme) = url_scheme(&text) else {
        return Ok(());
    };
    Err(format!(
        "{flag} {}: a {scheme}:// URL, which edc-sync does not support there: it keeps landing, state and \
         audit trail in local paths (given as a path, the URL would become a directory named {scheme:?}: in \
         the working directory)",
        crate::redact::redact_arg(&text)
    ))
}

#[cfg(test)]
mod tests {
    use super::require_local;
    use std::path::Path;

    #[test]
    fn urls_are_refused_and_paths_pass() {
        for url in ["s3://bucket/x", "postgres://u:p@h/db", "gs://b", "file:///tmp/x"] {
            let err = require_local("--out", Path::new(url)).unwrap_err();
            assert!(err.starts_with("--out "), "{err}");
            assert!(!err.contains("u:p@"), "no credentials shown: {err}");
        }
        for path in ["/srv/edc/landing", "landing", "./a://b", "dir with://colon"] {
            assert!(require_local("--out", Path::new(path)).is_ok(), "{path}");
        }
    }
}

//! Keeps secrets out of everything the tool writes.
//!
//! Tokens never reach the command line (they come from `*_env` variables),
//! but a Redis URL may carry a password, and an operator may paste anything.
//!
//! Every secret value a run reads or obtains (token, password, the Basic
//! pair, a Vault session id, a credential helper's output) is registered
//! here the moment it is known; [`scrub`] replaces each occurrence with
//! `***`. The identifier masker runs every audit line and every stderr line
//! through it, so a secret echoed back by a vendor is removed too.

use std::borrow::Cow;
use std::sync::RwLock;

/// Values shorter than this are not scrubbed: replacing every `ab` in every
/// line would destroy the audit trail while protecting nothing of value.
const MIN_SECRET_LEN: usize = 4;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Makes `secret` one of the values [`scrub`] removes.
pub fn register_secret(secret: &str) {
    if secret.len() < MIN_SECRET_LEN {
        return;
    }
    let mut all = SECRETS.write().unwrap_or_else(|p| p.into_inner());
    if !all.iter().any(|s| s == secret) {
        all.push(secret.to_string());
        // Longest first, so a secret that contains another goes whole.
        all.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

/// Whether `text` holds any registered secret.
pub fn contains_secret(text: &str) -> bool {
    let all = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    all.iter().any(|s| text.contains(s.as_str()))
}

/// `text` with every registered secret replaced by `***`.
pub fn scrub(text: &str) -> Cow<'_, str> {
    let all = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    if !all.iter().any(|s| text.contains(s.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for s in all.iter() {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "***");
        }
    }
    Cow::Owned(out)
}

/// Redacts the userinfo of any `scheme://user:password@host` in `arg`,
/// whether the argument is the URL itself or `--flag=URL`: everything from
/// `://` to the last `@` (see [`without_userinfo`]), user name included,
/// since a token is often passed as the user.
pub fn redact_arg(arg: &str) -> String {
    without_userinfo(arg)
}

/// `text` with everything between `://` and the last `@` replaced by
/// `***`: for a URL that may not even parse (a secret with `/`, `\` or a
/// control character in it breaks the parser before it finds the
/// userinfo), so the whole userinfo goes, whatever its bytes.
pub fn without_userinfo(text: &str) -> String {
    match (text.find("://"), text.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}***{}", &text[..scheme_end + 3], &text[at..])
        }
        _ => text.to_string(),
    }
}

/// The process arguments with credentials in URLs redacted.
pub fn redact_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    args.into_iter().map(|a| redact_arg(&a)).collect()
}

#[cfg(test)]
mod tests {
    use super::{redact_arg, register_secret, scrub};

    #[test]
    fn registered_secrets_are_scrubbed_wherever_they_appear() {
        register_secret("s3cr3t-session-42");
        register_secret("ab");
        assert_eq!(
            scrub("vendor said: session s3cr3t-session-42 expired; ab"),
            "vendor said: session *** expired; ab"
        );
        assert_eq!(scrub("nothing here"), "nothing here");
    }

    #[test]
    fn passwords_in_urls_are_redacted() {
        assert_eq!(
            redact_arg("redis://:hunter2@127.0.0.1:6379/0"),
            "redis://***@127.0.0.1:6379/0"
        );
        assert_eq!(redact_arg("--redis=redis://u:p@h"), "--redis=redis://***@h");
        assert_eq!(redact_arg("https://token@host/x"), "https://***@host/x");
        assert_eq!(
            redact_arg("redis://:a/b?c@h:1/"),
            "redis://***@h:1/",
            "a password with / and ?"
        );
        assert_eq!(redact_arg("--study"), "--study");
    }

    #[test]
    fn userinfo_goes_whole_even_when_the_url_does_not_parse() {
        use super::without_userinfo;
        assert_eq!(without_userinfo("http://u:a/b\\c@h:1/x"), "http://***@h:1/x");
        assert_eq!(without_userinfo("http://h/x"), "http://h/x");
    }
}

//! The identity of a stream (the one cursor a run works on), and its name
//! as a path: where its cursor, manifest and landed pages are kept, on
//! every backend.

use serde::{Deserialize, Serialize};

use crate::config::{Placeholder, PlaceholderValues};

/// vendor + tenant + study + protocol version + stream name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamIdentity {
    pub vendor: String,
    pub tenant: Option<String>,
    pub study: Option<String>,
    pub protocol_version: Option<String>,
    pub stream: Option<String>,
}

impl PlaceholderValues for StreamIdentity {
    fn value(&self, p: Placeholder) -> Option<&str> {
        match p {
            Placeholder::Vendor => Some(&self.vendor),
            Placeholder::Tenant => self.tenant.as_deref(),
            Placeholder::Study => self.study.as_deref(),
            Placeholder::ProtocolVersion => self.protocol_version.as_deref(),
            Placeholder::Stream => self.stream.as_deref(),
            // Not the stream's: the quota key is filled with the base URL's.
            Placeholder::Host => None,
        }
    }
}

/// A file-system-safe name for a stream: its identity parts, sanitised.
pub fn stream_dir_name(id: &StreamIdentity) -> String {
    dir_name_with(id, sanitize)
}

/// How many path components [`stream_dir_name`] has.
pub(crate) const DIR_DEPTH: usize = 5;

/// A landing directory as an audit line records it, read relative to the
/// landing root. Lines written before paths were recorded relative name it
/// absolutely (`/old/root/vault/-/S1/-/default`): its last
/// [`stream_dir_name`] components are the same directory under whatever
/// root the landing has now. `None` for a value that is neither.
pub(crate) fn relative_landing_dir(recorded: &str) -> Option<std::borrow::Cow<'_, str>> {
    let path = std::path::Path::new(recorded);
    if !path.is_absolute() {
        return (!recorded.is_empty()).then_some(std::borrow::Cow::Borrowed(recorded));
    }
    let parts: Vec<_> = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect();
    let tail = parts.get(parts.len().checked_sub(DIR_DEPTH)?.max(1)..)?;
    (tail.len() == DIR_DEPTH).then(|| std::borrow::Cow::Owned(tail.join("/")))
}

/// The stream's directory name with `sanitize` applied to each part (the
/// current mapping, or the legacy one `migrate` looks for).
pub(crate) fn dir_name_with(id: &StreamIdentity, sanitize: fn(&str) -> String) -> String {
    let part = |s: Option<&str>| sanitize(s.unwrap_or("-"));
    format!(
        "{}/{}/{}/{}/{}",
        sanitize(&id.vendor),
        part(id.tenant.as_deref()),
        part(id.study.as_deref()),
        part(id.protocol_version.as_deref()),
        part(id.stream.as_deref())
    )
}

/// Keeps letters, digits, `-`, `_`, `.` (not leading), `(` and `)`; every
/// other character is percent-encoded byte by byte (`/` becomes `%2F`, `%`
/// itself `%25`), as in a URL. The mapping is injective: every `%` starts a
/// fixed-width escape, so a name decodes back to exactly one id and two
/// distinct ids never share a path. (Before, escapes were `_` and hex
/// without a terminator: `a/b` and `a_2fb` collided; `migrate` moves state
/// written under those names.) The empty string becomes `%`, which no
/// non-empty id produces.
pub fn sanitize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '(' | ')') || (c == '.' && !out.is_empty()) {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    if out.is_empty() {
        out.push('%');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_landing_directory_reads_relative_to_the_root() {
        assert_eq!(
            relative_landing_dir("vault/-/S1/-/default").as_deref(),
            Some("vault/-/S1/-/default")
        );
        assert_eq!(
            relative_landing_dir("/srv/old/landing/vault/-/S1/-/default").as_deref(),
            Some("vault/-/S1/-/default")
        );
        assert_eq!(
            relative_landing_dir("/a/b").as_deref(),
            None,
            "too short to be one"
        );
        assert_eq!(relative_landing_dir("").as_deref(), None);
    }

    #[test]
    fn names_are_safe_and_distinct() {
        let id = StreamIdentity {
            vendor: "rave".into(),
            study: Some("Mediflex(Prod)".into()),
            stream: Some("../etc".into()),
            ..Default::default()
        };
        let name = stream_dir_name(&id);
        assert!(name.starts_with("rave/-/Mediflex(Prod)/-/"), "{name}");
        // Exactly five components, none hidden or a parent reference.
        let parts: Vec<&str> = name.split('/').collect();
        assert_eq!(parts.len(), 5, "{name}");
        assert!(
            parts.iter().all(|p| !p.is_empty() && !p.starts_with('.')),
            "{name}"
        );
        assert_ne!(sanitize("a/b"), sanitize("a_b"));
        assert_ne!(sanitize(".."), sanitize("."));
        assert_ne!(
            sanitize("a/b"),
            sanitize("a_2fb"),
            "the collision of the old mapping"
        );
        assert_ne!(sanitize(""), sanitize("-"));
        assert_eq!(
            sanitize("Mediflex(Prod)"),
            "Mediflex(Prod)",
            "plain ids keep their names"
        );
    }

    /// Decodes a sanitised name: if every name decodes to the id it came
    /// from, no two ids can share one.
    fn unsanitize(name: &str) -> Option<String> {
        if name == "%" {
            return Some(String::new());
        }
        let mut bytes = Vec::new();
        let mut rest = name.as_bytes();
        while let Some((&b, tail)) = rest.split_first() {
            if b == b'%' {
                let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
                bytes.push(u8::from_str_radix(hex, 16).ok()?);
                rest = &tail[2..];
            } else {
                bytes.push(b);
                rest = tail;
            }
        }
        String::from_utf8(bytes).ok()
    }

    proptest::proptest! {
        #[test]
        fn sanitize_is_injective(id in "\\PC{0,12}", other in "[a-z_/0-9.]{0,6}") {
            proptest::prop_assert_eq!(unsanitize(&sanitize(&id)), Some(id.clone()));
            proptest::prop_assert_eq!(unsanitize(&sanitize(&other)), Some(other.clone()));
            if id != other {
                proptest::prop_assert_ne!(sanitize(&id), sanitize(&other));
            }
        }
    }
}

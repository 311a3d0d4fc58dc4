//! Durable state: landed pages and their manifest, the per-stream cursor,
//! and the run lock (invariant 2: the cursor never runs ahead of the data).

mod cursor;
mod landing;
mod lock;

pub use cursor::{Cursor, CursorStore, PageAdvance, StoreError};
pub use landing::{LandedPage, LandingStore, LandingTemp, ManifestEntry};
pub use lock::{LockError, RunLock, StreamLocked};

use crate::stream::StreamIdentity;

/// A file-system-safe name for a stream: its identity parts, sanitised.
pub fn stream_dir_name(id: &StreamIdentity) -> String {
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

/// Keeps letters, digits, `-`, `_`, `.`, `(`, `)`; anything else becomes
/// `_` followed by its hex code, so distinct names stay distinct.
pub fn sanitize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '(' | ')') || (c == '.' && !out.is_empty()) {
            out.push(c);
        } else {
            out.push_str(&format!("_{:x}", c as u32));
        }
    }
    if out.is_empty() {
        out.push('-');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}

//! State written under the old, non-injective names, moved to the new ones.
//!
//! Up to this version `sanitize` kept `_` as is and wrote escapes without a
//! terminator, so the study ids `a/b` and `a_2fb` shared one directory. The
//! new mapping is injective; ids made only of letters, digits, `-`, `_`, `.`,
//! `(`, `)` keep their names, and for the others a stream's cursor and
//! landing directory are moved once, when the stream next runs (under its
//! run lock), and only when the old cursor file names this very stream:
//! a cursor that belongs to the other id of a collision is left alone.

use std::path::{Path, PathBuf};

use super::{stream_dir_name, StoreError};
use crate::stream::StreamIdentity;

/// The mapping before this version, kept only to find old state.
pub fn legacy_sanitize(s: &str) -> String {
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

fn legacy_stream_dir_name(id: &StreamIdentity) -> String {
    crate::stream::dir_name_with(id, legacy_sanitize)
}

/// What was moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Moved {
    pub from: PathBuf,
    pub to: PathBuf,
}

/// Moves the stream's cursor file and landing directory from their old
/// names, when the old cursor is this stream's and nothing is at the new
/// names yet. Call with the stream's run lock held.
pub(crate) fn stream(
    state_dir: &Path,
    out_dir: &Path,
    id: &StreamIdentity,
) -> Result<Vec<Moved>, StoreError> {
    let (old, new) = (legacy_stream_dir_name(id), stream_dir_name(id));
    if old == new {
        return Ok(Vec::new());
    }
    let old_cursor = state_dir.join(format!("{old}.cursor.json"));
    let new_cursor = state_dir.join(format!("{new}.cursor.json"));
    if new_cursor.exists() || !old_cursor.is_file() {
        return Ok(Vec::new());
    }
    let belongs = crate::no_follow::read_bytes(&old_cursor)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| serde_json::from_value::<StreamIdentity>(v["stream"].clone()).ok())
        .is_some_and(|owner| &owner == id);
    if !belongs {
        return Ok(Vec::new());
    }
    let mut moved = Vec::new();
    let old_landing = out_dir.join(&old);
    let new_landing = out_dir.join(&new);
    if old_landing.is_dir() && !new_landing.exists() {
        rename(&old_landing, &new_landing)?;
        moved.push(Moved {
            from: old_landing,
            to: new_landing,
        });
    }
    // The cursor last: until it moves, a crash leaves the old state to migrate again.
    rename(&old_cursor, &new_cursor)?;
    moved.push(Moved {
        from: old_cursor,
        to: new_cursor,
    });
    Ok(moved)
}

fn rename(from: &Path, to: &Path) -> Result<(), StoreError> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| StoreError::io(parent, "create", e))?;
    }
    std::fs::rename(from, to).map_err(|e| StoreError::io(from, "move to its new name", e))?;
    crate::durable::sync_parent_dir(to).map_err(|e| StoreError::io(to, "fsync the directory of", e))
}

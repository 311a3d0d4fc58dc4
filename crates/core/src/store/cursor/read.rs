//! Reading a cursor file back: its format checked, its stream checked,
//! its lookback memory read from its journal and proven by its seal, or
//! the initial cursor of a stream never synced. A child of `cursor.rs`.

use std::path::Path;

use super::journal::{Journal, Unresolved};
use super::seal::LineMemory;
use super::{Cursor, State, StoreError, FORMAT};
use crate::stream::StreamIdentity;

/// Reads the cursor file at `path` of `stream`; absent, the initial cursor.
pub(super) fn load(
    path: &Path,
    stream: &StreamIdentity,
    initial_start: Option<String>,
    journal: &Journal,
) -> Result<Cursor, StoreError> {
    // Never through a symbolic link (refused, 74, naming the file).
    let mut bytes = Vec::new();
    match crate::no_follow::read(path) {
        Ok(mut f) => {
            std::io::Read::read_to_end(&mut f, &mut bytes).map_err(|e| StoreError::io(path, "read", e))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(initial(stream, initial_start)),
        Err(e) => return Err(StoreError::io(path, "open", e)),
    }
    let mut state = parse_state(&bytes, stream).map_err(|detail| StoreError::Unreadable {
        path: path.to_path_buf(),
        detail,
    })?;
    let lookback = match state.lookback.take() {
        None => None,
        Some(LineMemory::Whole(memory)) => Some(memory),
        Some(LineMemory::Sealed(seal)) => {
            let cursor_file = path.display();
            let memory = journal.memory_sealed(&seal).map_err(|why| {
                let path = journal.path().to_path_buf();
                match why {
                    Unresolved::Behind(detail) | Unresolved::Unreadable(detail) => {
                        StoreError::Unreadable { path, detail }
                    }
                    Unresolved::Damaged(detail) => StoreError::Corrupt {
                        path,
                        detail: format!(
                            "the lookback memory it holds for {} is not the one the cursor seals: {detail}; \
                             nothing was fetched. Run again with --repair-state to rebuild the cursor from \
                             the trail (recorded in a cursor_rebuilt line)",
                            cursor_file,
                        ),
                    },
                }
            })?;
            Some(memory)
        }
    };
    Ok(Cursor {
        state: state.holding(lookback),
    })
}

/// A cursor's JSON as a database row holds it, of `stream`: its lookback
/// memory whole (a row written before schema version 5) or by its seal,
/// replayed from the stream's `memory` rows.
pub(super) fn parse(bytes: &[u8], memory: &[String], stream: &StreamIdentity) -> Result<Cursor, String> {
    let mut state = parse_state(bytes, stream)?;
    let lookback = match state.lookback.take() {
        None => None,
        Some(LineMemory::Whole(memory)) => Some(memory),
        Some(LineMemory::Sealed(seal)) => {
            let lines: Vec<&[u8]> = memory.iter().map(|l| l.as_bytes()).collect();
            let (memory, _) = super::journal::replay(&lines, &seal).map_err(|why| {
                format!(
                    "the stream's edc_sync_memory rows do not hold the lookback memory it seals: {}",
                    why.into_detail()
                )
            })?;
            Some(memory)
        }
    };
    Ok(Cursor {
        state: state.holding(lookback),
    })
}

/// A cursor's JSON (a file's bytes, a database row's text) of `stream`,
/// its lookback memory whole or sealed.
fn parse_state(bytes: &[u8], stream: &StreamIdentity) -> Result<State<LineMemory>, String> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON ({e})"))?;
    match value.get("format").and_then(serde_json::Value::as_u64) {
        Some(f) if f == u64::from(FORMAT) => {}
        Some(f) if f > u64::from(FORMAT) => {
            return Err(format!(
                "written by a newer edc-sync (state format {f}; this version reads format {FORMAT})"
            ))
        }
        other => return Err(format!("unknown state format {other:?}")),
    }
    let state: State<LineMemory> = serde_json::from_value(value).map_err(|e| e.to_string())?;
    if &state.stream != stream {
        return Err("it belongs to a different stream".into());
    }
    Ok(state)
}

pub(super) fn initial(stream: &StreamIdentity, window_start: Option<String>) -> Cursor {
    Cursor {
        state: State {
            format: FORMAT,
            stream: stream.clone(),
            window_start,
            next_page: None,
            window_end: None,
            high_water: None,
            pages_in_window: 0,
            records_in_window: 0,
            last_page_sha256: None,
            updated_at: None,
            run_id: None,
            receipt: None,
            manifest_bytes: None,
            lookback: None,
            snapshot: None,
        },
    }
}

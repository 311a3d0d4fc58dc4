//! A stream's lookback memory in the state database (schema version 5):
//! the journal a cursor file keeps beside it (`store/cursor/journal.rs`),
//! one `edc_sync_memory` row a line. Row 0 holds the memory whole; each
//! later row one commit's change with the seal after it. The cursor row
//! holds the memory by its seal, as the trail's line does, so a page's
//! commit writes its change, never the memory (at 20,000 identities the
//! row used to be rewritten whole, 1.2 MB, at every page).
//!
//! A commit writes its memory row in its own transaction, with its line
//! and its cursor row, so the rows never fall behind the cursor as a file
//! can. Nothing in them is trusted: a cursor is read with the rows up to
//! the last that records its seal, replayed and held to the seal.

use std::sync::Mutex;

use tokio_postgres::GenericClient;

use crate::store::{Cursor, MemoryChange};

/// What a commit writes of the memory.
#[derive(Debug, Clone)]
pub(crate) enum MemoryWrite {
    /// One more row: the page's change.
    Append(String),
    /// The rows replaced by one holding the memory whole.
    Rewrite(String),
}

/// Past the first row's size, how much the later rows may add before the
/// rows are written anew (as the file journal).
const SLACK: u64 = 64 * 1024;

/// How much the stream's rows hold, for this run: the bytes of all of
/// them and of the first (`None`: not read yet, so the next commit
/// rewrites them).
#[derive(Debug, Default)]
pub(crate) struct MemoryRows {
    held: Mutex<Option<(u64, u64)>>,
}

impl MemoryRows {
    /// The rows as a read of `cursor` found them: added to only when the
    /// last of them records the seal of its memory (rows left by a state
    /// emptied but for them, or lines past the cursor, are written anew by
    /// the next commit, never added to).
    pub(crate) fn read(&self, lines: &[String], cursor: &Cursor) {
        let ends_at_cursor = match (cursor.lookback_memory(), lines.last()) {
            (Some(memory), Some(last)) => {
                crate::store::journal_line_seal(last.as_bytes(), lines.len() == 1).as_ref()
                    == Some(&memory.seal())
            }
            _ => false,
        };
        let held = lines.first().filter(|_| ends_at_cursor).map(|first| {
            let all = lines.iter().map(|l| l.len() as u64).sum();
            (all, first.len() as u64)
        });
        *self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = held;
    }

    /// What committing `cursor` (after `change` to the memory the rows
    /// end at) writes; `None` when it keeps no memory.
    pub(crate) fn write_for(
        &self,
        cursor: &Cursor,
        change: Option<&MemoryChange>,
    ) -> Result<Option<MemoryWrite>, String> {
        let Some(memory) = cursor.lookback_memory() else {
            *self
                .held
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
            return Ok(None);
        };
        let seal = memory.seal();
        let text = |bytes: serde_json::Result<Vec<u8>>| {
            bytes
                .map_err(|e| format!("the lookback memory cannot be written ({e})"))
                .and_then(|b| String::from_utf8(b).map_err(|e| e.to_string()))
        };
        let mut held = self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let (Some((all, first)), Some(change)) = (*held, change) {
            if all < first.saturating_mul(2).saturating_add(SLACK) {
                let line = text(crate::store::journal_change_line(change, &seal))?;
                *held = Some((all + line.len() as u64, first));
                return Ok(Some(MemoryWrite::Append(line)));
            }
        }
        let line = text(crate::store::journal_base_line(memory, &seal))?;
        *held = Some((line.len() as u64, line.len() as u64));
        Ok(Some(MemoryWrite::Rewrite(line)))
    }

    /// The rows are no longer known (a failed commit): the next commit
    /// rewrites them.
    pub(crate) fn forget(&self) {
        *self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

/// Stream `key`'s memory rows, in order.
pub(crate) async fn read(
    client: &impl GenericClient,
    key: &str,
) -> Result<Vec<String>, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT line FROM edc_sync_memory WHERE stream = $1 ORDER BY n",
            &[&key],
        )
        .await?;
    Ok(rows.into_iter().map(|r| r.get(0)).collect())
}

/// Writes `write` to stream `key`'s rows (inside the commit's
/// transaction).
pub(crate) async fn write(
    client: &impl GenericClient,
    key: &str,
    write: &MemoryWrite,
) -> Result<(), tokio_postgres::Error> {
    match write {
        MemoryWrite::Append(line) => {
            client
                .execute(
                    "INSERT INTO edc_sync_memory (stream, n, line) \
                     SELECT $1, coalesce(max(n), -1) + 1, $2 FROM edc_sync_memory WHERE stream = $1",
                    &[&key, line],
                )
                .await?;
        }
        MemoryWrite::Rewrite(line) => {
            client
                .execute("DELETE FROM edc_sync_memory WHERE stream = $1", &[&key])
                .await?;
            client
                .execute(
                    "INSERT INTO edc_sync_memory (stream, n, line) VALUES ($1, 0, $2)",
                    &[&key, line],
                )
                .await?;
        }
    }
    Ok(())
}

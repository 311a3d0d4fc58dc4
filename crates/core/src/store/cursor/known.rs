//! What a holder of a stream's run lock knows of its cursor: the one it
//! read under the lock, or the one its last commit wrote. While the lock is
//! held nothing else writes the cursor (a file store is its only writer; a
//! database's commits check the holder's fence), so the cursor and its
//! lookback memory (over a megabyte at 20,000 identities) are read once a
//! hold, not again by each start-up check, the pages and the run's end.
//! Forgotten when a write may not have gone through, so it is read back.
//! A child of `cursor.rs`.

use std::sync::{Mutex, MutexGuard, PoisonError};

use super::Cursor;

#[derive(Debug, Default)]
pub(crate) struct KnownCursor(Mutex<Option<Cursor>>);

impl KnownCursor {
    /// The cursor known, if any.
    pub(crate) fn get(&self) -> Option<Cursor> {
        self.held().clone()
    }

    /// Whether a cursor is known (without copying it).
    pub(crate) fn is_known(&self) -> bool {
        self.held().is_some()
    }

    /// `cursor` is the stream's, as read or written under the lock.
    pub(crate) fn set(&self, cursor: &Cursor) {
        *self.held() = Some(cursor.clone());
    }

    /// The cursor is to be read again.
    pub(crate) fn forget(&self) {
        *self.held() = None;
    }

    fn held(&self) -> MutexGuard<'_, Option<Cursor>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

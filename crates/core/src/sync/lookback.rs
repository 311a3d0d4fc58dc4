//! A page read again in a lookback's span: which of its records were
//! landed before (the cursor's memory of them, `store::cursor::memory`)
//! and which are new. Pure, so the rule is tested without a server.

use std::collections::HashSet;

use crate::config::Delta;
use crate::edc::payload::identity::RecordKey;
use crate::edc::payload::order::earlier;
use crate::store::Cursor;

/// Where the window after one that ended at `mark` (its high-water mark,
/// or the second after a date window's end) starts: `mark` less the
/// delta's lookback, when it has one and the memory of landed records
/// reaches back that far. The benchmarks and the OQ check cursors with it.
pub fn restart_at(delta: &Delta, mark: &str) -> String {
    delta
        .lookback
        .as_ref()
        .and_then(|l| earlier(mark, l.span.as_secs()))
        .unwrap_or_else(|| mark.to_string())
}

/// A page's records, told apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// Records no earlier page landed: this page lands them.
    pub new: Vec<RecordKey>,
    /// Positions of the records an earlier page landed, or an earlier
    /// position of this page (a vendor listing one record twice).
    pub repeated: Vec<u32>,
}

/// Splits a page's records by the memory of the cursor before it and,
/// for `backfill --missing-only`, the records landed before elsewhere.
pub fn split(cursor: &Cursor, keys: Vec<RecordKey>, landed_before: Option<&HashSet<String>>) -> Split {
    let known = cursor
        .lookback_memory()
        .map(|m| m.identities())
        .unwrap_or_default();
    let elsewhere = |id: &str| landed_before.is_some_and(|l| l.contains(id));
    let mut on_page: HashSet<String> = HashSet::new();
    let mut out = Split {
        new: Vec::new(),
        repeated: Vec::new(),
    };
    for key in keys {
        if known.contains(key.identity.as_str())
            || elsewhere(&key.identity)
            || !on_page.insert(key.identity.clone())
        {
            out.repeated.push(key.position);
        } else {
            out.new.push(key);
        }
    }
    out
}

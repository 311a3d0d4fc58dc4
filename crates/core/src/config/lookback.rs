//! `delta.lookback`: how far back each window or cursor re-reads, and how
//! a record already landed is recognised when it is read again.
//!
//! A window closes at the server's clock minus its settle lag and a
//! modified-since cursor moves to its high-water mark; a record that
//! becomes visible later than that (replication lag, a long transaction, a
//! back-dated entry, a sub-second time just past a whole-second window
//! end) would never be asked for again. Re-reading the last `seconds` of
//! every window catches it; the record identities kept with the cursor
//! keep the re-read records from being landed twice.

use std::time::Duration;

use super::check::{integer, string, Fields, Report};
use super::policy::{CursorKind, IdenticalRecords, Lookback, PayloadFormat};
use super::yaml::Node;

const LOOKBACK_KEYS: [&str; 4] = ["seconds", "record_id", "max_records", "identical_records"];

/// The lookback of a date window (Vault's audit trail) when the policy
/// names none: an hour of lateness past the settle lag.
pub(crate) const DEFAULT_WINDOW_LOOKBACK_S: u64 = 3600;

/// The lookback of a modified-since cursor (a VQL or JSON timestamp
/// cursor) when the policy names none: five minutes.
pub(crate) const DEFAULT_CURSOR_LOOKBACK_S: u64 = 300;

/// A Rave study dataset re-reads nothing beyond its boundary second unless
/// told to (its `start` has whole seconds; that second is always re-read).
pub(crate) const DEFAULT_DATASET_LOOKBACK_S: u64 = 0;

/// Record identities kept per stream when the policy names no bound.
pub(crate) const DEFAULT_MAX_RECORDS: u32 = 20_000;

/// The longest lookback: Vault serves its audit trail 30 days back.
const MAX_SECONDS: i64 = 30 * 86_400;

pub(super) fn lookback(
    report: &mut Report,
    path: Vec<String>,
    node: &Node,
    default_s: u64,
) -> Option<Lookback> {
    let mut f = Fields::of(report, path, node)?;
    let seconds = match f.optional("seconds") {
        Some((p, n)) => integer(report, &p, n, 0, MAX_SECONDS).map(|s| s as u64),
        None => Some(default_s),
    };
    let record_id = match f.optional("record_id") {
        Some((p, n)) => string(report, &p, n).map(|s| Some(s.to_string())),
        None => Some(None),
    };
    let max_records = match f.optional("max_records") {
        Some((p, n)) => integer(report, &p, n, 1, 1_000_000).map(|m| m as u32),
        None => Some(DEFAULT_MAX_RECORDS),
    };
    let identical = match f.optional("identical_records") {
        Some((p, n)) => match string(report, &p, n) {
            Some("same") => Some(IdenticalRecords::Same),
            Some("distinct") => Some(IdenticalRecords::Distinct),
            Some(other) => {
                report.add(
                    &p,
                    format!(
                        "must be same (two records of identical content are one record listed twice) or \
                         distinct (they are two events, each landed once), got {other:?}"
                    ),
                );
                None
            }
            None => None,
        },
        None => Some(IdenticalRecords::Same),
    };
    f.finish(report, &LOOKBACK_KEYS);
    Some(Lookback {
        span: Duration::from_secs(seconds?),
        record_id: record_id?,
        max_records: max_records?,
        identical: identical?,
    })
}

/// The default `seconds` of a delta's lookback, or `None` when its cursor
/// is not a time (no lookback possible).
pub(super) fn default_seconds(format: PayloadFormat, cursor_kind: CursorKind, windowed: bool) -> Option<u64> {
    if format != PayloadFormat::Json || !cursor_kind.is_instant() {
        None
    } else if windowed {
        Some(DEFAULT_WINDOW_LOOKBACK_S)
    } else {
        Some(DEFAULT_CURSOR_LOOKBACK_S)
    }
}

/// What a lookback block given where no lookback is possible is told.
pub(super) const NOT_A_TIME: &str =
    "only used with format: json and cursor_kind: timestamp or php_datetime (a lookback re-reads a \
                                     span of time; an ODM SourceID or a number cursor has none)";

/// A stream's own `lookback` block, over its delta's: `Some(None)` turns
/// it off for the stream (`seconds: 0`).
pub(super) fn for_stream(
    report: &mut Report,
    path: Vec<String>,
    node: &Node,
    delta: Option<&super::policy::Delta>,
) -> Option<Option<Lookback>> {
    let default_s = delta.and_then(|d| default_seconds(d.format, d.cursor_kind, d.window.is_some()));
    let Some(default_s) = default_s else {
        report.add(&path, NOT_A_TIME);
        return None;
    };
    let l = lookback(report, path, node, default_s)?;
    Some((!l.span.is_zero()).then_some(l))
}

/// The lookback a delta has when its policy names none.
pub(super) fn default(default_s: u64) -> Lookback {
    Lookback {
        span: Duration::from_secs(default_s),
        record_id: None,
        max_records: DEFAULT_MAX_RECORDS,
        identical: IdenticalRecords::Same,
    }
}

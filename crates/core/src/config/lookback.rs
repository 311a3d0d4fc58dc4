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
use super::policy::Lookback;
use super::yaml::Node;

const LOOKBACK_KEYS: [&str; 3] = ["seconds", "record_id", "max_records"];

/// The lookback of a date window (Vault's audit trail) when the policy
/// names none: an hour of lateness past the settle lag.
pub const DEFAULT_WINDOW_LOOKBACK_S: u64 = 3600;

/// The lookback of a modified-since cursor (a VQL or JSON timestamp
/// cursor) when the policy names none: five minutes.
pub const DEFAULT_CURSOR_LOOKBACK_S: u64 = 300;

/// Record identities kept per stream when the policy names no bound.
pub const DEFAULT_MAX_RECORDS: u32 = 20_000;

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
    f.finish(report, &LOOKBACK_KEYS);
    Some(Lookback {
        span: Duration::from_secs(seconds?),
        record_id: record_id?,
        max_records: max_records?,
    })
}

/// The lookback a delta has when its policy names none.
pub(super) fn default(default_s: u64) -> Lookback {
    Lookback {
        span: Duration::from_secs(default_s),
        record_id: None,
        max_records: DEFAULT_MAX_RECORDS,
    }
}

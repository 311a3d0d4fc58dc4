//! What a stream did: pages, records, bytes, waits and their reasons, for
//! the run summary, `stream_finished`, `run_finished` and the metrics.

use std::path::PathBuf;
use std::time::Duration;

use super::SyncError;

/// Why a wait happened, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitKind {
    /// 429 / 503 with (or without) Retry-After.
    Throttled,
    /// Backoff after a 5xx, a transport error or a truncated body.
    Retry,
    /// The vendor's burst allowance fell to the floor.
    VendorBurst,
}

impl WaitKind {
    pub fn label(self) -> &'static str {
        match self {
            WaitKind::Throttled => "throttled",
            WaitKind::Retry => "retry",
            WaitKind::VendorBurst => "vendor_burst",
        }
    }
}

/// One wait, for the run summary and metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct Wait {
    pub kind: WaitKind,
    pub reason: String,
    pub seconds: f64,
}

/// What a stream did.
#[derive(Debug, Clone, Default)]
pub struct StreamReport {
    pub stream: String,
    pub pages: u64,
    pub records: u64,
    pub bytes: u64,
    pub replayed_pages: u64,
    /// Records read that were landed before (see `stream_finished`).
    pub repeated_records: u64,
    pub waits: Vec<Wait>,
    pub window_complete: bool,
    pub landing_dir: PathBuf,
    pub cursor_file: PathBuf,
    /// Wall time spent making pages durable (landing fsync + rename,
    /// manifest, audit line, cursor replace): the price of invariant 2.
    pub durable_commit: Duration,
    /// Server clock minus local clock at the last response with a `Date`.
    pub clock_skew_s: Option<f64>,
}

/// What a stream did, and why it stopped when it did not finish: the
/// report is kept either way, so a failed run still says what it committed.
pub(crate) struct StreamOutcome {
    pub report: StreamReport,
    pub result: Result<(), SyncError>,
}

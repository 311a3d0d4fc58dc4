//! Per-run choices that are not policy.

/// Per-run choices that are not policy.
#[derive(Debug, Clone, Default)]
pub struct SyncOptions {
    /// Stop (with progress saved) after this many committed pages.
    pub max_pages: Option<u64>,
    /// Fetch and validate, but land nothing and move no cursor.
    pub dry_run: bool,
    /// Backfill: the first window starts here (no cursor file yet).
    pub since: Option<String>,
    /// Backfill: stop once a committed page reaches this cursor value.
    pub until: Option<String>,
    /// Set by SIGINT / SIGTERM: stop at the next safe point.
    pub interrupt: crate::interrupt::Interrupt,
    /// A progress display for people at a terminal (never under cron).
    pub progress: Option<indicatif::ProgressBar>,
    /// `--repair-state`: a cursor file that disagrees with the audit line
    /// its receipt names takes the trail's cursor (audited as
    /// `state_repaired`) instead of stopping the run with 65.
    pub repair_state: bool,
    /// `--accept-rollback`: a landing that lists pages of runs the trail
    /// does not record (a state restored from an older backup) is recorded
    /// as a deviation (`rollback_accepted`) instead of stopping the run.
    pub accept_rollback: bool,
    /// With a state database: where this run's cursors and manifests are
    /// kept apart from the incremental ones (`backfill/SINCE..UNTIL`, the
    /// directory a state directory would nest them in).
    pub state_namespace: Option<String>,
    /// With a state directory: the backfill's own landing root below the
    /// one --out names (`backfill/SINCE..UNTIL`), recorded in each
    /// `page_committed` line as `landing_root` so `verify` from --out finds
    /// the page there and not in the incremental stream's directory (a
    /// state database records it in `landing_dir` itself).
    pub landing_root: Option<String>,
    /// `backfill --missing-only`: the landing root whose records (the
    /// incremental stream's and every earlier backfill's under it) are
    /// landed already; only records missing from all of them are landed.
    pub missing_from: Option<std::path::PathBuf>,
}

/// True once a cursor value is strictly past `until` (numbers as numbers,
/// timestamps as instants): a record equal to `until` may still follow.
pub(super) fn beyond(value: &str, until: &str) -> bool {
    crate::record::order::compare_params(value, until) == std::cmp::Ordering::Greater
}

//! `edc-sync bench sync`: what one committed page costs, and what it is
//! compared with. Figures: pages per second, CPU milliseconds per
//! committed page beside the floor of its syscalls (`side_by_side.rs`),
//! the wall time of the durable commit per page, and the peak RSS while
//! syncing large pages (`phase.rs`).

use std::path::PathBuf;

use serde::Serialize;

use super::phase::Phase;
use super::side_by_side::{Round, SideBySide};

/// Both phases' figures, and the single JSON line scripts read.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    /// The small pages, each round beside its floors.
    pub small: SideBySide,
    pub large: Phase,
    pub peers: super::peers::Peers,
    /// SHA-256 alone and the payload check alone, over a page padded like
    /// the large phase's and a dense one.
    pub one_pass: Vec<super::one_pass::Shape>,
    /// The Python loop over the large pages.
    pub large_python: Option<super::peers::PythonPeer>,
}

impl Figures {
    fn shape(&self, name: &str) -> Option<&super::one_pass::Shape> {
        self.one_pass.iter().find(|s| s.name == name)
    }

    /// SHA-256 and the check learning identities as the benchmark policy
    /// asks (by `id`), over one small page in cache, in ms: the computing
    /// a small page cannot do without.
    fn small_compute_ms_per_page(&self) -> Option<f64> {
        self.shape("small")
            .map(|s| (s.sha256_ms + s.by_id_check_ms) / s.pages.max(1) as f64)
    }

    /// SHA-256 over a small page in cache, in ms a byte: the rate the
    /// commit line's own hash is priced at.
    fn small_sha256_ms_per_byte(&self) -> Option<f64> {
        self.shape("small")
            .map(|s| s.sha256_ms / (s.page_bytes * s.pages).max(1) as f64)
    }

    /// The least CPU a small page of `round` could cost on this machine,
    /// in ms: the floor with the page received by a bare GET, SHA-256 and
    /// the check by id over it, and SHA-256 over its `page_committed` line
    /// (the trail's chain hashes every line). Nothing is counted for the
    /// HTTP client, the runtime, composing the commit's records or the
    /// trail's own checks, so no sync of that page can cost less; when
    /// this is above 1.3x the floor, so is every sync of it.
    fn least_ms_per_page(&self, round: &Round) -> Option<f64> {
        let line = round.sync.commit_bytes.audit_line as f64 * self.small_sha256_ms_per_byte()?;
        Some(round.floor_received.cpu_ms_per_page + self.small_compute_ms_per_page()? + line)
    }

    /// [`Figures::least_ms_per_page`] over the round's floor.
    fn least_vs_floor(&self, round: &Round) -> Option<f64> {
        self.least_ms_per_page(round)
            .map(|least| least / round.floor.cpu_ms_per_page)
    }

    /// A round's JSON with its least cost beside it.
    fn round_json(&self, round: &Round) -> serde_json::Value {
        let mut json = round.json();
        json["least_ms_per_page"] = serde_json::json!(self.least_ms_per_page(round));
        json["least_vs_floor"] = serde_json::json!(self.least_vs_floor(round));
        json
    }

    /// SHA-256 alone over one large page's bytes, in ms.
    fn sha256_ms_per_large_page(&self) -> Option<f64> {
        self.shape("padded")
            .map(|s| s.sha256_ms * self.large.page_bytes as f64 / s.page_bytes as f64)
    }
}

pub fn render(f: &Figures) -> String {
    let median = f.small.median();
    let (small, floor, received) = (&median.sync, median.floor, median.floor_received);
    let mut json = serde_json::json!({
        "pages_per_s": small.pages_per_s,
        "cpu_ms_per_page": small.cpu_ms_per_page,
        "user_cpu_ms_per_page": small.user_ms_per_page,
        "durable_commit_ms_per_page": small.durable_commit_ms_per_page,
        "small_page_bytes": small.page_bytes,
        "small_pages": small.pages,
        "large_peak_rss_mib": f.large.peak_rss_mib,
        "large_bytes": f.large.bytes,
        "large_page_bytes": f.large.page_bytes,
        "large_pages": f.large.pages,
        "large_cpu_ms_per_page": f.large.cpu_ms_per_page,
        "large_user_cpu_ms_per_page": f.large.user_ms_per_page,
        "sha256_ms_per_large_page": f.sha256_ms_per_large_page(),
        "large_user_cpu_vs_sha256": f.sha256_ms_per_large_page().map(|sha| f.large.user_ms_per_page / sha),
        "check_ms_per_large_page": f.shape("padded").map(|s| s.check_ms),
        "python_large_user_cpu_ms_per_page": f.large_python.as_ref().map(|p| p.user_ms_per_page),
        "large_user_cpu_vs_python": f.large_python.as_ref().map(|p| f.large.user_ms_per_page / p.user_ms_per_page),
        "dense_page_bytes": f.shape("dense").map(|s| s.page_bytes),
        "dense_sha256_ms": f.shape("dense").map(|s| s.sha256_ms),
        "dense_check_ms": f.shape("dense").map(|s| s.check_ms),
        "dense_one_pass_vs_sha256": f.shape("dense").map(|s| s.one_pass_vs_sha256),
        "padded_by_id_vs_sha256": f.shape("padded").map(|s| s.by_id_vs_sha256),
        "dense_by_id_vs_sha256": f.shape("dense").map(|s| s.by_id_vs_sha256),
        "padded_by_content_vs_sha256": f.shape("padded").map(|s| s.by_content_vs_sha256),
        "dense_by_content_vs_sha256": f.shape("dense").map(|s| s.by_content_vs_sha256),
        "small_compute_ms_per_page": f.small_compute_ms_per_page(),
        "floor_cpu_ms_per_page_times_0_3": floor.cpu_ms_per_page * 0.3,
        "syncs_per_page": f.peers.syncs_per_page,
        "python_cpu_ms_per_page": f.peers.python.as_ref().map(|p| p.cpu_ms_per_page),
        "cpu_vs_python": f.peers.python.as_ref().map(|p| small.cpu_ms_per_page / p.cpu_ms_per_page),
        "floor_wall_ms_per_page": floor.wall_ms_per_page,
        "floor_audit_line_bytes": small.commit_bytes.audit_line,
        "floor_manifest_line_bytes": small.commit_bytes.manifest_line,
        "floor_cursor_bytes": small.commit_bytes.cursor,
        "floor_cpu_ms_per_page": floor.cpu_ms_per_page,
        "durable_commit_vs_floor": small.durable_commit_ms_per_page / floor.wall_ms_per_page,
        "cpu_vs_floor": median.cpu_vs_floor(),
        "floor_received_wall_ms_per_page": received.wall_ms_per_page,
        "floor_received_cpu_ms_per_page": received.cpu_ms_per_page,
        "cpu_vs_floor_received": median.cpu_vs_floor_received(),
        "rounds": f.small.rounds.iter().map(|r| f.round_json(r)).collect::<Vec<_>>(),
    });
    // Beside the rest, not in it: the macro's recursion limit.
    json["small_sha256_ms_per_byte"] = serde_json::json!(f.small_sha256_ms_per_byte());
    json["least_ms_per_page"] = serde_json::json!(f.least_ms_per_page(median));
    json["least_vs_floor"] = serde_json::json!(f.least_vs_floor(median));
    json["floor_journal_line_bytes"] = serde_json::json!(small.commit_bytes.journal_line);
    format!(
        "sync benchmark (simulator in its own process, in-process pacer, unthrottled)\n\
         small pages: {} pages of {} bytes (the median of {} rounds, each a sync and at once its floors)\n\
         \x20 pages per second            {:.1}\n\
         \x20 CPU per committed page      {:.3} ms   (user {:.3} ms; target < 0.47 ms: 10x under the Python loop's 4.7 ms)\n\
         \x20 durable commit per page     {:.3} ms wall (fsync page + rename + dir, audit line; manifest and cursor unsynced)\n\
         \x20 fsync-class calls per page  {}   (strace -c, target <= 3)\n\
         \x20 Python loop, same work and durability: {} ms CPU per page ({} of it)\n\
         \x20 floor (the syscalls alone)  {:.3} ms wall, {:.3} ms CPU per page; ours is {:.2}x in CPU (regression guard <= 2.0x)\n\
         \x20   the same commit's bytes: a {} B page_committed line, a {} B manifest line, a {} B cursor\n\
         \x20 the floor, each page first received by a bare GET  {:.3} ms wall, {:.3} ms CPU per page; ours is {:.2}x\n\
         \x20 every round's CPU / floor: {}; with the received floor: {}\n\
         \x20 1.3x the floor leaves {:.3} ms a page above its syscalls; SHA-256 and the check learning identities (by id) alone take {} ms a page (in cache)\n\
         \x20 the least a page could cost: the received floor, SHA-256 and the check, SHA-256 of its {} B line: {} ms, {} the floor (every round: {})\n\
         large pages: {} pages of {:.1} MiB ({:.2} GiB)\n\
         \x20 peak RSS                    {:.1} MiB   (target < 48 MiB)\n\
         \x20 CPU per committed page      {:.1} ms (user {:.1} ms)\n\
         \x20 SHA-256 alone per page      {} ms   (user CPU is {}; target <= 1.5x)\n\
         \x20 Python loop, same pages     {} ms user CPU per page\n\
         one pass (SHA-256 + streaming check on each 64 KiB chunk in cache, as the sync sees it):\n\
         {}\
         {json}",
        small.pages,
        small.page_bytes,
        f.small.rounds.len(),
        small.pages_per_s,
        small.cpu_ms_per_page,
        small.user_ms_per_page,
        small.durable_commit_ms_per_page,
        f.peers.syncs_per_page.map_or("not counted (no strace)".into(), |s| format!("{s:.2}")),
        f.peers.python.as_ref().map_or("not run (no python3)".into(), |p| format!("{:.3}", p.cpu_ms_per_page)),
        f.peers.python.as_ref().map_or("-".into(), |p| format!("ours is {:.2}x", small.cpu_ms_per_page / p.cpu_ms_per_page)),
        floor.wall_ms_per_page,
        floor.cpu_ms_per_page,
        median.cpu_vs_floor(),
        small.commit_bytes.audit_line,
        small.commit_bytes.manifest_line,
        small.commit_bytes.cursor,
        received.wall_ms_per_page,
        received.cpu_ms_per_page,
        median.cpu_vs_floor_received(),
        ratios(f, |r| Some(r.cpu_vs_floor())),
        ratios(f, |r| Some(r.cpu_vs_floor_received())),
        floor.cpu_ms_per_page * 0.3,
        f.small_compute_ms_per_page().map_or("-".into(), |ms| format!("{ms:.3}")),
        small.commit_bytes.audit_line,
        f.least_ms_per_page(median).map_or("-".into(), |ms| format!("{ms:.3}")),
        f.least_vs_floor(median).map_or("-".into(), |r| format!("{r:.2}x")),
        ratios(f, |r| f.least_vs_floor(r)),
        f.large.pages,
        f.large.page_bytes as f64 / 1048576.0,
        f.large.bytes as f64 / 1073741824.0,
        f.large.peak_rss_mib,
        f.large.cpu_ms_per_page,
        f.large.user_ms_per_page,
        f.sha256_ms_per_large_page().map_or("-".into(), |s| format!("{s:.1}")),
        f.sha256_ms_per_large_page()
            .map_or("-".into(), |s| format!("{:.2}x", f.large.user_ms_per_page / s)),
        f.large_python
            .as_ref()
            .map_or("not run (no python3)".into(), |p| format!("{:.1}", p.user_ms_per_page)),
        f.one_pass
            .iter()
            .map(|s| format!(
                "  {:<6} {} x {:.1} MiB, {} records each: SHA-256 {:.1} ms, check {:.1} ms, together {:.2}x SHA-256{}; \
                 learning identities by id {:.1} ms, {:.2}x; by content {:.1} ms, {:.2}x\n",
                s.name,
                s.pages,
                s.page_bytes as f64 / 1048576.0,
                s.records,
                s.sha256_ms,
                s.check_ms,
                s.one_pass_vs_sha256,
                match s.name.as_str() {
                    "dense" => " (target <= 2.5x)",
                    "padded" => " (target <= 1.5x)",
                    _ => "",
                },
                s.by_id_check_ms,
                s.by_id_vs_sha256,
                s.by_content_check_ms,
                s.by_content_vs_sha256,
            ))
            .collect::<String>(),
    )
}

/// Every round's ratio, in the order the rounds ran (`-` where a round
/// has none).
fn ratios(f: &Figures, ratio: impl Fn(&Round) -> Option<f64>) -> String {
    let each: Vec<String> = f
        .small
        .rounds
        .iter()
        .map(|r| ratio(r).map_or("-".into(), |x| format!("{x:.2}x")))
        .collect();
    each.join(", ")
}

/// A scratch directory for the benchmark, removed afterwards.
pub fn scratch() -> anyhow::Result<(tempfile_dir::Dir, PathBuf)> {
    let dir = tempfile_dir::Dir::new()?;
    let path = dir.path().to_path_buf();
    Ok((dir, path))
}

mod tempfile_dir {
    //! A temp directory without a dev-dependency in the binary.
    use std::path::{Path, PathBuf};

    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new() -> std::io::Result<Dir> {
            let path = std::env::temp_dir().join(format!("edc-sync-bench-{}", edc_core::audit::RunId::new()));
            std::fs::create_dir_all(&path)?;
            Ok(Dir(path))
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

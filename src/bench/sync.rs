//! `edc-sync bench sync`: what one committed page costs.
//!
//! The simulator runs as a separate process (so its CPU is not counted);
//! the sync runs in this process with an unthrottled in-process pacer.
//! Figures: pages per second, CPU milliseconds per committed page, the
//! wall time of the durable commit per page, and (in a child process of
//! its own, so nothing else inflates it) the peak RSS while syncing large
//! pages.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use edc_core::run::{self, Endpoint, PacerChoice, RunSpec, Streams};
use edc_core::sync::SyncOptions;

use super::commit_bytes::CommitBytes;
use super::harness::{large_padding, policy, usage_split, SimProcess};

/// One measured sync.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Phase {
    pub pages: u64,
    pub records: u64,
    pub bytes: u64,
    pub page_bytes: u64,
    pub wall_s: f64,
    pub pages_per_s: f64,
    pub cpu_ms_per_page: f64,
    pub user_ms_per_page: f64,
    pub durable_commit_ms_per_page: f64,
    pub peak_rss_mib: f64,
    /// What each commit wrote besides the page, for the floor to write too.
    pub commit_bytes: CommitBytes,
}

/// Syncs `pages` pages of about `page_bytes` bytes each and measures.
pub async fn phase(exe: &Path, work: &Path, pages: u64, page_bytes: u64) -> anyhow::Result<Phase> {
    let (page_size, padding) = if page_bytes <= 256 * 1024 {
        (100u64, (page_bytes / 100).saturating_sub(200) as usize)
    } else {
        (1000u64, large_padding(page_bytes))
    };
    let sim = SimProcess::start(exe, pages * page_size, padding)?;
    std::fs::create_dir_all(work)?;
    let config = work.join("bench-policy.yaml");
    std::fs::write(&config, policy(page_size, page_bytes * 2))?;
    let spec = RunSpec {
        config,
        allow_dirty: true,
        vendor: "bench".into(),
        tenant: None,
        study: "BENCH".into(),
        protocol_version: None,
        streams: Streams::One("default".into()),
        out: work.join("landing"),
        state: work.join("state"),
        audit_log: work.join("audit.jsonl"),
        pacer: PacerChoice::Local,
        options: SyncOptions::default(),
        metrics_file: None,
        audit: Default::default(),
        endpoint: Some(Endpoint::bearer(sim.url.clone(), "bench-token")),
    };
    let (user0, sys0, _) = usage_split();
    let t0 = Instant::now();
    let result = run::execute(spec).await?;
    let wall = t0.elapsed();
    let (user1, sys1, peak_kib) = usage_split();
    let (cpu0, cpu1) = (user0 + sys0, user1 + sys1);
    result.outcome?;
    let report = result.reports.first().context("no stream report")?;
    let committed = report.pages.max(1) as f64;
    Ok(Phase {
        pages: report.pages,
        records: report.records,
        bytes: report.bytes,
        page_bytes: report.bytes / report.pages.max(1),
        wall_s: wall.as_secs_f64(),
        pages_per_s: report.pages as f64 / wall.as_secs_f64(),
        cpu_ms_per_page: (cpu1 - cpu0).as_secs_f64() * 1000.0 / committed,
        user_ms_per_page: (user1 - user0).as_secs_f64() * 1000.0 / committed,
        durable_commit_ms_per_page: report.durable_commit.as_secs_f64() * 1000.0 / committed,
        peak_rss_mib: peak_kib as f64 / 1024.0,
        commit_bytes: CommitBytes::of(work)?,
    })
}

/// Runs the large-page phase in a child process and reads its figures.
pub fn rss_phase_in_child(exe: &Path, work: &Path, pages: u64, page_mib: u64) -> anyhow::Result<Phase> {
    let out = Command::new(exe)
        .args(["bench", "sync-phase", "--pages", &pages.to_string()])
        .args(["--page-bytes", &(page_mib * 1024 * 1024).to_string()])
        .arg("--work")
        .arg(work)
        .stderr(Stdio::inherit())
        .output()
        .context("running the large-page phase")?;
    if !out.status.success() {
        bail!("the large-page phase failed with {}", out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or_default())
        .context("reading the large-page phase's figures")
}

/// Both phases' figures, and the single JSON line scripts read.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub small: Phase,
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

    /// SHA-256 alone over one large page's bytes, in ms.
    fn sha256_ms_per_large_page(&self) -> Option<f64> {
        self.shape("padded")
            .map(|s| s.sha256_ms * self.large.page_bytes as f64 / s.page_bytes as f64)
    }
}

pub fn render(f: &Figures) -> String {
    let json = serde_json::json!({
        "pages_per_s": f.small.pages_per_s,
        "cpu_ms_per_page": f.small.cpu_ms_per_page,
        "user_cpu_ms_per_page": f.small.user_ms_per_page,
        "durable_commit_ms_per_page": f.small.durable_commit_ms_per_page,
        "small_page_bytes": f.small.page_bytes,
        "small_pages": f.small.pages,
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
        "syncs_per_page": f.peers.syncs_per_page,
        "python_cpu_ms_per_page": f.peers.python.as_ref().map(|p| p.cpu_ms_per_page),
        "cpu_vs_python": f.peers.python.as_ref().map(|p| f.small.cpu_ms_per_page / p.cpu_ms_per_page),
        "floor_wall_ms_per_page": f.peers.floor_wall_ms_per_page,
        "floor_audit_line_bytes": f.small.commit_bytes.audit_line,
        "floor_manifest_line_bytes": f.small.commit_bytes.manifest_line,
        "floor_cursor_bytes": f.small.commit_bytes.cursor,
        "floor_cpu_ms_per_page": f.peers.floor_cpu_ms_per_page,
        "durable_commit_vs_floor": f.small.durable_commit_ms_per_page / f.peers.floor_wall_ms_per_page,
        "cpu_vs_floor": f.small.cpu_ms_per_page / f.peers.floor_cpu_ms_per_page,
        "floor_received_wall_ms_per_page": f.peers.floor_received_wall_ms_per_page,
        "floor_received_cpu_ms_per_page": f.peers.floor_received_cpu_ms_per_page,
        "cpu_vs_floor_received": f.small.cpu_ms_per_page / f.peers.floor_received_cpu_ms_per_page,
    });
    format!(
        "sync benchmark (simulator in its own process, in-process pacer, unthrottled)\n\
         small pages: {} pages of {} bytes\n\
         \x20 pages per second            {:.1}\n\
         \x20 CPU per committed page      {:.3} ms   (user {:.3} ms; target < 0.47 ms: 10x under the Python loop's 4.7 ms)\n\
         \x20 durable commit per page     {:.3} ms wall (fsync page + rename + dir, audit line; manifest and cursor unsynced)\n\
         \x20 fsync-class calls per page  {}   (strace -c, target <= 3)\n\
         \x20 Python loop, same work and durability: {} ms CPU per page ({} of it)\n\
         \x20 floor (the syscalls alone)  {:.3} ms wall, {:.3} ms CPU per page; ours is {:.2}x in CPU (target <= 1.3x)\n\
         \x20   the same commit's bytes: a {} B page_committed line, a {} B manifest line, a {} B cursor\n\
         \x20 the floor, each page first received by a bare GET  {:.3} ms wall, {:.3} ms CPU per page; ours is {:.2}x\n\
         large pages: {} pages of {:.1} MiB ({:.2} GiB)\n\
         \x20 peak RSS                    {:.1} MiB   (target < 48 MiB)\n\
         \x20 CPU per committed page      {:.1} ms (user {:.1} ms)\n\
         \x20 SHA-256 alone per page      {} ms   (user CPU is {}; target <= 1.5x)\n\
         \x20 Python loop, same pages     {} ms user CPU per page\n\
         one pass (SHA-256 + streaming check on each 64 KiB chunk in cache, as the sync sees it):\n\
         {}\
         {json}",
        f.small.pages,
        f.small.page_bytes,
        f.small.pages_per_s,
        f.small.cpu_ms_per_page,
        f.small.user_ms_per_page,
        f.small.durable_commit_ms_per_page,
        f.peers.syncs_per_page.map_or("not counted (no strace)".into(), |s| format!("{s:.2}")),
        f.peers.python.as_ref().map_or("not run (no python3)".into(), |p| format!("{:.3}", p.cpu_ms_per_page)),
        f.peers.python.as_ref().map_or("-".into(), |p| format!("ours is {:.2}x", f.small.cpu_ms_per_page / p.cpu_ms_per_page)),
        f.peers.floor_wall_ms_per_page,
        f.peers.floor_cpu_ms_per_page,
        f.small.cpu_ms_per_page / f.peers.floor_cpu_ms_per_page,
        f.small.commit_bytes.audit_line,
        f.small.commit_bytes.manifest_line,
        f.small.commit_bytes.cursor,
        f.peers.floor_received_wall_ms_per_page,
        f.peers.floor_received_cpu_ms_per_page,
        f.small.cpu_ms_per_page / f.peers.floor_received_cpu_ms_per_page,
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
                "  {:<6} {:.1} MiB, {} records: SHA-256 {:.1} ms, check {:.1} ms, together {:.2}x SHA-256 (target <= {})\n",
                s.name,
                s.page_bytes as f64 / 1048576.0,
                s.records,
                s.sha256_ms,
                s.check_ms,
                s.one_pass_vs_sha256,
                if s.name == "dense" { "2.5x" } else { "1.5x" }
            ))
            .collect::<String>(),
    )
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

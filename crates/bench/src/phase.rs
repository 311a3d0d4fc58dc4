//! One measured sync of the bench policy's stream: CPU, wall and peak
//! RSS of `pages` pages of a size, in this process (the small pages) or in
//! a child of its own (the large ones, so that nothing else inflates its
//! peak RSS). The simulator runs as a separate process, so its CPU is not
//! counted; the sync runs with an unthrottled in-process pacer.

use std::path::Path;
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
        (
            super::peers::SMALL_PAGE_RECORDS,
            super::peers::small_padding(page_bytes),
        )
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
        out: work.join("landing").into(),
        state: work.join("state").into(),
        audit_log: work.join("audit.jsonl"),
        pacer: PacerChoice::Local,
        options: SyncOptions::default(),
        metrics: Default::default(),
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

/// Runs the large-page phase in a child process (`bench`, this program,
/// whose `sync-phase` runs the sync in process) and reads its figures.
pub fn rss_phase_in_child(bench: &Path, work: &Path, pages: u64, page_mib: u64) -> anyhow::Result<Phase> {
    let out = Command::new(bench)
        .args(["sync-phase", "--pages", &pages.to_string()])
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

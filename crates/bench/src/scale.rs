//! `bench scale`: what the trail costs as a study grows, against the
//! targets the ledger is held to.
//!
//! - **Trail bytes a page**: a sync of N one-record pages with the shipped
//!   policy's lookback (300 s, records known by their id), the trail's
//!   growth over N against the target of 2 KB a one-record page; and the
//!   growth of one run that finds nothing new (an empty poll, which with a
//!   lookback re-reads its span), against a bounded line.
//! - **A quiet stream's start-up**: a quiet stream (its own vendor and
//!   simulator) shares its trail with a busy one. Its run with nothing new
//!   is timed on the trail as its own sync left it, then again after the
//!   busy stream appended N pages: target within 1.1x.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};
use serde::Serialize;

use super::harness::{delta_block, policy, sync_command, waited, SimProcess};
use super::startup::Measured;

/// The figures of one run of `bench scale`.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub pages: u64,
    /// Trail growth over the pages of a sync with the shipped lookback.
    pub trail_bytes_per_page: f64,
    /// Trail growth of a run with nothing new, with the same lookback.
    pub empty_poll_trail_bytes: u64,
    /// Lines the busy stream appended between the quiet stream's runs.
    pub busy_lines: u64,
    pub quiet_fresh: Measured,
    pub quiet_after_busy: Measured,
    pub quiet_ratio: f64,
}

/// The target of a one-record page's trail bytes.
pub const TRAIL_BYTES_TARGET: f64 = 2048.0;
/// The target of the quiet stream's start-up after the busy one's pages.
pub const QUIET_RATIO_TARGET: f64 = 1.1;

/// Measures both figures in `work`, `pages` pages each.
pub fn run(exe: &Path, work: &Path, pages: u64) -> anyhow::Result<Figures> {
    std::fs::create_dir_all(work)?;
    let (trail_bytes_per_page, empty_poll_trail_bytes) = trail_growth(exe, &work.join("lookback"), pages)?;
    let quiet = work.join("quiet");
    std::fs::create_dir_all(&quiet)?;
    let busy_sim = SimProcess::start(exe, pages, 0)?;
    let quiet_sim = SimProcess::start(exe, 5, 0)?;
    let config = quiet.join("two-streams.yaml");
    std::fs::write(&config, two_vendors())?;
    let trail = quiet.join("audit.jsonl");
    let run = |vendor: &str| {
        let mut cmd = sync_command(exe, &config, vendor, "SCALE", &quiet, &trail);
        cmd.args(["--pacer", "local"])
            .env("EDC_SYNC_BENCH_URL", &busy_sim.url)
            .env("EDC_SYNC_QUIET_URL", &quiet_sim.url);
        cmd
    };
    let ok = |(ok, _): (bool, libc::rusage), what: &str| match ok {
        true => Ok(()),
        false => bail!("{what} failed"),
    };
    ok(waited(run("quiet"))?, "the quiet stream's first sync")?;
    let quiet_fresh = timed(run("quiet"), "the quiet stream's run on its own trail")?;
    let before = line_count(&trail)?;
    ok(waited(run("busy"))?, "the busy stream's sync")?;
    let busy_lines = line_count(&trail)? - before;
    let quiet_after_busy = timed(run("quiet"), "the quiet stream's run after the busy one's")?;
    Ok(Figures {
        pages,
        trail_bytes_per_page,
        empty_poll_trail_bytes,
        busy_lines,
        quiet_ratio: quiet_after_busy.wall_s / quiet_fresh.wall_s,
        quiet_fresh,
        quiet_after_busy,
    })
}

/// Trail bytes a one-record page, and of a run with nothing new, with the
/// shipped lookback.
fn trail_growth(exe: &Path, work: &Path, pages: u64) -> anyhow::Result<(f64, u64)> {
    std::fs::create_dir_all(work)?;
    let sim = SimProcess::start(exe, pages, 0)?;
    let config = work.join("bench-policy.yaml");
    std::fs::write(&config, policy(1, 1024 * 1024))?;
    let trail = work.join("audit.jsonl");
    let sync = || super::harness::bench_sync(Command::new(exe), &config, work, &sim.url);
    if !waited(sync())?.0 {
        bail!("the sync of {pages} one-record pages failed");
    }
    let landed = size(&trail)?;
    if !waited(sync())?.0 {
        bail!("the run with nothing new failed");
    }
    Ok((landed as f64 / pages as f64, size(&trail)? - landed))
}

fn timed(cmd: Command, what: &str) -> anyhow::Result<Measured> {
    let (measured, ok) = Measured::of(cmd)?;
    if !ok {
        bail!("{what} failed");
    }
    Ok(measured)
}

fn size(path: &Path) -> anyhow::Result<u64> {
    Ok(std::fs::metadata(path)
        .with_context(|| format!("reading the size of {}", path.display()))?
        .len())
}

fn line_count(path: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.iter().filter(|b| **b == b'\n').count() as u64)
}

/// Two vendors on two simulators, one trail: `busy` pages one record at a
/// time, `quiet` holds five records in one page. Both keep the default
/// lookback (300 s, as a deployment's cursor stream does), so the busy
/// stream's lines carry its memory, and the quiet stream's run with
/// nothing new is one request (its span re-read in one page): the rest is
/// its start-up.
fn two_vendors() -> String {
    let vendor = |name: &str, url_env: &str, page_size: u64| {
        format!(
            r#"{name}:
  base_url_env: {url_env}
  token_env: EDC_SYNC_BENCH_TOKEN
  sustained_rate_per_sec: 1000000
  burst_capacity: 1000000
  bucket_key: "rl:{name}"
  max_concurrency: 4
{}"#,
            delta_block(page_size)
        )
    };
    format!(
        "{}{}",
        vendor("busy", "EDC_SYNC_BENCH_URL", 1),
        vendor("quiet", "EDC_SYNC_QUIET_URL", 100)
    )
}

/// The figures against their targets, then one JSON line.
pub fn render(f: &Figures) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "trail bytes a one-record page (shipped lookback): {:.0} (target {:.0}, {:.1}x)\n",
        f.trail_bytes_per_page,
        TRAIL_BYTES_TARGET,
        f.trail_bytes_per_page / TRAIL_BYTES_TARGET
    ));
    out.push_str(&format!(
        "trail bytes of a run with nothing new (same lookback): {}\n",
        f.empty_poll_trail_bytes
    ));
    out.push_str(&format!(
        "quiet stream's run with nothing new: {:.3} s on its own trail, {:.3} s after {} lines of another stream: \
         {:.2}x (target {QUIET_RATIO_TARGET}x)\n",
        f.quiet_fresh.wall_s, f.quiet_after_busy.wall_s, f.busy_lines, f.quiet_ratio
    ));
    out.push_str(&serde_json::json!({ "bench": "scale", "figures": f }).to_string());
    out
}

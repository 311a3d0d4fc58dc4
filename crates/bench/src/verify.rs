//! `bench verify`: what `edc-sync verify` costs at a landing of N pages,
//! against its floor, `sha256sum` over the same landed files.
//!
//! A sync of N one-record pages from the simulator makes the landing,
//! its manifest, its trail and its cursor, as a year of a busy study
//! leaves them. Then `verify` runs as a child process (wall time and peak
//! RSS from `wait4`), and `sha256sum` hashes every page file (the bytes
//! verify must read). The targets: verify within 1.5x of `sha256sum`, its
//! peak RSS under 64 MiB at a million pages. With `--bucket` the pages
//! land in a private S3 bucket and verify reads them there; `sha256sum`
//! hashes a local copy of the same objects.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};
use serde::Serialize;

use edc_testkit::s3_server::PrivateS3;

use super::harness::{bench_sync_to, policy, waited, SimProcess};
use super::startup::{rss, Measured};

/// The figures of one size.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub pages: u64,
    pub landed_bytes: u64,
    /// The audit trail verify reads whole (its chain and every commit).
    pub trail_bytes: u64,
    pub verify: Measured,
    pub sha256sum_s: f64,
    pub ratio: f64,
    /// `audit verify` of the same trail: the chain alone, the part of
    /// verify's cost that grows with the trail rather than the pages.
    pub audit_verify_s: f64,
}

/// Lands `pages` one-record pages in `work` (or, given one, under the
/// prefix of a bucket) and measures verify over them.
pub fn run(
    exe: &Path,
    work: &Path,
    pages: u64,
    bucket: Option<(&PrivateS3, String)>,
) -> anyhow::Result<Figures> {
    let sim = SimProcess::start(exe, pages, 0)?;
    std::fs::create_dir_all(work)?;
    let config = work.join("bench-policy.yaml");
    std::fs::write(&config, policy(1, 1024 * 1024))?;
    let landing = work.join("landing");
    // Where the pages land, and the environment that reaches it.
    let (out, env): (std::ffi::OsString, Vec<(&str, String)>) = match &bucket {
        None => (landing.clone().into(), Vec::new()),
        Some((s3, prefix)) => (s3.url(prefix).into(), s3.env()),
    };
    let mut sync = bench_sync_to(Command::new(exe), &config, work, &sim.url, &out);
    sync.envs(env.iter().map(|(k, v)| (k, v)));
    let (ok, _) = waited(sync)?;
    if !ok {
        bail!("the sync that lands the {pages} pages failed");
    }
    let mut verify = Command::new(exe);
    verify
        .envs(env.iter().map(|(k, v)| (k, v)))
        .arg("verify")
        .arg("--out")
        .arg(&out)
        .arg("--state")
        .arg(work.join("state"))
        .arg("--audit-log")
        .arg(work.join("audit.jsonl"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let (verify, ok) = Measured::of(verify)?;
    if !ok {
        bail!("verify found the landing it measures damaged (or failed)");
    }
    // The floor reads the same page bytes from a local copy, made after
    // verify ran (this process's own peak would otherwise be all wait4
    // can tell of the child's).
    if let Some((s3, prefix)) = &bucket {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(s3.download(prefix, &landing))?;
    }
    let started = Instant::now();
    let hashed = Command::new("sh")
        .arg("-c")
        .arg("find \"$1\" -path '*/pages/*' -type f -print0 | xargs -0 sha256sum > /dev/null")
        .arg("sh")
        .arg(&landing)
        .status()
        .context("running sha256sum (coreutils)")?;
    let sha256sum_s = started.elapsed().as_secs_f64();
    if !hashed.success() {
        bail!("sha256sum over the landed pages failed");
    }
    let trail = work.join("audit.jsonl");
    let started = Instant::now();
    let chain = Command::new(exe)
        .args(["audit", "verify"])
        .arg(&trail)
        .stdout(Stdio::null())
        .status()
        .context("running audit verify")?;
    let audit_verify_s = started.elapsed().as_secs_f64();
    if !chain.success() {
        bail!("audit verify of the trail failed");
    }
    Ok(Figures {
        pages,
        landed_bytes: landed_bytes(&landing)?,
        trail_bytes: std::fs::metadata(&trail)?.len(),
        ratio: verify.wall_s / sha256sum_s,
        verify,
        sha256sum_s,
        audit_verify_s,
    })
}

/// The bytes of every page file under `landing`.
fn landed_bytes(landing: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    let mut dirs = vec![landing.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                dirs.push(entry.path());
            } else if entry.path().parent().is_some_and(|p| p.ends_with("pages")) {
                total += entry.metadata()?.len();
            }
        }
    }
    Ok(total)
}

/// The human lines and the JSON line.
pub fn render(all: &[Figures]) -> String {
    let mut out = String::new();
    for f in all {
        out.push_str(&format!(
            "verify at {} pages ({} bytes landed, a trail of {} bytes): {:.3} s, {} (target < 64 MiB at a \
             million pages); sha256sum of the same pages: {:.3} s; ratio {:.2}x (target <= 1.5x); audit verify \
             of the trail alone: {:.3} s\n",
            f.pages,
            f.landed_bytes,
            f.trail_bytes,
            f.verify.wall_s,
            rss(&f.verify),
            f.sha256sum_s,
            f.ratio,
            f.audit_verify_s
        ));
    }
    out.push_str(&serde_json::to_string(all).unwrap_or_default());
    out
}

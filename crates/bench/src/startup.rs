//! `bench startup`: what history costs a run that has nothing new to fetch.
//!
//! Two state directories are brought to the same point (a sync of a few
//! pages, cursor at the end): one with only that history, one whose trail
//! starts with `entries` earlier audit lines and whose manifest starts with
//! `entries` earlier pages. Then one `edc-sync sync` child process runs
//! against each, with nothing new on the simulator; its wall time and peak
//! RSS (`wait4`) are the figures. The target: the second within 2x
//! of the first.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context};
use serde::Serialize;

use super::harness::{policy, SimProcess};
use edc_core::digest::{sha256_hex, ZERO_SHA256};
use edc_core::store::ManifestEntry;

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub wall_s: f64,
    /// The child's `ru_maxrss` from `wait4`.
    pub peak_rss_mib: f64,
    /// This process's own peak (`VmHWM`) when it started the child. Linux
    /// carries the spawning process's high-water mark across the child's
    /// `exec` into its `ru_maxrss`, so that is the floor of the figure.
    pub spawner_peak_rss_mib: f64,
    /// True when the child's figure is above that floor, so it is the
    /// child's own; false: the child used at most `peak_rss_mib`.
    pub peak_rss_exact: bool,
}

/// The figures of `bench startup`.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub manifest_entries: u64,
    pub audit_lines: u64,
    pub empty: Measured,
    pub history: Measured,
    pub time_ratio: f64,
    pub rss_ratio: f64,
}

const RECORDS: u64 = 300;

/// Measures both runs in `work`.
pub fn run(exe: &Path, work: &Path, entries: u64) -> anyhow::Result<Figures> {
    let sim = SimProcess::start(exe, RECORDS, 0)?;
    std::fs::create_dir_all(work)?;
    let config = work.join("bench-policy.yaml");
    std::fs::write(&config, policy(100, 1024 * 1024))?;
    let (empty_dir, history_dir) = (work.join("empty"), work.join("history"));
    for dir in [&empty_dir, &history_dir] {
        std::fs::create_dir_all(dir)?;
    }
    // History first, then the priming sync on top of it, as years of runs
    // would leave it.
    write_history_trail(&history_dir.join("audit.jsonl"), entries)?;
    write_manifest_history(&history_dir, entries)?;
    for dir in [&empty_dir, &history_dir] {
        let (ok, _) = sync(exe, &config, dir, &sim.url)?;
        if !ok {
            bail!("the priming sync in {} failed", dir.display());
        }
    }
    let empty = measured(exe, &config, &empty_dir, &sim.url)?;
    let history = measured(exe, &config, &history_dir, &sim.url)?;
    Ok(Figures {
        manifest_entries: entries,
        audit_lines: entries,
        time_ratio: history.wall_s / empty.wall_s,
        rss_ratio: history.peak_rss_mib / empty.peak_rss_mib,
        empty,
        history,
    })
}

fn sync(exe: &Path, config: &Path, dir: &Path, url: &str) -> anyhow::Result<(bool, libc::rusage)> {
    super::harness::waited(super::harness::bench_sync(Command::new(exe), config, dir, url))
}

fn measured(exe: &Path, config: &Path, dir: &Path, url: &str) -> anyhow::Result<Measured> {
    let measured = Measured::of(super::harness::bench_sync(Command::new(exe), config, dir, url))?;
    if !measured.1 {
        bail!("the measured sync in {} failed", dir.display());
    }
    Ok(measured.0)
}

impl Measured {
    /// Runs `cmd` to its end: its wall time and peak RSS, and whether it
    /// exited 0.
    pub fn of(cmd: Command) -> anyhow::Result<(Measured, bool)> {
        let spawner_peak_rss_mib = super::harness::peak_rss_kib().unwrap_or(0) as f64 / 1024.0;
        let started = Instant::now();
        let (ok, usage) = super::harness::waited(cmd)?;
        let wall_s = started.elapsed().as_secs_f64();
        let peak_rss_mib = usage.ru_maxrss as f64 / 1024.0;
        Ok((
            Measured {
                wall_s,
                peak_rss_mib,
                spawner_peak_rss_mib,
                peak_rss_exact: peak_rss_mib > spawner_peak_rss_mib,
            },
            ok,
        ))
    }
}

/// `entries` chained audit lines of earlier runs, as `audit verify` accepts.
fn write_history_trail(path: &Path, entries: u64) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut prev = ZERO_SHA256.to_string();
    for n in 1..=entries {
        let mut fields = serde_json::Map::new();
        fields.insert("n".into(), n.into());
        let line = edc_core::audit::compose(
            n,
            "2026-01-01T00:00:00.000Z",
            "history",
            "bench_history",
            fields,
            &prev,
        )?;
        prev = sha256_hex(line.as_bytes());
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

/// `entries` earlier pages in front of the stream's manifest.
fn write_manifest_history(dir: &Path, entries: u64) -> anyhow::Result<()> {
    let manifest = dir.join("landing/bench/-/BENCH/-/default/manifest.jsonl");
    if let Some(parent) = manifest.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    let mut out = std::io::BufWriter::new(std::fs::File::create(&manifest)?);
    for n in 0..entries {
        let sha = format!("{n:064x}");
        let entry = ManifestEntry {
            stream: "default".into(),
            page_key: format!("/api/v24.1/query/audit_trail?offset={n}"),
            cursor_before: serde_json::Value::Null,
            cursor_after: serde_json::Value::Null,
            file: format!("pages/{sha}.json"),
            sha256: sha,
            bytes: 1,
            records: 1,
            run_id: "history".into(),
            landed_at: "2026-01-01T00:00:00.000Z".into(),
            repeated: Vec::new(),
        };
        serde_json::to_writer(&mut out, &entry)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

/// The human summary and the JSON line.
pub fn render(f: &Figures) -> String {
    format!(
        "run with nothing new, empty history: {:.3} s, {}\n\
         run with nothing new, {} manifest entries + {} audit lines: {:.3} s, {}\n\
         ratio: time {:.2}x, memory {:.2}x (target <= 2x)\n{}",
        f.empty.wall_s,
        rss(&f.empty),
        f.manifest_entries,
        f.audit_lines,
        f.history.wall_s,
        rss(&f.history),
        f.time_ratio,
        f.rss_ratio,
        serde_json::to_string(f).unwrap_or_default()
    )
}

/// A child's peak RSS as it can be stated: its own, or at most the floor
/// the spawning process's mark sets.
pub fn rss(m: &Measured) -> String {
    if m.peak_rss_exact {
        format!("{:.1} MiB", m.peak_rss_mib)
    } else {
        format!(
            "at most {:.1} MiB (the bench's own peak at the spawn, {:.1} MiB, is the floor of what wait4 reports)",
            m.peak_rss_mib, m.spawner_peak_rss_mib
        )
    }
}

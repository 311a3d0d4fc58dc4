//! `edc-sync bench hosts-soak`: any host resumes any stream. Several
//! processes, each in a working directory of its own (as hosts), share one
//! `--state postgres://…` and one landing, start on the same stream at
//! seeded moments and SIGKILL each other at seeded instants; round after
//! round, then one clean run to the end.
//!
//! Checked with no code of the product's: the database is read with psql
//! (the test kit's), the landed pages with the test kit's reader. After
//! every round: the cursor is never past a record that did not land. At
//! the end: nothing lost or duplicated, the trail's chain intact (`audit
//! verify --state`), the landing reconciled (`verify`), and every run's
//! lock fenced: each run that took the stream has a fence higher than the
//! one before, and every page commit belongs to the run holding the
//! newest fence at that point in the trail.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use edc_sim::{Dataset, Fault, FaultSchedule, RetryAfterForm, SimConfig, Simulator};
use edc_testkit::postgres_server::PrivatePostgres;

#[derive(Debug, Clone, Serialize)]
pub struct HostsFigures {
    pub benchmark: &'static str,
    pub rounds: u32,
    pub hosts: u32,
    pub records_in_dataset: u32,
    /// Rounds that ended with more records landed than they started with.
    pub rounds_landing: u32,
    pub records_landed: usize,
    pub lost: usize,
    pub duplicates: usize,
    pub rounds_with_cursor_ahead: u32,
    /// Processes killed by the soak, and how the others ended.
    pub killed: u32,
    pub exits: BTreeMap<String, u32>,
    /// Runs that took the stream's lock (each with its fence).
    pub locks_taken: usize,
    /// Fences that did not increase, or commits by a run whose fence was
    /// no longer the newest (target 0).
    pub fence_violations: usize,
    pub audit_verify_exit: Option<i32>,
    pub verify_exit: Option<i32>,
    pub verify_summary: String,
    pub final_exit_code: Option<i32>,
    pub cursor_at_high_water: bool,
    pub seconds: f64,
}

const POLICY: &str = include_str!("../../../config/fixtures/simulator-policies.yaml");
const STREAM_DIR: &str = "soak/-/SOAK/-/default";

/// Runs the soak in `work` with a private PostgreSQL, and returns the figures.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    exe: &Path,
    work: &Path,
    rounds: u32,
    hosts: u32,
    records: u32,
    latency_ms: u64,
    seed: u64,
) -> anyhow::Result<HostsFigures> {
    let started = std::time::Instant::now();
    std::fs::create_dir_all(work)?;
    let pg = PrivatePostgres::start().map_err(|e| {
        anyhow::anyhow!("{e}; the hosts soak needs PostgreSQL 15 (sudo apt-get install -y postgresql-15)")
    })?;
    pg.migrate_with(exe).map_err(anyhow::Error::msg)?;
    let config = work.join("soak-policy.yaml");
    std::fs::write(&config, POLICY)?;
    let mut faults = FaultSchedule::default();
    for n in (13..100_000u64).step_by(13) {
        let fault = match n {
            n if n % 23 == 0 => Fault::Truncate,
            n if n % 17 == 0 => Fault::Status(500),
            _ => Fault::Throttle {
                status: 429,
                retry_after: RetryAfterForm::Seconds(0),
            },
        };
        faults.insert(n, fault);
    }
    let ds = Dataset {
        subjects: 30,
        records,
        seed: 77,
        padding: 0,
    };
    let sim = Simulator::start(
        SimConfig {
            dataset: ds.clone(),
            token: "soak-token".into(),
            faults,
            latency: Duration::from_millis(latency_ms),
            ..SimConfig::default()
        },
        "127.0.0.1:0".parse()?,
    )
    .await?;
    let landing = work.join("landing");
    let state = pg.run_url();
    let host_dirs: Vec<_> = (0..hosts).map(|h| work.join(format!("host-{h}"))).collect();
    for d in &host_dirs {
        std::fs::create_dir_all(d)?;
    }
    let sync_on = |dir: &Path| {
        let mut cmd = std::process::Command::new(exe);
        cmd.current_dir(dir)
            .args(["sync", "--config"])
            .arg(&config)
            .args([
                "--vendor",
                "soak",
                "--study",
                "SOAK",
                "--pacer",
                "local",
                "--allow-dirty",
                "--out",
            ])
            .arg(&landing)
            .args(["--state", &state, "--audit-log", "audit.jsonl"])
            .env("EDC_SYNC_SOAK_URL", sim.base_url())
            .env("EDC_SYNC_SOAK_TOKEN", "soak-token")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        cmd
    };
    let mut rng = seed | 1;
    let mut next = move || {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        rng >> 33
    };
    let (mut ahead, mut killed, mut landing_rounds, mut landed_before) = (0, 0, 0, 0);
    let mut exits: BTreeMap<String, u32> = BTreeMap::new();
    for _ in 0..rounds {
        let mut children = Vec::new();
        for dir in &host_dirs {
            tokio::time::sleep(Duration::from_millis(next() % 30)).await;
            children.push(Some(sync_on(dir).spawn().context("starting edc-sync sync")?));
        }
        tokio::time::sleep(Duration::from_millis(10 + next() % 150)).await;
        let victim = (next() % u64::from(hosts)) as usize;
        if let Some(mut child) = children[victim].take() {
            let _ = child.kill();
            let _ = child.wait();
            killed += 1;
        }
        tokio::time::sleep(Duration::from_millis(next() % 100)).await;
        for child in children.iter_mut().flatten() {
            // The rest end on their own within the round's budget, or are
            // killed too (a host lost mid-page).
            let deadline = std::time::Instant::now() + Duration::from_millis(300);
            let status = loop {
                if let Some(s) = child.try_wait()? {
                    break Some(s);
                }
                if std::time::Instant::now() > deadline {
                    break None;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            };
            let key = match status.and_then(|s| s.code()) {
                Some(code) => format!("exit {code}"),
                None => {
                    let _ = child.kill();
                    let _ = child.wait();
                    killed += 1;
                    continue;
                }
            };
            *exits.entry(key).or_default() += 1;
        }
        let (is_ahead, landed) = cursor_ahead(&pg, &landing, &ds)?;
        ahead += u32::from(is_ahead);
        landing_rounds += u32::from(landed > landed_before);
        landed_before = landed;
    }
    let last = sync_on(&host_dirs[0])
        .status()
        .context("starting the final edc-sync sync")?;
    let lines = psql_lines(&pg, "SELECT line FROM edc_sync_manifest ORDER BY stream, n")?;
    let ids = edc_qualify::landed::listed_json_record_ids(&landing.join(STREAM_DIR), &lines)?;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for id in ids {
        *counts.entry(id).or_default() += 1;
    }
    let (locks_taken, fence_violations) = fences(&pg)?;
    let audit = std::process::Command::new(exe)
        .args(["audit", "verify", "--state", &state])
        .output()
        .context("running edc-sync audit verify")?;
    let verify = std::process::Command::new(exe)
        .arg("verify")
        .arg("--out")
        .arg(&landing)
        .args(["--state", &state, "--audit-log", "audit.jsonl"])
        .output()
        .context("running edc-sync verify")?;
    let cursor = psql_lines(&pg, "SELECT state FROM edc_sync_cursor")?;
    let cursor: serde_json::Value = serde_json::from_str(cursor.trim()).unwrap_or_default();
    Ok(HostsFigures {
        benchmark: "hosts_soak",
        rounds,
        hosts,
        records_in_dataset: records,
        rounds_landing: landing_rounds,
        records_landed: counts.len(),
        lost: (records as usize).saturating_sub(counts.len()),
        duplicates: counts.values().filter(|n| **n > 1).count(),
        rounds_with_cursor_ahead: ahead,
        killed,
        exits,
        locks_taken,
        fence_violations,
        audit_verify_exit: audit.status.code(),
        verify_exit: verify.status.code(),
        verify_summary: String::from_utf8_lossy(&verify.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .to_string(),
        final_exit_code: last.code(),
        cursor_at_high_water: cursor["window_start"]
            == edc_core::sync::settled_window_start(&config, "soak", &ds.record(records).modified)?,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Whether the cursor's window starts past a record that did not land,
/// and how many records have landed.
fn cursor_ahead(pg: &PrivatePostgres, landing: &Path, ds: &Dataset) -> anyhow::Result<(bool, usize)> {
    let lines = psql_lines(pg, "SELECT line FROM edc_sync_manifest ORDER BY stream, n")?;
    let landed: std::collections::BTreeSet<String> =
        edc_qualify::landed::listed_json_record_ids(&landing.join(STREAM_DIR), &lines)?
            .into_iter()
            .collect();
    let cursor = psql_lines(pg, "SELECT state FROM edc_sync_cursor")?;
    let Some(start) = serde_json::from_str::<serde_json::Value>(cursor.trim())
        .ok()
        .and_then(|v| v["window_start"].as_str().map(str::to_string))
    else {
        return Ok((false, landed.len()));
    };
    let ahead = (1..=ds.records).any(|n| {
        let r = ds.record(n);
        r.modified.as_str() < start.as_str() && !landed.contains(&format!("AT-{n:07}"))
    });
    Ok((ahead, landed.len()))
}

/// The runs that took the stream's lock, and the fencing violations: a
/// fence not above the one before, or a page committed by a run that did
/// not hold the newest fence at that point of the trail.
fn fences(pg: &PrivatePostgres) -> anyhow::Result<(usize, usize)> {
    let trail = psql_lines(pg, "SELECT line FROM edc_sync_audit_line ORDER BY trail, n")?;
    let (mut taken, mut violations) = (0, 0);
    let mut holder: Option<(i64, String)> = None;
    for line in trail.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let run = v["run_id"].as_str().unwrap_or_default().to_string();
        match v["event"].as_str() {
            Some("stream_lock_taken") => {
                taken += 1;
                let fence = v["fence"].as_i64().unwrap_or(0);
                if holder.as_ref().is_some_and(|(f, _)| *f >= fence) {
                    violations += 1;
                }
                holder = Some((fence, run));
            }
            Some("page_committed")
                if v["dry_run"] != true && holder.as_ref().is_none_or(|(_, r)| *r != run) =>
            {
                violations += 1;
            }
            _ => {}
        }
    }
    Ok((taken, violations))
}

fn psql_lines(pg: &PrivatePostgres, sql: &str) -> anyhow::Result<String> {
    pg.psql("edc", sql).map_err(anyhow::Error::msg)
}

pub fn render(f: &HostsFigures) -> String {
    format!(
        "hosts soak: {} rounds, {} processes in working directories of their own on one PostgreSQL state \
         and one landing, SIGKILLing each other\n\
         processes killed              {}\n\
         exits of the others           {}\n\
         runs that took the lock       {}\n\
         fencing violations            {}   (target 0)\n\
         rounds with the cursor ahead  {}   (target 0)\n\
         records in the dataset        {}\n\
         rounds that landed records    {}\n\
         records landed                {}\n\
         duplicated records            {}   (target 0)\n\
         lost records                  {}   (target 0)\n\
         cursor at high-water          {}\n\
         audit verify --state          exit {}\n\
         edc-sync verify               exit {}: {}\n\
         final run exit code           {}\n\
         {:.1} s\n\
         {}",
        f.rounds,
        f.hosts,
        f.killed,
        f.exits
            .iter()
            .map(|(exit, n)| format!("{exit}: {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        f.locks_taken,
        f.fence_violations,
        f.rounds_with_cursor_ahead,
        f.records_in_dataset,
        f.rounds_landing,
        f.records_landed,
        f.duplicates,
        f.lost,
        f.cursor_at_high_water,
        edc_core::exit::status_text(f.audit_verify_exit),
        edc_core::exit::status_text(f.verify_exit),
        f.verify_summary,
        edc_core::exit::status_text(f.final_exit_code),
        f.seconds,
        serde_json::to_string(f).unwrap_or_default(),
    )
}

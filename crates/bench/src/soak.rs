//! `edc-sync bench crash-soak`: start a sync, SIGKILL it at a seeded random
//! moment (or, with `--fsync-faults`, fail its Nth fsync-class call with
//! EIO through strace), resume; many rounds, with faults on. After every
//! round, check the cursor is not ahead of the landed data; at the end,
//! count what landed. With `--object-store garage|s3s-fs` the pages land in
//! a private S3 server on loopback, and what landed is read back from its
//! bucket.

/// How each round's run is interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// SIGKILL at a seeded moment.
    Kill,
    /// The Nth fsync/fdatasync of each thread fails with EIO (strace).
    FsyncFaults,
}

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use edc_core::audit::{verify, Damage};
use edc_sim::{Dataset, Fault, FaultSchedule, RetryAfterForm, SimConfig, Simulator};

#[derive(Debug, Clone, Serialize)]
pub struct SoakFigures {
    pub mode: Mode,
    /// Where pages landed: `local` or the object store's URL.
    pub landing: String,
    pub rounds: u32,
    /// Rounds after which the cursor was past a record not landed.
    pub rounds_with_cursor_ahead: u32,
    /// Runs that stopped on an injected fsync failure.
    pub runs_failed_by_fault: u32,
    pub records_in_dataset: u32,
    pub records_landed: usize,
    pub duplicates: usize,
    pub lost: usize,
    pub cursor_at_high_water: bool,
    pub torn_tails_seen: u32,
    pub audit_intact: bool,
    pub audit_verify: String,
    pub final_exit_code: Option<i32>,
    /// The final run's last line on stderr, when it printed one.
    pub final_error: Option<String>,
    /// `edc-sync verify` over the landing at the end: its exit code and
    /// summary line.
    pub verify_exit_code: Option<i32>,
    pub verify_summary: String,
}

const POLICY: &str = include_str!("../../../config/fixtures/simulator-policies.yaml");

/// Runs the soak in `work` and returns the figures.
pub async fn run(
    exe: &Path,
    work: &Path,
    mode: Mode,
    rounds: u32,
    records: u32,
    seed: u64,
    object_store: Option<&str>,
) -> anyhow::Result<SoakFigures> {
    use edc_testkit::s3_server::PrivateS3;
    std::fs::create_dir_all(work)?;
    let garage = match object_store {
        Some("s3s-fs") => Some(PrivateS3::s3s_fs().map_err(anyhow::Error::msg)?),
        Some(_) => Some(PrivateS3::garage().map_err(anyhow::Error::msg)?),
        None => None,
    };
    let out = match &garage {
        Some(g) => std::ffi::OsString::from(g.url("soak")),
        None => work.join("landing").into_os_string(),
    };
    let config = work.join("soak-policy.yaml");
    std::fs::write(&config, POLICY)?;
    let mut faults = FaultSchedule::default();
    for n in 1..=100_000u64 {
        let fault = match n {
            n if n % 23 == 0 => Fault::Truncate,
            n if n % 17 == 0 => Fault::Status(500),
            n if n % 13 == 0 => Fault::Throttle {
                status: 429,
                retry_after: RetryAfterForm::Seconds(0),
            },
            _ => continue,
        };
        faults.insert(n, fault);
    }
    let sim_config = SimConfig {
        dataset: Dataset {
            subjects: 30,
            records,
            seed: 77,
            padding: 0,
        },
        token: "soak-token".into(),
        faults,
        latency: Duration::from_millis(3),
        ..SimConfig::default()
    };
    let sim = Simulator::start(sim_config, "127.0.0.1:0".parse()?).await?;
    let strace = ["/usr/bin/strace", "/bin/strace"]
        .into_iter()
        .find(|p| Path::new(p).is_file());
    if mode == Mode::FsyncFaults && strace.is_none() {
        anyhow::bail!("--fsync-faults needs strace (apt-get install -y strace)");
    }
    let ds = Dataset {
        subjects: 30,
        records,
        seed: 77,
        padding: 0,
    };
    let cursor_path = work.join("state/soak/-/SOAK/-/default.cursor.json");
    // What landed, as a local directory: the landing itself, or the bucket
    // copied out with the object_store client (not edc-sync's code).
    let landed_root = match &garage {
        Some(_) => work.join("downloaded"),
        None => work.join("landing"),
    };
    let landing = landed_root.join("soak/-/SOAK/-/default");

    let sync_under = |inject: Option<u64>| {
        let mut cmd = match (inject, strace) {
            (Some(nth), Some(strace)) => {
                let mut cmd = std::process::Command::new(strace);
                cmd.args([
                    "-f",
                    "-qq",
                    "-o",
                    "/dev/null",
                    "-e",
                    "trace=fsync,fdatasync",
                    "-e",
                ])
                .arg(format!("inject=fsync,fdatasync:error=EIO:when={nth}"))
                .arg(exe);
                cmd
            }
            _ => std::process::Command::new(exe),
        };
        cmd.args(["sync", "--config"])
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
            .arg(&out)
            .arg("--state")
            .arg(work.join("state"))
            .arg("--audit-log")
            .arg(work.join("audit.jsonl"))
            .env("EDC_SYNC_SOAK_URL", sim.base_url())
            .env("EDC_SYNC_SOAK_TOKEN", "soak-token")
            .envs(garage.iter().flat_map(|g| g.env()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        if inject.is_some() {
            // One page a round at most, so the failures fall on pages
            // throughout the dataset rather than after it is all landed.
            cmd.args(["--max-pages", "1"]);
        }
        cmd
    };
    let mut state = seed | 1;
    let (mut torn, mut ahead, mut failed) = (0, 0, 0);
    for _ in 0..rounds {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        match mode {
            Mode::Kill => {
                let delay = Duration::from_millis(5 + (state >> 33) % 150);
                let mut child = sync_under(None).spawn().context("starting edc-sync sync")?;
                tokio::time::sleep(delay).await;
                let _ = child.kill();
                let _ = child.wait();
            }
            Mode::FsyncFaults => {
                let nth = 1 + (state >> 33) % 6;
                let status = sync_under(Some(nth)).status().context("starting strace")?;
                failed += u32::from(!status.success());
            }
        }
        refresh(garage.as_ref(), &landed_root).await?;
        if cursor_ahead(&cursor_path, &landing, &ds)? {
            ahead += 1;
        }
        if let Ok(r) = verify(&work.join("audit.jsonl")) {
            if r.finding.as_ref().is_some_and(|f| f.damage == Damage::TornTail) {
                torn += 1;
            }
        }
    }
    let last = sync_under(None)
        .stderr(std::process::Stdio::piped())
        .output()
        .context("starting the final edc-sync sync")?;
    let status = last.status;
    let final_error = String::from_utf8_lossy(&last.stderr)
        .lines()
        .last()
        .map(str::to_string);
    refresh(garage.as_ref(), &landed_root).await?;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for id in edc_qualify::landed::landed_json_record_ids(&landing)? {
        *counts.entry(id).or_default() += 1;
    }
    let cursor: serde_json::Value =
        std::fs::read_to_string(work.join("state/soak/-/SOAK/-/default.cursor.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
    let report = verify(&work.join("audit.jsonl"))?;
    // The landing, its manifest, the trail and the cursor reconciled by
    // `edc-sync verify`, as an operator would after the soak.
    let reconciled = std::process::Command::new(exe)
        .arg("verify")
        .arg("--out")
        .arg(&out)
        .arg("--state")
        .arg(work.join("state"))
        .arg("--audit-log")
        .arg(work.join("audit.jsonl"))
        .envs(garage.iter().flat_map(|g| g.env()))
        .output()
        .context("starting edc-sync verify")?;
    Ok(SoakFigures {
        mode,
        landing: match &garage {
            Some(g) => format!("{} ({} on loopback)", g.url("soak"), g.name),
            None => "local directory".into(),
        },
        rounds,
        rounds_with_cursor_ahead: ahead,
        runs_failed_by_fault: failed,
        records_in_dataset: records,
        records_landed: counts.len(),
        duplicates: counts.values().filter(|n| **n > 1).count(),
        lost: (records as usize).saturating_sub(counts.len()),
        cursor_at_high_water: cursor["window_start"]
            == edc_core::sync::settled_window_start(&config, "soak", &ds.record(records).modified)?,
        torn_tails_seen: torn,
        audit_intact: report.intact(),
        audit_verify: report.to_string(),
        final_exit_code: status.code(),
        final_error,
        verify_exit_code: reconciled.status.code(),
        verify_summary: String::from_utf8_lossy(&reconciled.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .to_string(),
    })
}

/// With an object store, the bucket copied out into `to` afresh.
async fn refresh(garage: Option<&edc_testkit::s3_server::PrivateS3>, to: &Path) -> anyhow::Result<()> {
    if let Some(g) = garage {
        let _ = std::fs::remove_dir_all(to);
        g.download("soak", to).await?;
    }
    Ok(())
}

/// True when the cursor's window starts past a record that is not landed.
fn cursor_ahead(cursor: &Path, landing: &Path, ds: &Dataset) -> anyhow::Result<bool> {
    let Some(start) = std::fs::read_to_string(cursor)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["window_start"].as_str().map(str::to_string))
    else {
        return Ok(false);
    };
    let landed: std::collections::BTreeSet<String> = match landing.exists() {
        true => edc_qualify::landed::landed_json_record_ids(landing)?
            .into_iter()
            .collect(),
        false => Default::default(),
    };
    Ok((1..=ds.records).any(|n| {
        let r = ds.record(n);
        r.modified.as_str() < start.as_str() && !landed.contains(&format!("AT-{n:07}"))
    }))
}

pub fn render(f: &SoakFigures) -> String {
    format!(
        "crash soak: {} rounds of start / {} / resume, faults on, landing in {}\n\
         rounds with the cursor ahead of landed data   {}   (target 0)\n\
         runs stopped by an injected fsync failure     {}\n\
         records in the dataset   {}\n\
         records landed           {}\n\
         duplicated records       {}   (target 0)\n\
         lost records             {}   (target 0)\n\
         cursor at high-water     {}\n\
         torn audit tails seen    {}   (each acknowledged by the next run)\n\
         audit verify             {}\n\
         final run exit code      {}{}\n\
         edc-sync verify          exit {}: {}\n\
         {}",
        f.rounds,
        match f.mode {
            Mode::Kill => "SIGKILL at a seeded moment",
            Mode::FsyncFaults => "the Nth fsync fails with EIO (strace)",
        },
        f.landing,
        f.rounds_with_cursor_ahead,
        f.runs_failed_by_fault,
        f.records_in_dataset,
        f.records_landed,
        f.duplicates,
        f.lost,
        f.cursor_at_high_water,
        f.torn_tails_seen,
        f.audit_verify,
        edc_core::exit::status_text(f.final_exit_code),
        f.final_error
            .as_deref()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default(),
        edc_core::exit::status_text(f.verify_exit_code),
        f.verify_summary,
        serde_json::to_string(f).unwrap_or_default()
    )
}

//! `edc-sync bench crash-soak`: start a sync, SIGKILL it at a seeded random
//! moment, resume; many rounds, with faults on. Then count what landed.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use crate::audit::{verify, Damage};
use crate::sim::{Dataset, Fault, FaultSchedule, RetryAfterForm, SimConfig, Simulator};

#[derive(Debug, Clone, Serialize)]
pub struct SoakFigures {
    pub rounds: u32,
    pub records_in_dataset: u32,
    pub records_landed: usize,
    pub duplicates: usize,
    pub lost: usize,
    pub cursor_at_high_water: bool,
    pub torn_tails_seen: u32,
    pub audit_intact: bool,
    pub audit_verify: String,
    pub final_exit_code: Option<i32>,
}

const POLICY: &str = include_str!("../../config/fixtures/simulator-policies.yaml");

/// Runs the soak in `work` and returns the figures.
pub async fn run(
    exe: &Path,
    work: &Path,
    rounds: u32,
    records: u32,
    seed: u64,
) -> anyhow::Result<SoakFigures> {
    std::fs::create_dir_all(work)?;
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
    let sync = || {
        let mut cmd = std::process::Command::new(exe);
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
            .arg(work.join("landing"))
            .arg("--state")
            .arg(work.join("state"))
            .arg("--audit-log")
            .arg(work.join("audit.jsonl"))
            .env("EDC_SYNC_SOAK_URL", sim.base_url())
            .env("EDC_SYNC_SOAK_TOKEN", "soak-token")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        cmd
    };
    let mut state = seed | 1;
    let mut torn = 0;
    for _ in 0..rounds {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let delay = Duration::from_millis(5 + (state >> 33) % 150);
        let mut child = sync().spawn().context("starting edc-sync sync")?;
        tokio::time::sleep(delay).await;
        let _ = child.kill();
        let _ = child.wait();
        if let Ok(r) = verify(&work.join("audit.jsonl")) {
            if r.finding.as_ref().is_some_and(|f| f.damage == Damage::TornTail) {
                torn += 1;
            }
        }
    }
    let status = sync().status()?;
    let dir = work.join("landing/soak/-/SOAK/-/default");
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for id in crate::sim::landed_json_record_ids(&dir)? {
        *counts.entry(id).or_default() += 1;
    }
    let ds = Dataset {
        subjects: 30,
        records,
        seed: 77,
        padding: 0,
    };
    let cursor: serde_json::Value =
        std::fs::read_to_string(work.join("state/soak/-/SOAK/-/default.cursor.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
    let report = verify(&work.join("audit.jsonl"))?;
    Ok(SoakFigures {
        rounds,
        records_in_dataset: records,
        records_landed: counts.len(),
        duplicates: counts.values().filter(|n| **n > 1).count(),
        lost: (records as usize).saturating_sub(counts.len()),
        cursor_at_high_water: cursor["window_start"] == ds.record(records).modified,
        torn_tails_seen: torn,
        audit_intact: report.intact(),
        audit_verify: report.to_string(),
        final_exit_code: status.code(),
    })
}

pub fn render(f: &SoakFigures) -> String {
    format!(
        "crash soak: {} rounds of start / SIGKILL at a seeded moment / resume, faults on\n\
         records in the dataset   {}\n\
         records landed           {}\n\
         duplicated records       {}   (target 0)\n\
         lost records             {}   (target 0)\n\
         cursor at high-water     {}\n\
         torn audit tails seen    {}   (each acknowledged by the next run)\n\
         audit verify             {}\n\
         final run exit code      {:?}\n\
         {}",
        f.rounds,
        f.records_in_dataset,
        f.records_landed,
        f.duplicates,
        f.lost,
        f.cursor_at_high_water,
        f.torn_tails_seen,
        f.audit_verify,
        f.final_exit_code,
        serde_json::to_string(f).unwrap_or_default()
    )
}

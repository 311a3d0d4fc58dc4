//! `redis_calls_per_request` for `bench pacer`:
//! four `edc-sync sync --redis` processes, one quota, a stream each, 60
//! pages each against a simulator in a child process; Redis's own
//! `INFO commandstats` counts the script calls, the shared audit trail the
//! requests (`page_committed` lines; the simulator injects no faults).

use std::path::Path;

use anyhow::{bail, Context};

use super::harness::{policy, SimProcess};

/// Script calls and requests of one four-process sync.
pub async fn calls_per_request(exe: &Path, redis_url: &str, work: &Path) -> anyhow::Result<(u64, u64)> {
    let sim = SimProcess::start(exe, 300, 0)?;
    std::fs::create_dir_all(work)?;
    let config = work.join("fanout-policy.yaml");
    std::fs::write(&config, policy(5, 1024 * 1024))?;
    let mut admin = quota_pacer::RedisPacer::connect(redis_url, edc_core::REDIS_KEY_PREFIX)
        .await?
        .connection();
    super::harness::reset_stats(&mut admin).await?;
    let trail = work.join("audit.jsonl");
    let children = (1..=4)
        .map(|n| {
            super::harness::sync_command(exe, &config, "bench", &format!("FANOUT-{n}"), work, &trail)
                .args(["--redis", redis_url])
                .env("EDC_SYNC_BENCH_URL", &sim.url)
                .spawn()
                .context("starting a sync")
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    for mut child in children {
        let status = child.wait()?;
        if !status.success() {
            bail!("a fan-out sync failed: {status}");
        }
    }
    let calls = super::harness::script_calls_counted(&mut admin).await?;
    let mut requests = 0;
    edc_core::audit::each_event(&trail, "page_committed", |_, _| requests += 1)?;
    Ok((calls, requests))
}

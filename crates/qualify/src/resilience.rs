//! Resilience (OQ-013..OQ-015): a truncated body never committed, an invalid
//! payload ending the run with nothing committed, and kill -9 at any moment.

use std::time::Duration;

use anyhow::Context as _;
use serde_json::Value;

use super::context::{dataset, Ctx};
use super::scenario::{
    cursor, events, exit_of, first_str, json_lines, landed_ids, run_vault_ok, scenario, stream_dir, Scenario,
};
use edc_core::audit::verify;
use edc_core::run::{self};

/// The scenarios of this file, in id order.
pub fn all() -> Vec<Scenario> {
    vec![
        scenario!(
            "OQ-013",
            "A truncated body is never committed; the page is fetched again whole",
            ["URS-010", "URS-009"],
            false,
            oq_013
        ),
        scenario!(
            "OQ-014",
            "An invalid payload (JSON and ODM) ends the run with exit 65 and nothing committed",
            ["URS-010", "URS-019"],
            false,
            oq_014
        ),
        scenario!(
            "OQ-015",
            "Killed at arbitrary moments, resumed runs land every record exactly once",
            ["URS-017"],
            false,
            oq_015
        ),
    ]
}

async fn oq_013(ctx: &mut Ctx) -> anyhow::Result<()> {
    run_vault_ok(ctx, 60, &["2=truncate"]).await?;
    let retries = events(ctx, "retry_scheduled");
    let reason = first_str(&retries, "reason");
    ctx.check(
        "the truncated response was retried",
        "a retry_scheduled line naming the truncation",
        &reason,
        reason.contains("truncated"),
    );
    let ids = landed_ids(ctx, "oq_vault", "default")?;
    ctx.check_eq("records landed (each page whole, hash-checked)", 60, ids.len());
    let leftovers =
        edc_core::no_follow::read_dir(stream_dir(ctx, "oq_vault", "default").join(".tmp"))?.count();
    ctx.check_eq("partial files left in the landing area", 0, leftovers);
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_014(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    for vendor in ["oq_vault", "oq_rave"] {
        let sim = ctx.sim(60, &["2=garbage"], None).await?;
        let result = run::execute(ctx.spec(&config, vendor, &sim)).await?;
        ctx.check_eq(
            &format!("{vendor}: exit code with an invalid second page"),
            65,
            exit_of(&result),
        );
        let manifest = json_lines(&stream_dir(ctx, vendor, "default").join("manifest.jsonl"));
        ctx.check_eq(
            &format!("{vendor}: pages in the manifest (only the valid first page)"),
            1,
            manifest.len(),
        );
        let c = cursor(ctx, vendor, "default");
        let expected = manifest
            .first()
            .map_or(Value::Null, |m| m["cursor_after"]["next_page"].clone());
        ctx.check(
            &format!("{vendor}: cursor still points at the invalid page"),
            format!("{expected}"),
            format!("{}", c["next_page"]),
            c["next_page"] == expected,
        );
    }
    let failed = events(ctx, "request_failed");
    let quarantined = failed
        .iter()
        .filter(|l| l["quarantined"].as_str().is_some())
        .count();
    ctx.check_eq(
        "invalid pages kept aside in quarantine, not landed",
        2,
        quarantined,
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_015(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let text = edc_core::no_follow::read_string(&config)?.replacen("page_size: 25", "page_size: 6", 1);
    edc_core::no_follow::write(&config, text)?;
    let records = 120;
    let mut schedule = vec!["9=429:seconds:0", "17=500", "25=truncate"];
    schedule.sort();
    let sim = ctx.sim(records, &schedule, None).await?;
    let sync = |ctx: &Ctx| {
        let mut cmd = ctx.sync_command(&config, &sim, &["--allow-dirty"]);
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        cmd
    };
    let mut seed: u64 = 0x0015;
    let rounds = 12;
    for _ in 0..rounds {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut child = sync(ctx).spawn().context("starting edc-sync sync")?;
        tokio::time::sleep(Duration::from_millis(10 + (seed >> 33) % 90)).await;
        let _ = child.kill();
        let _ = child.wait();
    }
    let status = sync(ctx).status()?;
    ctx.check_eq(
        &format!("exit code of the run after {rounds} SIGKILLs"),
        "0".to_string(),
        status.code().map_or("none".into(), |c| c.to_string()),
    );
    let ids = landed_ids(ctx, "oq_vault", "default")?;
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    ctx.check_eq(
        "records landed (manifest, hash-checked)",
        records as usize,
        ids.len(),
    );
    ctx.check_eq("distinct records (no duplicates)", records as usize, unique.len());
    let c = cursor(ctx, "oq_vault", "default");
    ctx.check_eq(
        "cursor = high-water mark less the lookback (delta.lookback)",
        edc_core::sync::settled_window_start(
            &config,
            "oq_vault",
            &dataset(records).record(records).modified,
        )?,
        c["window_start"].as_str().unwrap_or("none").to_string(),
    );
    let report = verify(&ctx.dir.join("audit.jsonl"))?;
    ctx.check(
        "audit trail after the kills",
        "intact (torn lines, if any, acknowledged)",
        report.to_string(),
        report.intact(),
    );
    ctx.attach_run_outputs();
    Ok(())
}

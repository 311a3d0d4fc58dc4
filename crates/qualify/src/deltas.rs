//! OQ scenarios for the vendors' delta endpoints (OQ-024..OQ-028): date
//! windows that never fetch a boundary record twice, a cursor too old for
//! the endpoint named instead of skipped, a VQL cursor literal that no data
//! value can escape, backfill on newest-first data, and a cursor that never
//! moves backwards.

use std::process::Output;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::context::{dataset, Ctx, OQ_PASSWORD};
use super::scenario::{cursor, events, landed_and_distinct, scenario, stream_dir, Scenario};
use edc_sim::audit_trail::Arrivals;
use edc_sim::{Profile, Simulator};

/// The scenarios of this file, in id order.
pub fn all() -> Vec<Scenario> {
    vec![
        scenario!(
            "OQ-024",
            "Date windows: every record once across runs while records arrive, none at a boundary twice",
            ["URS-025", "URS-009"],
            false,
            oq_024
        ),
        scenario!(
            "OQ-025",
            "A window start older than the endpoint serves stops with 65 naming the interval, nothing skipped",
            ["URS-026", "URS-019"],
            false,
            oq_025
        ),
        scenario!(
            "OQ-026",
            "A hostile value in the data becomes one inert VQL literal; the query keeps its structure",
            ["URS-027", "URS-001"],
            false,
            oq_026
        ),
        scenario!(
            "OQ-027",
            "Backfill on a newest-first endpoint lands every record of its window",
            ["URS-028"],
            false,
            oq_027
        ),
        scenario!(
            "OQ-028",
            "Records older than the cursor are landed and flagged; the cursor never moves back",
            ["URS-029"],
            false,
            oq_028
        ),
    ]
}

async fn output(mut cmd: std::process::Command) -> anyhow::Result<Output> {
    Ok(tokio::task::spawn_blocking(move || cmd.output()).await??)
}

async fn sync(ctx: &Ctx, config: &std::path::Path, sim: &Simulator, vendor: &str) -> anyhow::Result<Output> {
    output(ctx.vendor_command(config, sim, vendor, OQ_PASSWORD, &[])).await
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

async fn oq_024(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    // Records arrive every 250 ms, from 20 s ago to 30 s from now.
    let origin = SystemTime::now() - Duration::from_secs(20);
    let sim = ctx
        .sim_with(200, &[], |c| {
            c.profile = Profile::Vault;
            c.audit_trail = Some(Arrivals::every(origin, Duration::from_millis(250)));
        })
        .await?;
    let mut starts = Vec::new();
    for run in 1..=3 {
        if run > 1 {
            tokio::time::sleep(Duration::from_millis(2500)).await;
        }
        let out = sync(ctx, &config, &sim, "oq_audit_trail").await?;
        ctx.check_eq(&format!("exit code of run {run}"), 0, code(&out));
        starts.push(cursor(ctx, "oq_audit_trail", "default")["window_start"].clone());
    }
    let ids = crate::landed::landed_json_record_ids(&stream_dir(ctx, "oq_audit_trail", "default"))?;
    let n = ids.len();
    ctx.check(
        "records landed / distinct",
        "equal: no record twice",
        landed_and_distinct(&ids),
        landed_and_distinct(&ids) == format!("{n} / {n}"),
    );
    let mut sorted = ids.clone();
    sorted.sort();
    let expected: Vec<String> = (1..=n as u32).map(|i| format!("AT-{i:07}")).collect();
    ctx.check(
        "landed records are 1..N with no gap",
        format!("AT-0000001..AT-{n:07}"),
        format!(
            "{} records, first {}, last {}",
            n,
            sorted.first().map_or("none", String::as_str),
            sorted.last().map_or("none", String::as_str)
        ),
        sorted == expected && n > 80,
    );
    ctx.check(
        "window start after each run (the second after that run's window end, less the lookback)",
        "strictly increasing",
        super::context::listed(
            &starts
                .iter()
                .map(|s| s.as_str().unwrap_or("none"))
                .collect::<Vec<_>>(),
        ),
        starts.windows(2).all(|w| w[0].as_str() < w[1].as_str()),
    );
    let asked: Vec<String> = sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.contains("/audittrail/"))
        .map(|r| r.path)
        .collect();
    ctx.check(
        "every data request names a closed window",
        "start_date and end_date on each",
        format!("{} requests", asked.len()),
        asked
            .iter()
            .all(|p| p.contains("start_date=") && p.contains("end_date=")),
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_025(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx
        .sim_with(30, &[], |c| {
            c.profile = Profile::Vault;
            c.audit_trail = Some(Arrivals::every(
                SystemTime::now() - Duration::from_secs(60),
                Duration::from_secs(1),
            ));
        })
        .await?;
    let since = "2026-01-01T00:00:00Z";
    let out = output(ctx.command(
        "backfill",
        &config,
        &sim,
        "oq_audit_trail",
        OQ_PASSWORD,
        &["--since", since],
    ))
    .await?;
    ctx.check_eq("exit code", 65, code(&out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    ctx.check(
        "the message names the interval the endpoint can no longer serve",
        format!("[{since}, <30 days ago>)"),
        err.trim(),
        err.contains(&format!("[{since}, ")) && err.contains("max_age_days"),
    );
    let data = sim
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.contains("/audittrail/"))
        .count();
    ctx.check_eq("data requests sent for the unservable window", 0, data);
    let failed = events(ctx, "request_failed");
    ctx.check(
        "the refusal is in the audit trail",
        "a request_failed line naming the interval",
        failed.len(),
        failed
            .iter()
            .any(|l| l["reason"].as_str().is_some_and(|r| r.contains(since))),
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_026(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let hostile = "2099-12-31T00:00:00Z' OR name__v != 'x";
    // 1 = login, 2 = page 1, 3 = page 2, whose records carry the hostile value.
    let fault = format!("3=cursor-value:{hostile}");
    let sim = ctx
        .sim_with(20, &[fault.as_str()], |c| c.profile = Profile::Vault)
        .await?;
    for run in 1..=2 {
        let out = sync(ctx, &config, &sim, "oq_vql").await?;
        ctx.check_eq(&format!("exit code of run {run}"), 0, code(&out));
    }
    let requests = sim.requests();
    ctx.check(
        "methods the EDC received",
        "POST only (login, VQL query, VQL next pages)",
        requests.len(),
        requests.iter().all(|r| r.method == "POST"),
    );
    let last = requests.last().and_then(|r| r.vql_since.clone());
    ctx.check_eq(
        "the second run's query, as the server parsed it: one literal holding the whole value",
        Some(hostile.to_string())
            .map(|s| format!("{s:?}"))
            .unwrap_or_default(),
        last.map(|s| format!("{s:?}")).unwrap_or_else(|| "none".into()),
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_027(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx.sim_with(423, &[], |c| c.newest_first = true).await?;
    let ds = dataset(423);
    // modified_since is exclusive: the window holds records 11..=233.
    let (since, until) = (ds.record(10).modified, ds.record(233).modified);
    let out = output(ctx.command(
        "backfill",
        &config,
        &sim,
        "oq_newest",
        OQ_PASSWORD,
        &["--since", &since, "--until", &until],
    ))
    .await?;
    ctx.check_eq("exit code", 0, code(&out));
    let label = format!(
        "{}..{}",
        edc_core::store::sanitize(&since),
        edc_core::store::sanitize(&until)
    );
    let dir = ctx
        .dir
        .join("landing/backfill")
        .join(&label)
        .join(format!("oq_newest/-/{}/-/default", super::context::OQ_STUDY));
    let ids = crate::landed::landed_json_record_ids(&dir)?;
    let missing: Vec<u32> = (11..=233u32)
        .filter(|n| !ids.contains(&format!("AT-{n:07}")))
        .collect();
    ctx.check(
        "records of the window [11, 233] not landed",
        "none",
        format!("{} missing of 223", missing.len()),
        missing.is_empty(),
    );
    ctx.check(
        "records landed / distinct",
        "equal",
        landed_and_distinct(&ids),
        landed_and_distinct(&ids) == format!("{0} / {0}", ids.len()),
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_028(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    // The simulator's backdating fault restamps every record of the page
    // it hits, records served before among them; a lookback would re-read
    // those (as new versions, rightly landed again). Without one, the page
    // holds only the 25 new records.
    let text = edc_core::no_follow::read_string(&config)?.replacen(
        "    page_size: 25\noq_rave:",
        "    page_size: 25\n    lookback:\n      seconds: 0\noq_rave:",
        1,
    );
    edc_core::no_follow::write(&config, text)?;
    let spec = |ctx: &Ctx, sim: &Simulator| edc_core::run::RunSpec {
        allow_dirty: true,
        ..ctx.spec(&config, "oq_vault", sim)
    };
    let first = ctx.sim(50, &[], None).await?;
    let result = edc_core::run::execute(spec(ctx, &first)).await?;
    ctx.check_eq("exit code of the first run", true, result.outcome.is_ok());
    let start = cursor(ctx, "oq_vault", "default")["window_start"].clone();
    // 25 new records arrive, dated 1999 by the vendor.
    let second = ctx.sim(75, &["1=backdated"], None).await?;
    let result = edc_core::run::execute(spec(ctx, &second)).await?;
    ctx.check_eq("exit code of the second run", true, result.outcome.is_ok());
    let last = events(ctx, "page_committed").pop().unwrap_or(Value::Null);
    ctx.check_eq(
        "the backdated page is flagged older_than_cursor",
        Value::Bool(true),
        last["older_than_cursor"].clone(),
    );
    ctx.check_eq(
        "records landed over both runs",
        75,
        crate::landed::landed_json_record_ids(&stream_dir(ctx, "oq_vault", "default"))?.len(),
    );
    ctx.check_eq(
        "window start after the backdated page",
        start.clone(),
        cursor(ctx, "oq_vault", "default")["window_start"].clone(),
    );
    ctx.attach_run_outputs();
    Ok(())
}

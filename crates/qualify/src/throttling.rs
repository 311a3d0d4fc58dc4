//! Throttling (OQ-001..OQ-006): a clean window, 429 with each Retry-After form, the
//! retry budget, and the audit line on disk before every sleep.

use serde_json::Value;

use super::context::{dataset, Ctx};
use super::scenario::{
    cursor, events, exit_of, first_str, gap_s, landed_ids, pacing, run_vault_ok, scenario, ts_us, Scenario,
};
use edc_core::run::{self};

/// The scenarios of this file, in id order.
pub fn all() -> Vec<Scenario> {
    vec![
        scenario!(
            "OQ-001",
            "Clean 200 window is landed whole and the cursor moves to its high-water mark (less the lookback)",
            ["URS-009", "URS-019"],
            false,
            oq_001
        ),
        scenario!(
            "OQ-002",
            "A single 429 then success: the same page is retried after the wait, cursor unchanged meanwhile",
            ["URS-004", "URS-009"],
            false,
            oq_002
        ),
        scenario!(
            "OQ-003",
            "Retry-After as an HTTP-date is honoured",
            ["URS-005"],
            false,
            oq_003
        ),
        scenario!(
            "OQ-004",
            "Retry-After absent: the configured default_retry_after_s is waited",
            ["URS-006"],
            false,
            oq_004
        ),
        scenario!(
            "OQ-005",
            "Retry budget exhausted: exit 75, cursor unchanged, next run resumes",
            ["URS-008", "URS-019"],
            false,
            oq_005
        ),
        scenario!(
            "OQ-006",
            "Every throttling audit line is on disk before the next request is sent",
            ["URS-011"],
            false,
            oq_006
        ),
    ]
}

async fn oq_001(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx.sim(110, &[], None).await?;
    let result = run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    ctx.check_eq("exit code of the sync", 0, exit_of(&result));
    let r = &result.reports[0];
    ctx.check_eq("pages committed (110 records, 25 per page)", 5, r.pages);
    ctx.check_eq("records committed", 110, r.records);
    let ids = landed_ids(ctx, "oq_vault", "default")?;
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    ctx.check_eq(
        "distinct records in landed, hash-checked pages",
        110,
        unique.len(),
    );
    let hw = dataset(110).record(110).modified;
    let c = cursor(ctx, "oq_vault", "default");
    ctx.check_eq(
        "cursor window_start = high-water mark less the lookback (delta.lookback)",
        edc_core::sync::settled_window_start(&config, "oq_vault", &hw)?,
        c["window_start"].as_str().unwrap_or("none").to_string(),
    );
    let committed = events(ctx, "page_committed");
    let all_hashed = committed
        .iter()
        .all(|l| l["payload_sha256"].as_str().is_some_and(|h| h.len() == 64));
    ctx.check(
        "every page_committed line carries payload_sha256",
        "5 lines, each with a 64-hex SHA-256",
        format!("{} lines, all hashed: {all_hashed}", committed.len()),
        committed.len() == 5 && all_hashed,
    );
    ctx.set_pacing(pacing(ctx, &sim, 50.0, 10));
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_002(ctx: &mut Ctx) -> anyhow::Result<()> {
    let (_, sim, _) = run_vault_ok(ctx, 60, &["2=429:seconds:2"]).await?;
    let reqs = sim.requests();
    ctx.check_eq("status of request 2", 429, reqs[1].status);
    ctx.check_eq(
        "request 3 asks for the same page as request 2",
        reqs[1].path.clone(),
        reqs[2].path.clone(),
    );
    let gap = gap_s(&reqs, 1, 2);
    ctx.check(
        "time between the 429 and the retry",
        ">= 2.0 s (Retry-After: 2)",
        format!("{gap:.3} s"),
        gap >= 2.0,
    );
    let pages = events(ctx, "page_committed");
    let same = pages.len() >= 2 && pages[1]["cursor_before"] == pages[0]["cursor_after"];
    ctx.check(
        "cursor before the retried page = cursor after page 1",
        "identical",
        format!(
            "{}",
            pages.get(1).map_or(Value::Null, |p| p["cursor_before"].clone())
        ),
        same,
    );
    let limited = events(ctx, "rate_limited");
    ctx.check_eq("rate_limited lines", 1, limited.len());
    ctx.check_eq(
        "Retry-After source recorded",
        "seconds".to_string(),
        first_str(&limited, "retry_after_source"),
    );
    ctx.set_pacing(pacing(ctx, &sim, 50.0, 10));
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_003(ctx: &mut Ctx) -> anyhow::Result<()> {
    let (_, sim, _) = run_vault_ok(ctx, 60, &["2=429:date:3"]).await?;
    let limited = events(ctx, "rate_limited");
    let source = first_str(&limited, "retry_after_source");
    ctx.check_eq("Retry-After source recorded", "date".to_string(), source);
    let wait = limited
        .first()
        .and_then(|l| l["retry_after_s"].as_f64())
        .unwrap_or(0.0);
    ctx.check(
        "wait derived from the date",
        "between 2 and 3 s (a date 3 s ahead, whole seconds)",
        format!("{wait:.3} s"),
        (2.0..=3.0).contains(&wait),
    );
    let reqs = sim.requests();
    let gap = gap_s(&reqs, 1, 2);
    ctx.check(
        "time between the 429 and the retry",
        format!(">= the wait ({wait:.3} s)"),
        format!("{gap:.3} s"),
        gap >= wait,
    );
    ctx.set_pacing(pacing(ctx, &sim, 50.0, 10));
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_004(ctx: &mut Ctx) -> anyhow::Result<()> {
    let (_, sim, _) = run_vault_ok(ctx, 60, &["2=429:absent", "4=503:raw:soon"]).await?;
    let limited = events(ctx, "rate_limited");
    let sources: Vec<&str> = limited
        .iter()
        .filter_map(|l| l["retry_after_source"].as_str())
        .collect();
    ctx.check_eq(
        "Retry-After sources recorded",
        "absent, unparseable".to_string(),
        sources.join(", "),
    );
    let waits: Vec<f64> = limited
        .iter()
        .filter_map(|l| l["retry_after_s"].as_f64())
        .collect();
    ctx.check(
        "waits used",
        "1.0 s each (default_retry_after_s: 1)",
        super::context::listed(&waits.iter().map(|w| format!("{w:.1} s")).collect::<Vec<_>>()),
        waits == [1.0, 1.0],
    );
    let reqs = sim.requests();
    let gap = gap_s(&reqs, 1, 2);
    ctx.check(
        "time between the 429 and the retry",
        ">= 1.0 s",
        format!("{gap:.3} s"),
        gap >= 1.0,
    );
    ctx.set_pacing(pacing(ctx, &sim, 50.0, 10));
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_005(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx
        .sim(
            60,
            &["2=429:seconds:0", "3=429:seconds:0", "4=429:seconds:0"],
            None,
        )
        .await?;
    let result = run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    ctx.check_eq(
        "exit code (max_retry_attempts: 3, three 429s)",
        75,
        exit_of(&result),
    );
    let pages = events(ctx, "page_committed");
    let after_first = pages
        .first()
        .map_or(Value::Null, |p| p["cursor_after"]["next_page"].clone());
    let c = cursor(ctx, "oq_vault", "default");
    ctx.check(
        "cursor after the exhausted run",
        format!("next_page {after_first} (page 1 committed, page 2 not)"),
        format!("next_page {}", c["next_page"]),
        c["next_page"] == after_first,
    );
    let exhausted = events(ctx, "quota_exhausted");
    ctx.check_eq("quota_exhausted lines", 1, exhausted.len());
    let finished = events(ctx, "run_finished");
    ctx.check_eq(
        "run_finished exit_code",
        75,
        finished
            .first()
            .and_then(|l| l["exit_code"].as_u64())
            .unwrap_or(0),
    );
    let resumed = run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    ctx.check_eq("exit code of the next run", 0, exit_of(&resumed));
    let ids = landed_ids(ctx, "oq_vault", "default")?;
    ctx.check_eq(
        "records landed after resuming (no loss, no duplicate)",
        60,
        ids.len(),
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_006(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx
        .sim(60, &["2=429:seconds:1", "3=503:seconds:1", "5=500"], None)
        .await?;
    let result = run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    ctx.check_eq("exit code", 0, exit_of(&result));
    let reqs = sim.requests();
    let mut waits: Vec<Value> = events(ctx, "rate_limited");
    waits.extend(events(ctx, "retry_scheduled"));
    waits.sort_by_key(|l| l["seq"].as_u64());
    ctx.check_eq("audited waits (429, 503, 500)", 3, waits.len());
    // One stream, one request at a time: the k-th failed request caused the
    // k-th wait, and the request after it is the retry.
    let failed: Vec<usize> = (0..reqs.len())
        .filter(|i| matches!(reqs[*i].status, 429 | 500 | 503))
        .collect();
    for (line, cause) in waits.iter().zip(failed) {
        let Some(next) = reqs.get(cause + 1) else { continue };
        let written = ts_us(line);
        ctx.check(
            &format!(
                "{} line for request {} is on disk before request {} arrives",
                line["event"].as_str().unwrap_or("?"),
                cause + 1,
                cause + 2
            ),
            "audit line ts < next arrival",
            format!(
                "audit {} < arrival {}",
                line["ts"].as_str().unwrap_or("?"),
                next.ts
            ),
            written < next.t_us,
        );
    }
    ctx.set_pacing(pacing(ctx, &sim, 50.0, 10));
    ctx.attach_run_outputs();
    Ok(())
}

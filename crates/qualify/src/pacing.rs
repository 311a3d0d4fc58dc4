//! Pacing across workers (OQ-007, OQ-008): one shared pause, and the burst +
//! rate x t envelope never exceeded. Both need a real Redis.

use anyhow::Context as _;

use super::context::Ctx;
use super::scenario::{exit_of, pacing, scenario, Scenario};
use edc_core::run::{self, PacerChoice, Streams};
use edc_sim::LogEntry;

/// The scenarios of this file, in id order.
pub fn all() -> Vec<Scenario> {
    vec![
        scenario!(
            "OQ-007",
            "A 429 seen by one worker pauses every worker on the quota",
            ["URS-007"],
            true,
            oq_007
        ),
        scenario!(
            "OQ-008",
            "Several workers on one quota never exceed burst + rate x t",
            ["URS-003"],
            true,
            oq_008
        ),
    ]
}

async fn oq_007(ctx: &mut Ctx) -> anyhow::Result<()> {
    let redis = ctx.redis.clone().context("needs Redis")?;
    let config = ctx.policy_repo()?;
    let sim = ctx.sim(40, &["1=429:seconds:2"], None).await?;
    let mut spec = ctx.spec(&config, "oq_shared", &sim);
    spec.streams = Streams::All;
    spec.pacer = PacerChoice::Redis(redis);
    let result = run::execute(spec).await?;
    ctx.check_eq("exit code", 0, exit_of(&result));
    let reqs = sim.requests();
    let throttled = reqs.iter().find(|r| r.status == 429).map(|r| r.t_us).unwrap_or(0);
    // Requests booked before the pause was recorded may still go out in the
    // first moments; none may arrive after that until the pause ends.
    let inside: Vec<&LogEntry> = reqs
        .iter()
        .filter(|r| r.t_us > throttled + 300_000 && r.t_us < throttled + 1_950_000)
        .collect();
    ctx.check_eq(
        "requests from any worker arriving 0.3 s to 1.95 s after the 429 (Retry-After: 2)",
        0,
        inside.len(),
    );
    let after = reqs.iter().filter(|r| r.t_us >= throttled + 1_950_000).count();
    ctx.check(
        "requests after the pause, from the three workers",
        "> 0",
        after,
        after > 0,
    );
    let streams: std::collections::BTreeSet<String> = result
        .reports
        .iter()
        .filter(|r| r.pages > 0)
        .map(|r| r.stream.clone())
        .collect();
    ctx.check_eq("workers that completed their window", 3, streams.len());
    ctx.set_pacing(pacing(ctx, &sim, 10.0, 3));
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_008(ctx: &mut Ctx) -> anyhow::Result<()> {
    let redis = ctx.redis.clone().context("needs Redis")?;
    let config = ctx.policy_repo()?;
    // The simulator enforces the same quota as the policy, 10/s with burst
    // 3, on arrivals, allowing the arrival tolerance URS-003 states.
    let tolerance = crate::envelope::ARRIVAL_TOLERANCE_S;
    let sim = ctx
        .sim_with(50, &[], |c| {
            c.quota = Some((10.0, 3));
            c.quota_arrival_tolerance = std::time::Duration::from_secs_f64(tolerance);
        })
        .await?;
    let mut spec = ctx.spec(&config, "oq_shared", &sim);
    spec.streams = Streams::All;
    spec.pacer = PacerChoice::Redis(redis);
    let result = run::execute(spec).await?;
    ctx.check_eq("exit code", 0, exit_of(&result));
    let reqs = sim.requests();
    let quota_429 = reqs
        .iter()
        .filter(|r| r.fault.as_deref() == Some("server_quota"))
        .count();
    ctx.check_eq(
        "429s from the server's own quota (equal to the policy)",
        0,
        quota_429,
    );
    let arrivals: Vec<i64> = reqs.iter().map(|r| r.t_us).collect();
    let env = crate::envelope::check_within(&arrivals, 10.0, 3, tolerance);
    let w = env.worst;
    ctx.check(
        &format!(
            "windows with more arrivals than 3 + 10 x (t + {tolerance} s), the arrival tolerance URS-003 states"
        ),
        0,
        format!(
            "{} (the fullest: {} arrivals in {:.3} s, {:.2} allowed)",
            env.violations,
            w.count,
            w.seconds(),
            w.allowed
        ),
        env.violations == 0,
    );
    ctx.check_eq("requests (3 workers x 10 pages)", 30, reqs.len());
    ctx.set_pacing(pacing(ctx, &sim, 10.0, 3));
    ctx.attach_run_outputs();
    Ok(())
}

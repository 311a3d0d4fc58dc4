//! OQ scenario for late records (OQ-034): a vault whose audit records carry
//! sub-second times and of which some become visible only seconds after
//! their time. The lookback lands every record once; a sync without one
//! loses records silently, and the completeness check
//! (`backfill --missing-only`) finds and lands exactly those, then proves
//! none missing.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::context::{code, output, text, Ctx, Roots, OQ_PASSWORD, OQ_STUDY};
use super::scenario::{landed_and_distinct, scenario, Scenario};
use edc_sim::audit_trail::{vault_date, Arrivals};
use edc_sim::{Profile, Simulator};

/// The scenarios of this file, in id order.
pub fn all() -> Vec<Scenario> {
    vec![scenario!(
        "OQ-034",
        "Late-visible and sub-second records: the lookback lands each once; the completeness check finds what a sync without it lost",
        ["URS-035"],
        false,
        oq_034
    )]
}

const RECORDS: u32 = 120;
const VENDOR: &str = "oq_audit_trail";

/// Every record of the stream landed under `out`, its checks' included.
fn landed(out: &Path) -> anyhow::Result<Vec<String>> {
    let dir = format!("{VENDOR}/-/{OQ_STUDY}/-/default");
    let mut ids = crate::landed::landed_json_record_ids(&out.join(&dir))?;
    if let Ok(checks) = edc_core::no_follow::read_dir(out.join("backfill")) {
        for check in checks {
            ids.extend(crate::landed::landed_json_record_ids(&check?.path().join(&dir))?);
        }
    }
    Ok(ids)
}

async fn oq_034(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    // Record n is stamped origin + n x 250 ms, with milliseconds; every 4th
    // becomes visible 3 s after its stamp, three times the settle lag.
    let origin = SystemTime::now() - Duration::from_secs(30);
    let sim = ctx
        .sim_with(RECORDS, &[], |c| {
            c.profile = Profile::Vault;
            c.audit_trail = Some(Arrivals::late_and_subsecond(origin));
        })
        .await?;
    let (a, b) = (ctx.dir.join("with-lookback"), ctx.dir.join("without-lookback"));
    let roots = |d: &Path| (d.join("landing"), d.join("state"), d.join("audit.jsonl"));
    let (a_out, a_state, a_trail) = roots(&a);
    let (b_out, b_state, b_trail) = roots(&b);
    let run = |ctx: &Ctx, sim: &Simulator, sub: &str, extra: &[&str], which: (&Path, &Path, &Path)| {
        let r = Roots {
            out: which.0,
            state: which.1,
            audit_log: which.2,
        };
        ctx.command_over(sub, &config, sim, VENDOR, OQ_PASSWORD, extra, r)
    };
    // Three growing runs with the policy's default lookback (3600 s).
    for n in 1..=3 {
        if n > 1 {
            tokio::time::sleep(Duration::from_millis(2600)).await;
        }
        let out = output(run(ctx, &sim, "sync", &[], (&a_out, &a_state, &a_trail))).await?;
        ctx.check_eq(&format!("exit code of sync {n} with the lookback"), 0, code(&out));
    }
    let ids = landed(&a_out)?;
    ctx.check(
        "records landed / distinct, with the lookback",
        format!("{RECORDS} / {RECORDS}"),
        landed_and_distinct(&ids),
        landed_and_distinct(&ids) == format!("{RECORDS} / {RECORDS}"),
    );
    // The same vault, the same three runs, with lookback.seconds: 0.
    let text_now = edc_core::no_follow::read_string(&config)?;
    let without = text_now.replacen(
        "      settle_lag_s: 1\noq_vql:",
        "      settle_lag_s: 1\n    lookback:\n      seconds: 0\noq_vql:",
        1,
    );
    anyhow::ensure!(
        without != text_now,
        "the OQ policy's oq_audit_trail block has moved"
    );
    edc_core::no_follow::write(&config, without)?;
    let sim_b = ctx
        .sim_with(RECORDS, &[], |c| {
            c.profile = Profile::Vault;
            c.audit_trail = Some(Arrivals::late_and_subsecond(
                SystemTime::now() - Duration::from_secs(30),
            ));
        })
        .await?;
    for n in 1..=3 {
        if n > 1 {
            tokio::time::sleep(Duration::from_millis(2600)).await;
        }
        let out = output(run(
            ctx,
            &sim_b,
            "sync",
            &["--allow-dirty"],
            (&b_out, &b_state, &b_trail),
        ))
        .await?;
        ctx.check_eq(
            &format!("exit code of sync {n} without a lookback"),
            0,
            code(&out),
        );
    }
    // Distinct: without identities, a late record that shows up mid-window
    // shifts the newest-first offsets and may be served (and landed) twice.
    let mut b_ids = landed(&b_out)?;
    b_ids.sort();
    b_ids.dedup();
    let lost = RECORDS as usize - b_ids.len();
    ctx.check(
        "records lost without a lookback (late or sub-second)",
        "at least 1",
        lost.to_string(),
        lost > 0,
    );
    // The completeness check over the window, twice.
    let since = vault_date(origin.duration_since(UNIX_EPOCH)?.as_secs() as i64 - 60);
    let check_args = ["--allow-dirty", "--since", &since, "--missing-only"];
    for (n, expected) in [(1, lost), (2, 0)] {
        let out = output(run(
            ctx,
            &sim_b,
            "backfill",
            &check_args,
            (&b_out, &b_state, &b_trail),
        ))
        .await?;
        let step = format!(
            "completeness check {n} without a lookback: edc-sync backfill --since {since} --missing-only"
        );
        check_missing(ctx, &step, &out, expected);
    }
    let mut ids = landed(&b_out)?;
    ids.sort();
    ids.dedup();
    ctx.check_eq(
        "distinct records landed without a lookback, after the checks",
        RECORDS as usize,
        ids.len(),
    );
    // The proof for the stream with the lookback: nothing missing.
    let out = output(run(
        ctx,
        &sim,
        "backfill",
        &check_args,
        (&a_out, &a_state, &a_trail),
    ))
    .await?;
    check_missing(ctx, "completeness check with the lookback", &out, 0);
    ctx.attach_run_outputs();
    Ok(())
}

/// A completeness check's step: it exited 0 and said `expected` records
/// were missing.
fn check_missing(ctx: &mut Ctx, step: &str, out: &std::process::Output, expected: usize) {
    let said = text(out);
    let line = said
        .lines()
        .find(|l| l.contains("records missing from the landing"))
        .unwrap_or_default()
        .trim()
        .to_string();
    ctx.check(
        step,
        format!("exit 0, \"{expected} records missing from the landing\""),
        format!("exit {}: {line}", code(out)),
        code(out) == 0 && said.contains(&format!(" {expected} records missing from the landing")),
    );
}

//! OQ scenario for retention (OQ-035): a vendor whose policy asks for its
//! landed pages to be unchangeable (S3 Object Lock, compliance mode, one
//! day) lands only in a bucket that locks objects, each page locked in the
//! write that stores it. The retention is read back with boto3 (moto's own
//! client, not edc-sync's), an insider's delete of a page is refused by the
//! store, and `verify` reports each page's retention. The OQ starts moto in
//! server mode on loopback; the site's own buckets are never used.

use std::time::Duration;

use super::context::{code, output, text, Ctx, Roots, OQ_PASSWORD};
use super::scenario::{events, scenario, Scenario};
use edc_testkit::s3_server::PrivateS3;

/// The scenarios of this file, in id order.
pub fn all() -> Vec<Scenario> {
    vec![scenario!(
        "OQ-035",
        "Landed pages are retained unchangeable for the policy's period (S3 Object Lock); a bucket that cannot lock is refused",
        ["URS-036"],
        false,
        oq_035
    )]
}

const VENDOR: &str = "oq_vault_locked";

async fn oq_035(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx.sim(60, &[], None).await?;
    let (state, trail) = (ctx.dir.join("state"), ctx.dir.join("audit.jsonl"));

    // A bucket made without Object Lock: refused before any request.
    let plain = PrivateS3::moto(false, None).map_err(anyhow::Error::msg)?;
    let url = plain.url("oq");
    let refused_state = ctx.dir.join("state-refused");
    let refused_trail = ctx.dir.join("audit-refused.jsonl");
    let roots = Roots {
        out: std::path::Path::new(&url),
        state: &refused_state,
        audit_log: &refused_trail,
    };
    let mut cmd = ctx.command_over("sync", &config, &sim, VENDOR, OQ_PASSWORD, &[], roots);
    cmd.envs(plain.env());
    let out = output(cmd).await?;
    let said = text(&out);
    let error = said
        .lines()
        .find(|l| l.contains("error:"))
        .unwrap_or("no error line");
    ctx.check(
        "a sync into a bucket made without Object Lock",
        "exit 78 naming Object Lock and object_lock, before any request",
        format!(
            "exit {}: {error}; {} request(s) sent",
            code(&out),
            sim.requests().len()
        ),
        code(&out) == 78
            && error.contains("Object Lock")
            && error.contains("object_lock")
            && sim.requests().is_empty(),
    );
    let written = plain.names("oq").await?;
    ctx.check_eq("objects written to that bucket", 0, written.len());

    // A bucket with Object Lock: every page locked as it is written.
    let locked = PrivateS3::moto(true, None).map_err(anyhow::Error::msg)?;
    let url = locked.url("oq");
    let roots = Roots {
        out: std::path::Path::new(&url),
        state: &state,
        audit_log: &trail,
    };
    let mut cmd = ctx.command_over("sync", &config, &sim, VENDOR, OQ_PASSWORD, &[], roots);
    cmd.envs(locked.env());
    let out = output(cmd).await?;
    ctx.check_eq(&format!("exit code of the sync into {url}"), 0, code(&out));
    let committed: Vec<serde_json::Value> = events(ctx, "page_committed")
        .into_iter()
        .filter(|p| p["landed"] == true)
        .collect();
    let pages: Vec<String> = locked
        .names("oq")
        .await?
        .into_iter()
        .filter(|n| n.contains("/pages/"))
        .collect();
    ctx.check_eq("pages in the bucket (60 records, 25 a page)", 3, pages.len());
    let day_from_now = time::OffsetDateTime::now_utc() + Duration::from_secs(86_400 - 600);
    let mut read_back = Vec::new();
    for key in &pages {
        let retention = locked.retention(key)?;
        let held = retention.as_ref().is_some_and(|(mode, until)| {
            mode == "COMPLIANCE"
                && time::OffsetDateTime::parse(until, &time::format_description::well_known::Rfc3339)
                    .is_ok_and(|t| t >= day_from_now)
        });
        read_back.push((key.clone(), retention, held));
    }
    ctx.check(
        "each page's retention, read back with boto3 (an independent client)",
        "COMPLIANCE, until at least a day after the sync",
        read_back
            .iter()
            .map(|(key, r, _)| match r {
                Some((mode, until)) => format!("{}: {mode} until {until}", short(key)),
                None => format!("{}: none", short(key)),
            })
            .collect::<Vec<_>>()
            .join("; "),
        !read_back.is_empty() && read_back.iter().all(|(_, _, held)| *held),
    );
    let recorded = committed
        .iter()
        .filter(|p| p["retention"]["mode"] == "COMPLIANCE")
        .count();
    ctx.check_eq(
        "page_committed lines that record the page's retention",
        committed.len(),
        recorded,
    );
    let first = pages.first().cloned().unwrap_or_default();
    let deleted = locked.delete_version(&first)?;
    ctx.check(
        "an insider deletes a landed page's stored version with the bucket's keys",
        "refused by the store",
        match &deleted {
            Ok(()) => "deleted".to_string(),
            Err(why) => format!("refused: {}", why.chars().take(160).collect::<String>()),
        },
        deleted.is_err(),
    );
    let mut verify = ctx.verify_over(roots);
    verify.envs(locked.env());
    let out = output(verify).await?;
    let report = text(&out);
    let evidence = ctx.dir.join("verify-retention.txt");
    edc_core::no_follow::write(&evidence, &report)?;
    ctx.attach(&evidence);
    let summary = report.lines().last().unwrap_or_default().to_string();
    let each = report
        .lines()
        .filter(|l| l.contains(": retained COMPLIANCE until "))
        .count();
    ctx.check(
        "edc-sync verify --out s3://… (its whole report is verify-retention.txt)",
        "exit 0, no discrepancy, 3 pages retained COMPLIANCE, one line each",
        format!("exit {}; {each} page line(s); {summary}", code(&out)),
        code(&out) == 0 && summary.contains("no discrepancy; 3 page(s) retained COMPLIANCE") && each == 3,
    );
    ctx.attach_run_outputs();
    Ok(())
}

/// A page's key as a step shows it: its file name.
fn short(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}

//! The audit chain (OQ-012): a trail of two runs verifies, and every kind of
//! edit is detected.

use super::context::Ctx;
use super::scenario::{scenario, Scenario};
use edc_core::audit::verify;
use edc_core::run::{self};

/// The scenarios of this file, in id order.
pub fn all() -> Vec<Scenario> {
    vec![scenario!(
        "OQ-012",
        "The audit chain verifies, and edits, removals and reordering are detected",
        ["URS-012"],
        false,
        oq_012
    )]
}

async fn oq_012(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx.sim(60, &["2=429:seconds:0"], None).await?;
    run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    let audit = ctx.dir.join("audit.jsonl");
    let report = verify(&audit)?;
    ctx.check(
        "verify of the trail of two runs",
        "intact",
        report.to_string(),
        report.intact() && report.runs == 2,
    );
    let lines: Vec<String> = edc_core::no_follow::read_string(&audit)?
        .lines()
        .map(str::to_string)
        .collect();
    let tamper_dir = ctx.dir.join("tampered");
    std::fs::create_dir_all(&tamper_dir)?;
    let write = |name: &str, lines: &[String]| -> anyhow::Result<std::path::PathBuf> {
        let p = tamper_dir.join(name);
        edc_core::no_follow::write(&p, lines.iter().map(|l| format!("{l}\n")).collect::<String>())?;
        Ok(p)
    };
    let mut edited = lines.clone();
    edited[2] = edited[2].replacen("\"attempt\":", "\"attempt\": ", 1);
    let mut removed = lines.clone();
    removed.remove(3);
    let mut swapped = lines.clone();
    swapped.swap(2, 3);
    for (name, variant, damage) in [
        ("edited.jsonl", edited, edc_core::audit::Damage::Edited),
        ("removed.jsonl", removed, edc_core::audit::Damage::Removed),
        ("reordered.jsonl", swapped, edc_core::audit::Damage::Reordered),
    ] {
        let path = write(name, &variant)?;
        let r = verify(&path)?;
        let found = r.finding.as_ref().map(|f| f.damage);
        ctx.check(
            &format!("verify of a copy with a line {damage}"),
            format!("not intact: {damage}"),
            r.to_string(),
            found == Some(damage),
        );
        ctx.attach(&path);
    }
    ctx.attach_run_outputs();
    Ok(())
}

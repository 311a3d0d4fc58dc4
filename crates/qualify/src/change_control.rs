//! Change control of the policy (OQ-010, OQ-011, OQ-018): a dirty policy refused
//! unless recorded, the header's provenance, and an invalid policy named key by key.

use std::path::Path;

use anyhow::Context as _;
use serde_json::Value;

use super::context::Ctx;
use super::scenario::{events, exit_of, scenario, Scenario};
use edc_core::run::{self};

/// The scenarios of this file, in id order.
pub fn all() -> Vec<Scenario> {
    vec![
        scenario!(
            "OQ-010",
            "A policy that differs from git HEAD is refused unless --allow-dirty, which is recorded",
            ["URS-014"],
            false,
            oq_010
        ),
        scenario!(
            "OQ-011",
            "The run header stamps the policy's SHA-256, git commit and blob id",
            ["URS-013"],
            false,
            oq_011
        ),
        scenario!(
            "OQ-018",
            "An invalid policy is refused with exit 78 and the key named",
            ["URS-018", "URS-019"],
            false,
            oq_018
        ),
    ]
}

async fn oq_010(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let text = edc_core::no_follow::read_string(&config)?;
    edc_core::no_follow::write(&config, text.replacen("page_size: 25", "page_size: 26", 1))?;
    let sim = ctx.sim(30, &[], None).await?;
    let refused = run::execute(ctx.spec(&config, "oq_vault", &sim)).await;
    let (code, message) = match &refused {
        Ok(r) => (exit_of(r), "the run started".to_string()),
        Err(e) => (e.exit().code(), e.to_string()),
    };
    ctx.check_eq("exit code with a modified policy", 78, code);
    ctx.check(
        "refusal message",
        "names the file and says it differs from HEAD",
        &message,
        message.contains("differs from the version committed at HEAD"),
    );
    ctx.check_eq(
        "requests sent to the EDC before the refusal",
        0,
        sim.requests().len(),
    );
    let mut spec = ctx.spec(&config, "oq_vault", &sim);
    spec.allow_dirty = true;
    let allowed = run::execute(spec).await?;
    ctx.check_eq("exit code with --allow-dirty", 0, exit_of(&allowed));
    let header = events(ctx, "run_started");
    let h = header.first().cloned().unwrap_or(Value::Null);
    ctx.check(
        "run header records the override",
        "config_dirty true, allow_dirty true",
        format!(
            "config_dirty {}, allow_dirty {}",
            h["config_dirty"], h["allow_dirty"]
        ),
        h["config_dirty"] == true && h["allow_dirty"] == true,
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_011(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    // git2 handles are not Send: read the ids in a block of their own.
    let (commit_id, blob) = {
        let repo = git2::Repository::open(config.parent().context("policy dir")?)?;
        let commit = repo.head()?.peel_to_commit()?;
        let blob = commit
            .tree()?
            .get_path(Path::new("rate_limits.yaml"))?
            .id()
            .to_string();
        (commit.id().to_string(), blob)
    };
    let sha = edc_core::digest::sha256_hex(&edc_core::no_follow::read_bytes(&config)?);
    let sim = ctx.sim(30, &[], None).await?;
    run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    let header = events(ctx, "run_started").first().cloned().unwrap_or(Value::Null);
    ctx.check_eq(
        "header config_git_commit = git HEAD",
        commit_id,
        header["config_git_commit"].as_str().unwrap_or("none").to_string(),
    );
    ctx.check_eq(
        "header config_git_blob = blob of rate_limits.yaml at HEAD",
        blob,
        header["config_git_blob"].as_str().unwrap_or("none").to_string(),
    );
    ctx.check_eq(
        "header config_sha256 = SHA-256 of the file",
        sha,
        header["config_sha256"].as_str().unwrap_or("none").to_string(),
    );
    ctx.check_eq(
        "header config_dirty",
        "false".to_string(),
        header["config_dirty"].to_string(),
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_018(ctx: &mut Ctx) -> anyhow::Result<()> {
    std::fs::create_dir_all(&ctx.dir)?;
    let cases = [
        (
            "sustained_rate_per_sec: 50",
            "sustained_rate_per_sec: 0",
            "oq_vault.sustained_rate_per_sec: must be > 0, got 0",
        ),
        (
            "burst_capacity: 10\n  max_retry",
            "burst_capacity: 2.5\n  max_retry",
            "oq_vault.burst_capacity: must be an integer >= 1, got 2.5",
        ),
        (
            "max_concurrency: 3\n  delta",
            "max_concurency: 3\n  delta",
            "oq_vault.max_concurency: unknown key (did you mean max_concurrency?)",
        ),
        (
            "rl:oq:{study}",
            "rl:oq:{site}",
            "oq_vault.bucket_key: unknown placeholder {site}",
        ),
    ];
    for (i, (from, to, expected)) in cases.iter().enumerate() {
        let path = ctx.dir.join(format!("invalid-{}.yaml", i + 1));
        edc_core::no_follow::write(&path, super::context::OQ_POLICY.replacen(from, to, 1))?;
        ctx.attach(&path);
        let out = std::process::Command::new(&ctx.exe)
            .args(["config", "validate", "--config"])
            .arg(&path)
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        ctx.check(
            &format!("config validate of invalid-{}.yaml ({to:?})", i + 1),
            format!("exit 78, message contains {expected:?}"),
            format!(
                "exit {}: {stderr}",
                edc_core::exit::status_text(out.status.code())
            ),
            out.status.code() == Some(78) && stderr.contains(expected),
        );
    }
    Ok(())
}

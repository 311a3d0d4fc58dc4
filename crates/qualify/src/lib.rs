//! Qualification: `edc-sync qualify iq|oq` writes evidence a QA reviewer
//! can sign without reading source code (validation/OQ.md is the protocol).
//!
//! The scenarios judge the tool with witnesses of their own that share no
//! code with `edc-core`: a reader of what landed (`landed`) and the rate
//! envelope of a token bucket (`envelope`). The test suite uses the same
//! witnesses.

mod audit_chain;
mod boundaries;
mod castor;
mod change_control;
mod chart;
pub mod context;
mod deltas;
pub mod envelope;
pub mod evidence;
pub mod files;
mod integrity;
pub mod iq;
pub mod landed;
mod late_records;
mod oq_redis;
mod pacing;
pub mod printed;
mod redcap;
pub mod release_record;
mod report;
mod resilience;
mod retention;
pub mod scenario;
pub mod scenarios;
mod state_db;
mod throttling;
pub mod trace;
mod vendors;

use std::path::Path;

use edc_core::error::IoContext;
use edc_core::Error;

use context::Ctx;
use edc_core::audit::now_rfc3339;
use edc_core::digest::sha256_hex;
use evidence::{Environment, Evidence, ScenarioResult, Status, Summary};
use scenarios::Scenario;

pub use edc_core::exit::NotQualified;

/// Runs one scenario and returns its evidence. Never fails: an error inside
/// the scenario is a failed scenario with the error as its note.
pub async fn run_scenario(s: &Scenario, evidence: &Path, redis: Option<&str>, exe: &Path) -> ScenarioResult {
    let started = now_rfc3339();
    let mut result = ScenarioResult {
        id: s.id.into(),
        title: s.title.into(),
        requirements: s.requirements.iter().map(|r| r.to_string()).collect(),
        status: Status::NotExecuted,
        note: None,
        started: started.clone(),
        finished: started,
        steps: Vec::new(),
        artifacts: Vec::new(),
        pacing: None,
    };
    if s.needs_redis && redis.is_none() {
        result.note = Some("not executed: this scenario needs Redis and no --redis URL was given".into());
        return result;
    }
    let mut ctx = Ctx::new(s.id, evidence, redis.map(str::to_string), exe.to_path_buf());
    let trail = ctx.dir.join("audit.jsonl");
    if let Some(url) = redis {
        oq_redis::forget_anchors(url, &trail).await;
    }
    let _ = std::fs::remove_dir_all(&ctx.dir);
    let outcome = match std::fs::create_dir_all(&ctx.dir) {
        Ok(()) => (s.run)(&mut ctx).await,
        Err(e) => Err(e.into()),
    };
    if let Some(url) = redis {
        oq_redis::forget_anchors(url, &trail).await;
    }
    result.finished = now_rfc3339();
    let all_passed = !ctx.steps.is_empty() && ctx.steps.iter().all(|st| st.pass);
    result.status = match (&outcome, all_passed) {
        (Ok(()), true) => Status::Passed,
        _ => Status::Failed,
    };
    if let Err(e) = outcome {
        result.note = Some(format!("the scenario stopped with an error: {e:#}"));
    } else if !all_passed {
        result.note = Some("one or more steps did not give the expected result (see the steps)".into());
    }
    result.steps = ctx.steps;
    result.pacing = ctx.pacing;
    result.artifacts = ctx
        .artifacts
        .iter()
        .filter_map(|p| p.strip_prefix(evidence).ok().map(|r| r.display().to_string()))
        .collect();
    result.artifacts.sort();
    result
}

/// The environment section of the evidence.
pub fn environment(config: &Path, redis: Option<(&str, &str)>) -> Environment {
    let exe = std::env::current_exe().unwrap_or_default();
    let exe_sha = edc_core::no_follow::read_bytes(&exe)
        .map(|b| sha256_hex(&b))
        .unwrap_or_else(|e| format!("unreadable: {e}"));
    let loaded = edc_core::config::load(config);
    let p = loaded.as_ref().ok().map(|l| l.provenance.clone());
    Environment {
        tool: env!("CARGO_PKG_NAME").into(),
        version: env!("CARGO_PKG_VERSION").into(),
        executable: exe.display().to_string(),
        executable_sha256: exe_sha,
        os: edc_core::host::platform(),
        host: edc_core::host::name(),
        user: edc_core::host::user(),
        redis_url: redis.map(|(u, _)| edc_core::redact::redact_arg(u)),
        redis_version: redis.map(|(_, v)| v.to_string()),
        config_path: p
            .as_ref()
            .map_or_else(|| config.display().to_string(), |p| p.recorded_path()),
        config_sha256: p.as_ref().map(|p| p.config_sha256.clone()),
        config_git_commit: p.as_ref().and_then(|p| p.config_git_commit.clone()),
        config_git_blob: p.as_ref().and_then(|p| p.config_git_blob.clone()),
        config_dirty: p.as_ref().map(|p| p.dirty()),
    }
}

/// Writes `<kind>-results.json`, `<kind>-report.md`, `<kind>-report.html`
/// and `SHA256SUMS` over this run's files in `dir`: its reports and the
/// folders of the scenarios it executed. A partial rerun into the same
/// directory leaves other scenarios' folders as they were, outside the
/// sums: they are an earlier run's evidence, not this one's.
pub fn write_evidence(dir: &Path, evidence: &Evidence) -> Result<(), edc_core::Error> {
    let kind = &evidence.kind;
    let json =
        serde_json::to_string_pretty(evidence).map_err(|e| Error::io("rendering the results", e.into()))?;
    let write = |name: String, text: String| {
        let path = dir.join(name);
        edc_core::no_follow::write(&path, text).io(|| format!("writing {}", path.display()))
    };
    write(format!("{kind}-results.json"), json + "\n")?;
    write(format!("{kind}-report.md"), report::markdown(evidence))?;
    write(format!("{kind}-report.html"), report::html(evidence))?;
    match printed::print(dir, kind) {
        Ok(Some(_)) => {}
        Ok(None) => tracing::warn!(
            "no Chromium found (EDC_SYNC_CHROMIUM or chromium on the PATH): the package has no {kind}-report.pdf; \
             print {kind}-report.html from a browser"
        ),
        Err(e) => tracing::warn!("the package has no {kind}-report.pdf: {e:#}; print {kind}-report.html from a browser"),
    }
    let reports = format!("{kind}-");
    let ours = |rel: &Path| {
        let top = rel.components().next().map(|c| c.as_os_str().to_string_lossy());
        match (top, rel.components().count()) {
            (Some(name), 1) => name.starts_with(&reports),
            (Some(folder), _) => evidence.scenarios.iter().any(|s| s.id == folder),
            (None, _) => false,
        }
    };
    let mut sums = String::new();
    for f in crate::files::under(dir) {
        let rel = f.strip_prefix(dir).unwrap_or(&f);
        if !ours(rel) {
            continue;
        }
        let bytes = edc_core::no_follow::read_bytes(&f).io(|| format!("reading {}", f.display()))?;
        sums.push_str(&format!("{}  {}\n", sha256_hex(&bytes), rel.display()));
    }
    write("SHA256SUMS".into(), sums)
}

/// Runs every OQ scenario (or those in `only`) and writes the evidence.
pub async fn oq(
    dir: &Path,
    config: &Path,
    redis: Option<String>,
    exe: &Path,
    only: &[String],
) -> Result<Evidence, Error> {
    std::fs::create_dir_all(dir).io(|| format!("creating {}", dir.display()))?;
    let started = now_rfc3339();
    let redis_info = match &redis {
        Some(url) => {
            let pacer = quota_pacer::RedisPacer::connect(url, edc_core::REDIS_KEY_PREFIX).await?;
            Some((url.clone(), pacer.server_version().await?))
        }
        None => None,
    };
    let mut results = Vec::new();
    for s in scenarios::all() {
        if !only.is_empty() && !only.iter().any(|o| o == s.id) {
            continue;
        }
        let r = run_scenario(&s, dir, redis.as_deref(), exe).await;
        tracing::info!(scenario = s.id, status = ?r.status, "OQ scenario done");
        results.push(r);
    }
    let environment = environment(config, redis_info.as_ref().map(|(u, v)| (u.as_str(), v.as_str())));
    let evidence = Evidence {
        kind: "oq".into(),
        started,
        finished: now_rfc3339(),
        environment,
        summary: Summary::of(&results),
        scenarios: results,
    };
    write_evidence(dir, &evidence)?;
    Ok(evidence)
}

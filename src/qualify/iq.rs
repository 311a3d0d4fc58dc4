//! `edc-sync qualify iq`: is the installation what it should be, on a
//! filesystem and a Redis that can carry the invariants?

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::evidence::{Evidence, ScenarioResult, Status, Step, Summary};
use edc_core::audit::now_rfc3339;
use quota_pacer::RedisPacer;

fn check(id: &str, title: &str, requirements: &[&str], steps: Vec<Step>) -> ScenarioResult {
    let now = now_rfc3339();
    let status = if steps.iter().all(|s| s.pass) {
        Status::Passed
    } else {
        Status::Failed
    };
    ScenarioResult {
        id: id.into(),
        title: title.into(),
        requirements: requirements.iter().map(|r| r.to_string()).collect(),
        status,
        note: None,
        started: now.clone(),
        finished: now,
        steps,
        artifacts: Vec::new(),
        pacing: None,
    }
}

fn step(description: &str, expected: &str, actual: String, pass: bool) -> Step {
    Step {
        description: description.into(),
        expected: expected.into(),
        actual,
        pass,
    }
}

/// Write, fsync, rename, fsync the directory, read back, remove.
fn probe_dir(dir: &Path) -> Result<String, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create: {e}"))?;
    let tmp = dir.join(".edc-sync-iq-probe.tmp");
    let done = dir.join(".edc-sync-iq-probe");
    let payload = format!("edc-sync IQ probe {}", now_rfc3339());
    let mut f = std::fs::File::create(&tmp).map_err(|e| format!("cannot create a file: {e}"))?;
    f.write_all(payload.as_bytes())
        .map_err(|e| format!("cannot write: {e}"))?;
    f.sync_all().map_err(|e| format!("fsync failed: {e}"))?;
    drop(f);
    std::fs::rename(&tmp, &done).map_err(|e| format!("rename failed: {e}"))?;
    edc_core::durable::sync_parent_dir(&done).map_err(|e| format!("directory fsync failed: {e}"))?;
    let back = std::fs::read_to_string(&done).map_err(|e| format!("cannot read back: {e}"))?;
    let _ = std::fs::remove_file(&done);
    if back == payload {
        Ok("write, fsync, rename, directory fsync and read-back succeeded".into())
    } else {
        Err("read back different bytes".into())
    }
}

/// Runs the IQ checks and writes the evidence to `evidence_dir`.
pub async fn iq(
    evidence_dir: &Path,
    config: &Path,
    redis: Option<String>,
    dirs: &[PathBuf],
) -> anyhow::Result<Evidence> {
    std::fs::create_dir_all(evidence_dir)?;
    let started = now_rfc3339();
    let env = super::environment(config, None);
    let mut results = Vec::new();

    results.push(check(
        "IQ-001",
        "The installed executable is identified",
        &["URS-013"],
        vec![step(
            "executable path, version and SHA-256",
            "readable, version reported",
            format!(
                "{} version {} sha256 {}",
                env.executable, env.version, env.executable_sha256
            ),
            !env.executable_sha256.starts_with("unreadable"),
        )],
    ));

    let loaded = edc_core::config::load(config);
    let mut steps = vec![step(
        "the policy file validates",
        "valid",
        match &loaded {
            Ok(l) => format!("valid: vendors {}", l.config.vendor_names().join(", ")),
            Err(e) => format!("{e}"),
        },
        loaded.is_ok(),
    )];
    if let Ok(l) = &loaded {
        let p = &l.provenance;
        steps.push(step(
            "the policy file is committed, unchanged, at git HEAD",
            "committed",
            p.why_uncontrolled().unwrap_or_else(|| "committed".into()),
            !p.dirty(),
        ));
        steps.push(step(
            "the git identity runs will stamp into the audit header",
            "a commit and a blob id",
            format!(
                "commit {} blob {} sha256 {}",
                p.config_git_commit.as_deref().unwrap_or("none"),
                p.config_git_blob.as_deref().unwrap_or("none"),
                p.config_sha256
            ),
            p.config_git_commit.is_some() && p.config_git_blob.is_some(),
        ));
    }
    results.push(check(
        "IQ-002",
        "The policy validates and is under change control",
        &["URS-013", "URS-014", "URS-018"],
        steps,
    ));

    let dir_steps = dirs
        .iter()
        .map(|d| {
            let r = probe_dir(d);
            let pass = r.is_ok();
            step(
                &format!("{} is writable and honours fsync", d.display()),
                "write + fsync + rename + dir fsync succeed",
                r.unwrap_or_else(|e| e),
                pass,
            )
        })
        .collect();
    results.push(check(
        "IQ-003",
        "Audit, state and landing directories are writable and durable",
        &["URS-009", "URS-011"],
        dir_steps,
    ));

    match &redis {
        None => {
            let mut r = check(
                "IQ-004",
                "Redis is reachable, its version known, the Lua scripts load, its clock compared",
                &["URS-003"],
                Vec::new(),
            );
            r.status = Status::NotExecuted;
            r.note =
                Some("not executed: no --redis given (runs with --pacer local do not need Redis)".into());
            results.push(r);
        }
        Some(url) => {
            let mut steps = Vec::new();
            match RedisPacer::connect(url, edc_core::REDIS_KEY_PREFIX).await {
                Err(e) => steps.push(step("connect", "reachable", e.to_string(), false)),
                Ok(pacer) => {
                    let version = pacer.server_version().await;
                    steps.push(step(
                        "Redis version",
                        "7.x or later",
                        match &version {
                            Ok(v) => v.clone(),
                            Err(e) => format!("error: {e}"),
                        },
                        version.as_ref().is_ok_and(|v| {
                            v.split('.')
                                .next()
                                .and_then(|m| m.parse::<u32>().ok())
                                .is_some_and(|m| m >= 6)
                        }),
                    ));
                    let hashes = pacer.load_scripts().await;
                    steps.push(step(
                        &format!("the Lua scripts load ({})", RedisPacer::SCRIPTS.join(", ")),
                        &format!("{} SHA-1 hashes", RedisPacer::SCRIPTS.len()),
                        match &hashes {
                            Ok(h) => h.join(", "),
                            Err(e) => format!("error: {e}"),
                        },
                        hashes
                            .as_ref()
                            .is_ok_and(|h| h.len() == RedisPacer::SCRIPTS.len()),
                    ));
                    let local = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map(|d| d.as_micros() as i64)
                        .unwrap_or_default();
                    let server = pacer.server_time_us().await;
                    let offset_ms = server.as_ref().map(|s| (s - local) as f64 / 1000.0);
                    steps.push(step(
                        "server clock vs this host's clock (pacing uses only the server's; audit timestamps use this host's)",
                        "|offset| < 1000 ms",
                        match &offset_ms {
                            Ok(o) => format!("{o:+.3} ms (server minus host)"),
                            Err(e) => format!("error: {e}"),
                        },
                        offset_ms.as_ref().is_ok_and(|o| o.abs() < 1000.0),
                    ));
                }
            }
            results.push(check(
                "IQ-004",
                "Redis is reachable, its version known, the Lua scripts load, its clock compared",
                &["URS-003"],
                steps,
            ));
        }
    }

    let mut environment = env;
    environment.redis_url = redis.as_deref().map(edc_core::redact::redact_arg);
    let evidence = Evidence {
        kind: "iq".into(),
        started,
        finished: now_rfc3339(),
        environment,
        summary: Summary::of(&results),
        scenarios: results,
    };
    super::write_evidence(evidence_dir, &evidence)?;
    Ok(evidence)
}

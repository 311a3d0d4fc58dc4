//! `edc-sync qualify iq`: is the installation what it should be, on a
//! filesystem and a Redis that can carry the invariants?
//!
//! The protocol's table (validation/IQ.md) is rendered from [`protocol`],
//! the same definitions the checks below report against, so the document a
//! reviewer approves and the checks the tool runs cannot drift apart.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::evidence::{Environment, Evidence, ScenarioResult, Status, Step, Summary};
use super::release_record;
use edc_core::audit::now_rfc3339;
use quota_pacer::RedisPacer;

/// The oldest Redis major version the pacer's scripts are qualified on
/// (`TIME` in a script that writes needs effects replication, the default
/// since 5; the OQ and the test suite run 7).
pub const REDIS_MIN_MAJOR: u32 = 6;

/// How far Redis's clock may be from this host's: pacing uses only the
/// server's clock, but a reviewer reads audit timestamps (this host's)
/// beside Redis-timed waits.
pub const CLOCK_OFFSET_MAX_MS: f64 = 1000.0;

/// One IQ check as the protocol states it.
pub struct IqCheck {
    pub id: &'static str,
    pub title: &'static str,
    pub requirements: &'static [&'static str],
    /// What is checked, as the protocol's table says it.
    pub checks: String,
    /// What passes, as the protocol's table says it.
    pub acceptance: String,
}

/// The IQ's checks, in order: the run reports against these and
/// validation/IQ.md's table is their rendering ([`protocol_table`]).
pub fn protocol() -> [IqCheck; 4] {
    let scripts = RedisPacer::SCRIPTS.len();
    [
        IqCheck {
            id: "IQ-001",
            title: "The installed executable is identified",
            requirements: &["URS-013"],
            checks: "Executable path, version and SHA-256, compared with the release record (`--release-record`: the release's checksum file, as `sha256sum` writes it)".into(),
            acceptance: "Readable; the record lists its SHA-256 under the name `edc-sync-VERSION` of this version".into(),
        },
        IqCheck {
            id: "IQ-002",
            title: "The policy validates and is under change control",
            requirements: &["URS-013", "URS-014", "URS-018"],
            checks: "The policy validates; it is committed, unchanged, at git HEAD; the commit and blob id runs will stamp".into(),
            acceptance: "Valid; committed; a commit and a blob id".into(),
        },
        IqCheck {
            id: "IQ-003",
            title: "Audit, state and landing directories are writable and durable",
            requirements: &["URS-009", "URS-011"],
            checks: "Each `--dir` is writable and honours fsync (write, fsync, rename, directory fsync, read back)".into(),
            acceptance: "Succeeds for every directory".into(),
        },
        IqCheck {
            id: "IQ-004",
            title: "Redis is reachable, its version known, the Lua scripts load, its clock compared",
            requirements: &["URS-003"],
            checks: format!(
                "Redis reachable, its version, the {scripts} Lua scripts load ({}), server clock vs host clock",
                RedisPacer::SCRIPTS.join(", ")
            ),
            acceptance: format!(
                "Version {REDIS_MIN_MAJOR}.0 or later; {scripts} SHA-1 script hashes; offset within ±{CLOCK_OFFSET_MAX_MS} ms"
            ),
        },
    ]
}

/// validation/IQ.md's table of checks, rendered from [`protocol`].
pub fn protocol_table() -> String {
    let mut table = String::from("| ID | Check | Acceptance | Requirements |\n|---|---|---|---|\n");
    for c in protocol() {
        table.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            c.id,
            c.checks,
            c.acceptance,
            c.requirements.join(", ")
        ));
    }
    table
}

fn check(def: &IqCheck, steps: Vec<Step>) -> ScenarioResult {
    let (id, title, requirements) = (def.id, def.title, def.requirements);
    let now = now_rfc3339();
    // A check that checked nothing proves nothing: never a pass.
    let status = if steps.is_empty() {
        Status::NotExecuted
    } else if steps.iter().all(|s| s.pass) {
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

/// IQ-001: the executable read, then compared with the release record.
/// Without a record the comparison its acceptance names was not made:
/// NOT EXECUTED, whatever the executable's own steps show.
fn identify(exe: &IqCheck, env: &Environment, record: Option<&Path>) -> ScenarioResult {
    let mut steps = vec![step(
        "executable path, version and SHA-256",
        "readable, version reported",
        format!(
            "{} version {} sha256 {}",
            env.executable, env.version, env.executable_sha256
        ),
        !env.executable_sha256.starts_with("unreadable"),
    )];
    let Some(record) = record else {
        let mut r = check(exe, steps);
        r.status = Status::NotExecuted;
        r.note = Some(
            "not executed: no --release-record given (the release's checksum file, in the format sha256sum writes), \
             so the version and hash were not compared with it"
                .into(),
        );
        return r;
    };
    let listed = release_record::read(record).map(|lines| {
        let by_hash = lines.iter().find(|l| l.sha256 == env.executable_sha256).cloned();
        (lines.len(), by_hash)
    });
    let shown = record.display();
    steps.push(match &listed {
        Err(e) => step(
            "the release record lists this executable's SHA-256",
            "listed",
            e.clone(),
            false,
        ),
        Ok((_, Some(line))) => step(
            "the release record lists this executable's SHA-256",
            "listed",
            format!("listed in {shown} as {}", line.name),
            true,
        ),
        Ok((n, None)) => step(
            "the release record lists this executable's SHA-256",
            "listed",
            format!("not among the {n} SHA-256 listed in {shown}: this is not the released build"),
            false,
        ),
    });
    if let Ok((_, Some(line))) = &listed {
        steps.push(step(
            "the release record's name for it states this version",
            &format!("edc-sync-{}", env.version),
            line.name.clone(),
            release_record::names_version(&line.name, &env.version),
        ));
    }
    check(exe, steps)
}

/// Write, fsync, rename, fsync the directory, read back, remove.
fn probe_dir(dir: &Path) -> Result<String, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create: {e}"))?;
    let tmp = dir.join(".edc-sync-iq-probe.tmp");
    let done = dir.join(".edc-sync-iq-probe");
    let payload = format!("edc-sync IQ probe {}", now_rfc3339());
    let mut f = edc_core::no_follow::create(&tmp).map_err(|e| format!("cannot create a file: {e}"))?;
    f.write_all(payload.as_bytes())
        .map_err(|e| format!("cannot write: {e}"))?;
    f.sync_all().map_err(|e| format!("fsync failed: {e}"))?;
    drop(f);
    std::fs::rename(&tmp, &done).map_err(|e| format!("rename failed: {e}"))?;
    edc_core::durable::sync_parent_dir(&done).map_err(|e| format!("directory fsync failed: {e}"))?;
    let back = edc_core::no_follow::read_string(&done).map_err(|e| format!("cannot read back: {e}"))?;
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
    release_record: Option<&Path>,
) -> Result<Evidence, edc_core::Error> {
    std::fs::create_dir_all(evidence_dir)
        .map_err(|e| edc_core::Error::io(format!("creating {}", evidence_dir.display()), e))?;
    let started = now_rfc3339();
    let env = super::environment(config, None);
    let [exe, policy, durable, redis_check] = protocol();
    let mut results = Vec::new();

    results.push(identify(&exe, &env, release_record));

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
    results.push(check(&policy, steps));

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
    let mut durable = check(&durable, dir_steps);
    if dirs.is_empty() {
        durable.note = Some(
            "not executed: no --dir given (name the audit, state and landing directories runs will use)"
                .into(),
        );
    }
    results.push(durable);

    match &redis {
        None => {
            let mut r = check(&redis_check, Vec::new());
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
                        &format!("{REDIS_MIN_MAJOR}.0 or later"),
                        match &version {
                            Ok(v) => v.clone(),
                            Err(e) => format!("error: {e}"),
                        },
                        version.as_ref().is_ok_and(|v| {
                            v.split('.')
                                .next()
                                .and_then(|m| m.parse::<u32>().ok())
                                .is_some_and(|m| m >= REDIS_MIN_MAJOR)
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
                        &format!("offset within ±{CLOCK_OFFSET_MAX_MS} ms"),
                        match &offset_ms {
                            Ok(o) => format!("{o:+.3} ms (server minus host)"),
                            Err(e) => format!("error: {e}"),
                        },
                        offset_ms.as_ref().is_ok_and(|o| o.abs() < CLOCK_OFFSET_MAX_MS),
                    ));
                }
            }
            results.push(check(&redis_check, steps));
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

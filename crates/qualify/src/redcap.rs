//! The OQ scenarios for REDCap's shapes: one POST endpoint whose every
//! request is an export with the token in its form, a log in the server's
//! wall-clock minutes without row ids, newest first, across a DST
//! fall-back, a server too old for its log, and a banned address (OQ-040);
//! records by id list then batches, a record deleted in between, and a
//! restricted token's silent subset (OQ-041).
//!
//! It runs the installed executable against the simulator's redcap
//! profile, which imitates REDCap's API help and its clients PyCap,
//! REDCapR and redcapAPI (see `crates/sim/src/vendor/redcap.rs` for the
//! source of each behaviour).

use std::process::Output;
use std::time::Duration;

use super::context::{Ctx, OQ_PASSWORD, OQ_TOKEN};
use super::scenario::{events, scenario, stream_dir, Scenario};
use edc_sim::audit_trail::Arrivals;
use edc_sim::{Profile, RedcapRights, Simulator};

/// The scenarios of this file, in id order.
pub fn all() -> Vec<Scenario> {
    vec![
        scenario!(
            "OQ-040",
            "A REDCap log is read with exports only, the token in the form body, in the server's wall-clock minutes: every change once, identical ones as two, a DST fall-back included; an old server and a banned address stop the run with their own exits",
            ["URS-041", "URS-001"],
            false,
            oq_040
        ),
        scenario!(
            "OQ-041",
            "REDCap records are read by the ids changed in a window, then whole in batches: every change once, a record deleted in between audited, and a restricted token's silent subset refused unless declared",
            ["URS-042", "URS-041"],
            false,
            oq_041
        ),
    ]
}

/// A redcap-profile simulator whose `changes` arrive as `arrivals`, with
/// `faults`, tuned further by `tune`.
async fn redcap_sim(
    ctx: &mut Ctx,
    changes: u32,
    arrivals: Option<&Arrivals>,
    faults: &[&str],
    tune: impl FnOnce(&mut edc_sim::SimConfig),
) -> anyhow::Result<Simulator> {
    ctx.sim_with(changes, faults, |c| {
        c.profile = Profile::Redcap;
        c.audit_trail = arrivals.cloned();
        tune(c)
    })
    .await
}

const RECORDS_VENDOR: &str = "oq_redcap_records";

/// A records run against `sim` over the scenario's roots `under`.
async fn records_run(
    ctx: &Ctx,
    config: &std::path::Path,
    sim: &Simulator,
    under: &str,
) -> anyhow::Result<(Output, std::path::PathBuf)> {
    let dir = ctx.dir.join(under);
    let mut cmd = ctx.command_over(
        "sync",
        config,
        sim,
        RECORDS_VENDOR,
        OQ_PASSWORD,
        &[],
        super::context::Roots {
            out: &dir.join("landing"),
            state: &dir.join("state"),
            audit_log: &dir.join("audit.jsonl"),
        },
    );
    cmd.env("EDC_SYNC_OQ_REDCAP_URL", format!("{}/api/", sim.base_url()));
    Ok((tokio::task::spawn_blocking(move || cmd.output()).await??, dir))
}

/// The pages listed in every manifest under `dir`'s landing.
fn landed_pages(dir: &std::path::Path) -> anyhow::Result<usize> {
    let mut pages = 0;
    for manifest in crate::files::under(&dir.join("landing"))
        .into_iter()
        .filter(|p| p.ends_with("manifest.jsonl"))
    {
        let text = edc_core::no_follow::read_string(&manifest)?;
        pages += text.lines().filter(|l| !l.trim().is_empty()).count();
    }
    Ok(pages)
}

/// The changes (visit rows) landed as new under `dir`'s landing, sorted.
fn landed_changes(dir: &std::path::Path) -> anyhow::Result<Vec<u32>> {
    let stream = crate::files::under(&dir.join("landing"))
        .into_iter()
        .find(|p| p.ends_with("manifest.jsonl"))
        .and_then(|p| p.parent().map(std::path::Path::to_path_buf));
    let rows = match stream {
        Some(stream) => crate::landed::landed_json_records(&stream, "")?,
        None => Vec::new(),
    };
    let mut changes: Vec<u32> = rows
        .iter()
        .filter_map(|r| r["visit_change"].as_str()?.parse().ok())
        .collect();
    changes.sort_unstable();
    Ok(changes)
}

/// The lines named `event` of the trail under `dir`.
fn trail_events(dir: &std::path::Path, event: &str) -> Vec<serde_json::Value> {
    super::scenario::json_lines(&dir.join("audit.jsonl"))
        .into_iter()
        .filter(|l| l["event"] == event)
        .collect()
}

async fn oq_041(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    // 40 changes to 20 records every 250 ms from 5 s ago: they keep
    // arriving through the first syncs.
    let arrivals = Arrivals::every(
        std::time::SystemTime::now() - Duration::from_secs(5),
        Duration::from_millis(250),
    );
    let sim = redcap_sim(ctx, 40, Some(&arrivals), &[], |_| {}).await?;
    let mut codes = Vec::new();
    for pause in [0, 2, 2, 4] {
        tokio::time::sleep(Duration::from_secs(pause)).await;
        codes.push(code(&records_run(ctx, &config, &sim, "growing").await?.0));
    }
    ctx.check_eq(
        "exit codes of the four syncs",
        "[0, 0, 0, 0]".to_string(),
        format!("{codes:?}"),
    );
    let changes = landed_changes(&ctx.dir.join("growing"))?;
    ctx.check(
        "every change to a record (a visit row) landed once",
        "changes 1..40, each once",
        format!(
            "{} changes, 1..40 each once: {}",
            changes.len(),
            changes == (1..=40).collect::<Vec<u32>>()
        ),
        changes == (1..=40).collect::<Vec<u32>>(),
    );
    let exports: Vec<String> = sim.requests().into_iter().filter_map(|r| r.export).collect();
    let lists = exports
        .iter()
        .filter(|e| e.contains("fields%5B0%5D=record_id"))
        .count();
    let batches: Vec<&String> = exports.iter().filter(|e| e.contains("records%5B0%5D=")).collect();
    ctx.check(
        "each window asks its ids (record id field, date range), then batches of at most 3 records",
        "4 id lists; batches with no date range and no 4th record",
        format!("{lists} id lists, {} batches", batches.len()),
        lists == 4
            && !batches.is_empty()
            && batches
                .iter()
                .all(|e| !e.contains("dateRange") && !e.contains("records%5B3%5D")),
    );

    // A record deleted between the id list and its batch.
    let deleting = redcap_sim(ctx, 20, Some(&arrivals), &[], |c| {
        c.redcap_delete_after_list = Some(3)
    })
    .await?;
    let (out, dir) = records_run(ctx, &config, &deleting, "deleted").await?;
    let vanished = trail_events(&dir, "records_vanished");
    ctx.check(
        "a record deleted after its id list: exit 0, one records_vanished line, its id masked",
        "0; 1 line; missing: 1 id, masked",
        format!(
            "{}; {} line(s); {:?}",
            code(&out),
            vanished.len(),
            vanished.first().map(|v| &v["missing"])
        ),
        code(&out) == 0
            && vanished.len() == 1
            && vanished[0]["missing"]
                .as_array()
                .is_some_and(|m| m.len() == 1 && m[0].as_str().is_some_and(|id| id.starts_with("masked-"))),
    );

    // Tokens that export a subset without saying so.
    for (rights, name, said) in [
        (
            RedcapRights::DeIdentified,
            "deidentified",
            "lacks 1 of the project's fields (aeterm)",
        ),
        (
            RedcapRights::OneGroup,
            "one-group",
            "no redcap_data_access_group column",
        ),
    ] {
        let restricted = redcap_sim(ctx, 20, Some(&arrivals), &[], |c| c.redcap_rights = rights).await?;
        let (out, dir) = records_run(ctx, &config, &restricted, name).await?;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let pages = landed_pages(&dir)?;
        ctx.check(
            &format!("a {name} token: exit 77 naming what is missing, before anything lands (not even the id list)"),
            format!("77; {said}; 0 pages"),
            format!(
                "{}; {}; {pages} pages",
                code(&out),
                if stderr.contains(said) { said } else { "not named" },
            ),
            code(&out) == 77 && stderr.contains(said) && pages == 0,
        );
    }

    // The same subset declared in the policy: landed, and the audit
    // header says what the landing lacks.
    let declared = ctx.policy_repo_as("policy-declared", |policy| {
        policy.replacen(
            "    lookback:\n      seconds: 120\n# OQ-039",
            "    lookback:\n      seconds: 120\n    restricted_scope:\n      fields: [aeterm]\n      one_group: true\n# OQ-039",
            1,
        )
    })?;
    let one_group = redcap_sim(ctx, 20, Some(&arrivals), &[], |c| {
        c.redcap_rights = RedcapRights::OneGroup
    })
    .await?;
    let (out, dir) = records_run(ctx, &declared, &one_group, "declared").await?;
    let header = trail_events(&dir, "run_started")
        .first()
        .map(|h| h["restricted_scope"].clone())
        .unwrap_or_default();
    let changes = landed_changes(&dir)?;
    let expected = serde_json::json!({"default": {"fields": ["aeterm"], "one_group": true}});
    ctx.check(
        "a one-group token whose scope the policy declares: exit 0, its records landed, the header records the scope",
        format!("0; changes landed; restricted_scope {expected}"),
        format!("{}; {} changes; restricted_scope {header}", code(&out), changes.len()),
        code(&out) == 0 && !changes.is_empty() && header == expected,
    );
    ctx.attach_run_outputs();
    Ok(())
}

const VENDOR: &str = "oq_redcap";

/// A run of `subcommand` against `sim`'s API URL, with `extra` arguments.
async fn run(
    ctx: &Ctx,
    config: &std::path::Path,
    sim: &Simulator,
    subcommand: &str,
    extra: &[&str],
) -> anyhow::Result<Output> {
    let mut cmd = ctx.command(subcommand, config, sim, VENDOR, OQ_PASSWORD, extra);
    cmd.env("EDC_SYNC_OQ_REDCAP_URL", format!("{}/api/", sim.base_url()));
    Ok(tokio::task::spawn_blocking(move || cmd.output()).await??)
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// The change numbers of the rows landed as new (a row's `visit`; a twin
/// shows its original's), sorted.
fn landed_visits(ctx: &Ctx) -> anyhow::Result<Vec<u32>> {
    let rows = crate::landed::landed_json_records(&stream_dir(ctx, VENDOR, "default"), "")?;
    let mut visits: Vec<u32> = rows
        .iter()
        .filter_map(|row| {
            let details = row["details"].as_str()?;
            details
                .split("visit = '")
                .nth(1)?
                .trim_end_matches('\'')
                .parse()
                .ok()
        })
        .collect();
    visits.sort_unstable();
    Ok(visits)
}

async fn oq_040(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    // Changes every 250 ms from 10 s ago, every 4th the twin of the one
    // before: three syncs 2.5 s apart while they arrive.
    let arrivals = Arrivals {
        twins: Some(4),
        ..Arrivals::every(
            std::time::SystemTime::now() - Duration::from_secs(10),
            Duration::from_millis(250),
        )
    };
    let sim = redcap_sim(ctx, 80, Some(&arrivals), &[], |_| {}).await?;
    let mut codes = Vec::new();
    for pass in 0..3 {
        if pass > 0 {
            tokio::time::sleep(Duration::from_millis(2500)).await;
        }
        codes.push(code(&run(ctx, &config, &sim, "sync", &[]).await?));
    }
    ctx.check_eq(
        "exit codes of the three syncs",
        "[0, 0, 0]".to_string(),
        format!("{codes:?}"),
    );
    let visits = landed_visits(ctx)?;
    let expected = crate::landed::listed_visits(&arrivals, visits.len() as u32);
    let twins = visits.windows(2).filter(|w| w[0] == w[1]).count();
    ctx.check(
        "changes landed: the first N the server logged, each once, identical rows as two",
        "every logged change once, at least 50, at least 12 twins",
        format!(
            "{} changes, {twins} twins, equal to the server's first {}: {}",
            visits.len(),
            visits.len(),
            visits == expected
        ),
        visits == expected && visits.len() >= 50 && twins >= 12,
    );
    let requests = sim.requests();
    let exports: Vec<&str> = requests.iter().filter_map(|r| r.export.as_deref()).collect();
    ctx.check(
        "every request is a POST of an export to the API URL, the token in its form body only",
        "all of them: POST /api/, form token=***&content=version|log",
        format!(
            "{} request(s), {} as expected",
            requests.len(),
            requests
                .iter()
                .filter(|r| r.method == "POST"
                    && r.path == "/api/"
                    && r.export
                        .as_deref()
                        .is_some_and(|e| e.starts_with("token=***&content=version")
                            || e.starts_with("token=***&content=log&")))
                .count()
        ),
        !requests.is_empty()
            && exports.len() == requests.len()
            && requests.iter().all(|r| r.method == "POST" && r.path == "/api/")
            && exports.iter().all(|e| {
                e.starts_with("token=***&content=version") || e.starts_with("token=***&content=log&")
            }),
    );
    let written: String = crate::files::under(&ctx.dir)
        .iter()
        .filter(|p| !p.ends_with("simulator-requests.jsonl"))
        .filter_map(|p| edc_core::no_follow::read_bytes(p).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .collect();
    ctx.check(
        "the token appears in no file the runs wrote (trail, state, landing)",
        "absent",
        if written.contains(OQ_TOKEN) {
            "present"
        } else {
            "absent"
        },
        !written.contains(OQ_TOKEN),
    );
    ctx.attach_run_outputs();

    // A backfill across America/Chicago's fall-back of 1 November 2026:
    // the wall clock shows 01:00-01:59 twice (CDT, then CST).
    let origin = humantime::parse_rfc3339("2026-11-01T06:00:00Z")?;
    let dst = Arrivals {
        twins: Some(5),
        ..Arrivals::every(origin, Duration::from_secs(120))
    };
    let dst_sim = redcap_sim(ctx, 48, Some(&dst), &[], |_| {}).await?;
    let dst_config = config.clone();
    let mut cmd = ctx.command_over(
        "backfill",
        &dst_config,
        &dst_sim,
        VENDOR,
        OQ_PASSWORD,
        &[
            "--since",
            "2026-11-01T05:00:00Z",
            "--until",
            "2026-11-01T09:00:00Z",
        ],
        super::context::Roots {
            out: &ctx.dir.join("dst/landing"),
            state: &ctx.dir.join("dst/state"),
            audit_log: &ctx.dir.join("dst/audit.jsonl"),
        },
    );
    cmd.env("EDC_SYNC_OQ_REDCAP_URL", format!("{}/api/", dst_sim.base_url()));
    let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
    ctx.check_eq("exit code of the backfill across the fall-back", 0, code(&out));
    let manifest = crate::files::under(&ctx.dir.join("dst/landing"))
        .into_iter()
        .find(|p| p.ends_with("manifest.jsonl"))
        .and_then(|p| p.parent().map(std::path::Path::to_path_buf));
    let rows = match &manifest {
        Some(dir) => crate::landed::landed_json_records(dir, "")?,
        None => Vec::new(),
    };
    let mut visits: Vec<u32> = rows
        .iter()
        .filter_map(|row| {
            row["details"]
                .as_str()?
                .split("visit = '")
                .nth(1)?
                .trim_end_matches('\'')
                .parse()
                .ok()
        })
        .collect();
    visits.sort_unstable();
    let repeated_hour = rows
        .iter()
        .filter(|r| {
            r["timestamp"]
                .as_str()
                .is_some_and(|t| t.starts_with("2026-11-01 01:"))
        })
        .count();
    ctx.check(
        "changes of the fall-back night landed (the hour 01:00-01:59 in CDT and in CST)",
        "all 48, each once, twins included; more than 30 stamped in that hour",
        format!(
            "{} changes, equal to the 48 logged: {}; {repeated_hour} in that hour",
            visits.len(),
            visits == crate::landed::listed_visits(&dst, 48)
        ),
        visits == crate::landed::listed_visits(&dst, 48) && repeated_hour > 30,
    );

    // A server older than Export Logging (REDCap 10.8.0).
    let old = redcap_sim(ctx, 5, None, &[], |c| c.redcap_version = "10.7.9".into()).await?;
    let out = run(ctx, &config, &old, "sync", &[]).await?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ctx.check(
        "a server without Export Logging: exit 78 naming its version, only the version asked",
        "78; REDCap 10.7.9 has no Export Logging; 1 request",
        format!(
            "{}; {}; {} request(s)",
            code(&out),
            stderr.trim(),
            old.requests().len()
        ),
        code(&out) == 78
            && stderr.contains("REDCap 10.7.9 has no Export Logging")
            && old.requests().len() == 1,
    );

    // A banned address: REDCap's 429 "... banned due to suspected abuse".
    let banned = redcap_sim(
        ctx,
        5,
        None,
        &["2=redcap-error:429:Your IP address (127.0.0.1) has been banned due to suspected abuse."],
        |_| {},
    )
    .await?;
    let out = run(ctx, &config, &banned, "sync", &[]).await?;
    let failed = events(ctx, "request_failed")
        .into_iter()
        .filter(|e| e["vendor_error"]["kind"] == "banned")
        .count();
    ctx.check(
        "a banned address: exit 76 at once, nothing asked after, the ban audited",
        "76; 2 requests; 1 request_failed line of kind banned",
        format!(
            "{}; {} requests; {failed} line(s)",
            code(&out),
            banned.requests().len()
        ),
        code(&out) == 76 && banned.requests().len() == 2 && failed == 1,
    );
    Ok(())
}

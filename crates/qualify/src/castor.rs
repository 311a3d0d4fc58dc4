//! OQ scenarios for Castor EDC's shapes (OQ-036 to OQ-039): a quota counted
//! in fixed windows from the first call, held across a 429, OAuth2
//! client-credentials tokens that expire during a sync, an audit trail by
//! whole days, and study data read whole as a live collection.
//!
//! Each runs the installed executable against the simulator's castor
//! profile, which imitates Castor's helpdesk pages and its clients (see
//! `crates/sim/src/vendor/castor.rs` for the source of each behaviour), with
//! the profile's own fixed-window quota as the vendor's gateway keeps it.

use std::process::Output;
use std::time::Duration;

use super::context::{Ctx, OQ_PASSWORD};
use super::scenario::{events, landed_and_distinct, scenario, stream_dir, Scenario};
use edc_sim::{LogEntry, Profile, Simulator};

/// The scenarios of this file, in id order.
pub fn all() -> Vec<Scenario> {
    vec![
        scenario!(
            "OQ-036",
            "A vendor's fixed-window quota is never exceeded, and a 429 holds every request until the window ends",
            ["URS-037", "URS-007"],
            false,
            oq_036
        ),
        scenario!(
            "OQ-037",
            "An OAuth2 token is renewed before it expires, never refused, and never written anywhere",
            ["URS-038", "URS-015"],
            false,
            oq_037
        ),
        scenario!(
            "OQ-038",
            "An audit trail of whole days in the study's zone lands every event once, identical events and a DST change included",
            ["URS-039", "URS-025"],
            false,
            oq_038
        ),
        scenario!(
            "OQ-039",
            "A live collection with no delta filter is read whole in one consistent pass, read again when it changed under the pass, and landed only where it changed",
            ["URS-040", "URS-030"],
            false,
            oq_039
        ),
    ]
}

const VENDOR: &str = "oq_castor";
/// The fixture policy's window: 6 calls per 2 s from the first.
const WINDOW_CALLS: usize = 6;
const WINDOW: Duration = Duration::from_secs(2);

async fn run(ctx: &Ctx, config: &std::path::Path, sim: &Simulator) -> anyhow::Result<Output> {
    let mut cmd = ctx.vendor_command(config, sim, VENDOR, OQ_PASSWORD, &[]);
    Ok(tokio::task::spawn_blocking(move || cmd.output()).await??)
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// The check both scenarios make of the landing: 60 records, each once.
fn sixty_landed_once(ctx: &mut Ctx) -> anyhow::Result<()> {
    let ids = crate::landed::landed_json_record_ids(&stream_dir(ctx, VENDOR, "default"))?;
    ctx.check_eq(
        "records landed / distinct",
        "60 / 60".to_string(),
        landed_and_distinct(&ids),
    );
    Ok(())
}

/// The calls in each of the vendor's windows, as it counts them: the first
/// arrival opens a window, and the first arrival after it ended the next.
fn vendor_windows(requests: &[LogEntry]) -> Vec<usize> {
    let mut counts: Vec<usize> = Vec::new();
    let mut start = None;
    for r in requests {
        match start {
            Some(s) if r.t_us - s < WINDOW.as_micros() as i64 => {
                if let Some(last) = counts.last_mut() {
                    *last += 1;
                }
            }
            _ => {
                start = Some(r.t_us);
                counts.push(1);
            }
        }
    }
    counts
}

async fn oq_036(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    // 60 records in pages of 5 (12 pages and a token request), a server
    // that refuses a 7th call in any of its windows, and a 429 without
    // Retry-After on the 4th request.
    let sim = ctx
        .sim_with(60, &["4=429:absent"], |c| {
            c.profile = Profile::Castor;
            c.window_quota = Some((WINDOW_CALLS as u32, WINDOW));
        })
        .await?;
    let out = run(ctx, &config, &sim).await?;
    ctx.check_eq("exit code", 0, code(&out));
    sixty_landed_once(ctx)?;
    let requests = sim.requests();
    let windows = vendor_windows(&requests);
    ctx.check(
        "calls in each of the server's windows (6 a window of 2 s from its first call)",
        format!("at most {WINDOW_CALLS} each"),
        format!("{windows:?}"),
        windows.iter().all(|n| *n <= WINDOW_CALLS),
    );
    let refused_by_window: Vec<&LogEntry> = requests
        .iter()
        .filter(|r| r.fault.as_deref() == Some("server_quota"))
        .collect();
    ctx.check_eq("requests the server's window refused", 0, refused_by_window.len());
    let limited = events(ctx, "rate_limited");
    ctx.check(
        "the 429 marked the window spent",
        "one rate_limited line with window_spent true",
        format!(
            "{} line(s), window_spent {}",
            limited.len(),
            limited
                .first()
                .map_or("absent".into(), |l| l["window_spent"].to_string())
        ),
        limited.len() == 1 && limited[0]["window_spent"] == true,
    );
    let (first, retry) = (requests[0].t_us, requests[4].t_us);
    ctx.check(
        "the request after the 429 waited for the end of the window the first call began",
        "at least 2 s after the first call (the 429 asked for 1 s)",
        format!("{:.3} s after", (retry - first) as f64 / 1e6),
        retry - first >= 1_950_000,
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_037(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    // Tokens that last two seconds (renewed one second before their end),
    // a sync of about four and a half.
    let sim = ctx
        .sim_with(60, &[], |c| {
            c.profile = Profile::Castor;
            c.token_lifetime = Duration::from_secs(2);
        })
        .await?;
    let out = run(ctx, &config, &sim).await?;
    ctx.check_eq("exit code", 0, code(&out));
    sixty_landed_once(ctx)?;
    let requests = sim.requests();
    let refused = requests.iter().filter(|r| r.status == 401).count();
    ctx.check_eq("requests refused for an expired token (401)", 0, refused);
    let posts: Vec<&LogEntry> = requests.iter().filter(|r| r.method == "POST").collect();
    let renewed = events(ctx, "session_renewed");
    ctx.check(
        "tokens obtained: one session_started, then one session_renewed per token, each before expiry",
        "token requests = 1 + renewals >= 3, every renewal for the token's lifetime",
        format!(
            "{} token request(s) to {:?}; {} renewal(s)",
            posts.len(),
            posts
                .iter()
                .map(|r| r.path.as_str())
                .collect::<std::collections::BTreeSet<_>>(),
            renewed.len()
        ),
        posts.len() == renewed.len() + 1
            && posts.len() >= 3
            && posts.iter().all(|r| r.path == "/oauth/token")
            && renewed
                .iter()
                .all(|l| l["reason"].as_str().is_some_and(|r| r.contains("lifetime"))),
    );
    // Neither the client secret nor any token reached any file of the
    // scenario or the run's output.
    let mut written = String::from_utf8_lossy(&out.stdout).into_owned();
    written.push_str(&String::from_utf8_lossy(&out.stderr));
    for path in crate::files::under(&ctx.dir) {
        written.push_str(&String::from_utf8_lossy(&edc_core::no_follow::read_bytes(&path)?));
    }
    let tokens = issued_tokens(posts.len());
    let leaked = tokens.iter().filter(|t| written.contains(t.as_str())).count()
        + usize::from(written.contains(OQ_PASSWORD));
    ctx.check_eq(
        "the client secret and the tokens issued, found in the evidence or the output",
        0,
        leaked,
    );
    ctx.attach_run_outputs();
    Ok(())
}

const AUDIT_VENDOR: &str = "oq_castor_audit";

/// The visits (the simulator's record numbers, which a twin repeats) of the
/// events a reader of the landing takes, sorted.
fn landed_visits(ctx: &Ctx) -> anyhow::Result<Vec<u32>> {
    let events = crate::landed::landed_json_records(&stream_dir(ctx, AUDIT_VENDOR, "default"), "/items")?;
    Ok(crate::landed::event_visits(&events))
}

async fn oq_038(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    // Events every 250 ms from 10 s ago, every 4th the twin of the one
    // before: three syncs 2.5 s apart while they arrive.
    let origin = std::time::SystemTime::now() - Duration::from_secs(10);
    let arrivals = edc_sim::audit_trail::Arrivals {
        twins: Some(4),
        ..edc_sim::audit_trail::Arrivals::every(origin, Duration::from_millis(250))
    };
    let sim = ctx
        .sim_with(80, &[], |c| {
            c.profile = Profile::Castor;
            c.audit_trail = Some(arrivals.clone());
        })
        .await?;
    let mut codes = Vec::new();
    for run in 0..3 {
        if run > 0 {
            tokio::time::sleep(Duration::from_millis(2500)).await;
        }
        let mut cmd = ctx.vendor_command(&config, &sim, AUDIT_VENDOR, OQ_PASSWORD, &[]);
        let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
        codes.push(code(&out));
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
        "events landed: the first N the server listed, each once, identical ones as two",
        "every listed event once, at least 60, at least 15 twins",
        format!(
            "{} events, {twins} twins, equal to the server's first {}: {}",
            visits.len(),
            visits.len(),
            visits == expected
        ),
        visits == expected && visits.len() >= 60 && twins >= 15,
    );
    let data: Vec<LogEntry> = sim
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/audit-trail"))
        .collect();
    ctx.check(
        "every data request names its days (date_from, date_to: YYYY-MM-DD) and its page",
        "all of them",
        format!("{} request(s)", data.len()),
        !data.is_empty()
            && data.iter().all(|r| {
                let days = |name: &str| {
                    r.path
                        .split(&format!("{name}="))
                        .nth(1)
                        .is_some_and(|v| v.len() >= 10 && v.as_bytes()[4] == b'-' && v.as_bytes()[7] == b'-')
                };
                days("date_from") && days("date_to") && r.path.contains("page=")
            }),
    );

    // A backfill of the days around Amsterdam's autumn DST change (the hour
    // 02:00-03:00 of 25 October happens twice).
    let dst_origin = humantime::parse_rfc3339("2026-10-24T21:49:59Z")?;
    let dst = edc_sim::audit_trail::Arrivals {
        twins: Some(5),
        subsecond: true,
        ..edc_sim::audit_trail::Arrivals::every(dst_origin, Duration::from_secs(600))
    };
    let dst_sim = ctx
        .sim_with(48, &[], |c| {
            c.profile = Profile::Castor;
            c.audit_trail = Some(dst.clone());
        })
        .await?;
    let roots_dir = ctx.dir.join("dst");
    let (out_dir, state, trail) = (
        roots_dir.join("landing"),
        roots_dir.join("state"),
        roots_dir.join("audit.jsonl"),
    );
    let roots = super::context::Roots {
        out: &out_dir,
        state: &state,
        audit_log: &trail,
    };
    let mut cmd = ctx.command_over(
        "backfill",
        &config,
        &dst_sim,
        AUDIT_VENDOR,
        OQ_PASSWORD,
        &[
            "--since",
            "2026-10-24T00:00:00Z",
            "--until",
            "2026-10-26T00:00:00Z",
        ],
        roots,
    );
    let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
    ctx.check_eq("exit code of the backfill across the DST change", 0, code(&out));
    let manifest = crate::files::under(&out_dir)
        .into_iter()
        .find(|p| p.ends_with("manifest.jsonl"))
        .and_then(|p| p.parent().map(std::path::Path::to_path_buf));
    let events = match &manifest {
        Some(dir) => crate::landed::landed_json_records(dir, "/items")?,
        None => Vec::new(),
    };
    let visits = crate::landed::event_visits(&events);
    let repeated_hour = events
        .iter()
        .filter(|e| {
            e["datetime"]["date"]
                .as_str()
                .is_some_and(|d| d.starts_with("2026-10-25 02:"))
        })
        .count();
    ctx.check(
        "events of 24-26 October landed (the repeated hour in CEST and in CET)",
        "all 48, each once, twins included; at least 10 in the hour 02:00-03:00 of the 25th",
        format!(
            "{} events, equal to the 48 listed: {}; {repeated_hour} in that hour",
            visits.len(),
            visits == crate::landed::listed_visits(&dst, 48)
        ),
        visits == crate::landed::listed_visits(&dst, 48) && repeated_hour >= 10,
    );
    ctx.attach_run_outputs();
    Ok(())
}

const DATA_VENDOR: &str = "oq_castor_data";

/// The snapshot of the last consistent pass (its `page_committed` line's
/// `snapshot`) and the keys of the items its pages hold, read back from
/// the landing by their content address (each page's bytes checked
/// against its name).
fn snapshot_items(ctx: &Ctx) -> anyhow::Result<(serde_json::Value, Vec<String>)> {
    let made = events(ctx, "page_committed")
        .into_iter()
        .rev()
        .find_map(|l| l.get("snapshot").cloned())
        .unwrap_or(serde_json::Value::Null);
    let dir = stream_dir(ctx, DATA_VENDOR, "default");
    let mut keys = Vec::new();
    for sha in made["pages"].as_array().into_iter().flatten() {
        let sha = sha.as_str().unwrap_or_default();
        let bytes = edc_core::no_follow::read_bytes(dir.join(format!("pages/{sha}.json")))?;
        anyhow::ensure!(
            edc_core::digest::sha256_hex(&bytes) == sha,
            "pages/{sha}.json does not hash to its name"
        );
        let page: serde_json::Value = serde_json::from_slice(&bytes)?;
        for item in page["_embedded"]["items"].as_array().into_iter().flatten() {
            keys.push(format!("{} {}", item["participant_id"], item["field_id"]));
        }
    }
    Ok((made, keys))
}

async fn oq_039(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    // 40 data points in pages of 10, one held back until the request for
    // page 2 of the first pass: it joins among its participant's points
    // and shifts every later page.
    let sim = ctx
        .sim_with(40, &["3=grow"], |c| {
            c.profile = Profile::Castor;
            c.study_data_held = 1;
        })
        .await?;
    let mut first = ctx.vendor_command(&config, &sim, DATA_VENDOR, OQ_PASSWORD, &[]);
    let out = tokio::task::spawn_blocking(move || first.output()).await??;
    ctx.check_eq("exit code of the first sync", 0, code(&out));
    let changed = events(ctx, "collection_changed");
    ctx.check(
        "the pass during which the collection grew is audited and read again",
        "one collection_changed line: pass 1, 39 items on its first page, 40 on its last",
        format!(
            "{} line(s): {}",
            changed.len(),
            changed
                .first()
                .map(|c| format!(
                    "pass {}, {} then {}",
                    c["pass"], c["first_total_items"], c["last_total_items"]
                ))
                .unwrap_or_default()
        ),
        changed.len() == 1
            && changed[0]["pass"] == 1
            && changed[0]["first_total_items"] == 39
            && changed[0]["last_total_items"] == 40,
    );
    let (made, keys) = snapshot_items(ctx)?;
    ctx.check(
        "the snapshot's pages, read from the landing by their hashes, hold every data point once",
        "40 / 40, and the snapshot says 40 items",
        format!(
            "{}, the snapshot says {} items",
            landed_and_distinct(&keys),
            made["items"]
        ),
        landed_and_distinct(&keys) == "40 / 40" && made["items"] == 40,
    );
    let pages_dir = stream_dir(ctx, DATA_VENDOR, "default").join("pages");
    let files = || edc_core::no_follow::read_dir(&pages_dir).map(|d| d.count());
    let files_before = files()?;
    let mut second = ctx.vendor_command(&config, &sim, DATA_VENDOR, OQ_PASSWORD, &[]);
    let out = tokio::task::spawn_blocking(move || second.output()).await??;
    ctx.check_eq("exit code of the second sync (nothing changed)", 0, code(&out));
    let committed = events(ctx, "page_committed");
    let again: Vec<&serde_json::Value> = committed.iter().rev().take(4).collect();
    let (made_again, _) = snapshot_items(ctx)?;
    ctx.check(
        "a second sync over an unchanged collection reads it whole and lands nothing",
        "its 4 pages unchanged, no file added, the same snapshot hash",
        format!(
            "{} of its 4 pages unchanged, {} file(s) before and {} after, same snapshot: {}",
            again.iter().filter(|l| l["unchanged"] == true).count(),
            files_before,
            files()?,
            made_again["sha256"] == made["sha256"]
        ),
        again.iter().all(|l| l["unchanged"] == true)
            && files()? == files_before
            && made_again["sha256"] == made["sha256"],
    );
    ctx.attach_run_outputs();
    Ok(())
}

/// The tokens the simulator issued: it issues them from its seed and a
/// counter, so a fresh registry with the same seed issues the same ones.
fn issued_tokens(n: usize) -> Vec<String> {
    let config = edc_sim::SimConfig {
        dataset: super::context::dataset(1),
        username: super::context::OQ_USER.into(),
        password: OQ_PASSWORD.into(),
        ..edc_sim::SimConfig::default()
    };
    let tokens = edc_sim::vendor::castor::Tokens::default();
    let form = format!(
        "grant_type=client_credentials&client_id={}&client_secret={OQ_PASSWORD}",
        super::context::OQ_USER
    );
    (0..n)
        .filter_map(|_| {
            let (_, body) = edc_sim::vendor::castor::token(&config, &tokens, form.as_bytes());
            let v: serde_json::Value = serde_json::from_str(&body).ok()?;
            v["access_token"].as_str().map(str::to_string)
        })
        .collect()
}

//! The OQ scenarios: one definition each, run by `cargo test` (tests/oq.rs)
//! and by `edc-sync qualify oq` on the installed binary.
//!
//! Each scenario drives the built-in simulator over real loopback HTTP (and
//! a real Redis where it says so) and records every check with the value it
//! observed.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::Value;

use super::context::{dataset, Ctx, OQ_PASSWORD, OQ_STUDY, OQ_TOKEN};
use super::evidence::Pacing;
use crate::audit::verify;
use crate::exit::Exit;
use crate::run::{self, PacerChoice, RunResult, Streams};
use crate::sim::{LogEntry, Simulator};

type Run = for<'a> fn(&'a mut Ctx) -> Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send + 'a>>;

/// One OQ scenario.
pub struct Scenario {
    pub id: &'static str,
    pub title: &'static str,
    pub requirements: &'static [&'static str],
    /// Needs a real Redis; without one it is reported as not executed.
    pub needs_redis: bool,
    pub run: Run,
}

macro_rules! scenario {
    ($id:literal, $title:literal, [$($urs:literal),+], $redis:literal, $f:ident) => {
        Scenario { id: $id, title: $title, requirements: &[$($urs),+], needs_redis: $redis, run: |ctx| Box::pin($f(ctx)) }
    };
}
pub(super) use scenario;

/// Every scenario, in id order.
pub fn all() -> Vec<Scenario> {
    let mut all = core();
    all.extend(super::vendors::all());
    all.extend(super::deltas::all());
    all.extend(super::integrity::all());
    all
}

/// The scenarios of the first release (OQ-001..OQ-018).
fn core() -> Vec<Scenario> {
    vec![
        scenario!(
            "OQ-001",
            "Clean 200 window is landed whole and the cursor moves to its high-water mark",
            ["URS-009", "URS-019"],
            false,
            oq_001
        ),
        scenario!(
            "OQ-002",
            "A single 429 then success: the same page is retried after the wait, cursor unchanged meanwhile",
            ["URS-004", "URS-009"],
            false,
            oq_002
        ),
        scenario!(
            "OQ-003",
            "Retry-After as an HTTP-date is honoured",
            ["URS-005"],
            false,
            oq_003
        ),
        scenario!(
            "OQ-004",
            "Retry-After absent: the configured default_retry_after_s is waited",
            ["URS-006"],
            false,
            oq_004
        ),
        scenario!(
            "OQ-005",
            "Retry budget exhausted: exit 75, cursor unchanged, next run resumes",
            ["URS-008", "URS-019"],
            false,
            oq_005
        ),
        scenario!(
            "OQ-006",
            "Every throttling audit line is on disk before the next request is sent",
            ["URS-011"],
            false,
            oq_006
        ),
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
        scenario!(
            "OQ-009",
            "Read-only: the EDC receives only GET and HEAD",
            ["URS-001"],
            false,
            oq_009
        ),
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
            "OQ-012",
            "The audit chain verifies, and edits, removals and reordering are detected",
            ["URS-012"],
            false,
            oq_012
        ),
        scenario!(
            "OQ-013",
            "A truncated body is never committed; the page is fetched again whole",
            ["URS-010", "URS-009"],
            false,
            oq_013
        ),
        scenario!(
            "OQ-014",
            "An invalid payload (JSON and ODM) ends the run with exit 65 and nothing committed",
            ["URS-010", "URS-019"],
            false,
            oq_014
        ),
        scenario!(
            "OQ-015",
            "Killed at arbitrary moments, resumed runs land every record exactly once",
            ["URS-017"],
            false,
            oq_015
        ),
        scenario!(
            "OQ-016",
            "The token, password, session ids and record content never appear in any output",
            ["URS-015", "URS-016"],
            false,
            oq_016
        ),
        scenario!(
            "OQ-017",
            "A next link to another origin is refused and that origin never sees the token",
            ["URS-002"],
            false,
            oq_017
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

// ---- helpers ----------------------------------------------------------------

pub(super) fn exit_of(result: &RunResult) -> u8 {
    match &result.outcome {
        Ok(()) => 0,
        Err(e) => Exit::for_error(e).code(),
    }
}

pub(super) fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .map(|t| t.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
        .unwrap_or_default()
}

pub(super) fn events(ctx: &Ctx, name: &str) -> Vec<Value> {
    json_lines(&ctx.dir.join("audit.jsonl"))
        .into_iter()
        .filter(|l| l["event"] == name)
        .collect()
}

pub(super) fn stream_dir(ctx: &Ctx, vendor: &str, stream: &str) -> std::path::PathBuf {
    ctx.dir
        .join("landing")
        .join(format!("{vendor}/-/{OQ_STUDY}/-/{stream}"))
}

pub(super) fn cursor(ctx: &Ctx, vendor: &str, stream: &str) -> Value {
    let path = ctx
        .dir
        .join("state")
        .join(format!("{vendor}/-/{OQ_STUDY}/-/{stream}.cursor.json"));
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

/// Record ids in the pages the manifest lists, each file hash-checked.
pub(super) fn landed_ids(ctx: &Ctx, vendor: &str, stream: &str) -> anyhow::Result<Vec<String>> {
    crate::sim::landed_json_record_ids(&stream_dir(ctx, vendor, stream))
}

/// "landed / distinct" of `ids`, as one observed value.
pub(super) fn landed_and_distinct<T: Ord + Clone>(ids: &[T]) -> String {
    let mut unique = ids.to_vec();
    unique.sort();
    unique.dedup();
    format!("{} / {}", ids.len(), unique.len())
}

/// The string `field` of the first of `lines`, or "none" (an observed value
/// for a step, never an error).
pub(super) fn first_str(lines: &[Value], field: &str) -> String {
    lines
        .first()
        .and_then(|l| l[field].as_str())
        .unwrap_or("none")
        .to_string()
}

/// The opening most scenarios share: commit the OQ policy, start the
/// simulator with `records` and `faults`, run `oq_vault` once, and check
/// it exits 0.
async fn run_vault_ok(
    ctx: &mut Ctx,
    records: u32,
    faults: &[&str],
) -> anyhow::Result<(std::path::PathBuf, Simulator, RunResult)> {
    let config = ctx.policy_repo()?;
    let sim = ctx.sim(records, faults, None).await?;
    let result = run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    ctx.check_eq("exit code", 0, exit_of(&result));
    Ok((config, sim, result))
}

fn ts_us(line: &Value) -> i64 {
    line["ts"]
        .as_str()
        .and_then(|t| humantime::parse_rfc3339(t).ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_micros() as i64)
}

fn gap_s(reqs: &[LogEntry], a: usize, b: usize) -> f64 {
    (reqs[b].t_us - reqs[a].t_us) as f64 / 1e6
}

/// The pacing chart data of a run: arrivals, and the waits the audit
/// trail recorded with their reasons.
fn pacing(ctx: &Ctx, sim: &Simulator, rate: f64, burst: u32) -> Pacing {
    let reqs = sim.requests();
    let t0 = reqs.first().map_or(0, |r| r.t_us);
    let arrivals_s = reqs.iter().map(|r| (r.t_us - t0) as f64 / 1e6).collect();
    let mut waits = Vec::new();
    for line in json_lines(&ctx.dir.join("audit.jsonl")) {
        let at = (ts_us(&line) - t0) as f64 / 1e6;
        match line["event"].as_str() {
            Some("rate_limited") => waits.push((
                at,
                line["retry_after_s"].as_f64().unwrap_or_default(),
                format!(
                    "{} Retry-After {}",
                    line["status"],
                    line["retry_after_source"].as_str().unwrap_or("?")
                ),
            )),
            Some("retry_scheduled") => waits.push((
                at,
                line["backoff_s"].as_f64().unwrap_or_default(),
                "retry backoff".to_string(),
            )),
            _ => {}
        }
    }
    Pacing {
        rate_per_sec: rate,
        burst,
        arrivals_s,
        waits,
    }
}

// ---- scenarios ------------------------------------------------------------------

async fn oq_001(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx.sim(110, &[], None).await?;
    let result = run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    ctx.check_eq("exit code of the sync", 0, exit_of(&result));
    let r = &result.reports[0];
    ctx.check_eq("pages committed (110 records, 25 per page)", 5, r.pages);
    ctx.check_eq("records committed", 110, r.records);
    let ids = landed_ids(ctx, "oq_vault", "default")?;
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    ctx.check_eq(
        "distinct records in landed, hash-checked pages",
        110,
        unique.len(),
    );
    let hw = dataset(110).record(110).modified;
    let c = cursor(ctx, "oq_vault", "default");
    ctx.check_eq(
        "cursor window_start = high-water mark",
        hw,
        c["window_start"].as_str().unwrap_or("none").to_string(),
    );
    let committed = events(ctx, "page_committed");
    let all_hashed = committed
        .iter()
        .all(|l| l["payload_sha256"].as_str().is_some_and(|h| h.len() == 64));
    ctx.check(
        "every page_committed line carries payload_sha256",
        "5 lines, each with a 64-hex SHA-256",
        format!("{} lines, all hashed: {all_hashed}", committed.len()),
        committed.len() == 5 && all_hashed,
    );
    ctx.set_pacing(pacing(ctx, &sim, 50.0, 10));
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_002(ctx: &mut Ctx) -> anyhow::Result<()> {
    let (_, sim, _) = run_vault_ok(ctx, 60, &["2=429:seconds:2"]).await?;
    let reqs = sim.requests();
    ctx.check_eq("status of request 2", 429, reqs[1].status);
    ctx.check_eq(
        "request 3 asks for the same page as request 2",
        reqs[1].path.clone(),
        reqs[2].path.clone(),
    );
    let gap = gap_s(&reqs, 1, 2);
    ctx.check(
        "time between the 429 and the retry",
        ">= 2.0 s (Retry-After: 2)",
        format!("{gap:.3} s"),
        gap >= 2.0,
    );
    let pages = events(ctx, "page_committed");
    let same = pages.len() >= 2 && pages[1]["cursor_before"] == pages[0]["cursor_after"];
    ctx.check(
        "cursor before the retried page = cursor after page 1",
        "identical",
        format!(
            "{}",
            pages.get(1).map_or(Value::Null, |p| p["cursor_before"].clone())
        ),
        same,
    );
    let limited = events(ctx, "rate_limited");
    ctx.check_eq("rate_limited lines", 1, limited.len());
    ctx.check_eq(
        "Retry-After source recorded",
        "seconds".to_string(),
        first_str(&limited, "retry_after_source"),
    );
    ctx.set_pacing(pacing(ctx, &sim, 50.0, 10));
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_003(ctx: &mut Ctx) -> anyhow::Result<()> {
    let (_, sim, _) = run_vault_ok(ctx, 60, &["2=429:date:3"]).await?;
    let limited = events(ctx, "rate_limited");
    let source = first_str(&limited, "retry_after_source");
    ctx.check_eq("Retry-After source recorded", "date".to_string(), source);
    let wait = limited
        .first()
        .and_then(|l| l["retry_after_s"].as_f64())
        .unwrap_or(0.0);
    ctx.check(
        "wait derived from the date",
        "between 2 and 3 s (a date 3 s ahead, whole seconds)",
        format!("{wait:.3} s"),
        (2.0..=3.0).contains(&wait),
    );
    let reqs = sim.requests();
    let gap = gap_s(&reqs, 1, 2);
    ctx.check(
        "time between the 429 and the retry",
        format!(">= the wait ({wait:.3} s)"),
        format!("{gap:.3} s"),
        gap >= wait,
    );
    ctx.set_pacing(pacing(ctx, &sim, 50.0, 10));
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_004(ctx: &mut Ctx) -> anyhow::Result<()> {
    let (_, sim, _) = run_vault_ok(ctx, 60, &["2=429:absent", "4=503:raw:soon"]).await?;
    let limited = events(ctx, "rate_limited");
    let sources: Vec<&str> = limited
        .iter()
        .filter_map(|l| l["retry_after_source"].as_str())
        .collect();
    ctx.check_eq(
        "Retry-After sources recorded",
        "absent, unparseable".to_string(),
        sources.join(", "),
    );
    let waits: Vec<f64> = limited
        .iter()
        .filter_map(|l| l["retry_after_s"].as_f64())
        .collect();
    ctx.check(
        "waits used",
        "1.0 s each (default_retry_after_s: 1)",
        format!("{waits:?}"),
        waits == [1.0, 1.0],
    );
    let reqs = sim.requests();
    let gap = gap_s(&reqs, 1, 2);
    ctx.check(
        "time between the 429 and the retry",
        ">= 1.0 s",
        format!("{gap:.3} s"),
        gap >= 1.0,
    );
    ctx.set_pacing(pacing(ctx, &sim, 50.0, 10));
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_005(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx
        .sim(
            60,
            &["2=429:seconds:0", "3=429:seconds:0", "4=429:seconds:0"],
            None,
        )
        .await?;
    let result = run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    ctx.check_eq(
        "exit code (max_retry_attempts: 3, three 429s)",
        75,
        exit_of(&result),
    );
    let pages = events(ctx, "page_committed");
    let after_first = pages
        .first()
        .map_or(Value::Null, |p| p["cursor_after"]["next_page"].clone());
    let c = cursor(ctx, "oq_vault", "default");
    ctx.check(
        "cursor after the exhausted run",
        format!("next_page {after_first} (page 1 committed, page 2 not)"),
        format!("next_page {}", c["next_page"]),
        c["next_page"] == after_first,
    );
    let exhausted = events(ctx, "quota_exhausted");
    ctx.check_eq("quota_exhausted lines", 1, exhausted.len());
    let finished = events(ctx, "run_finished");
    ctx.check_eq(
        "run_finished exit_code",
        75,
        finished
            .first()
            .and_then(|l| l["exit_code"].as_u64())
            .unwrap_or(0),
    );
    let resumed = run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    ctx.check_eq("exit code of the next run", 0, exit_of(&resumed));
    let ids = landed_ids(ctx, "oq_vault", "default")?;
    ctx.check_eq(
        "records landed after resuming (no loss, no duplicate)",
        60,
        ids.len(),
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_006(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx
        .sim(60, &["2=429:seconds:1", "3=503:seconds:1", "5=500"], None)
        .await?;
    let result = run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    ctx.check_eq("exit code", 0, exit_of(&result));
    let reqs = sim.requests();
    let mut waits: Vec<Value> = events(ctx, "rate_limited");
    waits.extend(events(ctx, "retry_scheduled"));
    waits.sort_by_key(|l| l["seq"].as_u64());
    ctx.check_eq("audited waits (429, 503, 500)", 3, waits.len());
    // One stream, one request at a time: the k-th failed request caused the
    // k-th wait, and the request after it is the retry.
    let failed: Vec<usize> = (0..reqs.len())
        .filter(|i| matches!(reqs[*i].status, 429 | 500 | 503))
        .collect();
    for (line, cause) in waits.iter().zip(failed) {
        let Some(next) = reqs.get(cause + 1) else { continue };
        let written = ts_us(line);
        ctx.check(
            &format!(
                "{} line for request {} is on disk before request {} arrives",
                line["event"].as_str().unwrap_or("?"),
                cause + 1,
                cause + 2
            ),
            "audit line ts < next arrival",
            format!(
                "audit {} < arrival {}",
                line["ts"].as_str().unwrap_or("?"),
                next.ts
            ),
            written < next.t_us,
        );
    }
    ctx.set_pacing(pacing(ctx, &sim, 50.0, 10));
    ctx.attach_run_outputs();
    Ok(())
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
    // The simulator enforces the same quota as the policy: 10/s, burst 3.
    let sim = ctx.sim(50, &[], Some((10.0, 3))).await?;
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
    let env = crate::bench::envelope::check(&arrivals, 10.0, 3);
    ctx.check_eq("windows with more arrivals than 3 + 10 x t", 0, env.violations);
    ctx.check_eq("requests (3 workers x 10 pages)", 30, reqs.len());
    ctx.set_pacing(pacing(ctx, &sim, 10.0, 3));
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_009(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx.sim(60, &["3=500", "5=429:seconds:0"], None).await?;
    run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    run::execute(ctx.spec(&config, "oq_rave", &sim)).await?;
    let reqs = sim.requests();
    let methods: std::collections::BTreeSet<String> = reqs.iter().map(|r| r.method.clone()).collect();
    let methods = methods.into_iter().collect::<Vec<_>>().join(", ");
    let only_reads = reqs.iter().all(|r| r.method == "GET" || r.method == "HEAD");
    ctx.check(
        "HTTP methods the simulator received",
        "GET (or HEAD) only",
        format!("{methods} in {} requests", reqs.len()),
        only_reads && !reqs.is_empty(),
    );
    let raw = reqwest::Client::new();
    let url = format!("{}/api/v24.1/query/audit_trail", sim.base_url());
    let post = raw
        .post(&url)
        .bearer_auth(OQ_TOKEN)
        .body("{}")
        .send()
        .await?
        .status()
        .as_u16();
    ctx.check_eq(
        "a POST (sent by a plain client, as edc-sync cannot) is refused",
        405,
        post,
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_010(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let text = std::fs::read_to_string(&config)?;
    std::fs::write(&config, text.replacen("page_size: 25", "page_size: 26", 1))?;
    let sim = ctx.sim(30, &[], None).await?;
    let refused = run::execute(ctx.spec(&config, "oq_vault", &sim)).await;
    let (code, message) = match &refused {
        Ok(r) => (exit_of(r), "the run started".to_string()),
        Err(e) => (Exit::for_error(e).code(), e.to_string()),
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
    let sha = crate::digest::sha256_hex(&std::fs::read(&config)?);
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
    let lines: Vec<String> = std::fs::read_to_string(&audit)?
        .lines()
        .map(str::to_string)
        .collect();
    let tamper_dir = ctx.dir.join("tampered");
    std::fs::create_dir_all(&tamper_dir)?;
    let write = |name: &str, lines: &[String]| -> anyhow::Result<std::path::PathBuf> {
        let p = tamper_dir.join(name);
        std::fs::write(&p, lines.iter().map(|l| format!("{l}\n")).collect::<String>())?;
        Ok(p)
    };
    let mut edited = lines.clone();
    edited[2] = edited[2].replacen("\"attempt\":", "\"attempt\": ", 1);
    let mut removed = lines.clone();
    removed.remove(3);
    let mut swapped = lines.clone();
    swapped.swap(2, 3);
    for (name, variant, damage) in [
        ("edited.jsonl", edited, crate::audit::Damage::Edited),
        ("removed.jsonl", removed, crate::audit::Damage::Removed),
        ("reordered.jsonl", swapped, crate::audit::Damage::Reordered),
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

async fn oq_013(ctx: &mut Ctx) -> anyhow::Result<()> {
    run_vault_ok(ctx, 60, &["2=truncate"]).await?;
    let retries = events(ctx, "retry_scheduled");
    let reason = first_str(&retries, "reason");
    ctx.check(
        "the truncated response was retried",
        "a retry_scheduled line naming the truncation",
        &reason,
        reason.contains("truncated"),
    );
    let ids = landed_ids(ctx, "oq_vault", "default")?;
    ctx.check_eq("records landed (each page whole, hash-checked)", 60, ids.len());
    let leftovers = std::fs::read_dir(stream_dir(ctx, "oq_vault", "default").join(".tmp"))?.count();
    ctx.check_eq("partial files left in the landing area", 0, leftovers);
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_014(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    for vendor in ["oq_vault", "oq_rave"] {
        let sim = ctx.sim(60, &["2=garbage"], None).await?;
        let result = run::execute(ctx.spec(&config, vendor, &sim)).await?;
        ctx.check_eq(
            &format!("{vendor}: exit code with an invalid second page"),
            65,
            exit_of(&result),
        );
        let manifest = json_lines(&stream_dir(ctx, vendor, "default").join("manifest.jsonl"));
        ctx.check_eq(
            &format!("{vendor}: pages in the manifest (only the valid first page)"),
            1,
            manifest.len(),
        );
        let c = cursor(ctx, vendor, "default");
        let expected = manifest
            .first()
            .map_or(Value::Null, |m| m["cursor_after"]["next_page"].clone());
        ctx.check(
            &format!("{vendor}: cursor still points at the invalid page"),
            format!("{expected}"),
            format!("{}", c["next_page"]),
            c["next_page"] == expected,
        );
    }
    let failed = events(ctx, "request_failed");
    let quarantined = failed
        .iter()
        .filter(|l| l["quarantined"].as_str().is_some())
        .count();
    ctx.check_eq(
        "invalid pages kept aside in quarantine, not landed",
        2,
        quarantined,
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_015(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let text = std::fs::read_to_string(&config)?.replacen("page_size: 25", "page_size: 6", 1);
    std::fs::write(&config, text)?;
    let records = 120;
    let mut schedule = vec!["9=429:seconds:0", "17=500", "25=truncate"];
    schedule.sort();
    let sim = ctx.sim(records, &schedule, None).await?;
    let sync = |ctx: &Ctx| {
        let mut cmd = ctx.sync_command(&config, &sim, &["--allow-dirty"]);
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        cmd
    };
    let mut seed: u64 = 0x0015;
    let rounds = 12;
    for _ in 0..rounds {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut child = sync(ctx).spawn().context("starting edc-sync sync")?;
        tokio::time::sleep(Duration::from_millis(10 + (seed >> 33) % 90)).await;
        let _ = child.kill();
        let _ = child.wait();
    }
    let status = sync(ctx).status()?;
    ctx.check_eq(
        &format!("exit code of the run after {rounds} SIGKILLs"),
        "0".to_string(),
        status.code().map_or("none".into(), |c| c.to_string()),
    );
    let ids = landed_ids(ctx, "oq_vault", "default")?;
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    ctx.check_eq(
        "records landed (manifest, hash-checked)",
        records as usize,
        ids.len(),
    );
    ctx.check_eq("distinct records (no duplicates)", records as usize, unique.len());
    let c = cursor(ctx, "oq_vault", "default");
    ctx.check_eq(
        "cursor = high-water mark",
        dataset(records).record(records).modified,
        c["window_start"].as_str().unwrap_or("none").to_string(),
    );
    let report = verify(&ctx.dir.join("audit.jsonl"))?;
    ctx.check(
        "audit trail after the kills",
        "intact (torn lines, if any, acknowledged)",
        report.to_string(),
        report.intact(),
    );
    ctx.attach_run_outputs();
    Ok(())
}

async fn oq_016(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let sim = ctx.sim(40, &["2=429:seconds:0", "3=500", "4=401"], None).await?;
    let mut outputs = Vec::new();
    for _ in 0..2 {
        let out = ctx.sync_command(&config, &sim, &["-v"]).output()?;
        outputs.push(out);
    }
    let codes: Vec<Option<i32>> = outputs.iter().map(|o| o.status.code()).collect();
    ctx.check(
        "exit codes (a 401 on request 4 ends the first run; the second completes)",
        "[Some(77), Some(0)]",
        format!("{codes:?}"),
        codes == [Some(77), Some(0)],
    );
    // A Vault session run whose session expires every 3 requests: the
    // password and every session id the server issued are secrets too.
    let vault = ctx
        .sim_with(40, &[], |c| {
            c.profile = crate::sim::Profile::Vault;
            c.session_ttl_requests = Some(3);
        })
        .await?;
    let out = ctx
        .vendor_command(&config, &vault, "oq_vault_session", OQ_PASSWORD, &["-v"])
        .output()?;
    ctx.check_eq(
        "exit code of the Vault session run",
        0,
        out.status.code().unwrap_or(-1),
    );
    outputs.push(out);
    let logins = vault.requests().iter().filter(|r| r.method == "POST").count();
    let issued = crate::sim::profile::Sessions::default();
    let session_ids: Vec<String> = (0..logins)
        .map(|_| issued.issue(super::context::dataset(0).seed))
        .collect();
    ctx.check(
        "Vault sessions issued (a login and renewals)",
        "more than one",
        logins,
        logins > 1,
    );
    let console = ctx.dir.join("console.txt");
    let mut text = String::new();
    for o in &outputs {
        text.push_str(&String::from_utf8_lossy(&o.stdout));
        text.push_str(&String::from_utf8_lossy(&o.stderr));
    }
    std::fs::write(&console, &text)?;
    ctx.attach(&console);
    ctx.attach_run_outputs();
    let mut files = Vec::new();
    super::context_files(&ctx.dir, &mut files);
    let mut token_hits = Vec::new();
    let mut password_hits = Vec::new();
    let mut session_hits = Vec::new();
    let mut record_hits = Vec::new();
    for f in &files {
        if f.extension()
            .is_some_and(|e| e == "json" && f.parent().is_some_and(|p| p.ends_with("pages")))
        {
            continue; // landed pages are the data itself
        }
        let content = String::from_utf8_lossy(&std::fs::read(f)?).into_owned();
        if content.contains(OQ_TOKEN) {
            token_hits.push(f.display().to_string());
        }
        if content.contains(OQ_PASSWORD) {
            password_hits.push(f.display().to_string());
        }
        if session_ids.iter().any(|id| content.contains(id.as_str())) {
            session_hits.push(f.display().to_string());
        }
        if content.contains("SUBJ-0") {
            record_hits.push(f.display().to_string());
        }
    }
    ctx.check(
        "files and console output holding the token",
        "none",
        format!("{} files searched; hits: {token_hits:?}", files.len()),
        token_hits.is_empty(),
    );
    ctx.check(
        "files and console output holding the password",
        "none",
        format!("hits: {password_hits:?}"),
        password_hits.is_empty(),
    );
    ctx.check(
        "files and console output holding a Vault session id",
        "none",
        format!(
            "{} session ids searched; hits: {session_hits:?}",
            session_ids.len()
        ),
        session_hits.is_empty(),
    );
    ctx.check(
        "outputs holding record content (subject identifiers), landed pages aside",
        "none",
        format!("hits: {record_hits:?}"),
        record_hits.is_empty(),
    );
    Ok(())
}

async fn oq_017(ctx: &mut Ctx) -> anyhow::Result<()> {
    let config = ctx.policy_repo()?;
    let other = Simulator::start(
        crate::sim::SimConfig {
            token: OQ_TOKEN.into(),
            ..Default::default()
        },
        "127.0.0.1:0".parse()?,
    )
    .await?;
    let evil = format!(
        "1=cross-origin-next:{}/api/v24.1/query/audit_trail?offset=25",
        other.base_url()
    );
    let redirect = format!("3=redirect:{}/api/v24.1/query/audit_trail", other.base_url());
    let sim = ctx.sim(60, &[&evil, &redirect], None).await?;
    let result = run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    ctx.check_eq("exit code with a cross-origin next link", 65, exit_of(&result));
    let again = run::execute(ctx.spec(&config, "oq_vault", &sim)).await?;
    ctx.check_eq("exit code with a cross-origin redirect", 65, exit_of(&again));
    ctx.check_eq("requests the other origin received", 0, other.requests().len());
    let manifest = json_lines(&stream_dir(ctx, "oq_vault", "default").join("manifest.jsonl"));
    let keys: Vec<String> = manifest
        .iter()
        .map(|m| m["page_key"].as_str().unwrap_or("?").to_string())
        .collect();
    ctx.check(
        "pages committed",
        "only the first page of the second run (its next link was same-origin; the page after it redirected away)",
        format!("{keys:?}"),
        keys.len() == 1 && !keys[0].contains("offset="),
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
        std::fs::write(&path, super::context::OQ_POLICY.replacen(from, to, 1))?;
        ctx.attach(&path);
        let out = std::process::Command::new(&ctx.exe)
            .args(["config", "validate", "--config"])
            .arg(&path)
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        ctx.check(
            &format!("config validate of invalid-{}.yaml ({to:?})", i + 1),
            format!("exit 78, message contains {expected:?}"),
            format!("exit {:?}: {stderr}", out.status.code()),
            out.status.code() == Some(78) && stderr.contains(expected),
        );
    }
    Ok(())
}

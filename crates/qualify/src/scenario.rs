//! One OQ scenario: its id, title, requirements and steps, and the
//! toolkit every theme's steps use (exit codes, audit lines, landed ids,
//! the pacing a scenario observed).
//!
//! Each scenario drives the built-in simulator over real loopback HTTP (and
//! a real Redis where it says so) and records every check with the value it
//! observed.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;

use serde_json::Value;

use super::context::{Ctx, OQ_STUDY};
use super::evidence::Pacing;
use edc_core::run::{self, RunResult};
use edc_sim::{LogEntry, Simulator};

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

pub(super) fn exit_of(result: &RunResult) -> u8 {
    match &result.outcome {
        Ok(()) => 0,
        Err(e) => e.exit().code(),
    }
}

pub(super) fn json_lines(path: &Path) -> Vec<Value> {
    edc_core::no_follow::read_string(path)
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
    edc_core::no_follow::read_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

/// The stream's cursor file as a step shows it: its SHA-256 and size (the
/// file itself is among the artifacts), or `none`.
pub(super) fn cursor_digest(ctx: &Ctx, vendor: &str, stream: &str) -> String {
    let path = ctx
        .dir
        .join("state")
        .join(format!("{vendor}/-/{OQ_STUDY}/-/{stream}.cursor.json"));
    match edc_core::no_follow::read_bytes(path) {
        Ok(bytes) => format!(
            "SHA-256 {} ({} bytes)",
            edc_core::digest::sha256_hex(&bytes),
            bytes.len()
        ),
        Err(_) => "none".into(),
    }
}

/// Record ids in the pages the manifest lists, each file hash-checked.
pub(super) fn landed_ids(ctx: &Ctx, vendor: &str, stream: &str) -> anyhow::Result<Vec<String>> {
    crate::landed::landed_json_record_ids(&stream_dir(ctx, vendor, stream))
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
pub(super) async fn run_vault_ok(
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

pub(super) fn ts_us(line: &Value) -> i64 {
    line["ts"]
        .as_str()
        .and_then(|t| humantime::parse_rfc3339(t).ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_micros() as i64)
}

pub(super) fn gap_s(reqs: &[LogEntry], a: usize, b: usize) -> f64 {
    (reqs[b].t_us - reqs[a].t_us) as f64 / 1e6
}

/// The pacing chart data of a run: arrivals, and the waits the audit
/// trail recorded with their reasons.
pub(super) fn pacing(ctx: &Ctx, sim: &Simulator, rate: f64, burst: u32) -> Pacing {
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
                    "{}, {}",
                    line["status"],
                    line["retry_after_source"]
                        .as_str()
                        .and_then(quota_pacer::RetryAfterSource::from_token)
                        .map_or("Retry-After not recorded", |s| s.describe())
                ),
            )),
            Some("retry_scheduled") => waits.push((
                at,
                line["backoff_s"].as_f64().unwrap_or_default(),
                format!(
                    "retry backoff after {}",
                    line["reason"].as_str().unwrap_or("a failed request")
                ),
            )),
            _ => {}
        }
    }
    Pacing {
        rate_per_sec: rate,
        burst,
        arrivals_s,
        waits,
        tolerance_s: crate::envelope::ARRIVAL_TOLERANCE_S,
    }
}

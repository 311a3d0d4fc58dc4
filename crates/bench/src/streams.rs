//! `bench streams`: Redis calls per request when many streams share one
//! quota, in one process or several, and whether every stream progresses.
//!
//! `--procs` `edc-sync sync --redis --all-streams` processes run N streams
//! of one quota between them (a cap of 4 in flight, a tight rate; stream k
//! in process k mod procs) against the simulator in a child process. With
//! several, the cap is shared across processes: a caller one of them turns
//! away waits for a wake-up, and what that costs is in the figure.
//! Redis's own `INFO commandstats` counts the script calls and the
//! wake-up pops (`BLPOP`, both counted as calls), the trail the requests (`page_committed` lines) and each
//! stream's finish (`stream_finished`). A stream costs a few calls
//! whatever its pages (its run lock taken and let go, the trail's
//! anchors): a second run of the same N streams with one page each prices
//! them, and the figure against the floor of 1.0 is the marginal cost of a
//! request, `(calls - calls of one page each) / (requests - N)`.

use std::path::Path;

use anyhow::{bail, Context};
use serde::Serialize;

use super::harness::{
    delta_block, reset_stats, script_calls_counted, sync_command, wake_pops_counted, SimProcess,
};

/// Records a page: the streams page through `pages * PAGE` records.
const PAGE: u64 = 5;
/// The quota's concurrency cap.
const CAP: u32 = 4;

/// What was asked of one measurement.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub streams: u32,
    /// Sync processes the streams are split between.
    pub procs: u32,
    pub pages: u64,
    pub rate: f64,
}

/// The figures of one stream count.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub streams: u32,
    pub procs: u32,
    pub pages_per_stream: u64,
    pub rate: f64,
    pub cap: u32,
    pub requests: u64,
    pub script_calls: u64,
    /// The wake-up pops (`BLPOP`) of callers the cap turned away in
    /// another process (none in one process).
    pub wake_pops: u64,
    /// All script calls and pops over all requests, the fixed ones
    /// included.
    pub calls_per_request: f64,
    /// The same with the calls of one page a stream taken off: what a
    /// request costs (floor 1.0, target 1.1).
    pub marginal_calls_per_request: f64,
    pub wall_s: f64,
    /// When each stream finished, seconds after the first finished line's
    /// run began: the first, the median and the last (a starved stream is
    /// the last, far behind).
    pub finish_first_s: f64,
    pub finish_median_s: f64,
    pub finish_last_s: f64,
}

/// One run of `shape` on `redis`, in `work`.
pub async fn run(exe: &Path, redis: &str, work: &Path, shape: Shape) -> anyhow::Result<Figures> {
    let pacer = quota_pacer::RedisPacer::connect(redis, edc_core::REDIS_KEY_PREFIX).await?;
    // Loaded once, so a run's first NOSCRIPT is not counted as its cost.
    pacer.load_scripts().await?;
    edc_core::store::load_run_lock_script(&pacer).await?;
    edc_core::audit::load_anchor_script(&pacer).await?;
    let mut admin = pacer.connection();
    let one = sync(exe, redis, &work.join("one-page"), shape, 1, &mut admin).await?;
    let all = sync(exe, redis, &work.join("paged"), shape, shape.pages, &mut admin).await?;
    let finishes = all.finishes;
    let at = |q: f64| finishes[((finishes.len() - 1) as f64 * q).round() as usize];
    Ok(Figures {
        streams: shape.streams,
        procs: shape.procs,
        pages_per_stream: shape.pages,
        rate: shape.rate,
        cap: CAP,
        requests: all.requests,
        script_calls: all.calls - all.pops,
        wake_pops: all.pops,
        calls_per_request: all.calls as f64 / all.requests.max(1) as f64,
        marginal_calls_per_request: all.calls.saturating_sub(one.calls) as f64
            / all.requests.saturating_sub(one.requests).max(1) as f64,
        wall_s: all.wall_s,
        finish_first_s: at(0.0),
        finish_median_s: at(0.5),
        finish_last_s: at(1.0),
    })
}

struct Counted {
    requests: u64,
    /// Script calls and wake-up pops.
    calls: u64,
    pops: u64,
    wall_s: f64,
    /// Sorted seconds from the run's start to each stream's end.
    finishes: Vec<f64>,
}

/// A sync of `shape.streams` streams of `pages` pages each, split between
/// `shape.procs` processes that run at once.
async fn sync(
    exe: &Path,
    redis: &str,
    work: &Path,
    shape: Shape,
    pages: u64,
    admin: &mut quota_pacer::Conn,
) -> anyhow::Result<Counted> {
    let sim = SimProcess::start(exe, pages * PAGE, 0)?;
    // A quota of its own each run: no earlier run's bucket or leases.
    let study = format!("STREAMS-{}", edc_core::audit::RunId::new()).replace(':', "-");
    reset_stats(admin).await?;
    let mut children = Vec::new();
    let started = std::time::Instant::now();
    for proc in 0..shape.procs {
        let dir = work.join(format!("proc-{proc}"));
        std::fs::create_dir_all(&dir)?;
        let config = dir.join("streams-policy.yaml");
        std::fs::write(&config, policy(shape, proc))?;
        let trail = dir.join("audit.jsonl");
        let child = sync_command(exe, &config, "bench", &study, &dir, &trail)
            .args(["--all-streams", "--redis", redis])
            .env("EDC_SYNC_BENCH_URL", &sim.url)
            .spawn()
            .context("starting a sync")?;
        children.push((child, trail));
    }
    for (child, _) in &mut children {
        let status = child.wait().context("waiting for a sync")?;
        if !status.success() {
            bail!(
                "a sync of {} streams in {} processes exited {status}",
                shape.streams,
                shape.procs
            );
        }
    }
    let wall_s = started.elapsed().as_secs_f64();
    let pops = wake_pops_counted(admin).await?;
    let calls = script_calls_counted(admin).await? + pops;
    let (mut requests, mut start, mut ends) = (0, None, Vec::new());
    for (_, trail) in &children {
        edc_core::audit::each_event(trail, "page_committed", |_, _| requests += 1)?;
        edc_core::audit::each_event(trail, "run_started", |_, line| {
            if let Some(t) = instant(&line) {
                start = Some(start.map_or(t, |s: time::OffsetDateTime| s.min(t)));
            }
        })?;
        edc_core::audit::each_event(trail, "stream_finished", |_, line| ends.extend(instant(&line)))?;
    }
    let start = start.context("no trail has a run_started line")?;
    if ends.len() != shape.streams as usize {
        bail!("{} of {} streams finished", ends.len(), shape.streams);
    }
    let mut finishes: Vec<f64> = ends.iter().map(|t| (*t - start).as_seconds_f64()).collect();
    finishes.sort_by(f64::total_cmp);
    Ok(Counted {
        requests,
        calls,
        pops,
        wall_s,
        finishes,
    })
}

fn instant(line: &serde_json::Value) -> Option<time::OffsetDateTime> {
    let ts = line["ts"].as_str()?;
    time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).ok()
}

/// The policy of process `proc`: one quota of `CAP` in flight at
/// `shape.rate` requests a second (a burst of `CAP`), every `shape.procs`th
/// of `shape.streams` streams of it, from the `proc`th.
fn policy(shape: Shape, proc: u32) -> String {
    let streams: String = (1..=shape.streams)
        .filter(|n| (n - 1) % shape.procs == proc)
        .map(|n| format!("    s{n}:\n      query:\n        object: o{n}__v\n"))
        .collect();
    format!(
        r#"bench:
  base_url_env: EDC_SYNC_BENCH_URL
  token_env: EDC_SYNC_BENCH_TOKEN
  sustained_rate_per_sec: {rate}
  burst_capacity: {CAP}
  bucket_key: "rl:streams:{{study}}"
  max_concurrency: {CAP}
  max_wait_s: 600
{delta}  streams:
{streams}"#,
        rate = shape.rate,
        delta = delta_block(PAGE),
    )
}

/// The figures against their floor, then one JSON line.
pub fn render(all: &[Figures]) -> String {
    let mut out = String::from(
        "streams  procs  pages/stream  requests  script calls  wake pops  calls/request  marginal (floor 1.0, target 1.1)  \
         finish first/median/last s\n",
    );
    for f in all {
        out.push_str(&format!(
            "{:>7}  {:>5}  {:>12}  {:>8}  {:>12}  {:>9}  {:>13.3}  {:>32.3}  {:.2} / {:.2} / {:.2}\n",
            f.streams,
            f.procs,
            f.pages_per_stream,
            f.requests,
            f.script_calls,
            f.wake_pops,
            f.calls_per_request,
            f.marginal_calls_per_request,
            f.finish_first_s,
            f.finish_median_s,
            f.finish_last_s
        ));
    }
    let json = serde_json::json!({ "bench": "streams", "figures": all });
    out.push_str(&json.to_string());
    out
}

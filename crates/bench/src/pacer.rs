//! `edc-sync bench pacer`: how the Redis bucket behaves under contention.
//!
//! Several worker processes, each with several tasks, take tokens from one
//! bucket as fast as it allows for a fixed window. The figures:
//! - Redis round trips per granted token (from Redis's own commandstats);
//! - envelope violations: windows holding more than `burst + rate * t`
//!   grants, with grant times taken from Redis `TIME`;
//! - utilisation: grants / (burst + rate * window);
//! - acquire latency p50 / p99 for a free token: a whole `Limiter::acquire`
//!   (slot, token and the previous release in one call, the permit, its
//!   renewer), beside the bare `EVALSHA` of the same script with the same
//!   arguments on a plain connection, interleaved sample by sample, and
//!   their ratio (at most 1.3 at p50).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use edc_qualify::envelope;
use quota_pacer::Rate;
use quota_pacer::{Ask, Limiter, Pacer, Quota, RedisPacer, Reservation};

/// What the parent asks for.
#[derive(Debug, Clone)]
pub struct BenchArgs {
    pub redis: String,
    pub procs: u32,
    pub tasks: u32,
    pub rate: f64,
    pub burst: u32,
    pub seconds: f64,
    pub grants_out: Option<PathBuf>,
}

/// What one worker process is told.
#[derive(Debug, Clone)]
pub struct WorkerArgs {
    pub redis: String,
    pub tasks: u32,
    pub rate: f64,
    pub burst: u32,
    pub key: String,
    pub start_us: i64,
    pub end_us: i64,
}

/// One line of a worker's stdout.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum WorkerLine {
    Grant { at_us: i64 },
    Done { client_calls: u64 },
}

/// The figures, printed as a table and as one JSON line.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub procs: u32,
    pub tasks: u32,
    pub rate: f64,
    pub burst: u32,
    pub seconds: f64,
    pub grants: usize,
    pub redis_calls: u64,
    pub client_calls: u64,
    pub round_trips_per_grant: f64,
    pub envelope_violations: usize,
    pub worst_envelope_excess: f64,
    pub utilisation: f64,
    pub acquire_p50_ms: f64,
    pub acquire_p99_ms: f64,
    pub raw_evalsha_p50_ms: f64,
    pub raw_evalsha_p99_ms: f64,
    /// `acquire_p50_ms / raw_evalsha_p50_ms`.
    pub acquire_over_raw_p50: f64,
    /// Script calls per request of a real four-process `sync --redis`
    /// (60 pages a stream), counted by Redis.
    pub redis_calls_per_request: f64,
    pub fanout_script_calls: u64,
    pub fanout_requests: u64,
    pub redis_version: String,
}

fn rate(rate: f64, burst: u32) -> anyhow::Result<Rate> {
    Rate::new(rate, burst)
        .with_context(|| format!("--rate must be > 0 and --burst >= 1 (got {rate}, {burst})"))
}

/// Microseconds since the epoch on this host's clock. Used only to line up
/// the workers' start; every measured time comes from Redis.
fn local_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or_default()
}

/// The worker side: `edc-sync bench pacer-worker ...` (spawned by [`run`]).
pub async fn run_worker(args: WorkerArgs) -> anyhow::Result<()> {
    let pacer = RedisPacer::connect(&args.redis, edc_core::REDIS_KEY_PREFIX).await?;
    let window = Duration::from_micros(u64::try_from(args.end_us - args.start_us).unwrap_or(0));
    let quota = Quota::new(args.key.clone(), rate(args.rate, args.burst)?)?.with_horizon(window);
    let offset = pacer.server_time_us().await? - local_us();
    let until_start = args.start_us - (local_us() + offset);
    if until_start > 0 {
        tokio::time::sleep(Duration::from_micros(until_start as u64)).await;
    }
    let mut tasks = Vec::new();
    for _ in 0..args.tasks {
        let (pacer, quota, end_us) = (pacer.clone(), quota.clone(), args.end_us);
        tasks.push(tokio::spawn(async move {
            let mut grants = Vec::new();
            let mut next_guess = i64::MIN;
            // Stop when the slot this task would book next is past the
            // window, so the run ends without wasted calls.
            while next_guess < end_us {
                match pacer.reserve(&quota).await? {
                    Reservation::Granted { wait, at_us } if at_us < end_us => {
                        grants.push(at_us);
                        next_guess = at_us + wait.as_micros() as i64;
                        tokio::time::sleep(wait).await;
                    }
                    _ => break,
                }
            }
            anyhow::Ok(grants)
        }));
    }
    let mut out = std::io::stdout().lock();
    for task in tasks {
        for at_us in task.await.context("worker task panicked")?? {
            writeln!(out, "{}", serde_json::to_string(&WorkerLine::Grant { at_us })?)?;
        }
    }
    writeln!(
        out,
        "{}",
        serde_json::to_string(&WorkerLine::Done {
            client_calls: pacer.calls()
        })?
    )?;
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx].as_secs_f64() * 1000.0
}

/// The parent side: spawns the workers, gathers, measures, prints.
/// `exe` is this program (its workers are `pacer-worker`), `product` the
/// `edc-sync` binary whose fan-out of streams is measured.
pub async fn run(args: BenchArgs, exe: PathBuf, product: PathBuf) -> anyhow::Result<Figures> {
    if args.procs == 0 || args.tasks == 0 || !args.seconds.is_finite() || args.seconds <= 0.0 {
        bail!("--procs, --tasks and --seconds must be > 0");
    }
    rate(args.rate, args.burst)?;
    let pacer = RedisPacer::connect(&args.redis, edc_core::REDIS_KEY_PREFIX).await?;
    pacer.load_scripts().await?;
    // The pacer's own connection: one server or a cluster, as --redis says.
    let mut admin = pacer.connection();
    let key = format!("bench:{}", edc_core::audit::RunId::new());
    let start_us = pacer.server_time_us().await? + 1_500_000;
    let end_us = start_us + (args.seconds * 1e6) as i64;
    super::harness::reset_stats(&mut admin).await?;

    let mut children = Vec::new();
    for _ in 0..args.procs {
        let child = std::process::Command::new(&exe)
            .args(["pacer-worker", "--redis", &args.redis, "--key", &key])
            .args([
                "--tasks",
                &args.tasks.to_string(),
                "--rate",
                &args.rate.to_string(),
            ])
            .args([
                "--burst",
                &args.burst.to_string(),
                "--start-us",
                &start_us.to_string(),
            ])
            .args(["--end-us", &end_us.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("spawning worker {}", exe.display()))?;
        children.push(child);
    }
    let gathered = tokio::task::spawn_blocking(move || -> anyhow::Result<(Vec<i64>, u64)> {
        let (mut grants, mut calls) = (Vec::new(), 0);
        for mut child in children {
            let stdout = child.stdout.take().context("worker stdout")?;
            for line in std::io::BufReader::new(stdout).lines() {
                match serde_json::from_str(&line?)? {
                    WorkerLine::Grant { at_us } => grants.push(at_us),
                    WorkerLine::Done { client_calls } => calls += client_calls,
                }
            }
            let status = child.wait()?;
            if !status.success() {
                bail!("a worker exited with {status}");
            }
        }
        Ok((grants, calls))
    });
    let (mut grants, client_calls) = gathered.await??;
    let redis_calls = super::harness::script_calls_counted(&mut admin).await?;
    grants.sort_unstable();

    let (acquire, raw) = free_token_latency(&pacer, &mut admin, &key).await?;
    let scratch = std::env::temp_dir().join(format!("edc-sync-fanout-{key}").replace(':', "-"));
    let fanout = super::fanout::calls_per_request(&product, &args.redis, &scratch).await;
    let _ = std::fs::remove_dir_all(&scratch);
    let (fanout_script_calls, fanout_requests) = fanout?;
    let env = envelope::check(&grants, args.rate, args.burst);
    let capacity = f64::from(args.burst) + args.rate * args.seconds;
    let figures = Figures {
        procs: args.procs,
        tasks: args.tasks,
        rate: args.rate,
        burst: args.burst,
        seconds: args.seconds,
        grants: grants.len(),
        redis_calls,
        client_calls,
        round_trips_per_grant: redis_calls as f64 / grants.len().max(1) as f64,
        envelope_violations: env.violations,
        worst_envelope_excess: env.worst_excess,
        utilisation: grants.len() as f64 / capacity,
        acquire_p50_ms: percentile(&acquire, 0.50),
        acquire_p99_ms: percentile(&acquire, 0.99),
        raw_evalsha_p50_ms: percentile(&raw, 0.50),
        raw_evalsha_p99_ms: percentile(&raw, 0.99),
        acquire_over_raw_p50: percentile(&acquire, 0.50) / percentile(&raw, 0.50),
        redis_calls_per_request: fanout_script_calls as f64 / fanout_requests.max(1) as f64,
        fanout_script_calls,
        fanout_requests,
        redis_version: pacer.server_version().await?,
    };
    if let Some(path) = &args.grants_out {
        let text: String = grants.iter().map(|g| format!("{g}\n")).collect();
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(figures)
}

/// Sorted latencies of a whole acquire and of the bare EVALSHA it makes,
/// on buckets that never run dry, 2000 samples each, interleaved so both
/// see the same machine.
async fn free_token_latency(
    pacer: &RedisPacer,
    raw_conn: &mut quota_pacer::Conn,
    key: &str,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    const SAMPLES: usize = 2000;
    let free = |part: &str| -> anyhow::Result<Quota> {
        Ok(Quota::new(format!("{key}:{part}"), rate(1e6, 1_000_000)?)?
            .with_concurrency(4, Duration::from_secs(60)))
    };
    let limiter = Limiter::new(pacer.clone(), free("free")?);
    let raw_quota = free("raw")?;
    let (mut acquire, mut raw) = (Vec::with_capacity(SAMPLES), Vec::with_capacity(SAMPLES));
    let mut previous: Vec<u64> = Vec::new();
    for _ in 0..SAMPLES {
        let t0 = Instant::now();
        let permit = limiter.acquire().await?;
        acquire.push(t0.elapsed());
        permit.release();

        // The same call, releasing the previous lease as the limiter does.
        let cmd = pacer.raw_acquire_cmd(&raw_quota, Ask::book(&previous, None));
        let t0 = Instant::now();
        let (status, _, _, lease, _): (i64, i64, String, u64, i64) = cmd.query_async(raw_conn).await?;
        raw.push(t0.elapsed());
        if status != 1 {
            bail!("the raw EVALSHA was not granted (status {status})");
        }
        previous = vec![lease];
    }
    acquire.sort_unstable();
    raw.sort_unstable();
    Ok((acquire, raw))
}

/// The human table followed by the one JSON line scripts read.
pub fn render(f: &Figures) -> String {
    format!(
        "pacer benchmark: {procs} procs x {tasks} tasks, rate {rate}/s, burst {burst}, {seconds} s, Redis {ver}\n\
         grants                      {grants}\n\
         Redis script calls          {calls} (client counted {client})\n\
         round trips per grant       {rtt:.3}   (target 1.00, <= 1.02)\n\
         envelope violations         {viol}   (target 0; worst excess {excess:.3})\n\
         utilisation                 {util:.1} %   (target >= 99 %)\n\
         acquire latency, free token p50 {p50:.3} ms, p99 {p99:.3} ms   (target p99 < 0.3 ms)\n\
         bare EVALSHA, same script   p50 {raw50:.3} ms, p99 {raw99:.3} ms\n\
         acquire / bare EVALSHA, p50 {ratio:.2}   (target <= 1.3)\n\
         4-process sync --redis      {fcalls} script calls / {freq} requests = {cpr:.3} a request   (target <= 1.1)\n\
         {json}",
        procs = f.procs,
        tasks = f.tasks,
        rate = f.rate,
        burst = f.burst,
        seconds = f.seconds,
        ver = f.redis_version,
        grants = f.grants,
        calls = f.redis_calls,
        client = f.client_calls,
        rtt = f.round_trips_per_grant,
        viol = f.envelope_violations,
        excess = f.worst_envelope_excess,
        util = f.utilisation * 100.0,
        p50 = f.acquire_p50_ms,
        p99 = f.acquire_p99_ms,
        raw50 = f.raw_evalsha_p50_ms,
        raw99 = f.raw_evalsha_p99_ms,
        ratio = f.acquire_over_raw_p50,
        fcalls = f.fanout_script_calls,
        freq = f.fanout_requests,
        cpr = f.redis_calls_per_request,
        json = serde_json::to_string(f).unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn script_calls_are_summed_from_commandstats() {
        let info = "# Commandstats\r\ncmdstat_evalsha:calls=1020,usec=9000,usec_per_call=8.8,rejected_calls=2,failed_calls=0\r\n\
                    cmdstat_time:calls=4,usec=1\r\ncmdstat_script|load:calls=3,usec=100\r\n";
        assert_eq!(crate::harness::script_calls(info), 1025);
        let pops = "cmdstat_blpop:calls=7,usec=9,rejected_calls=0\r\ncmdstat_evalsha:calls=3,usec=1\r\n";
        assert_eq!(crate::harness::wake_pops(pops), 7);
    }
}

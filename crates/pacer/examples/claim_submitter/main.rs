//! Submits synthetic X12 837-like claims to a clearinghouse through the
//! edc-sync pacer: an account quota, per-payer sub-limits with a
//! `_default`, caps on requests in flight for the account and per payer,
//! 429s honoured (`Retry-After` in either RFC form, else deterministic
//! backoff) and shared by every worker of every process, and claims that
//! run out of attempts written to a retry file, never lost.
//!
//! Walk-through: docs/pacing-your-own-submitter.md. Synthetic data only:
//! claim and patient identifiers are generated, and every log line masks
//! claim and payer identifiers anyway.
//!
//! ```sh
//! cargo run -p quota-pacer --example claim_submitter -- clearinghouse --port 8099 &
//! cargo run -p quota-pacer --example claim_submitter -- submit --endpoint http://127.0.0.1:8099 --claims 60
//! ```

mod clearinghouse;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use clap::{Parser, Subcommand};
use serde::Serialize;
use tokio::sync::Mutex;

use quota_pacer::retry_after;
use quota_pacer::{
    AcquireError, AnyPacer, KeyLimit, KeyedLimiter, KeyedPolicy, LocalPacer, Rate, RedisPacer, DEFAULT_KEY,
};
use sha2::{Digest, Sha256};

/// Submit synthetic claims to a clearinghouse under a shared, paced quota
/// (or run the clearinghouse simulator they are submitted to).
#[derive(Parser)]
#[command(
    name = "claim_submitter",
    about = "Submit synthetic X12 837-like claims to a clearinghouse under a shared, paced quota \
             (account + per-payer sub-limits, caps on requests in flight, 429s honoured by every worker), \
             or run the clearinghouse simulator they are submitted to.",
    after_help = "Example:\n  claim_submitter clearinghouse --port 8099 &\n  \
                  claim_submitter submit --endpoint http://127.0.0.1:8099 --claims 60 --redis redis://127.0.0.1:6379/\n\n\
                  Walk-through: docs/pacing-your-own-submitter.md"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Submit N synthetic claims with several worker tasks. Ends with one
    /// JSON line: claims done, sent to the retry file, 429s, elapsed.
    ///
    /// Exit 0 when every claim was accepted, 75 when any ran out of
    /// attempts and is in the retry file (resubmit it later; none is
    /// lost), 1 on any other error.
    Submit(SubmitArgs),
    /// Run the clearinghouse simulator (POST only, its own quotas, in-flight
    /// counts at GET /stats) until killed.
    Clearinghouse(clearinghouse::HouseArgs),
}

#[derive(clap::Args, Clone)]
struct SubmitArgs {
    /// The clearinghouse base URL (claims go to POST {endpoint}/v1/payers/{payer}/claims).
    #[arg(long)]
    endpoint: String,
    /// Claims to submit.
    #[arg(long, default_value_t = 60)]
    claims: u64,
    /// Number of the first claim (give each process its own range).
    #[arg(long, default_value_t = 1)]
    first_claim: u64,
    /// Payers, comma-separated; claims go to them in turn.
    #[arg(long, default_value = "PAYER-001", value_delimiter = ',')]
    payers: Vec<String>,
    /// Worker tasks sending at once (the caps still bound what is in flight).
    #[arg(long, default_value_t = 16)]
    workers: usize,
    /// Share the quota through this Redis (every process and host using it
    /// paces together); without it, this process paces alone.
    #[arg(long, env = "CLAIMS_REDIS_URL")]
    redis: Option<String>,
    /// The account's name: processes with the same name share its quota.
    #[arg(long, default_value = "clearinghouse")]
    account: String,
    /// Account quota: sustained requests per second.
    #[arg(long, default_value_t = 10.0)]
    account_rate: f64,
    #[arg(long, default_value_t = 20)]
    account_burst: u32,
    /// Account cap on requests in flight.
    #[arg(long, default_value_t = 8)]
    account_in_flight: u32,
    /// `_default` payer sub-limit: sustained requests per second.
    #[arg(long, default_value_t = 4.0)]
    payer_rate: f64,
    #[arg(long, default_value_t = 8)]
    payer_burst: u32,
    /// `_default` payer cap on requests in flight.
    #[arg(long, default_value_t = 4)]
    payer_in_flight: u32,
    /// Attempts per claim before it goes to the retry file.
    #[arg(long, default_value_t = 5)]
    max_attempts: u32,
    /// First backoff after a 429 without Retry-After or an error,
    /// milliseconds; doubles per attempt (no jitter).
    #[arg(long, default_value_t = 1000)]
    backoff_ms: u64,
    /// Where claims that ran out of attempts are appended (JSON lines).
    #[arg(long, default_value = "claims-retry.jsonl")]
    retry_file: PathBuf,
    /// Test hook: this percentage of claims fail their first send, half by
    /// an error and half by a panic inside the send (deterministic by claim
    /// number).
    #[arg(long, default_value_t = 0)]
    inject_failures: u64,
}

/// One synthetic claim.
#[derive(Debug, Clone)]
struct Claim {
    id: String,
    payer: String,
    body: String,
    number: u64,
}

impl Claim {
    /// A synthetic 837P-like interchange: only its shape is X12.
    fn synthetic(number: u64, payer: &str) -> Claim {
        let id = format!("CLM{number:09}");
        let body = format!(
            "ISA*00*          *00*          *ZZ*SUBMITTER      *ZZ*{payer:<15}*261203*1200*^*00501*{number:09}*0*T*:~\
             GS*HC*SUBMITTER*{payer}*20261203*1200*{number}*X*005010X222A1~ST*837*0001*005010X222A1~\
             BHT*0019*00*{id}*20261203*1200*CH~NM1*IL*1*SYNTHETIC*PATIENT****MI*SYN{number:08}~\
             CLM*{id}*125.00***11:B:1*Y*A*Y*Y~SE*6*0001~GE*1*{number}~IEA*1*{number:09}~"
        );
        Claim {
            id,
            payer: payer.to_string(),
            body,
            number,
        }
    }
}

/// An identifier as logs show it: a short hash, stable within a run, so
/// lines can be correlated without revealing the claim or the payer.
fn mask(id: &str) -> String {
    format!("masked-{}", &hex::encode(Sha256::digest(id.as_bytes()))[..10])
}

/// How one claim ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Done,
    RetryFile,
}

#[derive(Debug, Default, Serialize)]
struct Summary {
    claims: u64,
    done: u64,
    to_retry_file: u64,
    throttled_429: u64,
    send_errors: u64,
    panics: u64,
    attempts: u64,
    elapsed_s: f64,
}

/// What one send attempt came back with.
enum Sent {
    Accepted,
    Throttled(Option<Duration>),
    Failed(String),
}

fn injected(claim: &Claim, pct: u64) -> Option<bool> {
    // A fixed scramble of the claim number: the same claims fail every run.
    let h = claim.number.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    (h % 100 < pct).then_some(h.is_multiple_of(2))
}

async fn send(http: &reqwest::Client, endpoint: &str, claim: &Claim, inject: Option<bool>) -> Sent {
    match inject {
        Some(true) => panic!("injected panic while sending {}", mask(&claim.id)),
        Some(false) => return Sent::Failed("injected send error".into()),
        None => {}
    }
    let url = format!(
        "{}/v1/payers/{}/claims",
        endpoint.trim_end_matches('/'),
        claim.payer
    );
    let reply = http
        .post(url)
        .header("content-type", "application/edi-x12")
        .body(claim.body.clone())
        .send()
        .await;
    match reply {
        Ok(r) if r.status() == reqwest::StatusCode::ACCEPTED => Sent::Accepted,
        Ok(r) if r.status() == reqwest::StatusCode::TOO_MANY_REQUESTS => {
            let values: Vec<&[u8]> = r
                .headers()
                .get_all(reqwest::header::RETRY_AFTER)
                .iter()
                .map(|v| v.as_bytes())
                .collect();
            // Absent or unreadable: None, and the policy's backoff decides.
            let parsed = retry_after::parse(&values, SystemTime::now(), Duration::ZERO);
            Sent::Throttled(
                matches!(
                    parsed.source,
                    retry_after::RetryAfterSource::Seconds | retry_after::RetryAfterSource::Date
                )
                .then_some(parsed.wait),
            )
        }
        Ok(r) => Sent::Failed(format!("HTTP {}", r.status().as_u16())),
        Err(e) => Sent::Failed(format!("transport: {}", causes(&e.without_url()))),
    }
}

/// An error and every cause under it (`error sending request: client
/// error (Connect): tcp connect error: Connection refused`): reqwest's own
/// message alone does not say why.
fn causes(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

struct Worker {
    limiter: Arc<KeyedLimiter<AnyPacer>>,
    http: reqwest::Client,
    args: SubmitArgs,
    summary: Arc<std::sync::Mutex<Summary>>,
}

impl Worker {
    fn count(&self, f: impl FnOnce(&mut Summary)) {
        f(&mut self.summary.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// Sends one claim until it is accepted or its attempts are spent.
    async fn submit(&self, claim: &Claim) -> anyhow::Result<Outcome> {
        let masked = mask(&claim.id);
        let payer = mask(&claim.payer);
        let mut last = String::new();
        for attempt in 1..=self.args.max_attempts {
            let permit = match self.limiter.acquire(&[&claim.payer]).await {
                Ok(p) => p,
                Err(AcquireError::WaitTooLong { wait, .. }) => {
                    last = format!(
                        "no slot within the maximum wait ({:.1} s away)",
                        wait.as_secs_f64()
                    );
                    break;
                }
                Err(e) => return Err(e.into()),
            };
            self.count(|s| s.attempts += 1);
            let inject = (attempt == 1)
                .then(|| injected(claim, self.args.inject_failures))
                .flatten();
            // The send runs in a task of its own holding the permit: an
            // error, a panic or a cancellation drops the permit there, and
            // every slot goes back with it.
            let (http, endpoint, owned) = (self.http.clone(), self.args.endpoint.clone(), claim.clone());
            let sent = tokio::spawn(async move {
                let _permit = permit;
                send(&http, &endpoint, &owned, inject).await
            })
            .await;
            match sent {
                Ok(Sent::Accepted) => {
                    tracing::info!(claim = %masked, payer = %payer, attempt, "accepted");
                    return Ok(Outcome::Done);
                }
                Ok(Sent::Throttled(retry_after)) => {
                    self.count(|s| s.throttled_429 += 1);
                    let pause = self.limiter.throttled(retry_after, attempt).await?;
                    tracing::warn!(claim = %masked, payer = %payer, attempt, pause_ms = pause.as_millis() as u64,
                        retry_after = retry_after.is_some(), "429: every worker on the account pauses");
                    last = "429".into();
                }
                Ok(Sent::Failed(reason)) => {
                    self.count(|s| s.send_errors += 1);
                    let wait = self.limiter.policy().backoff(attempt);
                    tracing::warn!(claim = %masked, payer = %payer, attempt, error = %reason, backoff_ms = wait.as_millis() as u64, "send failed");
                    last = reason;
                    tokio::time::sleep(wait).await;
                }
                Err(join) => {
                    self.count(|s| s.panics += 1);
                    tracing::error!(claim = %masked, payer = %payer, attempt, panicked = join.is_panic(), "the send task died; its slots went back");
                    last = "the send task panicked".into();
                }
            }
        }
        tracing::error!(claim = %masked, payer = %payer, reason = %last, "attempts spent: written to the retry file");
        let line = serde_json::json!({
            "claim_id": claim.id, "payer": claim.payer, "attempts": self.args.max_attempts, "last_error": last,
        });
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.args.retry_file)
            .with_context(|| format!("opening the retry file {}", self.args.retry_file.display()))?;
        writeln!(file, "{line}").context("writing the retry file")?;
        file.sync_data().context("syncing the retry file")?;
        Ok(Outcome::RetryFile)
    }
}

async fn submit(args: SubmitArgs) -> anyhow::Result<Summary> {
    let rate = |per_sec: f64, burst: u32| {
        Rate::new(per_sec, burst)
            .with_context(|| format!("rate {per_sec}/s burst {burst}: must be > 0 and >= 1"))
    };
    let policy = KeyedPolicy::new(
        args.account.clone(),
        KeyLimit::new(
            rate(args.account_rate, args.account_burst)?,
            args.account_in_flight,
        ),
    )
    .with_key(
        DEFAULT_KEY,
        KeyLimit::new(rate(args.payer_rate, args.payer_burst)?, args.payer_in_flight),
    )
    .with_backoff(Duration::from_millis(args.backoff_ms), Duration::from_secs(60))
    .with_max_wait(Duration::from_secs(300));
    let pacer = match &args.redis {
        Some(url) => AnyPacer::Redis(RedisPacer::connect(url, "claim-submitter:").await?),
        None => AnyPacer::Local(LocalPacer::new()),
    };
    let limiter = Arc::new(KeyedLimiter::new(pacer, policy)?);
    // reqwest is built without a default TLS provider (rustls + ring here).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .context("building the HTTP client")?;
    let payers = args.payers.clone();
    let queue: Arc<Mutex<std::vec::IntoIter<Claim>>> = Arc::new(Mutex::new(
        (0..args.claims)
            .map(|i| {
                let n = args.first_claim + i;
                Claim::synthetic(n, &payers[(i as usize) % payers.len()])
            })
            .collect::<Vec<_>>()
            .into_iter(),
    ));
    let summary = Arc::new(std::sync::Mutex::new(Summary {
        claims: args.claims,
        ..Summary::default()
    }));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..args.workers.max(1) {
        let worker = Worker {
            limiter: limiter.clone(),
            http: http.clone(),
            args: args.clone(),
            summary: summary.clone(),
        };
        let queue = queue.clone();
        workers.push(tokio::spawn(async move {
            loop {
                let Some(claim) = queue.lock().await.next() else {
                    return anyhow::Ok(());
                };
                let outcome = worker.submit(&claim).await?;
                worker.count(|s| match outcome {
                    Outcome::Done => s.done += 1,
                    Outcome::RetryFile => s.to_retry_file += 1,
                });
            }
        }));
    }
    for worker in workers {
        worker.await.context("a worker task died")??;
    }
    limiter.flush().await?;
    let mut summary = std::mem::take(&mut *summary.lock().unwrap_or_else(|p| p.into_inner()));
    summary.elapsed_s = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// Exit code when claims ended in the retry file: EX_TEMPFAIL, as edc-sync
/// uses it: nothing is lost, resubmit them later.
const EXIT_CLAIMS_TO_RETRY: u8 = 75;

fn main() -> anyhow::Result<std::process::ExitCode> {
    use std::io::IsTerminal;
    let cli = Cli::parse();
    // Colour only for a person at a terminal, and never under NO_COLOR.
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let runtime = tokio::runtime::Runtime::new().context("starting the runtime")?;
    match cli.command {
        Command::Clearinghouse(args) => {
            runtime.block_on(clearinghouse::serve(args))?;
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::Submit(args) => {
            let retry_file = args.retry_file.clone();
            let summary = runtime.block_on(submit(args))?;
            println!("{}", serde_json::to_string(&summary)?);
            if summary.to_retry_file == 0 {
                return Ok(std::process::ExitCode::SUCCESS);
            }
            eprintln!(
                "claim_submitter: {} of {} claims ran out of attempts and are in {}: resubmit them later",
                summary.to_retry_file,
                summary.claims,
                retry_file.display()
            );
            Ok(std::process::ExitCode::from(EXIT_CLAIMS_TO_RETRY))
        }
    }
}

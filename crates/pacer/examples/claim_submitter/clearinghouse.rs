//! A clearinghouse simulator for the claim submitter: POST only, with its
//! own server-side quotas (an account bucket and one bucket per payer,
//! counting *arrivals* as a gateway does), a 429 with `Retry-After` in the
//! form asked for when a bucket is exceeded, a fixed latency, and the
//! requests in flight observed (account and per payer).
//!
//! `POST /v1/payers/{payer}/claims` with an 837-like body answers 202.
//! `GET /stats` answers what the simulator saw, as JSON (for the tests).
//! Synthetic data only; nothing here is a real clearinghouse API.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::TcpListener;

/// How a 429 states when to come back (RFC 9110 §10.2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RetryAfterForm {
    Seconds,
    Date,
    Absent,
    /// Seconds, date, absent in turn.
    Mixed,
}

/// The simulator's settings.
#[derive(Debug, Clone, clap::Args)]
pub struct HouseArgs {
    /// Port on 127.0.0.1 (0: any free port; the URL is printed first).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// The server's account quota: sustained per second.
    #[arg(long, default_value_t = 10.0)]
    pub account_rate: f64,
    #[arg(long, default_value_t = 20)]
    pub account_burst: u32,
    /// Each payer's quota: sustained per second.
    #[arg(long, default_value_t = 4.0)]
    pub payer_rate: f64,
    #[arg(long, default_value_t = 8)]
    pub payer_burst: u32,
    /// Time to answer each claim, milliseconds.
    #[arg(long, default_value_t = 50)]
    pub latency_ms: u64,
    /// The Retry-After form of a 429.
    #[arg(long, value_enum, default_value_t = RetryAfterForm::Mixed)]
    pub retry_after: RetryAfterForm,
}

/// A bucket on arrival times (GCRA), as a gateway keeps one, on the host's
/// wall clock: the clock a gateway keeps and the one the shared pacer reads
/// from Redis (`TIME`). On the monotonic clock it disagreed with Redis by
/// the rate the wall clock was being slewed (1,700 ppm measured on CI), a
/// difference of clocks, not of pacing.
struct Bucket {
    interval: Duration,
    tolerance: Duration,
    tat: SystemTime,
}

impl Bucket {
    fn new(rate: f64, burst: u32) -> Bucket {
        let interval = Duration::from_secs_f64(1.0 / rate);
        Bucket {
            interval,
            tolerance: interval * burst.saturating_sub(1),
            tat: SystemTime::now(),
        }
    }

    /// When a request arriving `now` would conform (`now` or earlier: it does).
    fn allowed_at(&self, now: SystemTime) -> SystemTime {
        self.tat.checked_sub(self.tolerance).unwrap_or(now)
    }

    fn take(&mut self, now: SystemTime) {
        self.tat = self.tat.max(now) + self.interval;
    }
}

/// What the simulator saw, as `GET /stats` reports it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    pub accepted: u64,
    /// 429s sent because a server-side bucket was exceeded.
    pub quota_exceeded: u64,
    pub max_in_flight_account: u64,
    pub max_in_flight_by_payer: BTreeMap<String, u64>,
    pub in_flight_now: u64,
}

struct State {
    args: HouseArgs,
    account: Mutex<Bucket>,
    payers: Mutex<BTreeMap<String, Bucket>>,
    in_flight: Mutex<(u64, BTreeMap<String, u64>)>,
    stats: Mutex<Stats>,
    throttles: Mutex<u64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Serves until the process is killed.
pub async fn serve(args: HouseArgs) -> anyhow::Result<()> {
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], args.port))).await?;
    println!("listening on http://{}", listener.local_addr()?);
    let state = Arc::new(State {
        account: Mutex::new(Bucket::new(args.account_rate, args.account_burst)),
        payers: Mutex::new(BTreeMap::new()),
        in_flight: Mutex::new((0, BTreeMap::new())),
        stats: Mutex::new(Stats::default()),
        throttles: Mutex::new(0),
        args,
    });
    loop {
        let (stream, _) = listener.accept().await?;
        let state = state.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(state.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

type Answer = Response<Full<Bytes>>;

fn answer(status: StatusCode, body: impl Into<Bytes>) -> Answer {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r
}

async fn handle(
    state: Arc<State>,
    req: Request<hyper::body::Incoming>,
) -> Result<Answer, std::convert::Infallible> {
    let path = req.uri().path().to_string();
    if req.method() == Method::GET && path == "/stats" {
        let stats = lock(&state.stats).clone();
        return Ok(answer(
            StatusCode::OK,
            serde_json::to_vec(&stats).unwrap_or_default(),
        ));
    }
    let payer = path
        .strip_prefix("/v1/payers/")
        .and_then(|rest| rest.strip_suffix("/claims"))
        .filter(|p| !p.is_empty() && !p.contains('/'))
        .map(str::to_string);
    let (Some(payer), true) = (payer, req.method() == Method::POST) else {
        return Ok(answer(StatusCode::NOT_FOUND, "POST /v1/payers/{payer}/claims"));
    };
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    if !body.starts_with(b"ISA*") {
        return Ok(answer(StatusCode::BAD_REQUEST, "not an X12 interchange"));
    }

    // The quota first, on arrival: both buckets must admit, or neither is
    // charged.
    let now = SystemTime::now();
    let refused_for = {
        let mut account = lock(&state.account);
        let mut payers = lock(&state.payers);
        let bucket = payers
            .entry(payer.clone())
            .or_insert_with(|| Bucket::new(state.args.payer_rate, state.args.payer_burst));
        let allowed = account.allowed_at(now).max(bucket.allowed_at(now));
        if let Some(wait) = allowed.duration_since(now).ok().filter(|w| !w.is_zero()) {
            Some(wait)
        } else {
            account.take(now);
            bucket.take(now);
            None
        }
    };
    if let Some(wait) = refused_for {
        lock(&state.stats).quota_exceeded += 1;
        return Ok(throttle(&state, wait));
    }

    // In flight: counted from admission to the answer.
    {
        let mut flight = lock(&state.in_flight);
        let (all, by_payer) = &mut *flight;
        *all += 1;
        let mine = by_payer.entry(payer.clone()).or_default();
        *mine += 1;
        let (all, mine) = (*all, *mine);
        let mut stats = lock(&state.stats);
        stats.max_in_flight_account = stats.max_in_flight_account.max(all);
        let max = stats.max_in_flight_by_payer.entry(payer.clone()).or_default();
        *max = (*max).max(mine);
        stats.in_flight_now = all;
    }
    tokio::time::sleep(Duration::from_millis(state.args.latency_ms)).await;
    {
        let mut flight = lock(&state.in_flight);
        flight.0 -= 1;
        if let Some(n) = flight.1.get_mut(&payer) {
            *n -= 1;
        }
        let mut stats = lock(&state.stats);
        stats.accepted += 1;
        stats.in_flight_now = flight.0;
    }
    Ok(answer(StatusCode::ACCEPTED, "{\"status\":\"accepted\"}"))
}

fn throttle(state: &State, wait: Duration) -> Answer {
    let form = match state.args.retry_after {
        RetryAfterForm::Mixed => {
            let mut n = lock(&state.throttles);
            *n += 1;
            [
                RetryAfterForm::Seconds,
                RetryAfterForm::Date,
                RetryAfterForm::Absent,
            ][(*n % 3) as usize]
        }
        form => form,
    };
    let mut r = answer(
        StatusCode::TOO_MANY_REQUESTS,
        "{\"error\":\"rate limit exceeded\"}",
    );
    let secs = wait.as_secs() + 1;
    let value = match form {
        RetryAfterForm::Seconds => Some(secs.to_string()),
        RetryAfterForm::Date => Some(httpdate::fmt_http_date(
            SystemTime::now() + Duration::from_secs(secs),
        )),
        _ => None,
    };
    if let Some(value) = value.and_then(|v| hyper::header::HeaderValue::from_str(&v).ok()) {
        r.headers_mut().insert(hyper::header::RETRY_AFTER, value);
    }
    r
}

//! Pacing requests against a vendor's quota: one quota, one truth, the
//! server's clock.
//!
//! Every outbound request first gets a [`Permit`] from a [`Limiter`]:
//! a slot under the quota's concurrency cap and a token reserved in every
//! gate of its [`Quota`], in one atomic call (an [`Ask`]) that also gives
//! back the slots of finished requests. The [`Pacer`] is where that state
//! lives: [`RedisPacer`] shares it across processes and hosts (server
//! clock, atomic Lua), [`LocalPacer`] keeps it in this process with the same
//! arithmetic ([`gcra`]), for tests and single-process programs.
//!
//! Redis keys are `<prefix>{<quota key>}:<part>`: the prefix is the
//! caller's ([`RedisPacer::connect`]), the braces a Redis Cluster hash tag
//! so that every key of one quota sits in one slot. [`KeyedLimiter`] is the
//! whole API for a submitter that paces its own requests under an account
//! and per-key sub-limits; [`retry_after`] turns a server's `Retry-After`
//! into a wait.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use quota_pacer::{retry_after, Limiter, LocalPacer, Quota, Rate, RetryAfterSource};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 5 requests a second, bursts of 20, at most 4 in flight.
//! let rate = Rate::new(5.0, 20).ok_or("bad rate")?;
//! let quota = Quota::new("vendor-account", rate)?.with_concurrency(4, Duration::from_secs(90));
//! let limiter = Limiter::new(LocalPacer::new(), quota);
//! let permit = limiter.acquire().await?;
//! // ... send one request; on a 429, pause every worker on the quota:
//! let asked = retry_after::parse(&[b"2"], SystemTime::now(), Duration::from_secs(60));
//! assert_eq!((asked.wait, asked.source), (Duration::from_secs(2), RetryAfterSource::Seconds));
//! limiter.pause(asked.wait).await?;
//! permit.release();
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod ask;
pub mod gcra;
mod keyed;
mod local;
mod permit;
mod queue;
mod quota;
mod rate;
mod redis;
mod redis_conn;
mod redis_wake;
pub mod retry_after;
mod wake;
pub mod window;

use std::future::Future;
use std::time::Duration;

pub use ask::{Answer, Ask, Fence, WAITER_TTL};
pub use keyed::{KeyLimit, KeyedLimiter, KeyedPolicy, DEFAULT_KEY};
pub use local::LocalPacer;
pub use permit::{AcquireError, Booking, CapQueue, HandOver, Limiter, Permit, LINGER};
pub use quota::{Gate, LeaseSet, Quota, QuotaError};
pub use rate::Rate;
pub use redis::{Conn, RedisPacer};
pub use redis_conn::CLUSTER_SCHEME;
pub use retry_after::{RetryAfter, RetryAfterSource};
pub use wake::KEEP_ASKING;
pub use window::{Window, WindowStart};

/// The answer to a reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// A slot is booked: sleep `wait`, then send without asking again.
    /// `at_us` is the booked instant in the pacer's clock (Redis: server
    /// time in microseconds since the epoch).
    Granted {
        /// How long to sleep before sending.
        wait: Duration,
        /// The booked instant, in the pacer's clock (µs).
        at_us: i64,
    },
    /// The wait would exceed the horizon; nothing was booked.
    Refused {
        /// How far away the next token is.
        wait: Duration,
    },
}

/// The answer to a request for a concurrency slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseAttempt {
    /// Held under this id, which is also a fencing token (ids only grow).
    Acquired(u64),
    /// The cap is reached; the oldest lease expires within `retry_in`.
    Full {
        /// When the first held slot's lease expires at the latest.
        retry_in: Duration,
    },
}

/// The pacer could not answer. A request must never be sent unpaced: the
/// caller stops (edc-sync ends the run at a page boundary, exit 69).
#[derive(Debug, Clone, thiserror::Error)]
pub enum PacerError {
    #[error("{url}: not a valid Redis URL ({detail})")]
    /// The URL is not one this pacer takes (found before connecting): a
    /// configuration mistake, not an outage.
    InvalidUrl {
        /// The URL, password redacted.
        url: String,
        /// What is wrong with it.
        detail: String,
    },
    #[error("Redis at {endpoint} is unavailable after {attempts} attempt(s): {detail}")]
    /// No answer: connection refused, timed out, or lost, after retries.
    Unavailable {
        /// The Redis URL, password redacted.
        endpoint: String,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        detail: String,
    },
    #[error("Redis at {endpoint} refused this client: {detail}; check the user name and password in the URL and the user's ACL")]
    /// The server refused the credentials (a wrong password or user,
    /// none where one is required) or its ACL denies what the pacer runs:
    /// retrying cannot help, so it is not retried.
    Refused {
        /// The Redis URL, password redacted.
        endpoint: String,
        /// What the server said.
        detail: String,
    },
    #[error("Redis at {endpoint} answered {script} unexpectedly: {detail}")]
    /// An answer that is not what the script returns: a defect or a
    /// server that is not Redis.
    Protocol {
        /// The Redis URL, password redacted.
        endpoint: String,
        /// The script (`lua/<name>`).
        script: &'static str,
        /// What was wrong with the answer.
        detail: String,
    },
}

/// Where the shared state of a quota lives.
///
/// Implementations are cheap to clone (shared state behind an `Arc`), so a
/// lease can be released from a `Drop` on another task.
pub trait Pacer: Clone + Send + Sync + 'static {
    /// Everything one request needs from the pacer, atomically: see [`Ask`].
    fn acquire(&self, quota: &Quota, ask: Ask<'_>)
        -> impl Future<Output = Result<Answer, PacerError>> + Send;

    /// Reserves one token in every gate of `quota`, or in none.
    fn reserve(&self, quota: &Quota) -> impl Future<Output = Result<Reservation, PacerError>> + Send;

    /// Pauses every gate of `quota` for `pause` from now (server time);
    /// a pause only ever extends.
    fn pause(&self, quota: &Quota, pause: Duration) -> impl Future<Output = Result<(), PacerError>> + Send;

    /// Marks every fixed window of `quota` spent until its end, for every
    /// caller: the vendor answered that the window's calls are used up (a
    /// 429), so nothing may go before it resets. A quota without windows
    /// is left as it is.
    fn spend_windows(&self, quota: &Quota) -> impl Future<Output = Result<(), PacerError>> + Send;

    /// Takes a slot under the quota's account cap if one is free (the
    /// bare lease, without a token; [`Pacer::acquire`] is what requests use).
    fn try_lease(&self, quota: &Quota) -> impl Future<Output = Result<LeaseAttempt, PacerError>> + Send;

    /// Extends lease `id`; `false` if it had already expired.
    fn renew(&self, quota: &Quota, id: u64) -> impl Future<Output = Result<bool, PacerError>> + Send;

    /// Gives lease `id` back; `false` if it had already expired.
    fn release(&self, quota: &Quota, id: u64) -> impl Future<Output = Result<bool, PacerError>> + Send;

    /// Waits, asking nothing, after the cap turned `waiter` away (an
    /// [`Answer::Full`] to an [`Ask`] made [`Ask::waiting`] under that
    /// name): until a call of any process frees a slot for it, or
    /// `retry_in` passes (the first held lease's expiry), or
    /// [`KEEP_ASKING`] (to keep its place in line). Then it asks again.
    fn wait_turn(&self, quota: &Quota, waiter: &str, retry_in: Duration) -> impl Future<Output = ()> + Send;
}

/// Either pacer, chosen at run time (a command-line flag, say).
#[derive(Clone)]
pub enum AnyPacer {
    /// Shared across processes and hosts.
    Redis(RedisPacer),
    /// This process only.
    Local(LocalPacer),
}

impl Pacer for AnyPacer {
    async fn acquire(&self, quota: &Quota, ask: Ask<'_>) -> Result<Answer, PacerError> {
        match self {
            AnyPacer::Redis(p) => p.acquire(quota, ask).await,
            AnyPacer::Local(p) => p.acquire(quota, ask).await,
        }
    }

    async fn reserve(&self, quota: &Quota) -> Result<Reservation, PacerError> {
        match self {
            AnyPacer::Redis(p) => p.reserve(quota).await,
            AnyPacer::Local(p) => p.reserve(quota).await,
        }
    }

    async fn pause(&self, quota: &Quota, pause: Duration) -> Result<(), PacerError> {
        match self {
            AnyPacer::Redis(p) => p.pause(quota, pause).await,
            AnyPacer::Local(p) => p.pause(quota, pause).await,
        }
    }

    async fn spend_windows(&self, quota: &Quota) -> Result<(), PacerError> {
        match self {
            AnyPacer::Redis(p) => p.spend_windows(quota).await,
            AnyPacer::Local(p) => p.spend_windows(quota).await,
        }
    }

    async fn try_lease(&self, quota: &Quota) -> Result<LeaseAttempt, PacerError> {
        match self {
            AnyPacer::Redis(p) => p.try_lease(quota).await,
            AnyPacer::Local(p) => p.try_lease(quota).await,
        }
    }

    async fn renew(&self, quota: &Quota, id: u64) -> Result<bool, PacerError> {
        match self {
            AnyPacer::Redis(p) => p.renew(quota, id).await,
            AnyPacer::Local(p) => p.renew(quota, id).await,
        }
    }

    async fn release(&self, quota: &Quota, id: u64) -> Result<bool, PacerError> {
        match self {
            AnyPacer::Redis(p) => p.release(quota, id).await,
            AnyPacer::Local(p) => p.release(quota, id).await,
        }
    }

    async fn wait_turn(&self, quota: &Quota, waiter: &str, retry_in: Duration) {
        match self {
            AnyPacer::Redis(p) => p.wait_turn(quota, waiter, retry_in).await,
            AnyPacer::Local(p) => p.wait_turn(quota, waiter, retry_in).await,
        }
    }
}

/// Milliseconds, rounded up, as both pacers report waits.
fn ceil_ms(us: i64) -> Duration {
    Duration::from_millis(u64::try_from(us.max(0)).unwrap_or(0).div_ceil(1000))
}

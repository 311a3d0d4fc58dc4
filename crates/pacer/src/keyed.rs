//! Pacing any request, read or write, under an account quota with keyed
//! sub-limits: the library API for submitters (walk-through in
//! docs/pacing-your-own-submitter.md).
//!
//! A [`KeyedPolicy`] names an account (its rate, burst and cap on requests
//! in flight) and sub-limits per key (a payer, a study, a tenant), with an
//! optional [`DEFAULT_KEY`] entry for keys it does not list. A
//! [`KeyedLimiter`] hands out a [`Permit`] for a request under a set of
//! keys: one token booked in the account gate and in every key's gate, and
//! one slot held under the account's cap and under every key's cap, all in
//! one atomic call or none of it. The permit gives every slot back when it
//! is dropped, on any path (success, error, `?`, panic, task cancellation);
//! a process killed outright loses its slots to the lease TTL.
//! [`KeyedLimiter::throttled`] reports a 429: every worker of every process
//! on the account waits out the pause, on the pacer's clock.
//!
//! Redis-backed ([`super::RedisPacer`], shared across processes and hosts,
//! server time) and in-process ([`super::LocalPacer`]) pacers give the same
//! answers to the same calls.
//!
//! ```
//! use std::time::Duration;
//! use quota_pacer::{KeyLimit, KeyedLimiter, KeyedPolicy, LocalPacer, Rate, DEFAULT_KEY};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let rate = |per_sec, burst| Rate::new(per_sec, burst).ok_or("bad rate");
//! // The account: 10/s sustained, bursts of 20, at most 8 in flight.
//! // Payers not listed: 4/s, bursts of 8, at most 4 in flight each.
//! let policy = KeyedPolicy::new("clearinghouse-acme", KeyLimit::new(rate(10.0, 20)?, 8))
//!     .with_key(DEFAULT_KEY, KeyLimit::new(rate(4.0, 8)?, 4));
//! let limiter = KeyedLimiter::new(LocalPacer::new(), policy)?;
//!
//! let permit = limiter.acquire(&["payer-00017"]).await?;
//! // ... send the request while holding `permit` ...
//! let got_429 = false;
//! if got_429 {
//!     // Retry-After: 2 (or None: the policy's deterministic backoff).
//!     limiter.throttled(Some(Duration::from_secs(2)), 1).await?;
//! }
//! drop(permit); // every slot goes back, whatever happened
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Rate;
use super::{AcquireError, CapQueue, Limiter, Pacer, PacerError, Permit, Quota, QuotaError};

/// The sub-limit entry that applies to every key a policy does not list.
pub const DEFAULT_KEY: &str = "_default";

/// A rate (sustained per second, with its burst) and a cap on requests in
/// flight at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeyLimit {
    /// Sustained requests per second and the burst allowed at once.
    pub rate: Rate,
    /// At most this many requests in flight (at least 1).
    pub max_in_flight: u32,
}

impl KeyLimit {
    /// A limit; a cap of 0 is taken as 1.
    pub fn new(rate: Rate, max_in_flight: u32) -> KeyLimit {
        KeyLimit {
            rate,
            max_in_flight: max_in_flight.max(1),
        }
    }
}

/// One account's pacing: its own limit, per-key sub-limits, and how long a
/// caller waits at most.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyedPolicy {
    /// The account's name: every process using the same name (and the
    /// same Redis) shares one quota. It becomes the Redis Cluster hash tag,
    /// so it must not contain `{` or `}`.
    pub name: String,
    /// The account's own limit: every request passes it.
    pub account: KeyLimit,
    /// Sub-limits by key; [`DEFAULT_KEY`] covers keys not listed. Without
    /// it, a key not listed is paced by the account alone.
    pub keys: BTreeMap<String, KeyLimit>,
    /// The longest single wait an acquire accepts; beyond it the acquire
    /// fails with [`AcquireError::WaitTooLong`] and books nothing.
    pub max_wait: Duration,
    /// How long a slot outlives a process that died holding it; must
    /// exceed the longest request.
    pub lease_ttl: Duration,
    /// The first backoff after a 429 without `Retry-After`; each further
    /// attempt doubles it, up to `backoff_max`. Deterministic: no jitter.
    pub backoff_initial: Duration,
    /// The longest backoff.
    pub backoff_max: Duration,
    /// Slack kept against a server that counts *arrivals* in a bucket of
    /// the same shape: requests leave on booked instants and arrive a
    /// little later, unevenly (docs/pacer.md, "Jitter margin").
    pub margin: Duration,
}

impl KeyedPolicy {
    /// A policy with no sub-limits, a 60 s maximum wait, a 90 s lease TTL,
    /// backoff from 1 s to 60 s and a 10 ms jitter margin.
    pub fn new(name: impl Into<String>, account: KeyLimit) -> KeyedPolicy {
        KeyedPolicy {
            name: name.into(),
            account,
            keys: BTreeMap::new(),
            max_wait: Duration::from_secs(60),
            lease_ttl: Duration::from_secs(90),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            margin: Duration::from_millis(10),
        }
    }

    /// Adds (or replaces) the sub-limit of `key`; [`DEFAULT_KEY`] for keys
    /// not listed.
    pub fn with_key(mut self, key: impl Into<String>, limit: KeyLimit) -> KeyedPolicy {
        self.keys.insert(key.into(), limit);
        self
    }

    /// Sets [`KeyedPolicy::max_wait`].
    pub fn with_max_wait(mut self, max_wait: Duration) -> KeyedPolicy {
        self.max_wait = max_wait;
        self
    }

    /// Sets [`KeyedPolicy::lease_ttl`].
    pub fn with_lease_ttl(mut self, lease_ttl: Duration) -> KeyedPolicy {
        self.lease_ttl = lease_ttl;
        self
    }

    /// Sets [`KeyedPolicy::margin`].
    pub fn with_margin(mut self, margin: Duration) -> KeyedPolicy {
        self.margin = margin;
        self
    }

    /// Sets the first and the longest backoff.
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> KeyedPolicy {
        self.backoff_initial = initial;
        self.backoff_max = max;
        self
    }

    /// The sub-limit that applies to `key`, if any.
    pub fn limit_of(&self, key: &str) -> Option<&KeyLimit> {
        self.keys.get(key).or_else(|| self.keys.get(DEFAULT_KEY))
    }

    /// The wait after attempt `attempt` (1-based) was throttled without a
    /// `Retry-After`: `backoff_initial * 2^(attempt-1)`, at most
    /// `backoff_max`. The same inputs always give the same wait.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(30);
        self.backoff_initial
            .saturating_mul(1u32 << doublings)
            .min(self.backoff_max)
    }

    /// The quota a request under `keys` passes: the account gate and cap,
    /// then one capped gate per key that has a sub-limit.
    fn quota(&self, keys: &[String]) -> Result<Quota, QuotaError> {
        let mut quota = Quota::new(self.name.clone(), self.account.rate)?
            .with_concurrency(self.account.max_in_flight, self.lease_ttl)
            .with_horizon(self.max_wait)
            .with_margin(self.margin);
        for key in keys {
            if key.is_empty() || key.contains(['{', '}']) {
                return Err(QuotaError(key.clone()));
            }
            if let Some(limit) = self.limit_of(key) {
                quota = quota.with_capped_gate(format!("key:{key}"), limit.rate, limit.max_in_flight);
            }
        }
        Ok(quota)
    }
}

/// Hands out permits under a [`KeyedPolicy`]; share it between worker
/// tasks (it is `Sync`; wrap it in an `Arc`).
pub struct KeyedLimiter<P: Pacer> {
    pacer: P,
    policy: KeyedPolicy,
    /// One limiter per set of keys seen, so each keeps its own queue of
    /// slots to give back (they ride on its next call).
    limiters: Mutex<HashMap<Vec<String>, Arc<Limiter<P>>>>,
    /// The account's own quota: where a throttle pauses everyone.
    account: Quota,
    /// The account cap's in-process queue, shared by every set of keys.
    queue: CapQueue<P>,
}

impl<P: Pacer> KeyedLimiter<P> {
    /// A limiter for `policy` on `pacer`. Fails if the account name is
    /// not usable as a key.
    pub fn new(pacer: P, policy: KeyedPolicy) -> Result<KeyedLimiter<P>, QuotaError> {
        let account = policy.quota(&[])?;
        Ok(KeyedLimiter {
            pacer,
            policy,
            limiters: Mutex::new(HashMap::new()),
            queue: CapQueue::new(account.max_concurrency()),
            account,
        })
    }

    /// The policy it paces by.
    pub fn policy(&self) -> &KeyedPolicy {
        &self.policy
    }

    /// Waits until one request under `keys` may be sent: a token in the
    /// account gate and in each key's gate, and a slot under each cap, all
    /// or none. Fails (having booked nothing) when the wait would exceed
    /// `max_wait`, when a key contains `{` or `}`, or when the pacer
    /// cannot answer.
    pub async fn acquire(&self, keys: &[&str]) -> Result<Permit<P>, AcquireError> {
        let limiter = self.limiter(keys)?;
        limiter.acquire().await
    }

    /// Reports that a request was throttled (429, or 503 with
    /// `Retry-After`): every worker on the account, in every process,
    /// waits until the pause ends. `retry_after` is the server's
    /// `Retry-After` if it sent one (either RFC 9110 form, already turned
    /// into a duration; [`super::retry_after::parse`] does that);
    /// without it the pause is the policy's deterministic backoff for
    /// `attempt`. Returns the pause applied. A pause only ever extends.
    pub async fn throttled(
        &self,
        retry_after: Option<Duration>,
        attempt: u32,
    ) -> Result<Duration, PacerError> {
        let pause = retry_after.unwrap_or_else(|| self.policy.backoff(attempt));
        self.pacer.pause(&self.account, pause).await?;
        Ok(pause)
    }

    /// Tells the pacer now about every slot given back and not yet carried
    /// by a call (they would go within [`super::LINGER`] anyway): call it
    /// before the process exits.
    pub async fn flush(&self) -> Result<(), PacerError> {
        let limiters: Vec<Arc<Limiter<P>>> = self.map().values().cloned().collect();
        for limiter in limiters {
            limiter.flush().await?;
        }
        Ok(())
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<String>, Arc<Limiter<P>>>> {
        // Inserting an Arc cannot be left half done by a panic.
        self.limiters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn limiter(&self, keys: &[&str]) -> Result<Arc<Limiter<P>>, AcquireError> {
        let mut keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        keys.sort_unstable();
        keys.dedup();
        if let Some(limiter) = self.map().get(&keys) {
            return Ok(limiter.clone());
        }
        let quota = self.policy.quota(&keys).map_err(AcquireError::Quota)?;
        let limiter = Arc::new(Limiter::in_queue(self.pacer.clone(), quota, self.queue.clone()));
        Ok(self.map().entry(keys).or_insert(limiter).clone())
    }
}

//! The cross-host run lock of a stream, in Redis (`runlock.lua`): its key
//! names and the calls that take, check, take over and give it back, on
//! the pacer's connection and with its bounded calls. The lock lives under
//! the hash tag of the quota that paces the stream, so the pacer's one call
//! a request can prove it as a [`quota_pacer::Fence`].

use std::sync::LazyLock;
use std::time::Duration;

use quota_pacer::{Fence, PacerError, RedisPacer};
use redis::Script;

use crate::REDIS_KEY_PREFIX;

/// The script, as the IQ lists it beside the pacer's.
pub(super) const SCRIPT_NAME: &str = "runlock.lua";

static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("runlock.lua")));

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The Redis keys of one stream's run lock: inside the hash tag of the
/// quota that paces the stream, so a request's one script call can prove
/// the lock beside its reservation (one Redis Cluster slot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLockName {
    stream: String,
    lock: String,
    fence: String,
}

impl RunLockName {
    /// The lock of `stream`, paced by the quota `quota_key`.
    pub fn new(quota_key: &str, stream: &str) -> RunLockName {
        RunLockName {
            stream: stream.to_string(),
            lock: format!("{REDIS_KEY_PREFIX}{{{quota_key}}}:run:{stream}:lock"),
            fence: format!("{REDIS_KEY_PREFIX}{{{quota_key}}}:run:{stream}:fence"),
        }
    }

    /// The stream, as messages name the lock.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// The key holding `<fence>|<holder>` while the lock is held.
    pub fn lock_key(&self) -> &str {
        &self.lock
    }

    /// The fence a request proves in its pacer call while `fence` holds
    /// this lock, extending it by `ttl`.
    pub fn fence(&self, fence: u64, ttl: Duration) -> Fence {
        Fence {
            lock_key: self.lock.clone(),
            fence,
            ttl,
        }
    }

    /// Takes this lock on `redis`: `Ok(fence)` or `Err(holder)`.
    pub async fn acquire(
        &self,
        redis: &RedisPacer,
        holder: &str,
        ttl: Duration,
    ) -> Result<Result<u64, String>, PacerError> {
        let mut inv = SCRIPT.prepare_invoke();
        inv.key(&self.lock)
            .key(&self.fence)
            .arg("acquire")
            .arg(holder)
            .arg(millis(ttl));
        fence_or_holder(redis, &inv).await
    }

    /// Takes this lock over from `expected` (its exact current value, a
    /// holder proved dead): `Ok(fence)`, or `Err(holder)` if the lock
    /// changed meanwhile.
    pub async fn take_over(
        &self,
        redis: &RedisPacer,
        expected: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Result<u64, String>, PacerError> {
        let mut inv = SCRIPT.prepare_invoke();
        inv.key(&self.lock)
            .key(&self.fence)
            .arg("takeover")
            .arg(expected)
            .arg(holder)
            .arg(millis(ttl));
        fence_or_holder(redis, &inv).await
    }

    /// True while `fence` still holds this lock (and extends it).
    pub async fn check(
        &self,
        redis: &RedisPacer,
        fence: u64,
        ttl: Duration,
    ) -> Result<LockState, PacerError> {
        let mut inv = SCRIPT.prepare_invoke();
        inv.key(&self.lock)
            .key(&self.fence)
            .arg("check")
            .arg(fence)
            .arg(millis(ttl));
        let (ok, holder): (i64, String) = redis.call(SCRIPT_NAME, &inv).await?;
        Ok(match (ok, holder) {
            (1, _) => LockState::Ours,
            (_, holder) if holder.is_empty() => LockState::Gone,
            (_, holder) => LockState::HeldBy(holder),
        })
    }

    /// Gives this lock back if `fence` still holds it.
    pub async fn release(&self, redis: &RedisPacer, fence: u64) -> Result<bool, PacerError> {
        let mut inv = SCRIPT.prepare_invoke();
        inv.key(&self.lock).key(&self.fence).arg("release").arg(fence);
        let (ok, _): (i64, String) = redis.call(SCRIPT_NAME, &inv).await?;
        Ok(ok == 1)
    }
}

/// Who holds a stream's run lock, as a check by its fence found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockState {
    /// Still this fence's (and extended).
    Ours,
    /// No one: the key expired or was removed (FLUSHALL, an eviction, a
    /// failover without persistence).
    Gone,
    /// Another run, as `<fence>|<holder>`.
    HeldBy(String),
}

impl std::fmt::Display for LockState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockState::Ours => f.write_str("it is still this run's"),
            LockState::Gone => f.write_str("the lock is no longer in Redis (expired, flushed or evicted)"),
            LockState::HeldBy(v) => match v.split_once('|') {
                Some((fence, holder)) => {
                    write!(f, "another run holds the stream: fence {fence}, held by {holder}")
                }
                None => write!(f, "another run holds the stream: {v}"),
            },
        }
    }
}

/// runlock.lua's `{ 1, fence }` or `{ 0, current holder }`.
async fn fence_or_holder(
    redis: &RedisPacer,
    inv: &redis::ScriptInvocation<'_>,
) -> Result<Result<u64, String>, PacerError> {
    let (ok, value): (i64, String) = redis.call(SCRIPT_NAME, inv).await?;
    Ok(if ok == 1 {
        Ok(value.parse().unwrap_or_default())
    } else {
        Err(value)
    })
}

/// Loads the script now (EVALSHA would also load it on first use): the IQ
/// proves with it that the server accepts the script.
pub async fn load_script(redis: &RedisPacer) -> Result<String, PacerError> {
    let mut conn = redis.connection();
    SCRIPT
        .prepare_invoke()
        .load_async(&mut conn)
        .await
        .map_err(|e| redis.protocol(SCRIPT_NAME, e.to_string()))
}

//! The cross-host run lock of a stream, in Redis (`lua/runlock.lua`):
//! its key names and the calls that take, check, take over and give it
//! back. A child of `redis.rs`, for its connection and its bounded calls.

use std::time::Duration;

use super::{millis, RedisPacer};
use crate::limiter::PacerError;

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
            lock: format!("edc-sync:{{{quota_key}}}:run:{stream}:lock"),
            fence: format!("edc-sync:{{{quota_key}}}:run:{stream}:fence"),
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
}

impl RedisPacer {
    /// Takes the cross-host run lock `name`: `Ok(fence)` or `Err(holder)`.
    pub async fn run_lock_acquire(
        &self,
        name: &RunLockName,
        holder: &str,
        ttl: Duration,
    ) -> Result<Result<u64, String>, PacerError> {
        let mut inv = self.inner.runlock.prepare_invoke();
        inv.key(&name.lock)
            .key(&name.fence)
            .arg("acquire")
            .arg(holder)
            .arg(millis(ttl));
        self.fence_or_holder(&inv).await
    }

    /// runlock.lua's `{ 1, fence }` or `{ 0, current holder }`.
    async fn fence_or_holder(
        &self,
        inv: &redis::ScriptInvocation<'_>,
    ) -> Result<Result<u64, String>, PacerError> {
        let (ok, value): (i64, String) = self.call("runlock.lua", inv).await?;
        Ok(if ok == 1 {
            Ok(value.parse().unwrap_or_default())
        } else {
            Err(value)
        })
    }

    /// Takes run lock `name` over from `expected` (its exact current value,
    /// a holder proved dead): `Ok(fence)`, or `Err(holder)` if the lock
    /// changed meanwhile.
    pub async fn run_lock_take_over(
        &self,
        name: &RunLockName,
        expected: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Result<u64, String>, PacerError> {
        let mut inv = self.inner.runlock.prepare_invoke();
        inv.key(&name.lock)
            .key(&name.fence)
            .arg("takeover")
            .arg(expected)
            .arg(holder)
            .arg(millis(ttl));
        self.fence_or_holder(&inv).await
    }

    /// True while `fence` still holds run lock `name` (and extends it).
    pub async fn run_lock_check(
        &self,
        name: &RunLockName,
        fence: u64,
        ttl: Duration,
    ) -> Result<bool, PacerError> {
        let mut inv = self.inner.runlock.prepare_invoke();
        inv.key(&name.lock)
            .key(&name.fence)
            .arg("check")
            .arg(fence)
            .arg(millis(ttl));
        let (ok, _): (i64, String) = self.call("runlock.lua", &inv).await?;
        Ok(ok == 1)
    }

    /// Gives run lock `name` back if `fence` still holds it.
    pub async fn run_lock_release(&self, name: &RunLockName, fence: u64) -> Result<bool, PacerError> {
        let mut inv = self.inner.runlock.prepare_invoke();
        inv.key(&name.lock).key(&name.fence).arg("release").arg(fence);
        let (ok, _): (i64, String) = self.call("runlock.lua", &inv).await?;
        Ok(ok == 1)
    }
}

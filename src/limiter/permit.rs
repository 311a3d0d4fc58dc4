//! From a pacer to a permission to send one request.
//!
//! [`Limiter::acquire`] books a token in every gate (one call), sleeps the
//! exact wait on the monotonic clock, then takes a concurrency lease. The
//! [`Permit`] renews its lease while held and gives it back on every path:
//! [`Permit::release`] on success or error, `Drop` on panic or task
//! cancellation. A holder killed outright loses its lease to the TTL.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use super::{LeaseAttempt, Pacer, PacerError, Quota, Reservation};

/// Bounds on how often a waiting caller re-asks for a lease slot.
const LEASE_POLL_MIN: Duration = Duration::from_millis(5);
const LEASE_POLL_MAX: Duration = Duration::from_millis(50);

/// Why no permit was given.
#[derive(Debug, thiserror::Error)]
pub enum AcquireError {
    /// Waiting would exceed the quota's horizon (`max_wait_s`): the run
    /// stops with progress saved (exit 75) rather than sleep for hours.
    #[error("quota {quota}: the next slot is {wait:?} away, beyond the {horizon:?} ceiling (max_wait_s)")]
    WaitTooLong {
        quota: String,
        wait: Duration,
        horizon: Duration,
    },
    #[error(transparent)]
    Pacer(#[from] PacerError),
}

/// Hands out permits for one quota.
pub struct Limiter<P: Pacer> {
    pacer: P,
    quota: Arc<Quota>,
    /// In-process share of the cap, so local tasks queue here instead of
    /// polling the shared lease set.
    local_slots: Arc<Semaphore>,
}

impl<P: Pacer> Limiter<P> {
    pub fn new(pacer: P, quota: Quota) -> Limiter<P> {
        let slots = quota.max_concurrency() as usize;
        Limiter {
            pacer,
            quota: Arc::new(quota),
            local_slots: Arc::new(Semaphore::new(slots)),
        }
    }

    pub fn quota(&self) -> &Quota {
        &self.quota
    }

    pub fn pacer(&self) -> &P {
        &self.pacer
    }

    /// Pauses the whole quota (every process) for `pause` from now.
    pub async fn pause(&self, pause: Duration) -> Result<(), PacerError> {
        self.pacer.pause(&self.quota, pause).await
    }

    /// Waits until one request may be sent.
    pub async fn acquire(&self) -> Result<Permit<P>, AcquireError> {
        let started = Instant::now();
        // The semaphore is never closed, so this cannot fail; if it ever
        // were, failing the acquire is the safe answer.
        let slot = self
            .local_slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| AcquireError::WaitTooLong {
                quota: self.quota.key().to_string(),
                wait: Duration::MAX,
                horizon: self.quota.horizon(),
            })?;
        let (wait, at_us) = match self.pacer.reserve(&self.quota).await? {
            Reservation::Granted { wait, at_us } => (wait, at_us),
            Reservation::Refused { wait } => return Err(self.too_long(wait)),
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let lease_id = loop {
            match self.pacer.try_lease(&self.quota).await? {
                LeaseAttempt::Acquired(id) => break id,
                LeaseAttempt::Full { retry_in } => {
                    let waited = started.elapsed();
                    if waited >= self.quota.horizon() {
                        return Err(self.too_long(waited));
                    }
                    tokio::time::sleep(retry_in.clamp(LEASE_POLL_MIN, LEASE_POLL_MAX)).await;
                }
            }
        };
        let renewer = tokio::spawn(renew_until_aborted(
            self.pacer.clone(),
            self.quota.clone(),
            lease_id,
        ));
        Ok(Permit {
            pacer: self.pacer.clone(),
            quota: self.quota.clone(),
            lease_id: Some(lease_id),
            renewer,
            _slot: slot,
            booked_at_us: at_us,
            waited: started.elapsed(),
        })
    }

    fn too_long(&self, wait: Duration) -> AcquireError {
        AcquireError::WaitTooLong {
            quota: self.quota.key().to_string(),
            wait,
            horizon: self.quota.horizon(),
        }
    }
}

async fn renew_until_aborted<P: Pacer>(pacer: P, quota: Arc<Quota>, id: u64) {
    let every = quota.lease_ttl() / 3;
    loop {
        tokio::time::sleep(every).await;
        match pacer.renew(&quota, id).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(
                    quota = quota.key(),
                    lease = id,
                    "concurrency lease expired before renewal"
                );
                return;
            }
            Err(e) => tracing::warn!(quota = quota.key(), lease = id, error = %e, "lease renewal failed"),
        }
    }
}

/// Permission to send one request: a booked token and a held lease.
pub struct Permit<P: Pacer> {
    pacer: P,
    quota: Arc<Quota>,
    lease_id: Option<u64>,
    renewer: JoinHandle<()>,
    _slot: OwnedSemaphorePermit,
    booked_at_us: i64,
    waited: Duration,
}

impl<P: Pacer> Permit<P> {
    /// The lease id: a fencing token that only grows.
    pub fn fencing_token(&self) -> u64 {
        self.lease_id.unwrap_or_default()
    }

    /// The instant the token was booked for, in the pacer's clock.
    pub fn booked_at_us(&self) -> i64 {
        self.booked_at_us
    }

    /// How long acquiring took (token wait plus lease wait).
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Gives the lease back now; `false` if it had already expired.
    pub async fn release(mut self) -> Result<bool, PacerError> {
        self.renewer.abort();
        match self.lease_id.take() {
            Some(id) => self.pacer.release(&self.quota, id).await,
            None => Ok(false),
        }
    }
}

impl<P: Pacer> Drop for Permit<P> {
    /// Panic or cancellation: release on the runtime in the background. If
    /// there is no runtime left the lease expires by its TTL.
    fn drop(&mut self) {
        self.renewer.abort();
        if let (Some(id), Ok(runtime)) = (self.lease_id.take(), tokio::runtime::Handle::try_current()) {
            let (pacer, quota) = (self.pacer.clone(), self.quota.clone());
            runtime.spawn(async move {
                if let Err(e) = pacer.release(&quota, id).await {
                    tracing::warn!(quota = quota.key(), lease = id, error = %e, "lease release failed; it will expire");
                }
            });
        }
    }
}

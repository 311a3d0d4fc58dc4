//! A pacer that counts the calls a caller makes, around any other: how a
//! test proves that a waiting caller asks when a slot frees, not every
//! few milliseconds. Counted, never timed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quota_pacer::{Answer, Ask, LeaseAttempt, Pacer, PacerError, Quota, Reservation};

/// `inner`, with every call that asks something of the quota counted.
#[derive(Clone)]
pub struct Counting<P: Pacer> {
    inner: P,
    calls: Arc<AtomicU64>,
}

impl<P: Pacer> Counting<P> {
    pub fn new(inner: P) -> Counting<P> {
        Counting {
            inner,
            calls: Arc::default(),
        }
    }

    /// The calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    fn count(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

impl<P: Pacer> Pacer for Counting<P> {
    async fn acquire(&self, quota: &Quota, ask: Ask<'_>) -> Result<Answer, PacerError> {
        self.count();
        self.inner.acquire(quota, ask).await
    }
    async fn reserve(&self, quota: &Quota) -> Result<Reservation, PacerError> {
        self.count();
        self.inner.reserve(quota).await
    }
    async fn pause(&self, quota: &Quota, pause: Duration) -> Result<(), PacerError> {
        self.count();
        self.inner.pause(quota, pause).await
    }
    async fn spend_windows(&self, quota: &Quota) -> Result<(), PacerError> {
        self.count();
        self.inner.spend_windows(quota).await
    }
    async fn try_lease(&self, quota: &Quota) -> Result<LeaseAttempt, PacerError> {
        self.count();
        self.inner.try_lease(quota).await
    }
    async fn renew(&self, quota: &Quota, id: u64) -> Result<bool, PacerError> {
        self.count();
        self.inner.renew(quota, id).await
    }
    async fn release(&self, quota: &Quota, id: u64) -> Result<bool, PacerError> {
        self.count();
        self.inner.release(quota, id).await
    }
    async fn wait_turn(&self, quota: &Quota, waiter: &str, retry_in: Duration) {
        self.inner.wait_turn(quota, waiter, retry_in).await
    }
}

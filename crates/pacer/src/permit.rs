//! From a pacer to a permission to send one request.
//! One concept: the limiter, and the permits and bookings it hands out.
//!
//! [`Limiter::acquire`] asks the pacer once for a concurrency slot and a
//! token in every gate (an [`Ask`]), sleeps the exact wait on the monotonic
//! clock, and hands out a [`Permit`]. The permit renews its lease while
//! held and gives it back on every path: [`Permit::release`] on success or
//! error, `Drop` on panic or task cancellation; a holder killed outright
//! loses its lease to the TTL.
//!
//! Giving back costs no round trip of its own: the lease id waits in the
//! limiter and rides on the next [`Ask`] this limiter sends (normally the
//! next request's, a few milliseconds later). If none is sent within
//! [`LINGER`], the limiter's one background task sends the give-back
//! alone, so a slot is never held for another process longer than that.
//! The same task renews every held lease each third of its TTL: a request
//! costs no task of its own, so a page costs no thread hand-off here.
//! [`Limiter::hand_over`] goes one step further for a run that pages: the
//! finished request's lease, the proof of the caller's [`Fence`] and the next
//! request's booking travel in one call.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, Once, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::queue::{self, Queue, Turn, Waits};
use super::{Answer, Ask, Fence, LeaseSet, Pacer, PacerError, Quota};

/// The longest a given-back lease waits for the next call to carry it.
pub const LINGER: Duration = Duration::from_millis(50);

/// Why no permit was given.
#[derive(Debug, thiserror::Error)]
pub enum AcquireError {
    /// Waiting would exceed the quota's horizon (`max_wait_s`): the run
    /// stops with progress saved (exit 75) rather than sleep for hours.
    #[error(
        "quota {quota}: {} {:.3} s away, beyond the {} s ceiling (max_wait_s)",
        match cap {
            Some(cap) => format!("a free slot of the {cap} concurrent requests allowed (max_concurrency) is at least"),
            None => "the next slot is".to_string(),
        },
        wait.as_secs_f64(),
        horizon.as_secs_f64()
    )]
    WaitTooLong {
        /// The quota's key.
        quota: String,
        /// How long the wait would have been.
        wait: Duration,
        /// The longest wait accepted.
        horizon: Duration,
        /// `Some(max_concurrency)` when what waited was the concurrency
        /// cap (every slot in flight), not the rate or a pause.
        cap: Option<u32>,
    },
    /// The pacer could not answer; nothing may be sent.
    #[error(transparent)]
    Pacer(#[from] PacerError),
    /// A key that cannot be part of a quota's Redis keys.
    #[error(transparent)]
    Quota(super::QuotaError),
}

/// One process's queue for a quota key's concurrency cap
/// (`queue.rs`): every limiter of the key made [`Limiter::in_queue`] with
/// a clone of it waits for the cap in the same first-in-first-out line.
pub struct CapQueue<P: Pacer>(Queue<Arc<Shared<P>>, Booking<P>>);

impl<P: Pacer> Clone for CapQueue<P> {
    fn clone(&self) -> Self {
        CapQueue(self.0.clone())
    }
}

impl<P: Pacer> CapQueue<P> {
    /// A queue of `cap` in-process slots (the quota's `max_concurrency`).
    pub fn new(cap: u32) -> CapQueue<P> {
        CapQueue(Queue::new(cap))
    }
}

/// A local slot of a limiter's queue.
type LocalSlot<P> = queue::LocalSlot<Arc<Shared<P>>, Booking<P>>;

impl<P: Pacer> Waits for Arc<Shared<P>> {
    fn lease_sets(&self) -> &[LeaseSet] {
        &self.sets
    }
}

/// Hands out permits for one quota; clones share everything.
pub struct Limiter<P: Pacer> {
    shared: Arc<Shared<P>>,
}

impl<P: Pacer> Clone for Limiter<P> {
    fn clone(&self) -> Self {
        Limiter {
            shared: self.shared.clone(),
        }
    }
}

/// What a limiter and its permits share.
struct Shared<P: Pacer> {
    pacer: P,
    quota: Quota,
    /// The quota's lease sets: a lease of this limiter can be given back by
    /// a call of any quota with the same ones.
    sets: Vec<LeaseSet>,
    /// The in-process share of the cap, shared by every limiter of the
    /// quota's key in this process: local tasks queue there instead of
    /// polling the shared lease set.
    queue: Queue<Arc<Shared<P>>, Booking<P>>,
    /// Leases given back and not yet told to the pacer.
    returned: Mutex<Vec<u64>>,
    /// Leases of the permits alive now, which the keeper renews.
    held: Mutex<BTreeSet<u64>>,
    /// Wakes the keeper: a lease was given back (or the limiter is gone).
    /// Outside `Shared`'s own `Arc`, so the waiting keeper keeps nothing
    /// alive.
    wake: Arc<Notify>,
    /// The keeper is started once, by the first permit, on its runtime.
    keeper: Once,
}

impl<P: Pacer> Drop for Shared<P> {
    fn drop(&mut self) {
        // The keeper wakes, finds the limiter gone, and ends.
        self.wake.notify_one();
    }
}

impl<P: Pacer> Shared<P> {
    fn returned(&self) -> std::sync::MutexGuard<'_, Vec<u64>> {
        // A Vec push or take cannot be left half done by a panic.
        self.returned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn held(&self) -> std::sync::MutexGuard<'_, BTreeSet<u64>> {
        // An insert or remove cannot be left half done by a panic.
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts the keeper on the current runtime, once.
    fn start_keeper(self: &Arc<Self>) {
        self.keeper.call_once(|| {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(keep(Arc::downgrade(self), self.wake.clone()));
            }
        });
    }

    /// The given-back leases, to carry on the next call.
    fn take_returned(&self) -> Vec<u64> {
        std::mem::take(&mut *self.returned())
    }

    /// Puts leases back when the call that carried them failed: the next
    /// call tries again (giving back twice is harmless).
    fn restore(&self, ids: Vec<u64>) {
        self.returned().extend(ids);
    }

    /// Queues lease `id` for the next call; the keeper sends it within
    /// [`LINGER`] if no request follows (at once if a task waits for a
    /// slot).
    fn give_back(&self, id: u64) {
        self.held().remove(&id);
        self.returned().push(id);
        self.wake.notify_one();
    }

    /// A held slot booked for `at_us`, as a booking of this limiter.
    fn booking(
        self: &Arc<Self>,
        slot: LocalSlot<P>,
        lease: u64,
        at_us: i64,
        wait: Duration,
        started: Instant,
    ) -> Booking<P> {
        self.held().insert(lease);
        self.start_keeper();
        Booking {
            permit: Permit {
                shared: self.clone(),
                lease_id: Some(lease),
                slot: Some(slot),
                booked_at_us: at_us,
                waited: Duration::ZERO,
                started,
            },
            ready_at: tokio::time::Instant::now() + wait,
        }
    }

    async fn flush(&self) -> Result<(), PacerError> {
        let ids = self.take_returned();
        if ids.is_empty() {
            return Ok(());
        }
        match self.pacer.acquire(&self.quota, Ask::check(&ids, None)).await {
            Ok(_) => Ok(()),
            Err(e) => {
                self.restore(ids);
                Err(e)
            }
        }
    }
}

/// What [`Limiter::hand_over`] found.
pub enum HandOver<P: Pacer> {
    /// The fence is held; the next request is booked if it was asked
    /// for and a slot and token were free within the horizon.
    Held(Option<Booking<P>>),
    /// The fenced lock is no longer the caller's. Nothing was booked.
    Lost,
}

impl<P: Pacer> Limiter<P> {
    /// A limiter of `quota` on `pacer`, alone in its queue for the cap.
    pub fn new(pacer: P, quota: Quota) -> Limiter<P> {
        let queue = CapQueue::new(quota.max_concurrency());
        Limiter::in_queue(pacer, quota, queue)
    }

    /// A limiter of `quota` on `pacer` that takes its in-process slots
    /// from `queue`, shared by every limiter of the quota's key in this
    /// process (the streams of one account, say): they wait in one FIFO
    /// for the cap, asking the pacer nothing while they wait.
    pub fn in_queue(pacer: P, quota: Quota, queue: CapQueue<P>) -> Limiter<P> {
        Limiter {
            shared: Arc::new(Shared {
                pacer,
                sets: quota.lease_sets(),
                quota,
                queue: queue.0,
                returned: Mutex::new(Vec::new()),
                held: Mutex::new(BTreeSet::new()),
                wake: Arc::new(Notify::new()),
                keeper: Once::new(),
            }),
        }
    }

    /// The quota it hands out permits for.
    pub fn quota(&self) -> &Quota {
        &self.shared.quota
    }

    /// Where the quota's state lives.
    pub fn pacer(&self) -> &P {
        &self.shared.pacer
    }

    /// Pauses the whole quota (every process) for `pause` from now.
    pub async fn pause(&self, pause: Duration) -> Result<(), PacerError> {
        self.shared.pacer.pause(&self.shared.quota, pause).await
    }

    /// Marks the quota's fixed windows spent until their end, for every
    /// process: the vendor answered that their calls are used up.
    pub async fn spend_windows(&self) -> Result<(), PacerError> {
        self.shared.pacer.spend_windows(&self.shared.quota).await
    }

    /// Reserves a token in `other`, a quota beside this one on the same
    /// pacer (a gate shared more widely than this quota's key, such as a
    /// vendor's per-server allowance): the caller sleeps the wait.
    pub async fn reserve_in(&self, other: &Quota) -> Result<crate::Reservation, PacerError> {
        self.shared.pacer.reserve(other).await
    }

    /// Tells the pacer now about every lease given back and not yet
    /// carried by a call: at the end of a stream, before a long sleep.
    pub async fn flush(&self) -> Result<(), PacerError> {
        self.shared.flush().await
    }

    /// Waits until one request may be sent: first for a slot of the
    /// in-process queue (no pacer call while waiting; the turn may come
    /// booked already), then for the pacer's answer.
    pub async fn acquire(&self) -> Result<Permit<P>, AcquireError> {
        let started = Instant::now();
        // Its name in the line of every process's callers the cap turned
        // away: it joins at its first refusal, not its second.
        let waiter = waiter_name();
        let (slot, mut carried) = match self.shared.queue.take(&self.shared, &waiter).await {
            Turn::Booked(booking) => return Ok(booking.ready().await),
            Turn::Slot {
                slot,
                release,
                in_line,
            } => {
                if let Some(retry_in) = in_line {
                    // Put in line by the call that handed the slot over.
                    self.shared
                        .pacer
                        .wait_turn(&self.shared.quota, &waiter, retry_in)
                        .await;
                }
                (slot, release)
            }
        };
        loop {
            let mut returned = self.shared.take_returned();
            // The lease of the request that held this slot before, given
            // back in this call (the cap would otherwise look full of it).
            returned.extend(carried.take());
            let answer = self
                .shared
                .pacer
                .acquire(&self.shared.quota, Ask::book(&returned, None).waiting(&waiter))
                .await;
            let answer = match answer {
                Ok(answer) => answer,
                Err(e) => {
                    self.shared.restore(returned);
                    return Err(e.into());
                }
            };
            match answer {
                Answer::Granted { wait, at_us, lease } => {
                    let booking = self.shared.booking(slot, lease, at_us, wait, started);
                    return Ok(booking.ready().await);
                }
                Answer::Refused { wait } => return Err(self.too_long(wait, None)),
                Answer::Full { retry_in } => {
                    let waited = started.elapsed();
                    if waited >= self.shared.quota.horizon() {
                        return Err(self.too_long(waited, Some(self.shared.quota.max_concurrency())));
                    }
                    // Every slot is held, by this process or another:
                    // asleep until a give-back frees one for this caller
                    // (`wake.rs`), asking nothing meanwhile.
                    self.shared
                        .pacer
                        .wait_turn(&self.shared.quota, &waiter, retry_in)
                        .await;
                }
                Answer::Checked | Answer::FenceLost => {
                    return Err(AcquireError::Pacer(PacerError::Protocol {
                        endpoint: String::new(),
                        script: "acquire.lua",
                        detail: format!("{answer:?} to a booking without a fence"),
                    }))
                }
            }
        }
    }

    /// Gives `current`'s lease back and proves `fence` in one call; with
    /// `book_next`, the same call books the next request. A run that pages
    /// calls this between landing a page and moving its cursor: one round
    /// trip a page in all.
    ///
    /// When other tasks of this process wait for the cap, the booking is
    /// the first waiter's (booked under its quota, handed its slot, whether
    /// or not `book_next` asked) and the caller gets none: its next request
    /// queues behind them, so every stream of one quota progresses.
    pub async fn hand_over(
        &self,
        current: Option<Permit<P>>,
        fence: &Fence,
        book_next: bool,
    ) -> Result<HandOver<P>, PacerError> {
        let started = Instant::now();
        let queue = &self.shared.queue;
        let mut returned = self.shared.take_returned();
        let slot = match current {
            Some(mut permit) => {
                if let Some(id) = permit.lease_id.take() {
                    self.shared.held().remove(&id);
                    returned.push(id);
                }
                permit.slot.take()
            }
            None => None,
        };
        // A waiter is booked for even when the caller books nothing more:
        // the call is made anyway (to prove the fence), and booking in it
        // saves the waiter a call of its own.
        let waiter = match &slot {
            Some(_) => queue.pop_compatible(&self.shared.sets),
            None => None,
        };
        let booked_for = waiter.as_ref().map_or(&self.shared.quota, |w| &w.limiter.quota);
        // Asked under the waiter's name: should the cap turn it away (other
        // processes wait before it), this call puts it in line and the
        // waiter waits for its wake-up without a call of its own.
        let ask = Ask {
            book: book_next || waiter.is_some(),
            release: &returned,
            fence: Some(fence),
            waiter: waiter.as_ref().map(|w| w.name.as_str()),
        };
        let answer = self.shared.pacer.acquire(booked_for, ask).await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                self.shared.restore(returned);
                if let Some(waiter) = waiter {
                    queue.unpop(waiter);
                }
                return Err(e);
            }
        };
        // Whatever was not booked: the waiter goes back first in line, and
        // the slot (dropped at the end) to it.
        let (wait, at_us, lease) = match answer {
            Answer::Granted { wait, at_us, lease } => (wait, at_us, lease),
            other => {
                match (waiter, other, slot) {
                    (Some(waiter), Answer::Full { retry_in }, Some(slot)) => {
                        queue.hand_in_line(waiter, slot, retry_in)
                    }
                    (Some(waiter), ..) => queue.unpop(waiter),
                    _ => {}
                }
                return Ok(match other {
                    Answer::FenceLost => HandOver::Lost,
                    _ => HandOver::Held(None),
                });
            }
        };
        let slot = match slot.or_else(|| queue.try_take()) {
            Some(slot) => slot,
            // No local slot to pass on: the lease goes back; the next
            // request asks again.
            None => {
                self.shared.give_back(lease);
                return Ok(HandOver::Held(None));
            }
        };
        Ok(match waiter {
            Some(waiter) => {
                let booking = waiter.limiter.booking(slot, lease, at_us, wait, waiter.since);
                queue.hand(waiter, booking);
                HandOver::Held(None)
            }
            None => HandOver::Held(Some(self.shared.booking(slot, lease, at_us, wait, started))),
        })
    }

    /// The wait past the horizon; `cap` when the concurrency cap waited.
    fn too_long(&self, wait: Duration, cap: Option<u32>) -> AcquireError {
        AcquireError::WaitTooLong {
            quota: self.shared.quota.key().to_string(),
            wait,
            horizon: self.shared.quota.horizon(),
            cap,
        }
    }
}

/// A name for a caller in the line of those the cap turned away, unique
/// across processes and hosts: `<process>/<count>`, the process named by
/// its id and start (nanoseconds). The Redis pacer wakes a caller through
/// a list of its process, found by the part before the `/`.
fn waiter_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static PROCESS: OnceLock<String> = OnceLock::new();
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let process = PROCESS.get_or_init(|| {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{}-{started}", std::process::id())
    });
    format!("{process}/{}", COUNT.fetch_add(1, Ordering::Relaxed))
}

/// The limiter's one background task: sends given-back leases that no
/// request carried within [`LINGER`], and renews every held lease each
/// third of its TTL. Ends when the limiter is gone.
async fn keep<P: Pacer>(shared: Weak<Shared<P>>, wake: Arc<Notify>) {
    let Some(every) = shared.upgrade().map(|s| s.quota.lease_ttl() / 3) else {
        return;
    };
    let every = every.max(Duration::from_millis(1));
    let mut renewal = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    renewal.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = wake.notified() => {
                let waiting = shared.upgrade().is_some_and(|s| s.queue.waiting() > 0);
                if !waiting {
                    tokio::time::sleep(LINGER).await;
                }
                let Some(shared) = shared.upgrade() else { return };
                if let Err(e) = shared.flush().await {
                    tracing::warn!(quota = shared.quota.key(), error = %e, "giving back concurrency leases failed; they expire by their TTL");
                }
            }
            _ = renewal.tick() => {
                let Some(shared) = shared.upgrade() else { return };
                renew_held(&shared).await;
            }
        }
    }
}

/// Renews every lease held now; one that had expired is dropped from the
/// set (its permit's request outlived the TTL: logged).
async fn renew_held<P: Pacer>(shared: &Shared<P>) {
    let quota = &shared.quota;
    let held: Vec<u64> = shared.held().iter().copied().collect();
    for id in held {
        match shared.pacer.renew(quota, id).await {
            Ok(true) => {}
            Ok(false) => {
                shared.held().remove(&id);
                tracing::warn!(
                    quota = quota.key(),
                    lease = id,
                    "concurrency lease expired before renewal"
                );
            }
            Err(e) => tracing::warn!(quota = quota.key(), lease = id, error = %e, "lease renewal failed"),
        }
    }
}

/// A slot and a token booked for a request that may not be sent yet:
/// [`Booking::ready`] sleeps until the booked instant. Dropped unused, it
/// gives its slot back like a [`Permit`] (the token is spent: pacing only
/// gets slower).
pub struct Booking<P: Pacer> {
    permit: Permit<P>,
    ready_at: tokio::time::Instant,
}

impl<P: Pacer> Booking<P> {
    /// How long until the booked instant (zero once it has passed).
    pub fn ready_in(&self) -> Duration {
        self.ready_at
            .saturating_duration_since(tokio::time::Instant::now())
    }

    /// Sleeps until the booked instant; then the request may go.
    pub async fn ready(mut self) -> Permit<P> {
        // A timer rounds up to the next millisecond tick even when the
        // instant has passed: a free token must not wait for one.
        if self.ready_at > tokio::time::Instant::now() {
            tokio::time::sleep_until(self.ready_at).await;
        }
        self.permit.waited = self.permit.started.elapsed();
        self.permit
    }
}

/// Permission to send one request: a booked token and a held lease.
pub struct Permit<P: Pacer> {
    shared: Arc<Shared<P>>,
    lease_id: Option<u64>,
    slot: Option<LocalSlot<P>>,
    booked_at_us: i64,
    waited: Duration,
    started: Instant,
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

    /// Gives the slot back: at once in this process, and to the pacer on
    /// the next call this limiter makes (within [`LINGER`]).
    pub fn release(self) {
        drop(self)
    }
}

impl<P: Pacer> Drop for Permit<P> {
    /// Every path gives the lease back the same way: success, error, panic
    /// or cancellation. With no runtime left the lease expires by its TTL.
    /// The local slot goes to the first task waiting for one, with the
    /// lease for its call to give back; with none waiting, the lease waits
    /// for this limiter's next call.
    fn drop(&mut self) {
        match (self.lease_id.take(), self.slot.take()) {
            (Some(id), Some(slot)) => {
                self.shared.held().remove(&id);
                let shared = self.shared.clone();
                slot.pass_with(id, &self.shared.sets, move |id| shared.give_back(id));
            }
            (Some(id), None) => self.shared.give_back(id),
            (None, slot) => drop(slot),
        }
    }
}

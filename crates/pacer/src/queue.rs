//! One process's queue for a quota's concurrency cap.
//!
//! Every limiter of one quota key in a process (one a stream, say) takes
//! its in-process share of the cap from the same [`CapQueue`]: a task that
//! finds every local slot taken waits here, in arrival order, without
//! asking the pacer anything, and is woken by the slot it is given. A
//! slot is passed on whole, with what the next holder needs so that its
//! one pacer call succeeds: the lease of the request that freed it, to give
//! back in that same call, or (from [`super::Limiter::hand_over`]) a
//! booking already made for the waiter in the call that proved the
//! finishing caller's fence. So a request costs one pacer call however
//! many tasks wait, and a task that keeps paging goes to the back of the
//! queue when others wait: every stream progresses.
//!
//! The cap of other processes is what this queue cannot see: a task
//! holding a local slot that the pacer turns away (`Answer::Full`) sleeps
//! until a give-back of any process frees a slot for it (`wake.rs`).
//!
//! The queue knows a waiter only as `C` (its limiter, [`Waits`]) and a
//! booking only as `B`: what they are is `permit.rs`'s business
//! ([`super::CapQueue`] is this queue of limiters and their bookings).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::LeaseSet;

/// What the queue needs of a waiter: the lease sets its quota takes (a
/// lease given back, or a booking made, for another holder must be under
/// the same ones).
pub(crate) trait Waits: Clone {
    fn lease_sets(&self) -> &[LeaseSet];
}

/// The in-process queue of one quota key's concurrency cap, of waiters
/// `C` and bookings `B`; clones share it.
pub(crate) struct Queue<C: Waits, B> {
    inner: Arc<Mutex<State<C, B>>>,
}

impl<C: Waits, B> Clone for Queue<C, B> {
    fn clone(&self) -> Self {
        Queue {
            inner: self.inner.clone(),
        }
    }
}

struct State<C: Waits, B> {
    /// Local slots nobody holds.
    free: u32,
    waiters: VecDeque<Waiter<C, B>>,
}

/// A task waiting for a slot: its limiter (whose quota a booking made for
/// it is booked under) and where its turn is sent.
pub(crate) struct Waiter<C: Waits, B> {
    pub(crate) limiter: C,
    /// Its name in the pacer's line of callers the cap turned away, should
    /// a call made for it be turned away.
    pub(crate) name: String,
    pub(crate) since: Instant,
    turn: oneshot::Sender<Turn<C, B>>,
}

/// What a waiting task is given.
pub(crate) enum Turn<C: Waits, B> {
    /// A local slot; `release` is the lease of the request that held it,
    /// still to be given back (the new holder's call carries it).
    Slot {
        slot: LocalSlot<C, B>,
        release: Option<u64>,
        /// The call that freed the slot asked for the waiter and the cap
        /// turned it away, putting it in the pacer's line: it waits for its
        /// wake-up (or this long) before it asks.
        in_line: Option<Duration>,
    },
    /// A slot and a token already booked for the waiter.
    Booked(B),
}

/// One of the queue's local slots, held; dropped, it goes to the first
/// waiter or back to the free count.
pub(crate) struct LocalSlot<C: Waits, B> {
    queue: Option<Queue<C, B>>,
}

impl<C: Waits, B> Drop for LocalSlot<C, B> {
    fn drop(&mut self) {
        if let Some(queue) = self.queue.take() {
            queue.pass_slot(None, None);
        }
    }
}

impl<C: Waits, B> LocalSlot<C, B> {
    /// Gives the slot up, with the lease `release` of the request that
    /// held it (under `sets`): the next holder's call gives it back if its
    /// quota takes the same lease sets; otherwise `give_back` keeps it for
    /// the old holder's limiter to send.
    pub(crate) fn pass_with(mut self, release: u64, sets: &[LeaseSet], give_back: impl FnOnce(u64)) {
        if let Some(queue) = self.queue.take() {
            queue.pass_slot(Some((release, sets)), Some(Box::new(give_back)));
        }
    }
}

type GiveBack<'a> = Box<dyn FnOnce(u64) + 'a>;

impl<C: Waits, B> Queue<C, B> {
    /// A queue of `cap` local slots.
    pub(crate) fn new(cap: u32) -> Queue<C, B> {
        Queue {
            inner: Arc::new(Mutex::new(State {
                free: cap.max(1),
                waiters: VecDeque::new(),
            })),
        }
    }

    fn state(&self) -> MutexGuard<'_, State<C, B>> {
        // Each step is a counter or a queue operation: a panic cannot
        // leave one half done.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How many tasks wait for a slot now.
    pub(crate) fn waiting(&self) -> usize {
        self.state().waiters.len()
    }

    /// A slot at once if one is free and nobody waits before the caller.
    pub(crate) fn try_take(&self) -> Option<LocalSlot<C, B>> {
        let mut state = self.state();
        if state.free > 0 && state.waiters.is_empty() {
            state.free -= 1;
            return Some(self.slot());
        }
        None
    }

    /// The turn of the caller named `name` (in the pacer's line, should
    /// it come to that): a free slot, or its place in the queue.
    pub(crate) async fn take(&self, limiter: &C, name: &str) -> Turn<C, B> {
        let since = Instant::now();
        let receiver = {
            let mut state = self.state();
            if state.free > 0 && state.waiters.is_empty() {
                state.free -= 1;
                return Turn::Slot {
                    slot: self.slot(),
                    release: None,
                    in_line: None,
                };
            }
            let (turn, receiver) = oneshot::channel();
            state.waiters.push_back(Waiter {
                limiter: limiter.clone(),
                name: name.to_string(),
                since,
                turn,
            });
            receiver
        };
        match receiver.await {
            Ok(turn) => turn,
            // Every sender of a turn either sends it or keeps it: a queue
            // whose waiter was dropped unsent cannot happen while this
            // receiver lives. Should it, a fresh wait is the safe answer.
            Err(_) => Box::pin(self.take(limiter, name)).await,
        }
    }

    /// The first waiter, if its quota takes the same lease sets as `sets`
    /// (a booking made for it gives back `sets`' leases in the same call).
    pub(crate) fn pop_compatible(&self, sets: &[LeaseSet]) -> Option<Waiter<C, B>> {
        let mut state = self.state();
        let compatible = state
            .waiters
            .front()
            .is_some_and(|w| w.limiter.lease_sets() == sets);
        if compatible {
            state.waiters.pop_front()
        } else {
            None
        }
    }

    /// Puts a waiter taken by [`CapQueue::pop_compatible`] back first.
    pub(crate) fn unpop(&self, waiter: Waiter<C, B>) {
        self.state().waiters.push_front(waiter);
    }

    fn slot(&self) -> LocalSlot<C, B> {
        LocalSlot {
            queue: Some(self.clone()),
        }
    }

    /// A freed slot to the first waiter still waiting, with the lease of
    /// the request that held it when that waiter's quota takes the same
    /// lease sets; with no waiter the slot is free, and a lease nobody
    /// carries goes to `give_back` (its own limiter sends it).
    fn pass_slot(&self, lease: Option<(u64, &[LeaseSet])>, give_back: Option<GiveBack<'_>>) {
        let mut lease = lease;
        loop {
            let waiter = {
                let mut state = self.state();
                match state.waiters.pop_front() {
                    Some(w) => w,
                    None => {
                        state.free += 1;
                        break;
                    }
                }
            };
            let carried = lease
                .filter(|(_, sets)| waiter.limiter.lease_sets() == *sets)
                .map(|(id, _)| id);
            let turn = Turn::Slot {
                slot: self.slot(),
                release: carried,
                in_line: None,
            };
            match waiter.turn.send(turn) {
                Ok(()) => {
                    if carried.is_some() {
                        lease = None;
                    }
                    break;
                }
                // That waiter is gone: the slot (not freed twice) and the
                // lease go to the next one.
                Err(Turn::Slot { mut slot, .. }) => slot.queue = None,
                Err(Turn::Booked(_)) => break,
            }
        }
        if let (Some((id, _)), Some(give_back)) = (lease, give_back) {
            give_back(id);
        }
    }

    /// Sends `slot` to `waiter`, which the pacer put in its line in the
    /// call that freed the slot (to wait for a wake-up, or `retry_in`,
    /// before it asks); a waiter gone meanwhile drops the slot, which goes
    /// on to the next.
    pub(crate) fn hand_in_line(&self, waiter: Waiter<C, B>, slot: LocalSlot<C, B>, retry_in: Duration) {
        let _ = waiter.turn.send(Turn::Slot {
            slot,
            release: None,
            in_line: Some(retry_in),
        });
    }

    /// Sends `booking` to `waiter`; a waiter gone meanwhile drops it, which
    /// gives its slot and lease on like any unused booking.
    pub(crate) fn hand(&self, waiter: Waiter<C, B>, booking: B) {
        let _ = waiter.turn.send(Turn::Booked(booking));
    }
}

//! One question to the pacer per request.
//!
//! A request would otherwise cost four Redis round trips: reserve a token,
//! take a concurrency lease, give the lease back, prove a lock the caller
//! holds before it acts on the answer. An [`Ask`] carries all of it at
//! once, and both pacers answer it atomically (`lua/acquire.lua`, and the
//! same steps under the [`super::LocalPacer`]'s mutex): the leases of
//! finished requests are given back, the fence is proved, then a slot is
//! taken and a token booked in every gate; the last two all or none.

use std::time::Duration;

/// A lock the caller holds elsewhere (a fencing lock: its key holds
/// `<token>|<holder>`), proved in the same call as a booking so that a
/// caller whose lock was taken over learns it before it sends or commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The lock's Redis key; it must share the quota's hash tag, so one
    /// script can read both (one Redis Cluster slot).
    pub lock_key: String,
    /// The fencing token the caller was given; the lock is the caller's
    /// while its value starts with `<token>|`.
    pub fence: u64,
    /// A proof also extends the lock by this much.
    pub ttl: Duration,
}

/// What one call asks for.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// Book a token and a slot; `false` only gives back and checks.
    pub book: bool,
    /// Leases of requests that have finished, given back first.
    pub release: &'a [u64],
    /// The lock to prove before anything is booked.
    pub fence: Option<&'a Fence>,
    /// The caller's place in the line of callers the cap turned away, by
    /// a name unique to it (`None`: not in line). A slot freed while
    /// others wait goes to the first of them: a caller takes one only if
    /// fewer callers wait before it than there are free slots; one turned
    /// away joins the line under its name and keeps its place while it
    /// asks again within [`WAITER_TTL`].
    pub waiter: Option<&'a str>,
}

/// How long a caller turned away by the cap keeps its place in line
/// without asking again. A waiter is woken when a slot frees for it and
/// otherwise asks every [`super::KEEP_ASKING`], well within this; a caller
/// that died holds up the line at most this long.
pub const WAITER_TTL: Duration = Duration::from_secs(3);

impl<'a> Ask<'a> {
    /// A token and a slot, giving back `release` first.
    pub fn book(release: &'a [u64], fence: Option<&'a Fence>) -> Ask<'a> {
        Ask {
            book: true,
            release,
            fence,
            waiter: None,
        }
    }

    /// The same, asked by the waiter named `waiter` (see [`Ask::waiter`]).
    pub fn waiting(self, waiter: &'a str) -> Ask<'a> {
        Ask {
            waiter: Some(waiter),
            ..self
        }
    }

    /// Only give back `release` and prove `fence`.
    pub fn check(release: &'a [u64], fence: Option<&'a Fence>) -> Ask<'a> {
        Ask {
            book: false,
            release,
            fence,
            waiter: None,
        }
    }
}

/// The answer to an [`Ask`]. The releases were applied whatever it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Booked: a slot held under `lease` (a fencing token that only grows)
    /// and a token for `at_us`; sleep `wait`, then send.
    Granted {
        /// How long to sleep before sending.
        wait: Duration,
        /// The booked instant, in the pacer's clock (µs).
        at_us: i64,
        /// The lease id: also a fencing token that only grows.
        lease: u64,
    },
    /// The next token is beyond the horizon; nothing was booked.
    Refused {
        /// How far away the next token is.
        wait: Duration,
    },
    /// Every slot is taken; the first expires within `retry_in`. Nothing
    /// was booked.
    Full {
        /// When the first held slot's lease expires at the latest.
        retry_in: Duration,
    },
    /// Nothing asked to book; the fence, if asked, is held.
    Checked,
    /// The fenced lock is no longer the caller's; nothing was booked.
    FenceLost,
}

//! The in-process pacer: the same GCRA arithmetic as `lua/gcra.lua`, and
//! the same steps as `lua/acquire.lua`, under a mutex, on this process's
//! monotonic clock.
//!
//! Used by `demo` and by single-process runs (`--pacer local`). It cannot
//! coordinate with other processes; that is what [`super::RedisPacer`] is for.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::gcra::{self, GateShape};
use super::wake::Wakeups;
use super::window::{self, WindowState};
use super::{ceil_ms, Answer, Ask, LeaseAttempt, LeaseSet, Pacer, PacerError, Quota, Reservation};

#[derive(Default)]
struct State {
    /// TAT per (quota key, gate name), microseconds since `origin`.
    tats: HashMap<(String, String), i64>,
    /// Pause-until per quota key.
    pauses: HashMap<String, i64>,
    /// The current window per (quota key, window name).
    windows: HashMap<(String, String), WindowState>,
    /// Live leases per (quota key, lease set): id -> expiry.
    leases: HashMap<(String, String), BTreeMap<u64, i64>>,
    /// Callers the account's cap turned away, per quota key: name ->
    /// (arrival, the time it must ask again by).
    lines: HashMap<String, HashMap<String, (i64, i64)>>,
    next_lease: u64,
}

/// In-process pacer; clones share one state.
#[derive(Clone)]
pub struct LocalPacer {
    origin: Instant,
    state: Arc<Mutex<State>>,
    /// The callers the cap turned away, woken when a call frees a slot.
    wakeups: Wakeups,
}

impl Default for LocalPacer {
    fn default() -> Self {
        Self::new()
    }
}

impl LocalPacer {
    /// A pacer with no history: every bucket full.
    pub fn new() -> LocalPacer {
        LocalPacer {
            origin: Instant::now(),
            state: Arc::default(),
            wakeups: Wakeups::default(),
        }
    }

    fn now_us(&self) -> i64 {
        // Start at one second so a fresh gate's TAT of 0 is in the past.
        i64::try_from(self.origin.elapsed().as_micros()).unwrap_or(i64::MAX) + 1_000_000
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the arithmetic
        // half-applied (each step is a plain store), so the state is usable.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl State {
    fn reserve(&mut self, quota: &Quota, now: i64) -> Reservation {
        let state = self;
        let pause = state.pauses.get(quota.key()).copied().unwrap_or(0);
        let mut tats: Vec<(GateShape, i64)> = quota
            .gates()
            .iter()
            .zip(quota.shapes())
            .map(|(g, shape)| {
                let tat = state
                    .tats
                    .get(&(quota.key().to_string(), g.name.clone()))
                    .copied()
                    .unwrap_or(0);
                (shape, tat)
            })
            .collect();
        let mut gates: Vec<(GateShape, &mut i64)> = tats.iter_mut().map(|(s, t)| (*s, t)).collect();
        let horizon = i64::try_from(quota.horizon().as_micros()).unwrap_or(i64::MAX);
        let mut decision = gcra::reserve(now, pause, &gates, i64::MAX);
        let windows: Vec<_> = quota
            .windows()
            .iter()
            .zip(quota.window_shapes())
            .map(|(w, shape)| (shape, state.windows.get(&window_key(quota, w)).copied()))
            .collect();
        decision.at_us = window::settle(decision.at_us, &windows);
        decision.wait_us = decision.at_us - now;
        if decision.wait_us > horizon {
            return Reservation::Refused {
                wait: ceil_ms(decision.wait_us),
            };
        }
        for (w, (shape, current)) in quota.windows().iter().zip(windows) {
            let next = window::commit(decision.at_us, &shape, current);
            state.windows.insert(window_key(quota, w), next);
        }
        gcra::commit(&decision, &mut gates);
        for (gate, (_, tat)) in quota.gates().iter().zip(tats) {
            state
                .tats
                .insert((quota.key().to_string(), gate.name.clone()), tat);
        }
        Reservation::Granted {
            wait: ceil_ms(decision.wait_us),
            at_us: decision.at_us,
        }
    }

    /// Marks every window of `quota` spent until its end (the vendor said so).
    fn spend_windows(&mut self, quota: &Quota, now: i64) {
        for (w, shape) in quota.windows().iter().zip(quota.window_shapes()) {
            let key = window_key(quota, w);
            let spent = window::spent(now, &shape, self.windows.get(&key).copied());
            self.windows.insert(key, spent);
        }
    }

    /// The live leases of one lease set of `quota`, the expired ones dropped.
    fn leases(&mut self, quota: &Quota, set: &str, now: i64) -> &mut BTreeMap<u64, i64> {
        let leases = self
            .leases
            .entry((quota.key().to_string(), set.to_string()))
            .or_default();
        leases.retain(|_, expiry| *expiry > now);
        leases
    }

    /// How many callers the account's cap turned away wait before `me`
    /// (all of them if `me` is not in line), those that stopped asking
    /// dropped first, as `acquire.lua` counts them.
    fn ahead(&mut self, quota: &Quota, me: Option<&str>, now: i64) -> usize {
        let Some(line) = self.lines.get_mut(quota.key()) else {
            return 0;
        };
        line.retain(|_, (_, until)| *until > now);
        match me.and_then(|me| line.get(me).map(|(arrival, _)| (*arrival, me))) {
            Some(mine) => line
                .iter()
                .filter(|(name, (arrival, _))| (*arrival, name.as_str()) < mine)
                .count(),
            None => line.len(),
        }
    }

    /// The first `n` callers in line (those that stopped asking dropped),
    /// `me` left out: the ones a freed slot is for.
    fn first_in_line(&mut self, quota: &Quota, n: usize, me: Option<&str>, now: i64) -> Vec<String> {
        let Some(line) = self.lines.get_mut(quota.key()) else {
            return Vec::new();
        };
        line.retain(|_, (_, until)| *until > now);
        let mut order: Vec<(i64, &String)> = line
            .iter()
            .filter(|(name, _)| Some(name.as_str()) != me)
            .map(|(name, (arrival, _))| (*arrival, name))
            .collect();
        order.sort_unstable();
        order.into_iter().take(n).map(|(_, name)| name.clone()).collect()
    }

    /// Puts `me` in the line (keeping its place if it was there), to ask
    /// again within [`super::WAITER_TTL`].
    fn join_line(&mut self, quota: &Quota, me: Option<&str>, now: i64) {
        let Some(me) = me else { return };
        let until = now + i64::try_from(super::WAITER_TTL.as_micros()).unwrap_or(i64::MAX / 2);
        let line = self.lines.entry(quota.key().to_string()).or_default();
        line.entry(me.to_string()).or_insert((now, until)).1 = until;
    }

    /// When one of `sets` is at its cap: how long until that set's first
    /// lease expires.
    fn full(&mut self, quota: &Quota, sets: &[LeaseSet], now: i64) -> Option<Duration> {
        sets.iter().find_map(|set| {
            let leases = self.leases(quota, &set.part, now);
            (leases.len() >= set.cap as usize)
                .then(|| ceil_ms(leases.values().min().copied().unwrap_or(now) - now))
        })
    }

    /// A slot in each of `sets` if each has one free, expiring the lease
    /// TTL after `from`.
    fn lease(&mut self, quota: &Quota, sets: &[LeaseSet], now: i64, from: i64) -> LeaseAttempt {
        let ttl = i64::try_from(quota.lease_ttl().as_micros()).unwrap_or(i64::MAX / 2);
        if let Some(retry_in) = self.full(quota, sets, now) {
            return LeaseAttempt::Full { retry_in };
        }
        self.next_lease += 1;
        let id = self.next_lease;
        for set in sets {
            self.leases(quota, &set.part, now).insert(id, from + ttl);
        }
        LeaseAttempt::Acquired(id)
    }

    /// Gives lease `id` back in every set; whether it was still held.
    fn give_back(&mut self, quota: &Quota, id: u64, now: i64) -> bool {
        let mut held = false;
        for set in quota.lease_sets() {
            held |= self.leases(quota, &set.part, now).remove(&id).is_some();
        }
        held
    }
}

/// The state key of one window of `quota`.
fn window_key(quota: &Quota, window: &super::Window) -> (String, String) {
    (quota.key().to_string(), window.name.clone())
}

impl Pacer for LocalPacer {
    /// The steps of `lua/acquire.lua`. There is no fenced lock in one process
    /// (the stream's file lock is the lock), so a fence is always held.
    async fn acquire(&self, quota: &Quota, ask: Ask<'_>) -> Result<Answer, PacerError> {
        let now = self.now_us();
        let mut state = self.state();
        let sets = quota.lease_sets();
        let account = &sets[0];
        let held = |state: &State| {
            let key = (quota.key().to_string(), account.part.clone());
            state.leases.get(&key).map_or(0, BTreeMap::len)
        };
        let before = held(&state);
        for id in ask.release {
            state.give_back(quota, *id, now);
        }
        // The slots this call freed (given back or expired) go to the
        // first callers in line: they are woken, as `acquire.lua` wakes
        // them, and ask again.
        let after = state.leases(quota, &account.part, now).len();
        let free = (account.cap as usize).saturating_sub(after);
        let woken = state.first_in_line(quota, before.saturating_sub(after).min(free), ask.waiter, now);
        for name in &woken {
            self.wakeups.wake(name);
        }
        if !ask.book {
            return Ok(Answer::Checked);
        }
        let ahead = state.ahead(quota, ask.waiter, now);
        let turned_away = match state.full(quota, &sets, now) {
            Some(retry_in) => Some(retry_in),
            None if ahead > 0 && after + ahead >= account.cap as usize => {
                // As `acquire.lua`: with no lease held, the callers ahead
                // were woken for the free slots, and this one waits its wake.
                let leases = state.leases(quota, &account.part, now);
                Some(match leases.values().min() {
                    Some(first) => ceil_ms(first - now),
                    None => super::WAITER_TTL,
                })
            }
            None => None,
        };
        if let Some(retry_in) = turned_away {
            state.join_line(quota, ask.waiter, now);
            return Ok(Answer::Full { retry_in });
        }
        Ok(match state.reserve(quota, now) {
            Reservation::Refused { wait } => Answer::Refused { wait },
            Reservation::Granted { wait, at_us } => match state.lease(quota, &sets, now, at_us) {
                LeaseAttempt::Acquired(lease) => {
                    if let (Some(line), Some(me)) = (state.lines.get_mut(quota.key()), ask.waiter) {
                        line.remove(me);
                    }
                    Answer::Granted { wait, at_us, lease }
                }
                LeaseAttempt::Full { retry_in } => Answer::Full { retry_in },
            },
        })
    }

    async fn reserve(&self, quota: &Quota) -> Result<Reservation, PacerError> {
        let now = self.now_us();
        Ok(self.state().reserve(quota, now))
    }

    async fn pause(&self, quota: &Quota, pause: Duration) -> Result<(), PacerError> {
        let until = self.now_us() + i64::try_from(pause.as_micros()).unwrap_or(i64::MAX / 2);
        let mut state = self.state();
        let current = state.pauses.entry(quota.key().to_string()).or_insert(0);
        *current = (*current).max(until);
        Ok(())
    }

    async fn spend_windows(&self, quota: &Quota) -> Result<(), PacerError> {
        let now = self.now_us();
        self.state().spend_windows(quota, now);
        Ok(())
    }

    async fn try_lease(&self, quota: &Quota) -> Result<LeaseAttempt, PacerError> {
        let now = self.now_us();
        // The account's cap only, as `lease.lua` takes it for the Redis pacer.
        let account = &quota.lease_sets()[..1];
        Ok(self.state().lease(quota, account, now, now))
    }

    async fn renew(&self, quota: &Quota, id: u64) -> Result<bool, PacerError> {
        let now = self.now_us();
        let ttl = i64::try_from(quota.lease_ttl().as_micros()).unwrap_or(i64::MAX / 2);
        let mut state = self.state();
        let mut all = true;
        for set in quota.lease_sets() {
            all &= state
                .leases(quota, &set.part, now)
                .get_mut(&id)
                .map(|expiry| *expiry = now + ttl)
                .is_some();
        }
        Ok(all)
    }

    async fn release(&self, quota: &Quota, id: u64) -> Result<bool, PacerError> {
        let now = self.now_us();
        Ok(self.state().give_back(quota, id, now))
    }

    async fn wait_turn(&self, _quota: &Quota, waiter: &str, retry_in: Duration) {
        self.wakeups.wait(waiter, retry_in).await;
    }
}

//! Waking a caller the concurrency cap turned away when a slot frees.
//!
//! A caller the cap turns away waits in the quota's line (see
//! [`super::Ask::waiter`]). The call that frees a slot names the first
//! callers in line it freed slots for, and each is woken here, by name:
//! it asks again then, once, instead of every few milliseconds. The
//! [`super::LocalPacer`] wakes its waiters itself; the
//! [`super::RedisPacer`]'s script pushes their names onto a list of their
//! process, which one task of that process pops (`redis_wake.rs`).
//!
//! A wake is a hint, never a grant: the woken caller still asks, and the
//! pacer decides. So a lost wake (a process that could not listen) costs
//! only time: every waiter also asks again by [`KEEP_ASKING`] to keep its
//! place in line, and at the instant the first held slot's lease expires.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

/// The longest a caller in line waits without asking again: well within
/// [`super::WAITER_TTL`], so it keeps its place while no slot frees.
pub const KEEP_ASKING: Duration = Duration::from_secs(2);

/// The shortest wait before asking again: a lease about to expire is not
/// asked about in a spin.
const AT_LEAST: Duration = Duration::from_millis(5);

/// The callers of one process waiting for a wake, by name; clones share
/// them.
#[derive(Clone, Default)]
pub(crate) struct Wakeups {
    waiting: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
}

impl Wakeups {
    fn waiting(&self) -> MutexGuard<'_, HashMap<String, Arc<Notify>>> {
        // An insert or remove cannot be left half done by a panic.
        self.waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Wakes the caller named `name`. A wake that comes before its caller
    /// waits (between the answer that turned it away and its wait) is kept
    /// for that wait.
    pub(crate) fn wake(&self, name: &str) {
        let mut waiting = self.waiting();
        // A kept wake of a caller that never waited again (it was granted
        // meanwhile) is dropped once no one holds it.
        if waiting.len() > 1024 {
            waiting.retain(|_, notify| Arc::strong_count(notify) > 1);
        }
        waiting
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(Notify::new()))
            .notify_one();
    }

    /// Enters `name`'s wait: from now on a wake of `name` is kept for it.
    pub(crate) fn enter<'a>(&'a self, name: &'a str) -> Entered<'a> {
        let notify = self
            .waiting()
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(Notify::new()))
            .clone();
        Entered {
            wakeups: self,
            name,
            notify,
        }
    }

    /// Waits until `name` is woken or `retry_in` has passed, whichever is
    /// first; `retry_in` is bounded to [5 ms, [`KEEP_ASKING`]].
    pub(crate) async fn wait(&self, name: &str, retry_in: Duration) {
        self.enter(name).wait(retry_in).await;
    }

    /// Whether some caller is in its wait now.
    pub(crate) fn any_waiting(&self) -> bool {
        self.waiting()
            .values()
            .any(|notify| Arc::strong_count(notify) > 1)
    }
}

/// A caller in its wait; dropped, it leaves (with the wake it used).
pub(crate) struct Entered<'a> {
    wakeups: &'a Wakeups,
    name: &'a str,
    notify: Arc<Notify>,
}

impl Entered<'_> {
    /// Waits until woken or `retry_in` has passed (see [`Wakeups::wait`]).
    pub(crate) async fn wait(self, retry_in: Duration) {
        let _ = tokio::time::timeout(retry_in.clamp(AT_LEAST, KEEP_ASKING), self.notify.notified()).await;
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        let mut waiting = self.wakeups.waiting();
        let mine = waiting
            .get(self.name)
            .is_some_and(|n| Arc::ptr_eq(n, &self.notify) && Arc::strong_count(n) == 2);
        if mine {
            waiting.remove(self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Wakeups;

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_wake_before_the_wait_is_kept_for_it() {
        let wakeups = Wakeups::default();
        wakeups.wake("a");
        let started = tokio::time::Instant::now();
        wakeups.wait("a", Duration::from_secs(1)).await;
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "the kept wake ended the wait at once"
        );
        wakeups.wait("a", Duration::from_secs(1)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(1), "a wake is used once");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_wait_is_bounded_by_keeping_its_place_in_line() {
        let wakeups = Wakeups::default();
        let started = tokio::time::Instant::now();
        wakeups.wait("a", Duration::from_secs(600)).await;
        assert_eq!(started.elapsed(), super::KEEP_ASKING);
        assert!(wakeups.waiting().is_empty(), "nothing is kept of a finished wait");
    }
}

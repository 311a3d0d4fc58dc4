//! The Redis pacer's wake-ups across processes.
//!
//! `acquire.lua` pushes the name of a caller a freed slot is for onto the
//! wake-up list of the caller's process, `<prefix>{<quota>}:wake:<process>`.
//! In each process, one task a list pops it (`BLPOP`) and wakes that
//! caller ([`Wakeups`]), who then asks again. The task runs while some
//! caller waits, on a connection of its own: a blocking pop would hold up
//! every other call on the pacer's shared one.
//!
//! A wake is a hint. Should this connection fail, the task logs it and
//! tries again after [`KEEP_ASKING`]; meanwhile the waiting callers still
//! ask at the first lease's expiry and to keep their place in line, as
//! `wake.rs` bounds every wait.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use super::redis_conn::{Conn, OpenError, Target};
use super::wake::{Wakeups, KEEP_ASKING};

/// The part of a quota's key before the process's name.
pub(crate) const LIST: &str = "wake:";

/// How long one pop blocks: between two, the task sees whether anyone
/// still waits.
const BLOCK_S: u64 = 1;

/// What the listeners of one pacer share; the pacer holds it, each task
/// only weakly, so a pacer dropped ends them.
pub(crate) struct Listeners {
    target: Target,
    endpoint: String,
    /// The pacer's bound on opening a connection.
    connect_timeout: Duration,
    /// The callers of this process in their wait.
    pub(crate) wakeups: Wakeups,
    /// The lists a task pops now.
    running: Mutex<HashSet<String>>,
}

impl Listeners {
    pub(crate) fn new(target: Target, endpoint: String, connect_timeout: Duration) -> Listeners {
        Listeners {
            target,
            endpoint,
            connect_timeout,
            wakeups: Wakeups::default(),
            running: Mutex::new(HashSet::new()),
        }
    }

    fn running(&self) -> MutexGuard<'_, HashSet<String>> {
        // An insert or remove cannot be left half done by a panic.
        self.running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts the task popping `list` unless one runs. The caller has
    /// entered its wait ([`Wakeups::enter`]) first: a task that finds
    /// nobody waiting ends under the same lock this takes, so no wait is
    /// left without one.
    pub(crate) fn ensure(self: &Arc<Self>, list: String) {
        if !self.running().insert(list.clone()) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(listen(Arc::downgrade(self), list))),
            Err(_) => drop(self.running().remove(&list)),
        }
    }

    /// Whether the task of `list` should end (nobody waits); if so, it is
    /// marked ended in the same step.
    fn done(&self, list: &str) -> bool {
        let mut running = self.running();
        if self.wakeups.any_waiting() {
            return false;
        }
        running.remove(list);
        true
    }
}

/// Pops `list` while a caller waits; ends when none does or the pacer is
/// gone.
async fn listen(listeners: Weak<Listeners>, list: String) {
    let mut conn: Option<Conn> = None;
    loop {
        let Some(shared) = listeners.upgrade() else { return };
        if shared.done(&list) {
            return;
        }
        let mut open = match conn.take() {
            Some(open) => open,
            None => {
                // A pop blocks for BLOCK_S: its answer may take that long.
                let timeout = Duration::from_secs(BLOCK_S) + shared.connect_timeout;
                match Conn::open(&shared.target, 1, shared.connect_timeout, timeout).await {
                    Ok(open) => open,
                    Err(OpenError::Refused(detail) | OpenError::Failed(detail)) => {
                        tracing::warn!(endpoint = %shared.endpoint, error = %detail, "the wake-up connection failed; waiting callers ask again on their own");
                        drop(shared);
                        tokio::time::sleep(KEEP_ASKING).await;
                        continue;
                    }
                }
            }
        };
        let (wakeups, endpoint) = (shared.wakeups.clone(), shared.endpoint.clone());
        drop(shared);
        let popped: redis::RedisResult<Option<(String, String)>> = redis::cmd("BLPOP")
            .arg(&list)
            .arg(BLOCK_S)
            .query_async(&mut open)
            .await;
        match popped {
            Ok(popped) => {
                if let Some((_, name)) = popped {
                    wakeups.wake(&name);
                }
                conn = Some(open);
            }
            Err(e) => {
                tracing::warn!(endpoint = %endpoint, error = %e, "the wake-up pop failed; waiting callers ask again on their own");
                tokio::time::sleep(KEEP_ASKING).await;
            }
        }
    }
}

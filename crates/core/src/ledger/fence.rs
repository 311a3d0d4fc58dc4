//! The cross-host run lock of a stream (with `--redis`): a lease with a
//! TTL, renewed while the run works, and a fencing token proved right
//! before every cursor commit, so a holder that lost the lock (a paused
//! process, an expired lease, a takeover) can never move the cursor.
//!
//! The proof costs no round trip of its own: it rides in the call that
//! gives the page's concurrency slot back and books the next page
//! ([`quota_pacer::Limiter::hand_over`]), made after the page is landed
//! and audited and before the cursor moves. The cursor is a local file,
//! which cannot check a token itself; the prove-then-rename leaves a window
//! of well under a millisecond, against a lease of 60 s renewed every 20 s.
//!
//! Each proof also extends the lease, so the renewer only speaks when no
//! proof did for a third of the TTL (a stream waiting its turn for the
//! concurrency cap): a stream that pages costs no renewal calls, which at
//! hundreds of streams were a third of all the calls.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::store::StreamLocked;
use crate::store::{LockState, RunLockName};
use quota_pacer::{Fence, PacerError, RedisPacer};

const TTL: Duration = Duration::from_secs(60);

/// Why the fenced lock stopped a run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FenceError {
    #[error(transparent)]
    Locked(#[from] StreamLocked),
    #[error(transparent)]
    Pacer(#[from] PacerError),
}

/// A held cross-host run lock.
pub(crate) struct FencedLock {
    pacer: RedisPacer,
    name: RunLockName,
    fence: u64,
    lost: Arc<AtomicBool>,
    /// When the lease was last extended, by the renewer or by a proof.
    extended: Arc<Mutex<Instant>>,
    renewer: JoinHandle<()>,
    /// The holder whose lock was taken over (a dead pid of this host).
    taken_over_from: Option<String>,
}

/// The holder part of a lock value `<fence>|host H, pid P, run R`.
fn holder_of(value: &str) -> &str {
    value.split_once('|').map_or(value, |(_, h)| h)
}

/// True when `holder` names this host and a pid that no longer runs: a run
/// killed with SIGKILL, whose lease would otherwise block the stream for
/// the rest of its TTL. A pid that runs (or cannot be asked) is alive.
fn dead_on_this_host(holder: &str) -> bool {
    let field = |name: &str| {
        holder
            .split(", ")
            .find_map(|part| part.strip_prefix(name))
            .map(str::trim)
    };
    let (Some(host), Some(pid)) = (field("host "), field("pid ")) else {
        return false;
    };
    let Ok(pid) = pid.parse::<libc::pid_t>() else {
        return false;
    };
    if host != crate::host::name() || pid <= 0 || pid == std::process::id() as libc::pid_t {
        return false;
    }
    // SAFETY: kill(2) with signal 0 sends nothing; it only asks whether the
    // process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

impl FencedLock {
    /// Takes the lock of `stream`, paced by the quota `quota_key`.
    pub(crate) async fn acquire(
        pacer: &RedisPacer,
        quota_key: &str,
        stream: &str,
        holder: &str,
    ) -> Result<FencedLock, FenceError> {
        let name = &RunLockName::new(quota_key, stream);
        let locked = |current: &str| StreamLocked {
            stream: stream.to_string(),
            holder: format!("{}, via Redis", holder_of(current)),
        };
        let (fence, taken_over_from) = match name.acquire(pacer, holder, TTL).await? {
            Ok(fence) => (fence, None),
            Err(current) if dead_on_this_host(holder_of(&current)) => {
                match name.take_over(pacer, &current, holder, TTL).await? {
                    Ok(fence) => (fence, Some(holder_of(&current).to_string())),
                    Err(now) => return Err(locked(&now).into()),
                }
            }
            Err(current) => return Err(locked(&current).into()),
        };
        let lost = Arc::new(AtomicBool::new(false));
        let extended = Arc::new(Mutex::new(Instant::now()));
        let renewer = {
            let (pacer, name, lost) = (pacer.clone(), name.clone(), lost.clone());
            let extended = extended.clone();
            tokio::spawn(async move {
                loop {
                    let due = at(&extended) + TTL / 3;
                    if Instant::now() < due {
                        tokio::time::sleep_until(due).await;
                        continue;
                    }
                    match name.check(&pacer, fence, TTL).await {
                        Ok(LockState::Ours) => set(&extended),
                        Ok(_) => {
                            tracing::error!(stream = %name.stream(), fence, "the run lock was lost; no further page will be committed");
                            lost.store(true, Ordering::SeqCst);
                            return;
                        }
                        Err(e) => {
                            tracing::warn!(stream = %name.stream(), error = %e, "run lock renewal failed; will retry");
                            // Again a third of the TTL later, as after a
                            // renewal (the lease outlives two failures).
                            tokio::time::sleep(TTL / 3).await;
                        }
                    }
                }
            })
        };
        Ok(FencedLock {
            pacer: pacer.clone(),
            name: name.clone(),
            fence,
            lost,
            extended,
            renewer,
            taken_over_from,
        })
    }

    pub(crate) fn fence(&self) -> u64 {
        self.fence
    }

    /// The previous holder, when this lock was taken over from a dead pid.
    pub(crate) fn taken_over_from(&self) -> Option<&str> {
        self.taken_over_from.as_deref()
    }

    /// What a call must prove for this run to keep the lock.
    pub(crate) fn run_fence(&self) -> Fence {
        Fence {
            lock_key: self.name.lock_key().to_string(),
            fence: self.fence,
            ttl: TTL,
        }
    }

    /// True once the renewer or a proof found the lock taken: no call can
    /// make it ours again.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Who holds the lock now, for the message of a run that lost it.
    pub(crate) async fn now_held(&self) -> String {
        match self.name.check(&self.pacer, self.fence, TTL).await {
            Ok(state) => state.to_string(),
            Err(e) => format!("who holds it now could not be read ({e})"),
        }
    }

    /// Records that a proof held (and so extended the lease by the TTL):
    /// the renewer waits a third of the TTL from now.
    pub(crate) fn mark_proven(&self) {
        set(&self.extended);
    }

    /// Records that a proof failed.
    pub(crate) fn mark_lost(&self) {
        self.lost.store(true, Ordering::SeqCst);
    }

    pub(crate) async fn release(self) {
        self.renewer.abort();
        if let Err(e) = self.name.release(&self.pacer, self.fence).await {
            tracing::warn!(stream = %self.name.stream(), error = %e, "run lock release failed; it expires by its TTL");
        }
    }
}

/// When the lease was last extended.
fn at(extended: &Mutex<Instant>) -> Instant {
    // An Instant is stored whole: a panic cannot leave it half written.
    *extended.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The lease was extended now.
fn set(extended: &Mutex<Instant>) {
    *extended.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Instant::now();
}

impl Drop for FencedLock {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

//! SIGINT / SIGTERM: stop at the next safe point.
//!
//! The first signal sets a flag the page loop checks between pages and
//! while it waits (pacing, Retry-After, backoff); an in-flight page is
//! finished and committed, or abandoned uncommitted if its request had not
//! been answered. The run then writes `run_interrupted`, releases its lock
//! and leases, and exits 75. A second signal exits at once with 130: safe,
//! because every commit is atomic and the cursor is written last.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Exit code of the second signal (128 + SIGINT, as shells report it).
pub(crate) const ABORT_EXIT_CODE: i32 = 130;

#[derive(Clone, Default)]
pub struct Interrupt {
    flag: Arc<AtomicBool>,
    notify: Arc<Notify>,
}

impl std::fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Interrupt({})", self.requested())
    }
}

impl Interrupt {
    /// True once a stop was requested.
    pub fn requested(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Requests a stop (what the first signal does).
    pub fn trigger(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Resolves once a stop is requested.
    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.requested() {
                return;
            }
            notified.await;
        }
    }

    /// Installs the SIGINT / SIGTERM handlers on the current runtime.
    pub fn install() -> std::io::Result<Interrupt> {
        use tokio::signal::unix::{signal, SignalKind};
        let interrupt = Interrupt::default();
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let handle = interrupt.clone();
        tokio::spawn(async move {
            let mut seen = 0;
            loop {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
                seen += 1;
                if seen == 1 {
                    tracing::warn!("stop requested: finishing the page in flight, then stopping (signal again to abort at once)");
                    handle.trigger();
                } else {
                    tracing::error!("aborting at once; committed state is intact");
                    std::process::exit(ABORT_EXIT_CODE);
                }
            }
        });
        Ok(interrupt)
    }
}

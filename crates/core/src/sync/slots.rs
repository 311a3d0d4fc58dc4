//! A stream's place in its quota: the permit of the request in flight, the
//! next page's slot booked ahead, and (with Redis) the fenced cross-host
//! run lock that every commit proves in the same pacer call that hands the
//! page's slot on (invariant 4: one call a request).

use super::request::Request;
use super::stream::Stream;
use super::{FencedLock, Spent, StreamJob, SyncError};
use quota_pacer::{AcquireError, Booking, HandOver, Pacer, Permit};

pub(super) struct Slots<P: Pacer> {
    /// The permit of the request in flight, until its page is committed
    /// (which hands its slot on) or the attempt ends.
    holding: Option<Permit<P>>,
    /// The next page's slot and token, booked by the call that proved the
    /// run lock for the previous page's commit.
    booked: Option<Booking<P>>,
    fenced: Option<FencedLock>,
}

impl<P: Pacer> Slots<P> {
    pub(super) fn new(fenced: Option<FencedLock>) -> Slots<P> {
        Slots {
            holding: None,
            booked: None,
            fenced,
        }
    }

    /// Holds a slot for the request `req`: the one booked by the previous
    /// page's commit, or one asked for now.
    pub(super) async fn hold(
        &mut self,
        stream: &mut Stream<'_, P>,
        req: &Request<'_>,
    ) -> Result<(), SyncError> {
        let permit = match self.booked.take() {
            Some(booking) => ready(stream, booking).await?,
            None => permit(stream, req).await?,
        };
        self.holding = Some(permit);
        vendor_gate(stream, req).await
    }

    /// Gives the held slot back (the attempt did not commit, or it did and
    /// the commit already handed the slot on).
    pub(super) fn release_held(&mut self) {
        if let Some(permit) = self.holding.take() {
            permit.release();
        }
    }

    /// Gives a slot booked ahead back: a login must not wait for a slot
    /// this stream itself holds.
    pub(super) fn drop_booking(&mut self) {
        self.booked = None;
    }

    /// With a cross-host run lock: proves it is still this run's, right
    /// before the cursor moves, in the call that gives the page's slot
    /// back and (with `book_next`) books the next page.
    pub(super) async fn prove_lock(
        &mut self,
        job: &StreamJob<P>,
        stream: &str,
        book_next: bool,
    ) -> Result<(), SyncError> {
        let Some(fenced) = &self.fenced else {
            return Ok(());
        };
        let lost = |now: String| SyncError::LockLost {
            stream: stream.to_string(),
            fence: fenced.fence(),
            now,
        };
        if fenced.is_lost() {
            return Err(lost(fenced.now_held().await));
        }
        let current = self.holding.take();
        let handed = job
            .limiter
            .hand_over(current, &fenced.run_fence(), book_next)
            .await?;
        match handed {
            HandOver::Held(booked) => {
                fenced.mark_proven();
                self.booked = booked;
                Ok(())
            }
            HandOver::Lost => {
                fenced.mark_lost();
                Err(lost(fenced.now_held().await))
            }
        }
    }

    /// The end of the stream: a booking the loop did not use goes back with
    /// any other lease this stream gave back, in one call, before the run
    /// lock is let go.
    pub(super) async fn finish(mut self, job: &StreamJob<P>, stream: &str) {
        self.booked = None;
        self.holding = None;
        if let Err(e) = job.limiter.flush().await {
            tracing::warn!(stream, error = %e, "giving back concurrency leases failed; they expire by their TTL");
        }
        if let Some(fenced) = self.fenced.take() {
            fenced.release().await;
        }
    }
}

/// A slot in the quota, or why there is none: a stop request, or a slot
/// further away than `max_wait_s` (audited, exit 75).
pub(super) async fn permit<P: Pacer>(
    stream: &mut Stream<'_, P>,
    req: &Request<'_>,
) -> Result<Permit<P>, SyncError> {
    let Request {
        url, cursor, attempt, ..
    } = *req;
    let job = stream.job;
    let acquired = tokio::select! {
        acquired = job.limiter.acquire() => acquired,
        _ = job.options.interrupt.wait() => return Err(SyncError::Interrupted { stream: stream.name.clone() }),
    };
    match acquired {
        Ok(p) => Ok(p),
        Err(AcquireError::WaitTooLong {
            wait, horizon, cap, ..
        }) => {
            let reason = match cap {
                // Every slot in flight for longer than max_wait_s: the
                // concurrency cap, not the rate, is what waited.
                Some(cap) => format!(
                    "all {cap} of the quota's concurrent slots (max_concurrency) stayed taken for {:.3} s, \
                     beyond max_wait_s ({} s)",
                    wait.as_secs_f64(),
                    horizon.as_secs_f64()
                ),
                None => format!(
                    "the quota's next slot is {:.3} s away, beyond max_wait_s ({} s)",
                    wait.as_secs_f64(),
                    horizon.as_secs_f64()
                ),
            };
            stream.exhausted(url, attempt, reason, cursor, Spent::Quota).await
        }
        Err(AcquireError::Pacer(e)) => Err(e.into()),
        // The stream's quota was formed before the run started.
        Err(AcquireError::Quota(e)) => Err(stream.rejected(e.to_string())),
    }
}

/// With the vendor's burst allowance at the floor (Vault's): the host-wide
/// gate's token, slept for (`Stream::vendor_burst`); past `max_wait_s`,
/// exhaustion (75).
async fn vendor_gate<P: Pacer>(stream: &mut Stream<'_, P>, req: &Request<'_>) -> Result<(), SyncError> {
    let Some(gate) = stream.vendor_gate.clone() else {
        return Ok(());
    };
    let job = stream.job;
    match job.limiter.reserve_in(&gate).await? {
        quota_pacer::Reservation::Granted { wait, .. } => {
            if !wait.is_zero() {
                stream.report.waits.push(super::Wait {
                    kind: super::WaitKind::VendorBurst,
                    reason: "vendor burst floor".into(),
                    seconds: wait.as_secs_f64(),
                });
                stream
                    .sleep(wait, "the vendor's burst allowance is at its floor")
                    .await?;
            }
            Ok(())
        }
        quota_pacer::Reservation::Refused { wait } => {
            let reason = format!(
                "the vendor's burst allowance is at the floor and the host's next slot is {:.3} s away, beyond \
                 max_wait_s",
                wait.as_secs_f64()
            );
            stream
                .exhausted(req.url, req.attempt, reason, req.cursor, Spent::Quota)
                .await
        }
    }
}

/// The booked slot's instant, unless a stop is requested first.
async fn ready<P: Pacer>(stream: &Stream<'_, P>, booking: Booking<P>) -> Result<Permit<P>, SyncError> {
    let until = tokio::time::Instant::now() + booking.ready_in();
    let why = "the quota's next slot (a shared pause after a throttle, or the rate)";
    let ready = async {
        tokio::select! {
            permit = booking.ready() => Ok(permit),
            _ = stream.job.options.interrupt.wait() => Err(SyncError::Interrupted { stream: stream.name.clone() }),
        }
    };
    stream.showing_wait(why, until, ready).await
}

//! The simulator's own quotas, counted on arrivals as a vendor's gateway
//! counts them: a token bucket (`--quota-rate`, `--quota-burst`) and a fixed
//! window (Castor's: "600 calls per 10 minutes; if the first request
//! happens at 09:00, then the rate is set until 09:10", Castor helpdesk,
//! "Castor EDC/CDMS API rate limiting").

use std::time::{Duration, SystemTime};

/// The simulator's own quota: a token bucket on arrival times, as a vendor
/// gateway keeps one.
///
/// It counts time on the host's wall clock, the clock a vendor's gateway
/// keeps and the one Redis's `TIME` reads (the shared pacer's clock): on
/// one host the two then agree. Counted on the monotonic clock instead, it
/// disagreed with Redis by the rate at which the wall clock was being
/// slewed (1,700 ppm measured on this project's CI machine), which over a
/// few seconds at a quota equal to the policy is one request too many: a
/// difference of clocks, not of pacing. (Between two hosts the same
/// difference is real; docs/pacer.md says what margin covers it.)
pub struct ServerBucket {
    interval: Duration,
    tolerance: Duration,
    tat: SystemTime,
}

impl ServerBucket {
    /// `rate` per second with `burst`, admitting arrivals up to
    /// `arrival_tolerance` later than an exact pacer would send them.
    pub fn new(rate: f64, burst: u32, arrival_tolerance: Duration) -> ServerBucket {
        let interval = Duration::from_secs_f64(1.0 / rate);
        ServerBucket {
            interval,
            tolerance: interval * burst.saturating_sub(1) + arrival_tolerance,
            tat: SystemTime::now(),
        }
    }

    /// `Ok` if a request arriving now conforms, else how long until one would.
    pub fn admit(&mut self, now: SystemTime) -> Result<(), Duration> {
        let allowed_at = self.tat.checked_sub(self.tolerance).unwrap_or(now);
        if let Ok(wait) = allowed_at.duration_since(now) {
            if !wait.is_zero() {
                return Err(wait);
            }
        }
        self.tat = self.tat.max(now) + self.interval;
        Ok(())
    }
}

/// A fixed window on arrivals: the first request after a window ended
/// opens one of `length`, in which at most `calls` are admitted.
pub struct ServerWindow {
    calls: u32,
    length: Duration,
    start: Option<SystemTime>,
    count: u32,
}

impl ServerWindow {
    /// `calls` per window of `length`.
    pub fn new(calls: u32, length: Duration) -> ServerWindow {
        ServerWindow {
            calls,
            length,
            start: None,
            count: 0,
        }
    }

    /// `Ok` if a request arriving now fits the window, else how long until
    /// the window ends.
    pub fn admit(&mut self, now: SystemTime) -> Result<(), Duration> {
        let open = self
            .start
            .filter(|s| now.duration_since(*s).is_ok_and(|d| d < self.length));
        match open {
            Some(start) if self.count >= self.calls => {
                Err((start + self.length).duration_since(now).unwrap_or_default())
            }
            Some(_) => {
                self.count += 1;
                Ok(())
            }
            None => {
                self.start = Some(now);
                self.count = 1;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ServerBucket, ServerWindow};
    use std::time::{Duration, SystemTime};

    /// 6 arrivals in 0.294 s at 10/s with burst 3: refused by an exact
    /// gateway, admitted by one allowing 50 ms of transit; a seventh is
    /// refused by both.
    #[test]
    fn the_arrival_tolerance_admits_a_late_arrival_and_no_extra_request() {
        let at = |t0: SystemTime, ms: u64| t0 + Duration::from_millis(ms);
        let arrivals = [0, 0, 0, 100, 200, 294, 294];
        let admitted = |tolerance: Duration| {
            let mut bucket = ServerBucket::new(10.0, 3, tolerance);
            let t0 = bucket.tat;
            arrivals
                .iter()
                .map(|ms| bucket.admit(at(t0, *ms)).is_ok())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            admitted(Duration::ZERO),
            [true, true, true, true, true, false, false]
        );
        assert_eq!(
            admitted(Duration::from_millis(50)),
            [true, true, true, true, true, true, false]
        );
    }

    #[test]
    fn a_window_opens_at_the_first_call_and_admits_its_calls() {
        let t0 = SystemTime::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut w = ServerWindow::new(2, Duration::from_secs(10));
        assert!(w.admit(at(0)).is_ok());
        assert!(w.admit(at(5000)).is_ok());
        assert_eq!(w.admit(at(6000)), Err(Duration::from_secs(4)));
        // The next window opens at the first call after the end.
        assert!(w.admit(at(12_000)).is_ok());
        assert!(w.admit(at(21_999)).is_ok());
        assert!(w.admit(at(21_999)).is_err());
    }
}

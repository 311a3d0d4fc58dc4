//! The token-bucket arithmetic (GCRA, "virtual scheduling"), in Rust.
//!
//! This is the twin of `lua/gcra.lua`: the [`LocalPacer`] runs it under a
//! mutex with the process's monotonic clock, the Redis pacer runs the Lua
//! with the server's clock. Both answer the same question the same way, so
//! one test suite covers both. Times are integer microseconds.
//!
//! [`LocalPacer`]: super::LocalPacer

use super::Rate;

/// One gate's shape in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateShape {
    /// Time to refill one token.
    pub interval_us: f64,
    /// How far ahead of its TAT a request may go:
    /// (burst - 1) * interval - margin. May be negative (burst 1 with a
    /// margin: requests are spaced interval + margin apart).
    pub tolerance_us: f64,
}

impl GateShape {
    /// The shape of `rate`, keeping `margin` of slack against a bucket of
    /// the same shape that counts *arrivals* (the vendor's): if each
    /// request arrives between d and d + margin after its booked instant,
    /// the arrivals conform to `rate` exactly.
    pub fn new(rate: Rate, margin: std::time::Duration) -> GateShape {
        let interval_us = 1_000_000.0 / rate.per_sec();
        let tolerance_us = f64::from(rate.burst() - 1) * interval_us - margin.as_micros() as f64;
        GateShape {
            interval_us,
            tolerance_us,
        }
    }
}

impl From<Rate> for GateShape {
    fn from(rate: Rate) -> Self {
        GateShape::new(rate, std::time::Duration::ZERO)
    }
}

/// The answer to one reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Within the horizon: booked.
    pub granted: bool,
    /// When the request may go, in the clock's microseconds.
    pub at_us: i64,
    /// `at_us - now`, never negative.
    pub wait_us: i64,
}

/// Reserves one token in every gate or none. `tats` holds each gate's TAT
/// (0 for a fresh gate) and is updated only when the reservation is granted.
pub fn reserve(
    now_us: i64,
    pause_until_us: i64,
    gates: &[(GateShape, &mut i64)],
    horizon_us: i64,
) -> Decision {
    let mut at = now_us.max(pause_until_us) as f64;
    for (shape, tat) in gates {
        at = at.max(**tat as f64 - shape.tolerance_us);
    }
    let at_us = at.ceil() as i64;
    let wait_us = at_us - now_us;
    if wait_us > horizon_us {
        return Decision {
            granted: false,
            at_us,
            wait_us,
        };
    }
    Decision {
        granted: true,
        at_us,
        wait_us,
    }
}

/// Applies a granted decision to the gates: TAT = max(TAT, at) + interval,
/// rounded up so rounding can only slow pacing down.
pub fn commit(decision: &Decision, gates: &mut [(GateShape, &mut i64)]) {
    for (shape, tat) in gates.iter_mut() {
        let base = (**tat).max(decision.at_us) as f64;
        **tat = (base + shape.interval_us).ceil() as i64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(rate: f64, burst: u32) -> GateShape {
        Rate::new(rate, burst).unwrap().into()
    }

    #[test]
    fn burst_then_one_per_interval() {
        let s = shape(10.0, 3);
        let mut tat = 0i64;
        let now = 1_000_000;
        let mut waits = Vec::new();
        for _ in 0..6 {
            let mut gates = [(s, &mut tat)];
            let d = reserve(now, 0, &gates, i64::MAX);
            commit(&d, &mut gates);
            waits.push(d.wait_us);
        }
        assert_eq!(waits, vec![0, 0, 0, 100_000, 200_000, 300_000]);
    }

    #[test]
    fn a_margin_absorbs_arrival_jitter() {
        // Burst 1 at 10/s with a 10 ms margin: bookings 110 ms apart, so
        // arrivals delayed by anything between 0 and 10 ms stay >= 100 ms apart.
        let s = GateShape::new(Rate::new(10.0, 1).unwrap(), std::time::Duration::from_millis(10));
        let mut tat = 0i64;
        let mut at = Vec::new();
        for _ in 0..3 {
            let mut gates = [(s, &mut tat)];
            let d = reserve(1_000_000, 0, &gates, i64::MAX);
            commit(&d, &mut gates);
            at.push(d.at_us);
        }
        assert_eq!((at[1] - at[0], at[2] - at[1]), (110_000, 100_000 + 10_000));
    }

    #[test]
    fn a_refusal_changes_nothing() {
        let s = shape(1.0, 1);
        let mut tat = 5_000_000i64;
        let gates = [(s, &mut tat)];
        let d = reserve(1_000_000, 0, &gates, 1_000_000);
        assert!(!d.granted);
        assert_eq!(d.wait_us, 4_000_000);
        assert_eq!(tat, 5_000_000);
    }

    #[test]
    fn the_tightest_gate_governs_and_the_pause_is_a_floor() {
        let (account, study) = (shape(100.0, 10), shape(1.0, 1));
        let (mut a, mut b) = (0i64, 0i64);
        let now = 10_000_000;
        let mut gates = [(account, &mut a), (study, &mut b)];
        let first = reserve(now, 0, &gates, i64::MAX);
        commit(&first, &mut gates);
        let second = reserve(now, 0, &gates, i64::MAX);
        assert_eq!(second.wait_us, 1_000_000, "the 1/s study gate sets the wait");
        let paused = reserve(now, now + 7_000_000, &gates, i64::MAX);
        assert_eq!(paused.wait_us, 7_000_000);
    }
}

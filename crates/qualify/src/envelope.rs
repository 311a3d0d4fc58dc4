//! The allowed envelope of a token bucket: in any window of length t, at
//! most `burst + rate * t` grants. Used by the benchmark and the tests.

/// How much later than its grant a request may arrive at the vendor and
/// still count as paced (URS-003): transit and scheduling on a loaded
/// machine, where the OQ observes requests. Half an interval at the OQ's
/// 10/s; one request too many still exceeds it by half a request.
pub const ARRIVAL_TOLERANCE_S: f64 = 0.05;

/// How many grants exceed the envelope, and by how much at worst.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EnvelopeCheck {
    /// Grants `j` for which some window ending at `j` holds too many.
    pub violations: usize,
    /// The largest excess seen (grants above `burst + rate * t`), or the
    /// smallest headroom as a negative number when there is no violation.
    pub worst_excess: f64,
    /// The window of that excess: what a reviewer is shown.
    pub worst: Window,
}

/// A window that starts and ends on a grant, and how many it holds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Window {
    pub start_us: i64,
    pub end_us: i64,
    /// Grants before the window (its first grant is number `before + 1`).
    pub before: usize,
    pub count: usize,
    /// The most the envelope allows in it.
    pub allowed: f64,
}

impl Window {
    /// Its length in seconds.
    pub fn seconds(&self) -> f64 {
        (self.end_us - self.start_us) as f64 / 1e6
    }
}

/// Checks sorted grant times (microseconds) against the envelope.
///
/// Every window that starts and ends on a grant is checked (that is where
/// the count is largest), so this is exact, and O(n²): fine for the few
/// thousand grants of a benchmark or test.
pub fn check(sorted_us: &[i64], rate_per_sec: f64, burst: u32) -> EnvelopeCheck {
    check_within(sorted_us, rate_per_sec, burst, 0.0)
}

/// [`check`] for times observed at the receiving end, where each request
/// may arrive up to `tolerance_s` later than it was granted (transit and
/// scheduling): a window of length t may hold `burst + rate * (t +
/// tolerance_s)`. Two requests granted exactly one interval apart can
/// arrive closer together when the first is delayed; a pacer that grants
/// one too many still shows, as a whole request above the line.
pub fn check_within(sorted_us: &[i64], rate_per_sec: f64, burst: u32, tolerance_s: f64) -> EnvelopeCheck {
    // A microsecond of slack: booked times are rounded up to whole µs.
    const SLACK: f64 = 1e-6;
    let mut result = EnvelopeCheck {
        violations: 0,
        worst_excess: f64::NEG_INFINITY,
        worst: Window::default(),
    };
    for j in 0..sorted_us.len() {
        let mut violated = false;
        for i in 0..=j {
            let t = (sorted_us[j] - sorted_us[i]) as f64 / 1e6;
            let allowed = f64::from(burst) + rate_per_sec * (t + tolerance_s);
            let count = j - i + 1;
            let excess = count as f64 - allowed - SLACK;
            if excess > result.worst_excess {
                result.worst_excess = excess;
                result.worst = Window {
                    start_us: sorted_us[i],
                    end_us: sorted_us[j],
                    before: i,
                    count,
                    allowed,
                };
            }
            violated |= excess > 0.0;
        }
        result.violations += usize::from(violated);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::{check, check_within};

    #[test]
    fn a_perfect_schedule_has_no_violation() {
        let mut times: Vec<i64> = vec![0; 5];
        times.extend((1..=20).map(|k| k * 100_000));
        assert_eq!(check(&times, 10.0, 5).violations, 0);
    }

    #[test]
    fn one_early_grant_is_a_violation() {
        let mut times: Vec<i64> = vec![0; 5];
        times.extend((1..=20).map(|k| k * 100_000));
        times[10] -= 1_000;
        times.sort();
        assert!(check(&times, 10.0, 5).violations >= 1);
        assert_eq!(
            check(&[0; 6], 10.0, 5).violations,
            1,
            "six at once with burst five"
        );
    }

    #[test]
    fn arrivals_get_the_stated_tolerance_and_the_worst_window_is_named() {
        // Seen under load: 6 arrivals in 0.294 s at 10/s, burst 3 (5.94
        // allowed without a tolerance, 6.44 with 50 ms).
        let mut times = vec![0, 0, 0];
        times.extend([100_000, 200_000, 294_000]);
        let exact = check(&times, 10.0, 3);
        assert_eq!(exact.violations, 1);
        assert_eq!((exact.worst.count, exact.worst.end_us), (6, 294_000));
        assert!((exact.worst.allowed - 5.94).abs() < 1e-9);
        let within = check_within(&times, 10.0, 3, 0.05);
        assert_eq!(within.violations, 0);
        assert!((within.worst.allowed - 6.44).abs() < 1e-9, "{within:?}");
        // One request too many is still a violation with the tolerance.
        times.push(294_000);
        assert_eq!(check_within(&times, 10.0, 3, 0.05).violations, 1);
    }
}

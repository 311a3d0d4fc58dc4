//! The allowed envelope of a token bucket: in any window of length t, at
//! most `burst + rate * t` grants. Used by the benchmark and the tests.

/// How many grants exceed the envelope, and by how much at worst.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EnvelopeCheck {
    /// Grants `j` for which some window ending at `j` holds too many.
    pub violations: usize,
    /// The largest excess seen (grants above `burst + rate * t`), or the
    /// smallest headroom as a negative number when there is no violation.
    pub worst_excess: f64,
}

/// Checks sorted grant times (microseconds) against the envelope.
///
/// Every window that starts and ends on a grant is checked (that is where
/// the count is largest), so this is exact, and O(n²): fine for the few
/// thousand grants of a benchmark or test.
pub fn check(sorted_us: &[i64], rate_per_sec: f64, burst: u32) -> EnvelopeCheck {
    // A microsecond of slack: booked times are rounded up to whole µs.
    const SLACK: f64 = 1e-6;
    let mut result = EnvelopeCheck {
        violations: 0,
        worst_excess: f64::NEG_INFINITY,
    };
    for j in 0..sorted_us.len() {
        let mut violated = false;
        for i in 0..=j {
            let t = (sorted_us[j] - sorted_us[i]) as f64 / 1e6;
            let excess = (j - i + 1) as f64 - (f64::from(burst) + rate_per_sec * t) - SLACK;
            result.worst_excess = result.worst_excess.max(excess);
            violated |= excess > 0.0;
        }
        result.violations += usize::from(violated);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::check;

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
}

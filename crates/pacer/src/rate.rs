//! The shape of a token bucket.

use std::time::Duration;

/// A token-bucket shape: a positive, finite refill rate and a whole-token
/// capacity of at least one.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Rate {
    sustained_rate_per_sec: f64,
    burst_capacity: u32,
}

impl Rate {
    /// `None` unless `per_sec` is finite and > 0 and `burst` >= 1.
    pub fn new(per_sec: f64, burst: u32) -> Option<Rate> {
        (per_sec.is_finite() && per_sec > 0.0 && burst >= 1).then_some(Rate {
            sustained_rate_per_sec: per_sec,
            burst_capacity: burst,
        })
    }

    /// Tokens added per second.
    pub fn per_sec(&self) -> f64 {
        self.sustained_rate_per_sec
    }

    /// Tokens the bucket holds when full: the burst allowed at once.
    pub fn burst(&self) -> u32 {
        self.burst_capacity
    }

    /// Time to refill one token.
    pub fn interval(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.sustained_rate_per_sec)
    }
}

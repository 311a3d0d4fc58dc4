//! Benchmark programs: they measure and print figures; tests never time.

pub mod envelope;
pub mod pacer;
pub mod soak;
pub mod startup;
pub mod sync;

//! Benchmark programs: they measure and print figures; tests never time.

pub mod bare_get;
pub mod commit_bytes;
pub mod fanout;
pub mod harness;
pub mod hosts;
pub mod one_pass;
pub mod pacer;
pub mod peers;
pub mod phase;
pub mod side_by_side;
pub mod soak;
pub mod startup;
pub mod state;
pub mod sync;

//! edc-sync's benchmark programs (the `edc-sync-bench` binary): they run
//! the shipped `edc-sync` and print figures against their floors; tests
//! never time. Nothing of the product depends on this crate.

pub mod bare_get;
pub mod cli;
pub mod commit_bytes;
pub mod fanout;
pub mod harness;
pub mod hosts;
pub mod large_page;
pub mod one_pass;
pub mod pacer;
pub mod peers;
pub mod phase;
pub mod scale;
pub mod side_by_side;
pub mod soak;
pub mod startup;
pub mod state;
pub mod streams;
pub mod sync;
pub mod verify;

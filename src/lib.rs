//! edc-sync: pulls clinical-trial data deltas out of EDC systems and lands
//! them byte for byte, under GxP rules.
//!
//! The five invariants of `../shared/DESIGN.md` are the product; each
//! module's documentation says which one it carries.

pub mod audit;
pub mod bench;
pub mod cli;
pub mod commands;
pub mod config;
pub mod digest;
pub mod durable;
pub mod edc;
pub mod exit;
pub mod host;
pub mod interrupt;
#[warn(missing_docs)]
pub mod limiter;
pub mod logging;
pub mod mask;
pub mod metrics;
pub mod qualify;
pub mod reconcile;
pub mod redact;
pub mod run;
pub mod sim;
pub mod store;
pub mod stream;
pub mod sync;

//! The core of edc-sync: policy, the read-only EDC client, landing and
//! state, the audit trail, the page loop and one run.
//!
//! The six invariants (docs/architecture.md) are what this crate carries:
//! read-only by construction (`edc`), the cursor never ahead of the data
//! (`store`, `sync`), audit first (`audit`, `sync`), one quota on server
//! time (the `quota-pacer` crate, shared through `quota`), policy under
//! change control (`config`), evidence that proves itself (`audit`,
//! `reconcile`).
//!
//! The public surface is deliberate: what the binary and the test suite
//! name, and nothing else. Each public module exposes only what its
//! `mod.rs` re-exports with `pub use` (a run: [`run::execute`]; the
//! policy: `config::load`; the trail's verification and reading:
//! `audit`; the reconciler, the state database's export, the exit codes;
//! the read-only client and its page checks, which the suite drives
//! against the simulator). The modules inside are `pub(crate)`, and
//! `unreachable_pub` below makes the build (clippy with `-D warnings`)
//! refuse a `pub` item nothing outside can reach, so an internal item says
//! `pub(crate)`. Nothing outside this crate can make a commit receipt,
//! move a cursor, open a landing store or start a stream's page loop.

#![warn(unreachable_pub)]

pub mod audit;
pub mod config;
pub(crate) mod db_error;
pub mod digest;
pub mod durable;
pub mod edc;
pub mod error;
pub mod exit;
pub mod host;
pub(crate) mod interrupt;
pub mod ledger;
pub mod mask;
pub(crate) mod metrics;
pub(crate) mod metrics_push;
pub mod no_follow;
pub mod paths;
pub(crate) mod quota;
pub mod reconcile;
pub mod record;
pub mod redact;
pub mod run;
pub mod state_db;
pub mod store;
pub mod stream;
pub mod sync;
pub(crate) mod trace_context;
pub(crate) mod zone;

/// Every Redis key edc-sync writes starts with this: the pacer's keys,
/// each stream's run lock and the audit anchor.
pub const REDIS_KEY_PREFIX: &str = "edc-sync:";

/// The tool's name as the audit header and the HTTP `User-Agent` give it
/// (the binary's, not this crate's).
pub const TOOL: &str = "edc-sync";

pub use error::Error;

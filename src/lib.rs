//! The `edc-sync` command, and nothing else: its flags (`cli`), one
//! function per subcommand (`commands`), and the log's set-up (`logging`).
//!
//! What a run does lives in the `edc-core` crate; pacing in `quota-pacer`;
//! the installation and operational qualification in `edc-qualify`; the
//! EDC simulator, shipped for on-site OQ and `demo`, in `edc-sim`. The
//! benchmarks are a program of their own (`edc-sync-bench`), not part of
//! this binary. docs/architecture.md draws the crates and their arrows.

pub mod cli;
pub mod commands;
pub mod logging;

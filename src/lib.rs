//! The `edc-sync` command: its flags (`cli`), one function per subcommand
//! (`commands`), the installation and operational qualification with its
//! evidence (`qualify`), and the benchmarks (`bench`).
//!
//! What a run does lives in the `edc-core` crate; pacing in `quota-pacer`;
//! the EDC simulator, shipped for on-site OQ and `demo`, in `edc-sim`; the
//! private Redis launchers of the OQ in `edc-testkit`. docs/architecture.md
//! draws the crates and their arrows.

pub mod bench;
pub mod cli;
pub mod commands;
pub mod files;
pub mod logging;
pub mod qualify;

//! One documented top-level function per mode. Each takes the parsed
//! arguments and returns one `Result`; `main` turns it into an exit code.

mod audit;
mod bench;
mod config;
mod cursor;
mod demo;
mod qualify;
mod simulate;
mod sync;

use crate::cli::{Cli, Command};

/// Runs the command the user asked for.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Sync(args) => sync::run(args),
        Command::Backfill(args) => sync::backfill(args),
        Command::Cursor(cmd) => cursor::run(cmd),
        Command::Config(cmd) => config::run(cmd),
        Command::Qualify(cmd) => qualify::run(cmd),
        Command::Audit(cmd) => audit::run(cmd),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Simulate(args) => simulate::run(args),
    }
}

/// A small multi-threaded runtime: the machines have two cores, and the
/// work is waiting on the network, not computing.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

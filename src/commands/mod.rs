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

use std::io::Write;

use anyhow::Context;

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
        Command::Completions { shell } => {
            // Rendered into memory first: clap_complete panics on a write
            // error, and `| head` must end quietly.
            let mut buf = Vec::new();
            clap_complete::generate(
                shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "edc-sync",
                &mut buf,
            );
            std::io::stdout()
                .lock()
                .write_all(&buf)
                .context("writing the completions")
        }
        Command::Man => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(<Cli as clap::CommandFactory>::command()).render(&mut buf)?;
            std::io::stdout()
                .lock()
                .write_all(&buf)
                .context("writing the man page")
        }
        Command::Audit(cmd) => audit::run(cmd),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Simulate(args) => simulate::run(args),
    }
}

/// A small multi-threaded runtime: the machines have two cores, and the
/// work is waiting on the network, not computing.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

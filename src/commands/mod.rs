//! One documented top-level function per mode. Each takes the parsed
//! arguments and returns one `Result`; `main` turns it into an exit code.

mod audit;
mod bench;
mod config;
mod cursor;
mod demo;
mod qualify;
mod simulate;
mod state;
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
        Command::Man { path, out_dir } => man(&path, out_dir.as_deref()),
        Command::Audit(cmd) => audit::run(cmd),
        Command::State(cmd) => state::run(cmd),
        Command::Verify(args) => audit::reconcile(args),
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

/// `edc-sync man [SUBCOMMAND...] [--out-dir DIR]`: pages from the same
/// definitions as `--help`, so they cannot disagree with it.
fn man(path: &[String], out_dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    let mut cmd = <Cli as clap::CommandFactory>::command().disable_help_subcommand(true);
    cmd.build();
    if let Some(dir) = out_dir {
        return clap_mangen::generate_to(cmd, dir)
            .with_context(|| format!("writing man pages into {}", dir.display()));
    }
    let mut page = cmd;
    for name in path {
        let Some(sub) = page.find_subcommand(name).cloned() else {
            // A usage error, like any unknown subcommand: clap prints it, exit 2.
            <Cli as clap::CommandFactory>::command()
                .error(
                    clap::error::ErrorKind::InvalidSubcommand,
                    format!("no subcommand {name:?} under {:?}", page.get_name()),
                )
                .exit();
        };
        page = sub;
    }
    let mut buf = Vec::new();
    clap_mangen::Man::new(page).render(&mut buf)?;
    std::io::stdout()
        .lock()
        .write_all(&buf)
        .context("writing the man page")
}

//! One documented top-level function per mode. Each takes the parsed
//! arguments and returns one `Result`; `main` turns it into an exit code.

mod audit;
mod completions;
mod config;
mod cursor;
mod demo;
mod man;
mod qualify;
mod simulate;
mod state;
mod sync;

use crate::cli::{Cli, Command};
use edc_core::error::IoContext;
use edc_core::Error;

/// Runs the command the user asked for.
pub fn run(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Sync(args) => sync::run(args),
        Command::Backfill(args) => sync::backfill(args),
        Command::Cursor(cmd) => cursor::run(cmd),
        Command::Config(cmd) => config::run(cmd),
        Command::Qualify(cmd) => qualify::run(cmd),
        Command::Completions { shell } => completions::run(shell),
        Command::Man { path, out_dir } => man::run(&path, out_dir.as_deref()),
        Command::Audit(cmd) => audit::run(cmd),
        Command::State(cmd) => state::run(cmd),
        Command::Verify(args) => audit::reconcile(args),
        Command::Simulate(args) => simulate::run(args),
    }
}

/// A spinner drawn with `template`, only when stderr is a terminal: a
/// person is watching. Under cron, systemd or a pipe it is `None` and
/// nothing is drawn.
fn spinner(template: &str) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new_spinner();
    let style = indicatif::ProgressStyle::with_template(template)
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
    bar.set_style(style);
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    Some(bar)
}

/// A small multi-threaded runtime: the machines have two cores, and the
/// work is waiting on the network, not computing.
fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .io(|| "starting the async runtime".into())
}

//! One documented top-level function per mode. Each takes the parsed
//! arguments and returns one `Result`; `main` turns it into an exit code.

mod audit;
mod config;

use crate::cli::{Cli, Command};

/// Runs the command the user asked for.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Config(cmd) => config::run(cmd),
        Command::Audit(cmd) => audit::run(cmd),
    }
}

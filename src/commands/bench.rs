//! `edc-sync bench ...`

use std::io::Write;

use anyhow::Context;

use crate::bench::pacer::{self, BenchArgs, WorkerArgs};
use crate::cli::BenchCommand;

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    let rt = super::runtime()?;
    match cmd {
        BenchCommand::Pacer {
            redis,
            procs,
            tasks,
            rate,
            burst,
            seconds,
            grants_out,
        } => {
            let exe = std::env::current_exe().context("locating the edc-sync executable for the workers")?;
            let args = BenchArgs {
                redis,
                procs,
                tasks,
                rate,
                burst,
                seconds,
                grants_out,
            };
            let figures = rt.block_on(pacer::run(args, exe))?;
            writeln!(std::io::stdout().lock(), "{}", pacer::render(&figures)).context("writing to stdout")?;
            Ok(())
        }
        BenchCommand::PacerWorker {
            redis,
            key,
            tasks,
            rate,
            burst,
            start_us,
            end_us,
        } => rt.block_on(pacer::run_worker(WorkerArgs {
            redis,
            tasks,
            rate,
            burst,
            key,
            start_us,
            end_us,
        })),
    }
}

//! The `edc-sync` binary: parse, set up logging, run, map the result to an
//! exit code. Everything else lives in the library.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use edc_core::exit::{is_broken_pipe, Exit};
use edc_sync::cli::Cli;

fn main() -> ExitCode {
    // clap prints usage errors itself and exits 2 (EX_USAGE).
    let cli = Cli::parse();
    edc_sync::logging::init(cli.log_format, cli.verbose, cli.quiet);
    match edc_sync::commands::run(cli) {
        Ok(()) => ExitCode::from(Exit::Ok.code()),
        Err(err) if is_broken_pipe(&err) => ExitCode::from(Exit::Ok.code()),
        Err(err) => {
            let code = Exit::for_error(&err);
            // If stderr is gone too there is nowhere left to report to.
            // Identifiers in URLs are masked, as in the audit trail.
            let text = edc_core::mask::global_text(&format!("{err:#}"));
            let _ = writeln!(std::io::stderr().lock(), "edc-sync: error: {text}");
            ExitCode::from(code.code())
        }
    }
}

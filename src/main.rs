//! The `edc-sync` binary: parse, set up logging, run, turn the result into
//! an exit code (the error's type decides which). Everything else lives in
//! the library.

use std::io::Write;
use std::process::ExitCode;

use edc_core::exit::Exit;

fn main() -> ExitCode {
    // A usage error exits 2 (EX_USAGE), in the log's format.
    let cli = match edc_sync::cli::parse() {
        Ok(cli) => cli,
        Err(refused) => return edc_sync::logging::refused(refused),
    };
    let (format, color) = (cli.log_format, cli.color.colours_stderr());
    edc_sync::logging::init(format, color, cli.verbose, cli.quiet);
    match edc_sync::commands::run(cli) {
        Ok(()) => ExitCode::from(Exit::Ok.code()),
        Err(err) if err.is_broken_pipe() => ExitCode::from(Exit::Ok.code()),
        Err(err) => {
            let code = err.exit();
            // If stderr is gone too there is nowhere left to report to.
            // Identifiers in URLs are masked, as in the audit trail.
            let text = edc_core::mask::global_text(&format!("{err:#}"));
            let _ = writeln!(
                std::io::stderr().lock(),
                "{}",
                edc_sync::logging::fatal(format, &text, code)
            );
            ExitCode::from(code.code())
        }
    }
}

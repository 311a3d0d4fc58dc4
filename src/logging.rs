//! Diagnostics go to stderr through `tracing`; stdout is for results.
//!
//! Logs are for operators, not evidence: the audit trail is the record.

use std::io::Write;

use edc_core::exit::Exit;
use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Installs the global subscriber. `RUST_LOG`, when set, wins over -v/-q;
/// `colour` is `--color` as this stderr resolves it.
pub fn init(format: LogFormat, colour: bool, verbose: u8, quiet: u8) {
    let default = match (verbose, quiet) {
        (_, q) if q > 0 => "error",
        (0, _) => "info",
        (1, _) => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Through the run's masker: identifiers in URLs never reach a log.
        .with_writer(|| edc_core::mask::MaskedStderr);
    // A second init (tests) is harmless; the first subscriber stays.
    let _ = match format {
        LogFormat::Text => builder.with_ansi(colour).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// A command line clap refused: clap's own text (or help, or the version,
/// on stdout with 0), or under `--log-format json` one JSON line with the
/// error's first line and exit 2.
pub fn refused(refused: crate::cli::Refused) -> std::process::ExitCode {
    let crate::cli::Refused { error, log_format } = refused;
    if log_format == LogFormat::Text || !error.use_stderr() {
        error.exit();
    }
    // clap's message is its first paragraph: one line, or a line ending
    // in `:` and the arguments it is about on the lines under it. The
    // usage and the hint after the blank line are for a terminal.
    let text = error.to_string();
    let mut paragraph = text.lines().take_while(|l| !l.trim().is_empty()).map(str::trim);
    let first = paragraph.next().unwrap_or_default().trim_start_matches("error: ");
    let rest: Vec<&str> = paragraph.collect();
    let message = match rest.is_empty() {
        true => first.to_string(),
        false => format!("{first} {}", rest.join(", ")),
    };
    let _ = writeln!(
        std::io::stderr().lock(),
        "{}",
        fatal(LogFormat::Json, &message, Exit::Usage)
    );
    std::process::ExitCode::from(Exit::Usage.code())
}

/// The last line of a failed run, in the log's format: a collector that
/// parses every stderr line as JSON gets the error, the exit code and its
/// meaning as one object too (in the shape of the log lines before it).
pub fn fatal(format: LogFormat, text: &str, exit: Exit) -> String {
    let code = exit.code();
    match format {
        LogFormat::Text => format!("edc-sync: error: {text}"),
        LogFormat::Json => {
            let label = Exit::ALL.iter().find(|d| d.code == code).map_or("", |d| d.label);
            serde_json::json!({
                "timestamp": edc_core::audit::now_rfc3339(),
                "level": "ERROR",
                "message": text,
                "exit_code": code,
                "exit": label,
                "target": "edc_sync",
            })
            .to_string()
        }
    }
}

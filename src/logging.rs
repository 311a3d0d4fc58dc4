//! Diagnostics go to stderr through `tracing`; stdout is for results.
//!
//! Logs are for operators, not evidence: the audit trail is the record.

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Installs the global subscriber. `RUST_LOG`, when set, wins over -v/-q.
pub fn init(format: LogFormat, verbose: u8, quiet: u8) {
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
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

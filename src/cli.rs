//! Command-line definitions, and nothing else: parsing is clap's job, the
//! work is in `commands`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::DEFAULT_PATH;

/// Pulls clinical-trial data deltas out of EDC systems, paced, audited and
/// read-only.
#[derive(Debug, Parser)]
#[command(name = "edc-sync", version, about, long_about = None, propagate_version = true)]
#[command(
    after_help = "Exit codes: 0 ok, 2 usage, 65 data, 66 no input, 69 unavailable, 74 I/O, \
                        75 try later (progress saved), 77 permission, 78 configuration."
)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// More log detail (-v debug, -vv trace). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Less log detail (-q errors only).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "verbose")]
    pub quiet: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check or show the rate-limit policy file.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Work with the hash-chained audit trail.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Benchmarks that print figures (see docs/benchmarks.md).
    #[command(subcommand)]
    Bench(BenchCommand),
}

/// Where the policy file is.
#[derive(Debug, Args)]
pub struct ConfigPath {
    /// The policy file.
    #[arg(long, env = "EDC_SYNC_CONFIG", default_value = DEFAULT_PATH)]
    pub config: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the policy file; report every problem with its key and line.
    ///
    /// Exit 0 when valid, 78 when not.
    ///
    /// Example: edc-sync config validate --config config/rate_limits.yaml --require-committed
    Validate {
        #[command(flatten)]
        path: ConfigPath,
        /// Also fail unless the file is committed, unchanged, at git HEAD
        /// (what a run requires without --allow-dirty).
        #[arg(long)]
        require_committed: bool,
        /// Also fail unless every environment variable named by a `*_env`
        /// key is set (values are never printed).
        #[arg(long)]
        check_env: bool,
    },
    /// Print the effective policy (defaults filled in) with its provenance.
    ///
    /// Secrets are never printed: only the names of the variables that hold
    /// them, and whether each is set.
    ///
    /// Example: edc-sync config show --vendor veeva_vault
    Show {
        #[command(flatten)]
        path: ConfigPath,
        /// Show only this vendor.
        #[arg(long)]
        vendor: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Verify an audit file's hash chain and per-run sequence numbers.
    ///
    /// Exit 0 when intact, 65 when not (the first bad line and why: edited,
    /// removed, reordered, malformed, or a torn final line left by a crash).
    ///
    /// Example: edc-sync audit verify /var/lib/edc-sync/audit.jsonl
    Verify {
        /// The audit file (JSON Lines).
        file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Contention on one Redis token bucket: round trips per grant,
    /// envelope violations, utilisation, acquire latency.
    ///
    /// Ends with one JSON line of the figures.
    ///
    /// Example: edc-sync bench pacer --redis redis://127.0.0.1:6379/ --procs 4 --tasks 4 --rate 50 --burst 20 --seconds 20
    Pacer {
        /// Redis URL.
        #[arg(long, env = "EDC_SYNC_REDIS_URL")]
        redis: String,
        /// Worker processes.
        #[arg(long, default_value_t = 4)]
        procs: u32,
        /// Tasks per worker process.
        #[arg(long, default_value_t = 4)]
        tasks: u32,
        /// Bucket refill rate, tokens per second.
        #[arg(long, default_value_t = 50.0)]
        rate: f64,
        /// Bucket capacity.
        #[arg(long, default_value_t = 20)]
        burst: u32,
        /// Length of the measured window.
        #[arg(long, default_value_t = 20.0)]
        seconds: f64,
        /// Also write every grant time (Redis server microseconds, sorted),
        /// one per line.
        #[arg(long)]
        grants_out: Option<PathBuf>,
    },
    /// One worker process of `bench pacer` (spawned by it).
    #[command(hide = true)]
    PacerWorker {
        #[arg(long)]
        redis: String,
        #[arg(long)]
        key: String,
        #[arg(long)]
        tasks: u32,
        #[arg(long)]
        rate: f64,
        #[arg(long)]
        burst: u32,
        #[arg(long, allow_negative_numbers = true)]
        start_us: i64,
        #[arg(long, allow_negative_numbers = true)]
        end_us: i64,
    },
}

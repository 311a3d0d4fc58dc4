//! Command-line definitions, and nothing else: parsing is clap's job, the
//! work is in `commands`.
//!
//! One concept: the command line's shape, every subcommand and flag with
//! the help a user reads.

use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use edc_core::config::DEFAULT_PATH;

mod audit;
pub mod examples;
mod simulate;

pub use audit::AuditCommand;
pub use simulate::SimulateArgs;

/// Pulls clinical-trial data deltas out of EDC systems, paced, audited and
/// read-only.
#[derive(Debug, Parser)]
#[command(name = "edc-sync", version, about, long_about = None, propagate_version = true)]
#[command(after_help = edc_core::exit::Exit::help_footer())]
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
    /// When to colour logs, the progress line and help: auto colours a
    /// terminal unless NO_COLOR is set to anything but the empty string.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One line per event, for people.
    Text,
    /// One JSON object per line, the final error included, for collectors.
    Json,
}

/// `--summary`: how a run's summary on stdout is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SummaryFormat {
    /// A few indented lines, for people.
    Text,
    /// One JSON object as the last line of stdout (outcome, exit code,
    /// streams, pages, records, waits, the trail), for schedulers; also
    /// when the run is refused before it starts.
    Json,
}

/// `--color`: as cargo and ripgrep take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour a terminal, unless NO_COLOR is set (and not empty).
    Auto,
    /// Always colour, NO_COLOR or not, terminal or not.
    Always,
    /// Never colour.
    Never,
}

impl ColorChoice {
    /// Whether to colour a stream that is (or is not) a terminal, given
    /// the value of NO_COLOR (no-color.org: set and not empty disables).
    pub fn colours(self, terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => terminal && no_color.is_none_or(|v| v.is_empty()),
        }
    }

    /// Whether to colour stderr, as this process finds it.
    pub fn colours_stderr(self) -> bool {
        use std::io::IsTerminal;
        self.colours(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        )
    }
}

/// The last value of `flag` in the raw arguments, read before parsing:
/// clap's own help and errors come out before the parse is done, and must
/// already follow `--color` and `--log-format`.
fn raw_value<T: ValueEnum>(args: &[std::ffi::OsString], flag: &str) -> Option<T> {
    let mut found = None;
    let mut args = args.iter().map(|a| a.to_string_lossy());
    while let Some(arg) = args.next() {
        let value = match arg.strip_prefix(flag) {
            Some("") => args.next().map(|v| v.into_owned()),
            Some(rest) => rest.strip_prefix('=').map(str::to_string),
            None => None,
        };
        if let Some(v) = value.and_then(|v| T::from_str(&v, false).ok()) {
            found = Some(v);
        }
    }
    found
}

/// The command-line definition as users meet it: the derive's, with the
/// examples of [`examples::EXAMPLES`] after each subcommand's help. Help,
/// completions and man pages all come from here.
pub fn command() -> clap::Command {
    fn with_examples(cmd: clap::Command, path: &str) -> clap::Command {
        let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
        names.into_iter().fold(cmd, |cmd, name| {
            let sub_path = if path.is_empty() {
                name.clone()
            } else {
                format!("{path} {name}")
            };
            cmd.mut_subcommand(&name, |sub| {
                let sub = with_examples(sub, &sub_path);
                match examples::of(&sub_path).next() {
                    Some(_) => sub.after_help(examples::help(&sub_path)),
                    None => sub,
                }
            })
        })
    }
    hide_env_values(with_examples(Cli::command(), ""))
}

/// No option's help shows the value of the environment variable it reads
/// (`EDC_SYNC_STATE` may hold a database password, `EDC_SYNC_REDIS_URL` a
/// Redis one): only the variable's name, on every subcommand.
fn hide_env_values(cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
    let cmd = cmd.mut_args(|arg| arg.hide_env_values(true));
    names
        .into_iter()
        .fold(cmd, |cmd, name| cmd.mut_subcommand(&name, hide_env_values))
}

/// A command line clap refused (or help or the version asked for), and the
/// log format it asked for, which the refusal is written in.
pub struct Refused {
    pub error: clap::Error,
    pub log_format: LogFormat,
}

/// Parses this process's arguments.
pub fn parse() -> Result<Cli, Refused> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let color = match raw_value(&args, "--color").unwrap_or(ColorChoice::Auto) {
        // clap's auto already honours NO_COLOR and a terminal.
        ColorChoice::Auto => clap::ColorChoice::Auto,
        ColorChoice::Always => clap::ColorChoice::Always,
        ColorChoice::Never => clap::ColorChoice::Never,
    };
    let log_format = raw_value(&args, "--log-format").unwrap_or(LogFormat::Text);
    command()
        .color(color)
        .try_get_matches_from(args)
        .and_then(|m| Cli::from_arg_matches(&m))
        .map_err(|error| Refused { error, log_format })
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the built-in demo: simulator, in-process pacer, a full sync with
    /// throttling in it, then verify its audit trail. Needs no network.
    Demo(DemoArgs),
    /// Pull the delta of one or all streams of a vendor.
    Sync(SyncArgs),
    /// Re-pull a past window with its own cursor; the incremental cursor is
    /// never touched.
    ///
    /// Pages land under OUT/backfill/SINCE..UNTIL/ and the cursor lives
    /// under STATE/backfill/SINCE..UNTIL/, so a backfill can be resumed.
    Backfill(BackfillArgs),
    /// Inspect a stream's cursor.
    #[command(subcommand)]
    Cursor(CursorCommand),
    /// Check or show the rate-limit policy file.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Installation and operational qualification, with evidence for QA.
    #[command(subcommand)]
    Qualify(QualifyCommand),
    /// Print shell completions (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell whose script to print.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print a man page (roff) generated from these definitions: the
    /// top level, or a subcommand's (`edc-sync man sync`, `edc-sync man
    /// config validate`), or write every page to a directory.
    Man {
        /// The subcommand whose page to print (none: the top level).
        #[arg(value_name = "SUBCOMMAND")]
        path: Vec<String>,
        /// Write every page (edc-sync.1, edc-sync-sync.1, ...) into DIR instead.
        #[arg(long, value_name = "DIR", conflicts_with = "path")]
        out_dir: Option<PathBuf>,
    },
    /// Work with the hash-chained audit trail.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// The PostgreSQL state database: create or upgrade its schema.
    #[command(subcommand)]
    State(StateCommand),
    /// Re-prove landed data: every landed file, manifest entry,
    /// page_committed audit line and cursor against the others.
    ///
    /// Prints one line per discrepancy (the file and what differs), then a
    /// summary. Exit 0 when none, 65 when any, 66 when a path cannot be read.
    Verify(VerifyArgs),
    /// Run the EDC simulator on loopback (Vault-style JSON and Rave-style ODM,
    /// with injectable faults) until interrupted.
    Simulate(SimulateArgs),
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
    /// Write the policy's provenance stamp (POLICY.stamp.json beside it):
    /// its commit, its path and blob id there, its SHA-256 and the
    /// repository's remote. Run it in the policy repository at release
    /// time and ship the stamp with the policy: a run that finds no git
    /// repository around the policy (a container's ConfigMap, an image)
    /// accepts it only when its bytes are the ones the stamp names.
    ///
    /// Exit 0 when written; 78 when the policy is not committed, unchanged,
    /// at HEAD.
    Stamp {
        #[command(flatten)]
        path: ConfigPath,
        /// A file holding the audit key the runs use, to MAC the stamp with
        /// (default: the EDC_SYNC_AUDIT_KEY variable, when set). A run
        /// holding the key refuses a stamp whose MAC does not verify.
        #[arg(long, value_name = "FILE")]
        audit_key_file: Option<PathBuf>,
    },
    /// Prove, against the policy repository, that every commit an audit
    /// trail's run headers record holds the policy blob they record at the
    /// path they record: what turns a stamp's claims into facts.
    ///
    /// Exit 0 when every claim holds; 65 when one does not (each named);
    /// 66 when the trail or the repository cannot be read.
    CheckStamp {
        /// A clone of the policy repository (any clone holding the commits).
        #[arg(long, value_name = "PATH")]
        repo: PathBuf,
        /// The audit trail whose run headers to check.
        #[arg(long, value_name = "FILE")]
        trail: PathBuf,
    },
    /// Print the effective policy (defaults filled in) with its provenance.
    ///
    /// Secrets are never printed: only the names of the variables that hold
    /// them, and whether each is set.
    Show {
        #[command(flatten)]
        path: ConfigPath,
        /// Show only this vendor.
        #[arg(long)]
        vendor: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// Create the edc-sync schema in a PostgreSQL database, or apply the
    /// migrations a newer binary brings; each recorded in edc_sync_schema.
    ///
    /// Run it as the schema's owner, never as the role runs use; runs
    /// refuse (78) a database whose schema version is not theirs. Exit 0
    /// when the schema is current (prints what was applied).
    Migrate {
        /// The database (postgres://user[:password]@host:port/database).
        #[arg(long, env = "EDC_SYNC_STATE", value_name = "URL")]
        state: String,
        /// Grant this role what runs need and no more: SELECT on the audit
        /// trail, manifest and anchors and the functions that append to
        /// them, UPDATE only on the cursor and run-lock tables.
        #[arg(long, value_name = "ROLE")]
        grant_to: Option<String>,
        /// From now on take a trail line only from a holder of the audit
        /// key (EDC_SYNC_AUDIT_KEY, or --audit-key-file): the database
        /// keeps a key derived from it, never the key. Again with another
        /// key: that key is required instead.
        #[arg(long)]
        require_audit_key: bool,
        /// The audit key for --require-audit-key, from a file (default:
        /// the EDC_SYNC_AUDIT_KEY variable).
        #[arg(long, value_name = "FILE", requires = "require_audit_key")]
        audit_key_file: Option<PathBuf>,
    },
}

/// The stream a command is about.
#[derive(Debug, Clone, Args)]
pub struct StreamArgs {
    /// Vendor: a top-level key of the policy file.
    #[arg(long)]
    pub vendor: String,
    /// Study (fills {study}), e.g. Mediflex(Prod).
    #[arg(long, value_parser = identity_part)]
    pub study: String,
    /// Tenant (fills {tenant}).
    #[arg(long, value_parser = identity_part)]
    pub tenant: Option<String>,
    /// Protocol version (fills {protocol_version}).
    #[arg(long, value_parser = identity_part)]
    pub protocol_version: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PacerKind {
    /// In this process only (no Redis): for single-process runs.
    Local,
}

/// Where a run's files are: the same three flags for `sync`, `backfill`
/// and `verify`.
#[derive(Debug, Args)]
pub struct RunDirs {
    /// Where pages and manifests land: a local directory, or an object
    /// store as s3://bucket/prefix, gs://bucket/prefix or az://container/prefix
    /// (credentials from the service's standard environment; see
    /// docs/operations.md, "Landing in object storage").
    #[arg(long, value_name = "DIR|URL")]
    pub out: PathBuf,
    /// State directory (cursors, run locks, audit anchors), or a PostgreSQL
    /// database (postgres://user@host:port/db) holding cursors, manifests,
    /// run locks and the audit trail (docs/operations.md, "Running on
    /// several hosts").
    #[arg(long, env = "EDC_SYNC_STATE", value_name = "DIR|URL")]
    pub state: PathBuf,
    /// The audit trail (JSON Lines, appended); with a database --state,
    /// its file name names the trail kept there.
    #[arg(long)]
    pub audit_log: PathBuf,
}

/// Flags of `edc-sync verify`: the directories `sync` was given, and
/// optionally the study whose streams to verify.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub dirs: RunDirs,
    /// Verify only this vendor's streams of --study: for a landing shared
    /// by studies that keep separate audit trails (each trail describes its
    /// own study only).
    #[arg(long, requires = "study")]
    pub vendor: Option<String>,
    /// The study to verify (with --vendor).
    #[arg(long, requires = "vendor", value_parser = identity_part)]
    pub study: Option<String>,
    /// Narrow --study to this tenant.
    #[arg(long, requires = "study", value_parser = identity_part)]
    pub tenant: Option<String>,
    /// Narrow --study to this protocol version.
    #[arg(long, requires = "study", value_parser = identity_part)]
    pub protocol_version: Option<String>,
    /// Narrow --study to this stream.
    #[arg(long = "stream", value_name = "NAME", requires = "study")]
    pub stream_name: Option<String>,
    /// Prove the trail's seals and checkpoints with the audit key in
    /// EDC_SYNC_AUDIT_KEY too, as `audit verify --key` does: a trail
    /// recomputed, extended or replaced by someone without the key is a
    /// discrepancy.
    #[arg(long)]
    pub key: bool,
    /// Like --key, with the key read from FILE.
    #[arg(long, value_name = "FILE", conflicts_with = "key")]
    pub key_file: Option<PathBuf>,
}

impl VerifyArgs {
    /// The streams to verify: a study's, or everything found.
    pub fn scope(&self) -> edc_core::reconcile::Scope {
        match (&self.vendor, &self.study) {
            (Some(vendor), Some(study)) => edc_core::reconcile::Scope::Study {
                vendor: vendor.clone(),
                study: study.clone(),
                tenant: self.tenant.clone(),
                protocol_version: self.protocol_version.clone(),
                stream: self.stream_name.clone(),
            },
            _ => edc_core::reconcile::Scope::All,
        }
    }
}

/// Flags of `edc-sync sync`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("pacing").required(true).args(["redis", "pacer"])))]
pub struct SyncArgs {
    #[command(flatten)]
    pub path: ConfigPath,
    #[command(flatten)]
    pub stream: StreamArgs,
    /// Run only this stream (default: the stream called "default", which a
    /// vendor without a `streams` map has).
    #[arg(long = "stream", value_name = "NAME", conflicts_with = "all_streams")]
    pub stream_name: Option<String>,
    /// Run every stream the vendor lists, concurrently.
    #[arg(long)]
    pub all_streams: bool,
    /// The summary on stdout: text, or one JSON object as its last line
    /// (what Airflow keeps of a task and Dagster reads).
    #[arg(long, value_enum, default_value = "text")]
    pub summary: SummaryFormat,
    #[command(flatten)]
    pub dirs: RunDirs,
    /// Redis URL: the quota is shared with every process using it.
    /// A Redis Cluster: redis+cluster://host:port,host:port (docs/pacer.md).
    #[arg(long, env = "EDC_SYNC_REDIS_URL")]
    pub redis: Option<String>,
    /// Pace in this process only, instead of Redis.
    #[arg(long, value_enum)]
    pub pacer: Option<PacerKind>,
    /// Stop after this many committed pages (progress saved). 0 runs the
    /// start-up checks only (the cursor checked against the audit trail,
    /// rolled forward over commits it missed) and fetches nothing.
    #[arg(long)]
    pub max_pages: Option<u64>,
    /// Fetch and validate, but land nothing and move no cursor.
    #[arg(long)]
    pub dry_run: bool,
    /// Run with a policy file that is not committed at git HEAD (recorded in
    /// the audit header).
    #[arg(long)]
    pub allow_dirty: bool,
    /// Prometheus textfile-collector file, replaced atomically at the end
    /// of the run (pages, records, bytes, waits by reason, retries, last
    /// success, last exit code, duration; per stream).
    #[arg(long)]
    pub metrics_file: Option<PathBuf>,
    /// Prometheus Pushgateway to push the same figures to at the end of
    /// the run, one group per stream (for pods and tasks that end before a
    /// scrape); a Pushgateway that is down is a warning.
    #[arg(long, value_name = "URL", env = "EDC_SYNC_METRICS_PUSH")]
    pub metrics_push: Option<String>,
    /// Append to an audit trail whose end does not verify or that diverges
    /// from its anchor, recording the damage in an audit_repaired line
    /// (without it such a trail stops the run with 65).
    #[arg(long)]
    pub repair_audit: bool,
    /// Take the audit trail's cursor for a stream whose cursor disagrees
    /// with the trail's last commit of the stream, recording what was
    /// replaced in a state_repaired line (without it such a cursor stops the
    /// run with 65, naming it); likewise rebuild a manifest, or a bucket's
    /// deleted manifest line object, from the trail or the index.
    #[arg(long)]
    pub repair_state: bool,
    /// Continue when the landing lists pages of runs the audit trail does
    /// not record (the state and trail were restored from an older
    /// backup), recording what was found in a rollback_accepted line
    /// (without it such a landing stops the run with 65, naming it).
    #[arg(long)]
    pub accept_rollback: bool,
    /// With the audit key: take an audit trail no line of which is sealed
    /// (written before the key was set), recording it in an
    /// audit_key_adopted line (without it such a trail stops a keyed run
    /// with 65: one replaced wholesale by someone without the key looks
    /// the same).
    #[arg(long)]
    pub adopt_unsealed_trail: bool,
    /// A file holding the audit key that signs every run_finished line
    /// (default: the EDC_SYNC_AUDIT_KEY variable, when set). At least 32 bytes.
    #[arg(long, value_name = "FILE")]
    pub audit_key_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum CursorCommand {
    /// Print a stream's cursor: where its next run starts, the trail line
    /// that put it there, and the lookback's size (`--full`: whole).
    Show {
        #[command(flatten)]
        stream: StreamArgs,
        /// The stream (default: "default").
        #[arg(long = "stream", value_name = "NAME", default_value = "default")]
        stream_name: String,
        /// State directory, or a PostgreSQL state database URL.
        #[arg(long, env = "EDC_SYNC_STATE", value_name = "DIR|URL")]
        state: PathBuf,
        /// Print the cursor whole, the lookback's every record id included
        /// (by default the lookback is shown by its size).
        #[arg(long)]
        full: bool,
    },
}

/// Flags of `edc-sync demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where the demo writes its landing, state, audit and simulator log:
    /// a new or empty directory, or one a previous demo made (it is cleared);
    /// any other is refused (2), untouched.
    #[arg(long, default_value = "edc-sync-demo")]
    pub dir: PathBuf,
    /// Records in the simulated dataset.
    #[arg(long, default_value_t = 300)]
    pub records: u32,
}

/// Flags of `edc-sync backfill`.
#[derive(Debug, Args)]
pub struct BackfillArgs {
    #[command(flatten)]
    pub sync: SyncArgs,
    /// Window start: the cursor value to start from (e.g. a timestamp for
    /// Vault, a start id for Rave): an RFC 3339 instant or a whole number.
    #[arg(long, value_parser = cursor_bound)]
    pub since: String,
    /// Window end: every record up to this cursor value is landed. On an
    /// ascending endpoint (delta.order) the run stops at the first page past
    /// it (landed whole); otherwise it pages to the end of the window.
    /// Earlier than --since is a usage error. An RFC 3339 instant or a
    /// whole number, as --since.
    #[arg(long, value_parser = cursor_bound)]
    pub until: Option<String>,
    /// Prove the window complete: read it again and land only the records
    /// missing from the landing (the incremental stream's and every earlier
    /// backfill's under --out), then print how many were missing (0 is the
    /// proof; stream_finished records it too). The incremental cursor is not
    /// touched, and every such check starts afresh. JSON deltas, a state
    /// directory and a landing directory only.
    #[arg(long)]
    pub missing_only: bool,
}

#[derive(Debug, Subcommand)]
pub enum QualifyCommand {
    /// Operational qualification: run every OQ scenario against the built-in
    /// simulator (and Redis when available) and write the evidence package.
    ///
    /// Exit 0 only if every executed scenario passed (70 otherwise). Without
    /// Redis the Redis scenarios are reported as not executed, never passed.
    Oq {
        /// Directory for the evidence package (created; the folders of the
        /// scenarios this run executes are replaced, others left as they
        /// were and outside this run's SHA256SUMS).
        #[arg(long)]
        evidence: PathBuf,
        #[command(flatten)]
        path: ConfigPath,
        /// Redis URL (default: $EDC_SYNC_REDIS_URL). Without one the Redis
        /// scenarios are reported as not executed: the OQ never picks a
        /// server itself. It removes its own trails' anchors from this
        /// Redis, so that a rerun gives the same result.
        #[arg(long, env = "EDC_SYNC_REDIS_URL")]
        redis: Option<String>,
        /// Run only these scenarios (e.g. OQ-001,OQ-005).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
    /// Installation qualification: executable identity, policy validity and
    /// change control, durable directories, Redis and its clock.
    Iq {
        /// Directory for the evidence package (created).
        #[arg(long)]
        evidence: PathBuf,
        #[command(flatten)]
        path: ConfigPath,
        /// The Redis runs will share their quotas through (without it, the
        /// Redis check is reported as not executed: acceptable only for a
        /// site that runs with --pacer local alone).
        #[arg(long, env = "EDC_SYNC_REDIS_URL")]
        redis: Option<String>,
        /// A directory runs will write to (audit, state, landing). Repeatable.
        #[arg(long = "dir")]
        dirs: Vec<PathBuf>,
        /// The release's checksum file, as `sha256sum` writes it, listing
        /// this executable as `edc-sync-VERSION` (without it, the
        /// comparison of IQ-001 is reported as not executed).
        #[arg(long, value_name = "FILE")]
        release_record: Option<PathBuf>,
    },
}

/// A part of a stream's identity. `-` alone is refused: state and landing
/// paths spell an absent tenant or protocol version `-`, so `--tenant -`
/// would share the files of the stream without a tenant.
fn identity_part(value: &str) -> Result<String, String> {
    match value {
        "-" => {
            Err("`-` alone is how state and landing paths write an absent value; give the real one".into())
        }
        v => Ok(v.to_string()),
    }
}

/// A backfill bound is a cursor value of one of the kinds a delta's cursor
/// has: an RFC 3339 instant (`2026-01-01T00:00:00Z`) or a whole number (a
/// Rave start id). Anything else would be sent to the server as the
/// cursor parameter, so it is refused here, before anything happens.
fn cursor_bound(value: &str) -> Result<String, String> {
    let v = value.trim();
    let is_number =
        !v.is_empty() && v.len() <= 20 && v.bytes().all(|b| b.is_ascii_digit()) && v.parse::<u64>().is_ok();
    let is_instant = time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339).is_ok();
    if is_number || is_instant {
        Ok(v.to_string())
    } else {
        Err("not a cursor value: give an RFC 3339 instant (2026-01-01T00:00:00Z) or a whole number (a Rave start id)".into())
    }
}

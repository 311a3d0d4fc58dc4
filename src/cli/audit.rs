//! Flags of `edc-sync audit`: verifying a trail (its chain, anchors and
//! keyed checkpoints) and writing a database's trail out as its file.

use std::path::PathBuf;

use clap::Subcommand;

/// `edc-sync audit ...`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Verify an audit file's hash chain and per-run sequence numbers, and
    /// optionally its keyed checkpoints and its anchors.
    ///
    /// Exit 0 when intact, 65 when not (the first bad line and why: edited,
    /// removed, reordered, malformed, a torn final line left by a crash,
    /// unsigned, a checkpoint that does not verify, or diverging from an
    /// anchor).
    #[command(group(clap::ArgGroup::new("trail_source").required(true).args(["file", "state"])))]
    Verify {
        /// The audit file (JSON Lines).
        file: Option<PathBuf>,
        /// Instead of a file: the trail kept in this PostgreSQL state
        /// database (postgres://user@host:port/db), read and checked as the
        /// file `audit export` would write.
        #[arg(long, value_name = "URL", conflicts_with_all = ["file", "anchors"])]
        state: Option<String>,
        /// With --state: the trail's name (the file name the runs gave
        /// --audit-log).
        #[arg(long, value_name = "NAME", default_value = "audit.jsonl", requires = "state")]
        trail: String,
        /// A state directory: the file must match the chain-head anchor
        /// runs left there (it was not truncated, emptied or replaced).
        #[arg(long, value_name = "STATE_DIR")]
        anchors: Option<PathBuf>,
        /// Also prove the trail against the anchor runs with --redis keep
        /// in this Redis (redis://, rediss:// or redis+cluster://): a trail
        /// restored from an older backup together with its state directory
        /// agrees with that directory's anchor, not with Redis's.
        #[arg(long, value_name = "URL")]
        redis: Option<String>,
        /// Check every run_finished checkpoint with the key in
        /// EDC_SYNC_AUDIT_KEY: proves the file was not recomputed by
        /// someone without the key.
        #[arg(long)]
        key: bool,
        /// Like --key, with the key read from FILE.
        #[arg(long, value_name = "FILE", conflicts_with = "key")]
        key_file: Option<PathBuf>,
    },
    /// Write a trail kept in a PostgreSQL state database as the JSON Lines
    /// file of docs/audit-trail.md, byte for byte the same chain: what a
    /// reviewer reads does not depend on where it was kept.
    ///
    /// Never replaces an existing file. Exit 0 when written.
    Export {
        /// The database (postgres://user@host:port/database).
        #[arg(long, env = "EDC_SYNC_STATE", value_name = "URL")]
        state: String,
        /// The trail's name (the file name the runs gave --audit-log).
        #[arg(long, value_name = "NAME", default_value = "audit.jsonl")]
        trail: String,
        /// The file to write (must not exist).
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
    },
}

//! The `run_started` header: who ran what, where, under which policy.

use serde::Serialize;

use super::log::AuditEvent;
use crate::config::Provenance;
use crate::redact::redact_args;
use crate::stream::StreamIdentity;
use crate::trace_context::TraceContext;

/// The first line of every run.
#[derive(Debug, Clone, Serialize)]
pub struct RunStarted {
    pub tool: &'static str,
    pub version: &'static str,
    pub host: String,
    pub os_user: String,
    pub pid: u32,
    pub platform: String,
    pub command_line: Vec<String>,
    pub config_path: String,
    pub config_sha256: String,
    pub config_git_commit: Option<String>,
    pub config_git_blob: Option<String>,
    pub config_dirty: bool,
    /// Why the config is not under change control, when it is not.
    pub config_dirty_reason: Option<String>,
    pub allow_dirty: bool,
    /// When the policy ran outside its repository: the stamp beside it
    /// (`config stamp`) its commit and blob came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_stamp: Option<String>,
    /// With `config_stamp`: whether the stamp's MAC was verified with the
    /// run's audit key (`false`: the run held no key, so the stamp proves
    /// only what anyone who could write the policy could also write; check
    /// it against the repository with `config check-stamp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_stamp_verified: Option<bool>,
    /// The scheduler's trace context (`TRACEPARENT`/`TRACESTATE`), when it
    /// passed a valid one: joins this run to the task's trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceContext>,
    pub stream: Option<StreamIdentity>,
    /// With `--state postgres://…`: the database (without credentials).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_db: Option<String>,
    /// With `--state postgres://…`: the schema version the run found and
    /// required, so the evidence says which schema held it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_schema_version: Option<i32>,
    /// With `--state postgres://…` and neither the Redis anchor (`--redis`)
    /// nor Object-Locked pages: said once, since a database and its landing
    /// restored together from one older backup agree with each other and
    /// only a witness outside both would see it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback_witness: Option<&'static str>,
    /// Per stream, what the policy declares its token may not export
    /// (REDCap's `delta.restricted_scope`): the run lands that subset, and
    /// the evidence says so in the run's own words, not only through the
    /// policy's hash.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub restricted_scope: std::collections::BTreeMap<String, crate::config::RestrictedScope>,
}

impl AuditEvent for RunStarted {
    const NAME: &'static str = "run_started";
}

impl RunStarted {
    /// Builds the header for this process from the loaded config's provenance.
    pub fn new(provenance: &Provenance, allow_dirty: bool, stream: Option<StreamIdentity>) -> Self {
        RunStarted {
            tool: crate::TOOL,
            version: env!("CARGO_PKG_VERSION"),
            host: crate::host::name(),
            os_user: crate::host::user(),
            pid: std::process::id(),
            platform: crate::host::platform(),
            command_line: redact_args(std::env::args()),
            config_path: provenance.recorded_path(),
            config_sha256: provenance.config_sha256.clone(),
            config_git_commit: provenance.config_git_commit.clone(),
            config_git_blob: provenance.config_git_blob.clone(),
            config_dirty: provenance.dirty(),
            config_dirty_reason: provenance.why_uncontrolled(),
            allow_dirty,
            config_stamp: provenance.stamp().map(str::to_string),
            config_stamp_verified: None,
            trace: TraceContext::from_env(),
            stream,
            state_db: None,
            state_schema_version: None,
            rollback_witness: None,
            restricted_scope: Default::default(),
        }
    }

    /// The header of a run whose state and trail are in the state
    /// database `shown` (its URL without credentials), of that schema.
    pub fn with_state_db(mut self, shown: &str, schema_version: i32) -> Self {
        self.state_db = Some(shown.to_string());
        self.state_schema_version = Some(schema_version);
        self
    }
}

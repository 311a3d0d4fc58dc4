//! The policy file: parse, validate strictly, and record its provenance.
//!
//! Invariant 5 of the design: policy is data under change control. Loading
//! reads the file's bytes once; the same bytes are hashed, parsed and
//! compared with git, so the audit header describes exactly what ran.

mod auth;
mod check;
mod collection;
mod delta;
mod locate;
pub(crate) mod lookback;
mod object_lock;
mod policy;
pub(crate) mod provenance;
mod redcap;
mod redcap_export;
mod stamp;
mod template;
mod validate;
pub(crate) mod vql;
mod window;
mod window_quota;
pub mod yaml;

use std::fmt;
use std::path::{Path, PathBuf};

pub use crate::zone::Zone;
pub use policy::{
    Config, CursorKind, DateWindow, LockMode, MissingEnv, ObjectLock, Policy, RestrictedScope, WindowFormat,
    DEFAULT_VAULT_CLIENT_ID,
};
pub use provenance::{ChangeState, Provenance};
pub use redcap_export::{ExportContent, FieldRefused};
pub use stamp::{path_for as stamp_path, Stamp};

pub(crate) use policy::{
    Auth, Delta, Dialect, EnvVarName, HttpLimits, IdenticalRecords, Lookback, Paging, PayloadFormat,
    RecordOrder, StreamSpec,
};
pub(crate) use template::{MissingValue, Placeholder, PlaceholderValues};

use crate::digest::sha256_hex;

/// The default policy file, relative to the working directory.
pub const DEFAULT_PATH: &str = "config/rate_limits.yaml";

/// One thing wrong with a policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Dotted key path, e.g. `veeva_vault.sustained_rate_per_sec`; empty for
    /// the document itself.
    pub key: String,
    /// 1-based line, when it could be found.
    pub line: Option<usize>,
    pub message: String,
}

/// Every missing variable once, with every key that names it.
fn render_missing(missing: &[MissingEnv]) -> String {
    let mut names: Vec<(&str, bool, Vec<&str>)> = Vec::new();
    for m in missing {
        match names.iter_mut().find(|(n, ..)| *n == m.name) {
            Some((_, _, keys)) => keys.push(&m.key),
            None => names.push((&m.name, m.not_unicode, vec![&m.key])),
        }
    }
    let listed: Vec<String> = names
        .iter()
        .map(|(name, not_unicode, keys)| {
            let what = if *not_unicode {
                "not valid UTF-8"
            } else {
                "not set"
            };
            format!("{name} ({what}; named by {})", keys.join(", "))
        })
        .collect();
    match names.len() {
        1 => format!(
            "an environment variable a run needs is not usable: {}",
            listed.join("")
        ),
        n => format!(
            "{n} environment variables a run needs are not usable: {}",
            listed.join("; ")
        ),
    }
}

/// Why a policy cannot be used: exit 78 (EX_CONFIG), or 66 when the file
/// named on the command line cannot be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {error}", path.display())]
    Read { path: PathBuf, error: std::io::Error },
    #[error("{}", render_problems(path, problems))]
    Invalid { path: PathBuf, problems: Vec<Problem> },
    #[error("{reason}; {remedy}")]
    NotUnderChangeControl { reason: String, remedy: String },
    #[error(transparent)]
    MissingEnv(#[from] MissingEnv),
    /// `config validate --check-env`: every variable missing, at once.
    #[error("{}", render_missing(.0))]
    MissingEnvs(Vec<MissingEnv>),
    #[error("vendor {vendor:?} is not defined in {}; it defines: {known}", path.display())]
    UnknownVendor {
        vendor: String,
        path: PathBuf,
        known: String,
    },
    #[error("stream {stream:?} is not defined for vendor {vendor}; it defines: {known}")]
    UnknownStream {
        vendor: String,
        stream: String,
        known: String,
    },
    #[error("{0}")]
    Identity(String),
    /// A rate-limit-only policy (no `delta`) cannot be synced.
    #[error(
        "{vendor}.delta: {vendor} has no delta endpoint in {}; sync needs one (path, format, paging...; see the veeva_vault block of the shipped config/rate_limits.yaml)",
        path.display()
    )]
    NoDelta { vendor: String, path: PathBuf },
}

impl ConfigError {
    /// Its exit code: a policy file that cannot be read is an input file
    /// named on the command line (66); every other variant is 78.
    pub fn exit(&self) -> crate::exit::Exit {
        match self {
            ConfigError::Read { .. } => crate::exit::Exit::NoInput,
            _ => crate::exit::Exit::Config,
        }
    }
}

fn render_problems(path: &Path, problems: &[Problem]) -> String {
    let lines: Vec<String> = problems.iter().map(|p| p.render(path)).collect();
    match lines.len() {
        1 => lines[0].clone(),
        n => format!("{} has {n} problems:\n  {}", path.display(), lines.join("\n  ")),
    }
}

impl Problem {
    /// `file:line: key: message`, the shape editors and CI annotate.
    pub fn render(&self, path: &Path) -> String {
        let mut s = path.display().to_string();
        if let Some(line) = self.line {
            s.push_str(&format!(":{line}"));
        }
        if !self.key.is_empty() {
            s.push_str(&format!(": {}", self.key));
        }
        s.push_str(&format!(": {}", self.message));
        s
    }
}

/// A validated policy together with where it came from.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: Config,
    pub provenance: Provenance,
}

impl LoadedConfig {
    /// The policy of `vendor`, or an error listing the vendors defined.
    pub fn vendor(&self, vendor: &str) -> Result<&Policy, ConfigError> {
        self.config
            .vendor(vendor)
            .ok_or_else(|| ConfigError::UnknownVendor {
                vendor: vendor.to_string(),
                path: self.provenance.config_path.clone(),
                known: self.config.vendor_names().join(", "),
            })
    }

    /// Refuses a config whose loaded bytes are not the committed ones,
    /// unless the operator said `--allow-dirty` (which the audit header
    /// then records).
    pub fn require_committed(&self, allow_dirty: bool) -> Result<(), ConfigError> {
        match self.provenance.why_uncontrolled() {
            Some(reason) if !allow_dirty => Err(ConfigError::NotUnderChangeControl {
                reason,
                remedy: self.provenance.remedy(),
            }),
            _ => Ok(()),
        }
    }

    /// With the audit key (its id `key_id`; `verifies` its stamp MAC
    /// check): a policy accepted on its stamp must carry a MAC that
    /// verifies, since anyone who can write the policy can write a stamp
    /// too (78 otherwise, naming the stamp).
    pub fn require_sealed_stamp(
        &self,
        key_id: &str,
        verifies: impl FnOnce(&str, &str) -> bool,
    ) -> Result<(), ConfigError> {
        let Some(stamp) = &self.provenance.stamp_record else {
            return Ok(());
        };
        if stamp.verifies(verifies) {
            return Ok(());
        }
        Err(ConfigError::NotUnderChangeControl {
            reason: format!(
                "{} is accepted on its stamp {}, which {} with audit key {key_id}",
                self.provenance.config_path.display(),
                self.provenance.stamp().unwrap_or("beside it"),
                match stamp.mac {
                    None => "carries no MAC",
                    Some(_) => "carries a MAC that does not verify",
                },
            ),
            remedy:
                "stamp the released policy again with `edc-sync config stamp` and the audit key set, in its \
                     repository, and ship that stamp"
                    .into(),
        })
    }
}

impl fmt::Display for LoadedConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.provenance.config_path.display())
    }
}

/// Parses and validates the text of a policy file (no provenance).
pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let node = yaml::parse(text).map_err(|e| {
        let problem = match (&e.duplicate, e.line) {
            (Some((key, column)), Some(line)) => Problem {
                key: key.clone(),
                line: locate::duplicate_line(text, line, *column, key).or(e.line),
                message: "duplicate key: each key may appear once in a map".into(),
            },
            _ => Problem {
                key: String::new(),
                line: e.line,
                message: format!("not valid YAML: {}", e.message),
            },
        };
        ConfigError::Invalid {
            path: path.to_path_buf(),
            problems: vec![problem],
        }
    })?;
    validate::config(text, &node).map_err(|problems| ConfigError::Invalid {
        path: path.to_path_buf(),
        problems,
    })
}

/// Reads, validates and fingerprints the policy file at `path`.
pub fn load(path: &Path) -> Result<LoadedConfig, ConfigError> {
    let bytes = crate::no_follow::operator_input(path).map_err(|error| ConfigError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    let text = std::str::from_utf8(&bytes).map_err(|e| ConfigError::Invalid {
        path: path.to_path_buf(),
        problems: vec![Problem {
            key: String::new(),
            line: None,
            message: format!("not UTF-8 text: {e}"),
        }],
    })?;
    let config = parse(path, text)?;
    let provenance = provenance::of(path, &bytes, sha256_hex(&bytes));
    Ok(LoadedConfig { config, provenance })
}

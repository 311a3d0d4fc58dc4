//! Why a command did not complete: one typed error, each variant with its
//! exit code.
//!
//! The exit code is the interface cron, systemd, Kubernetes and Airflow act
//! on, so it is decided by the type system, not by searching an error's
//! causes: [`Error::exit`] matches every variant, and each wrapped error
//! type matches every one of its own variants in its `exit()`, beside its
//! definition. A new failure is a new variant, and the build refuses it
//! until it has a code. `tests/integration/exit_codes.rs` holds every
//! variant to the README's table.

use crate::audit::{AuditError, KeyError, NotIntact, ReadError, RedisAnchorError};
use crate::config::ConfigError;
use crate::exit::{Exit, NotQualified};
use crate::reconcile::{Discrepancies, Unverifiable};
use crate::state_db::{DbError, ExportError};
use crate::store::StoreError;
use crate::sync::SyncError;
use quota_pacer::PacerError;

/// Every way a command of edc-sync can fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The policy cannot be read (66) or used (78).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A stream stopped early; its variant says why.
    #[error(transparent)]
    Sync(#[from] SyncError),
    /// The audit trail could not be written, or it is damaged.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The landing or the state could not be read or written, or is damaged.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The state database failed or refused.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The audit key could not be had (78).
    #[error(transparent)]
    Key(#[from] KeyError),
    /// Redis could not answer about the audit anchor (69).
    #[error(transparent)]
    RedisAnchor(#[from] RedisAnchorError),
    /// Redis, as the pacer reaches it, is unusable.
    #[error(transparent)]
    Pacer(#[from] PacerError),
    /// `audit verify`: the trail was read and is not intact (65). Boxed: a
    /// verification report is larger than every other failure.
    #[error(transparent)]
    NotIntact(Box<NotIntact>),
    /// `audit verify`: the trail named on the command line cannot be read (66).
    #[error(transparent)]
    AuditUnreadable(#[from] ReadError),
    /// `verify`: the ledgers disagree (65).
    #[error(transparent)]
    Discrepancies(#[from] Discrepancies),
    /// `verify` could not run: a path named on the command line cannot be
    /// read (66), the landing's object store or the state database failed.
    #[error(transparent)]
    Unverifiable(#[from] Unverifiable),
    /// `audit export` did not produce its file.
    #[error(transparent)]
    Export(#[from] ExportError),
    /// `config check-stamp`: a recorded commit does not hold the recorded
    /// policy blob (65).
    #[error(transparent)]
    StampNotHeld(#[from] crate::audit::StampNotHeld),
    /// `config check-stamp`: the trail or the repository cannot be read (66).
    #[error(transparent)]
    StampUnreadable(#[from] crate::audit::StampUnreadable),
    /// An IQ or OQ check did not pass (70).
    #[error(transparent)]
    NotQualified(#[from] NotQualified),
    /// A file named on the command line cannot be read (66).
    #[error("{what}: {source}")]
    Input { what: String, source: std::io::Error },
    /// Writing a result, a file asked for, or starting what a command
    /// needs (a runtime, a socket) failed (74). A closed stdout (`| head`)
    /// is not a failure: [`Error::is_broken_pipe`].
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    /// What was being done when `source` happened: the same exit code.
    #[error("{what}: {source}")]
    Context { what: String, source: Box<Error> },
}

impl Error {
    /// The exit code of this failure.
    pub fn exit(&self) -> Exit {
        match self {
            Error::Config(e) => e.exit(),
            Error::Sync(e) => e.exit(),
            Error::Audit(e) => e.exit(),
            Error::Store(e) => e.exit(),
            Error::Db(e) => e.exit(),
            Error::Key(_) => Exit::Config,
            Error::RedisAnchor(_) => Exit::Unavailable,
            Error::Pacer(e) => Exit::for_pacer(e),
            Error::NotIntact(_) | Error::Discrepancies(_) | Error::StampNotHeld(_) => Exit::DataErr,
            Error::StampUnreadable(_) => Exit::NoInput,
            Error::AuditUnreadable(e) if crate::no_follow::is_link_refusal(&e.error) => Exit::IoErr,
            Error::AuditUnreadable(_) | Error::Input { .. } => Exit::NoInput,
            Error::Unverifiable(e) => e.exit(),
            Error::Export(e) => e.exit(),
            Error::NotQualified(_) => Exit::QualificationFailed,
            Error::Io { .. } => Exit::IoErr,
            Error::Context { source, .. } => source.exit(),
        }
    }

    /// An I/O failure while doing `what` (74).
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }

    /// A file named on the command line that cannot be read (66).
    pub fn input(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Input {
            what: what.into(),
            source,
        }
    }

    /// This error, said to have happened while doing `what`.
    pub fn context(self, what: impl Into<String>) -> Error {
        Error::Context {
            what: what.into(),
            source: Box::new(self),
        }
    }

    /// Only that stdout's reader went away (`| head`): the program ends
    /// quietly, as other Unix tools do.
    pub fn is_broken_pipe(&self) -> bool {
        match self {
            Error::Io { source, .. } => source.kind() == std::io::ErrorKind::BrokenPipe,
            Error::Context { source, .. } => source.is_broken_pipe(),
            _ => false,
        }
    }

    /// The failure beneath any context.
    pub fn root(&self) -> &Error {
        match self {
            Error::Context { source, .. } => source.root(),
            other => other,
        }
    }
}

impl From<crate::ledger::LedgerError> for Error {
    fn from(e: crate::ledger::LedgerError) -> Error {
        use crate::ledger::LedgerError;
        match e {
            LedgerError::Audit(a) => Error::Audit(a),
            LedgerError::Store(s) => Error::Store(s),
            LedgerError::Locked(l) => Error::Sync(SyncError::Locked(l)),
            LedgerError::Pacer(p) => Error::Pacer(p),
        }
    }
}

impl From<crate::ledger::AnchorRefused> for Error {
    fn from(e: crate::ledger::AnchorRefused) -> Error {
        use crate::ledger::AnchorRefused;
        match e {
            AnchorRefused::Audit(a) => Error::Audit(a),
            AnchorRefused::Redis(r) => Error::RedisAnchor(r),
        }
    }
}

impl From<NotIntact> for Error {
    fn from(e: NotIntact) -> Error {
        Error::NotIntact(Box::new(e))
    }
}

/// `?` on an I/O result with what was being done: `.io("writing to stdout")`.
pub trait IoContext<T> {
    /// An I/O failure while doing `what` (74).
    fn io(self, what: impl FnOnce() -> String) -> Result<T, Error>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn io(self, what: impl FnOnce() -> String) -> Result<T, Error> {
        self.map_err(|e| Error::io(what(), e))
    }
}

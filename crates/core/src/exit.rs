//! Exit codes are part of the interface (README, docs/operations.md): one
//! mapping from error to code, here. Codes are sysexits-style; extend,
//! never renumber.

use crate::audit::checkpoint::KeyError;
use crate::audit::{verify, AuditError, NotIntact};
use crate::config::ConfigError;
use crate::edc::AuthError;
use crate::store::{StoreError, StreamLocked};
use crate::sync::SyncError;
use quota_pacer::{AcquireError, PacerError};

/// A qualification whose executed checks did not all pass (exit 70).
/// Defined here, beside the mapping, so that nothing below `commands/`
/// needs to know `qualify` exists.
#[derive(Debug, thiserror::Error)]
#[error("{kind}: {failed} of {executed} executed check(s) failed; see {report}")]
pub struct NotQualified {
    pub kind: String,
    pub failed: usize,
    pub executed: usize,
    pub report: String,
}

/// Every code the tool exits with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Done: everything requested completed.
    Ok = 0,
    /// Usage error (reported by clap).
    Usage = 2,
    /// Data error: invalid payload, broken audit chain.
    DataErr = 65,
    /// An input file named on the command line cannot be read.
    NoInput = 66,
    /// Unavailable: EDC or Redis unreachable after the retry budget.
    Unavailable = 69,
    /// A qualification (IQ/OQ) check did not pass.
    QualificationFailed = 70,
    /// I/O error writing landing, audit or state.
    IoErr = 74,
    /// Temporary failure, progress saved: try again later.
    TempFail = 75,
    /// Permission: the EDC refused the credential (401/403, a vendor's
    /// refusal in the body, a failed login or credential helper).
    NoPerm = 77,
    /// Configuration: invalid, uncommitted, or a missing environment variable.
    Config = 78,
}

/// One documented exit code: its number, a short label for `--help`, and
/// the meaning and advice the README's table gives word for word (a test
/// holds the README to this list).
pub struct Documented {
    pub code: u8,
    pub label: &'static str,
    pub meaning: &'static str,
    pub what_to_do: &'static str,
}

impl Exit {
    /// Every code the tool exits with, in order. 130 is not an [`Exit`]:
    /// it is the signal handler's abort, outside the error mapping.
    pub const ALL: [Documented; 11] = [
        Documented { code: 0, label: "ok", meaning: "done: everything requested completed", what_to_do: "nothing" },
        Documented { code: 2, label: "usage", meaning: "usage error (bad flags)", what_to_do: "fix the command line" },
        Documented {
            code: 65,
            label: "data",
            meaning: "data error: invalid payload (a cursor value of the wrong kind included), broken audit chain, an audit trail whose end does not verify or that diverges from its anchor, state that disagrees with the trail at start (a cursor, the manifest's tail, the last landed page, a landing owned by another state directory), a damaged manifest, `verify` discrepancies",
            what_to_do: "investigate; do not retry blindly (`--repair-audit` records a known audit damage, `--repair-state` takes the trail's state; both audited; docs/operations.md)",
        },
        Documented {
            code: 66,
            label: "no input",
            meaning: "an input file named on the command line cannot be read (`--config`, `audit verify FILE`, the paths given to `verify`)",
            what_to_do: "check the path",
        },
        Documented {
            code: 69,
            label: "unavailable",
            meaning: "unavailable: EDC or Redis unreachable after the retry budget, the landing's object store unreachable or failing (5xx), or the PostgreSQL state database unreachable or lost mid-run (nothing more was committed)",
            what_to_do: "check connectivity; the next run resumes",
        },
        Documented {
            code: 70,
            label: "qualification failed",
            meaning: "qualification failed: an IQ/OQ check did not pass",
            what_to_do: "read the report's Deviations",
        },
        Documented {
            code: 74,
            label: "I/O",
            meaning: "I/O error writing landing, audit or state (an object store that found other bytes than the SHA-256 sent included, a state database out of disk), or a file or directory below them that is a symbolic link (never followed)",
            what_to_do: "check disk space and permissions; replace the link by what it stood for",
        },
        Documented {
            code: 75,
            label: "try later",
            meaning: "temporary failure, progress saved (retry budget or max wait exhausted, stream locked, the run lock taken over by another run, interrupted, the object store throttling: 429 or SlowDown, a state-database deadlock or serialization failure that outlasted its retries)",
            what_to_do: "nothing: the next scheduled run resumes",
        },
        Documented {
            code: 77,
            label: "permission",
            meaning: "permission: the EDC refused the credential (401/403, a refused login, a vendor's access error, a failed credential helper), the object store refused the landing's credentials, or the state database refused the role or its grants",
            what_to_do: "check the variables the message names",
        },
        Documented {
            code: 78,
            label: "configuration",
            meaning: "configuration: invalid, uncommitted, a missing environment variable, a URL edc-sync does not take there (`--out ftp://…`, `--state redis://…`), or a state database without this binary's schema version or read-only (a replica)",
            what_to_do: "fix and commit the policy, set the variable, give a path or a URL edc-sync takes there, run `edc-sync state migrate`, or point --state at the primary",
        },
        Documented {
            code: 130,
            label: "aborted",
            meaning: "aborted by a second SIGINT/SIGTERM (the first stops at a safe point with 75)",
            what_to_do: "nothing is corrupt; run again",
        },
    ];

    /// `Exit codes: 0 ok, 2 usage, ...` for the end of `--help`.
    pub fn help_footer() -> String {
        let codes: Vec<String> = Exit::ALL
            .iter()
            .map(|d| format!("{} {}", d.code, d.label))
            .collect();
        format!("Exit codes: {} (see the README).", codes.join(", "))
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    /// The exit of a landing or state failure: damage 65; an object store
    /// unreachable or failing 69, throttling 75, credentials refused 77;
    /// anything else 74.
    fn for_store(e: &StoreError) -> Exit {
        match e {
            StoreError::Corrupt { .. } => Exit::DataErr,
            StoreError::Object(o) => Exit::for_object(o),
            StoreError::Db(e) => Exit::for_db(e),
            _ => Exit::IoErr,
        }
    }

    /// The exit of an object-store failure: unreachable or failing 69,
    /// throttling 75, credentials refused 77, a bad URL 78, else 74.
    fn for_object(o: &crate::store::object::ObjectError) -> Exit {
        use crate::store::object::Failure;
        match o.failure {
            Failure::Unavailable => Exit::Unavailable,
            Failure::Throttled => Exit::TempFail,
            Failure::Refused => Exit::NoPerm,
            Failure::Config => Exit::Config,
            Failure::Checksum | Failure::Other => Exit::IoErr,
        }
    }

    /// The exit of a state-database failure (its variant decides).
    fn for_db(e: &crate::state_db::DbError) -> Exit {
        match e.exit_code() {
            65 => Exit::DataErr,
            69 => Exit::Unavailable,
            75 => Exit::TempFail,
            77 => Exit::NoPerm,
            78 => Exit::Config,
            _ => Exit::IoErr,
        }
    }

    /// A pacer that cannot be used: a URL it does not take is a
    /// configuration mistake (78) wherever it is given; anything else is
    /// Redis unavailable or misbehaving (69).
    fn for_pacer(e: &PacerError) -> Exit {
        match e {
            PacerError::InvalidUrl { .. } => Exit::Config,
            PacerError::Unavailable { .. } | PacerError::Protocol { .. } => Exit::Unavailable,
        }
    }

    /// The code for an error: the first cause in the chain that has one.
    /// Anything unclassified is a software fault and reports as I/O (74)
    /// rather than claiming success or a retryable state.
    pub fn for_error(err: &anyhow::Error) -> Exit {
        for cause in err.chain() {
            // A policy file that cannot be read is an input file named on
            // the command line (README: 66), not an invalid policy.
            if let Some(ConfigError::Read { .. }) = cause.downcast_ref::<ConfigError>() {
                return Exit::NoInput;
            }
            if cause.is::<ConfigError>() {
                return Exit::Config;
            }
            if cause.is::<NotIntact>() || cause.is::<crate::reconcile::Discrepancies>() {
                return Exit::DataErr;
            }
            if cause.is::<crate::reconcile::Unreadable>() {
                return Exit::NoInput;
            }
            if cause.is::<verify::ReadError>() {
                return Exit::NoInput;
            }
            if let Some(AuditError::Db(e)) = cause.downcast_ref::<AuditError>() {
                return Exit::for_db(e);
            }
            if let Some(e) = cause.downcast_ref::<AuditError>() {
                return if e.is_damage() { Exit::DataErr } else { Exit::IoErr };
            }
            if let Some(e) = cause.downcast_ref::<crate::state_db::DbError>() {
                return Exit::for_db(e);
            }
            if let Some(e) = cause.downcast_ref::<crate::reconcile::DbUnreadable>() {
                return match e {
                    crate::reconcile::DbUnreadable::Db(e) => Exit::for_db(e),
                    crate::reconcile::DbUnreadable::Export(crate::state_db::ExportError::Db(e)) => {
                        Exit::for_db(e)
                    }
                    crate::reconcile::DbUnreadable::Export(_) => Exit::IoErr,
                    crate::reconcile::DbUnreadable::Local(_) => Exit::NoInput,
                    crate::reconcile::DbUnreadable::Object(o) => Exit::for_object(o),
                };
            }
            if let Some(e) = cause.downcast_ref::<crate::state_db::ExportError>() {
                return match e {
                    crate::state_db::ExportError::Db(e) => Exit::for_db(e),
                    crate::state_db::ExportError::Refused { .. } => Exit::Config,
                    crate::state_db::ExportError::Io { .. } => Exit::IoErr,
                };
            }
            if cause.is::<KeyError>() {
                return Exit::Config;
            }
            if cause.is::<crate::audit::anchor::redis_copy::RedisAnchorError>() {
                return Exit::Unavailable;
            }
            if let Some(e) = cause.downcast_ref::<SyncError>() {
                return match e {
                    SyncError::Exhausted { .. }
                    | SyncError::Locked(_)
                    | SyncError::LockLost { .. }
                    | SyncError::Interrupted { .. } => Exit::TempFail,
                    SyncError::Unreachable { .. } => Exit::Unavailable,
                    SyncError::Pacer(e) => Exit::for_pacer(e),
                    SyncError::Permission { .. } => Exit::NoPerm,
                    SyncError::Credential { error, .. } => match error {
                        AuthError::Refused { .. }
                        | AuthError::Helper { .. }
                        | AuthError::WrongVault { .. } => Exit::NoPerm,
                        AuthError::Unavailable { .. } => Exit::Unavailable,
                        AuthError::Throttled { .. } => Exit::TempFail,
                        AuthError::Protocol { .. } | AuthError::OffOrigin { .. } => Exit::DataErr,
                    },
                    SyncError::Rejected { .. } => Exit::DataErr,
                    SyncError::Audit(AuditError::Db(e)) => Exit::for_db(e),
                    SyncError::Audit(e) if e.is_damage() => Exit::DataErr,
                    SyncError::Store(e) => Exit::for_store(e),
                    SyncError::Audit(_) => Exit::IoErr,
                };
            }
            if cause.is::<NotQualified>() {
                return Exit::QualificationFailed;
            }
            if cause.is::<StreamLocked>() {
                return Exit::TempFail;
            }
            if let Some(e) = cause.downcast_ref::<StoreError>() {
                return Exit::for_store(e);
            }
            if let Some(e) = cause.downcast_ref::<PacerError>() {
                return Exit::for_pacer(e);
            }
            if let Some(e) = cause.downcast_ref::<AcquireError>() {
                return match e {
                    AcquireError::WaitTooLong { .. } => Exit::TempFail,
                    AcquireError::Pacer(e) => Exit::for_pacer(e),
                    AcquireError::Quota(_) => Exit::Config,
                };
            }
        }
        Exit::IoErr
    }
}

/// A child process's exit status as people read it (in a soak's figures,
/// an OQ step's result): the code, or that a signal ended it.
pub fn status_text(code: Option<i32>) -> String {
    code.map_or_else(|| "none (killed by a signal)".into(), |c| c.to_string())
}

/// True when the error is only that stdout's reader went away (`| head`),
/// which ends the program quietly, as other Unix tools do.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

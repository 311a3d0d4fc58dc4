//! Why a stream stopped early: one error type, each variant one exit code
//! ([`SyncError::exit`]).

use crate::audit::AuditError;
use crate::edc::AuthError;
use crate::exit::Exit;
use crate::ledger::{LockError, Locked as StreamLocked, StoreError};
use quota_pacer::PacerError;

/// Why a stream stopped early. Each variant has one exit code.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Retry budget or max wait spent (exit 75, progress saved).
    #[error("{stream}: {reason}; the cursor is unchanged and the next run resumes there")]
    Exhausted { stream: String, reason: String },
    /// The EDC could not be reached within the retry budget (exit 69).
    #[error("{stream}: the EDC is unreachable after {attempts} attempt(s): {detail}")]
    Unreachable {
        stream: String,
        attempts: u32,
        detail: String,
    },
    /// The EDC banned this host's address (REDCap's hit threshold): exit
    /// 76, never retried.
    #[error("{stream}: {detail}")]
    Banned { stream: String, detail: String },
    /// The server does not offer what the policy asks of it (REDCap older
    /// than its Export Logging): exit 78, a configuration to change.
    #[error("{stream}: {detail}")]
    Unsupported { stream: String, detail: String },
    /// 401 / 403, or a vendor's refusal in the body (exit 77). `hint`
    /// names the credential variables of the scheme in use.
    #[error("{stream}: {detail}: {hint}")]
    Permission {
        stream: String,
        detail: String,
        hint: String,
    },
    /// No credential could be obtained: the login was refused or the
    /// helper failed (77), the login endpoint is down (69), or it answered
    /// something that is not a login response (65).
    #[error("{stream}: {error}; {hint}")]
    Credential {
        stream: String,
        hint: String,
        error: AuthError,
    },
    /// Another 4xx, an invalid payload, a bad next link (exit 65).
    #[error("{stream}: {reason}")]
    Rejected { stream: String, reason: String },
    #[error(transparent)]
    Pacer(#[from] PacerError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error(transparent)]
    Locked(#[from] StreamLocked),
    /// The cross-host run lock was lost mid-run (taken by another run, or
    /// gone from Redis), so this one stops without moving the cursor
    /// (exit 75). `now` says which.
    #[error("{stream}: lost the run lock (fence {fence}): {now}; the cursor was not moved")]
    LockLost { stream: String, fence: u64, now: String },
    /// A collection changed under every pass a run may make (exit 75: the
    /// pages read are committed, and the next run reads it again).
    #[error("{stream}: {detail}")]
    Unsettled { stream: String, detail: String },
    /// SIGINT / SIGTERM (exit 75: progress saved, run again).
    #[error("{stream}: interrupted at a safe point; committed pages are kept and the next run resumes")]
    Interrupted { stream: String },
}

impl SyncError {
    /// Its exit code, one for each variant.
    pub fn exit(&self) -> Exit {
        match self {
            SyncError::Exhausted { .. }
            | SyncError::Locked(_)
            | SyncError::LockLost { .. }
            | SyncError::Unsettled { .. }
            | SyncError::Interrupted { .. } => Exit::TempFail,
            SyncError::Unreachable { .. } => Exit::Unavailable,
            SyncError::Pacer(e) => Exit::for_pacer(e),
            SyncError::Permission { .. } => Exit::NoPerm,
            SyncError::Banned { .. } => Exit::Banned,
            SyncError::Unsupported { .. } => Exit::Config,
            SyncError::Credential { error, .. } => match error {
                AuthError::Refused { .. } | AuthError::Helper { .. } | AuthError::WrongVault { .. } => {
                    Exit::NoPerm
                }
                AuthError::Unavailable { .. } => Exit::Unavailable,
                AuthError::Throttled { .. } => Exit::TempFail,
                AuthError::Protocol { .. } | AuthError::OffOrigin { .. } => Exit::DataErr,
            },
            SyncError::Rejected { .. } => Exit::DataErr,
            SyncError::Audit(e) => e.exit(),
            SyncError::Store(e) => e.exit(),
        }
    }
}

impl From<crate::ledger::LedgerError> for SyncError {
    fn from(e: crate::ledger::LedgerError) -> Self {
        use crate::ledger::LedgerError;
        match e {
            LedgerError::Audit(a) => SyncError::Audit(a),
            LedgerError::Store(s) => SyncError::Store(s),
            LedgerError::Locked(l) => SyncError::Locked(l),
            LedgerError::Pacer(p) => SyncError::Pacer(p),
        }
    }
}

impl From<LockError> for SyncError {
    fn from(e: LockError) -> Self {
        match e {
            LockError::Locked(l) => SyncError::Locked(l),
            LockError::Store(s) => SyncError::Store(s),
        }
    }
}

//! Why the state database failed, and which exit code that is. The type
//! lives below the audit trail and the state, which report it; which
//! failure a client error is (by SQLSTATE) is decided in `state_db/`.

use crate::exit::Exit;

/// A failure of the state database. Each variant has one exit code.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// Could not connect, or the connection was lost (69: the next run
    /// resumes from the last committed transaction).
    #[error("state database {url}: cannot {op} it: {detail}")]
    Unavailable {
        url: String,
        op: &'static str,
        detail: String,
    },
    /// The credentials or the role's grants were refused (77).
    #[error("state database {url}: {op}: permission refused: {detail}")]
    Permission {
        url: String,
        op: &'static str,
        detail: String,
    },
    /// Wrong database, schema version, or a read-only server (78).
    #[error("state database {url}: {detail}")]
    Config { url: String, detail: String },
    /// What the database holds disagrees with its own trail, or a row
    /// refused as a rewrite (65): nothing more is written on top of it.
    #[error("state database {url}: {detail}")]
    Damaged { url: String, detail: String },
    /// The server could not write (disk full, out of resources) or failed
    /// a statement otherwise (74).
    #[error("state database {url}: cannot {op}: {detail}")]
    Write {
        url: String,
        op: &'static str,
        detail: String,
    },
    /// The stream's run lock was taken over by a later run (its fence is
    /// higher): this run may not commit (75; nothing was committed).
    #[error(
        "state database {url}: stream {stream}: lost the run lock (this run's fence {ours}, the stream's now {}); \
         nothing was committed",
        now.map_or_else(|| "none".to_string(), |n| n.to_string())
    )]
    Fenced {
        url: String,
        stream: String,
        ours: i64,
        now: Option<i64>,
    },
    /// A serialization failure or deadlock that stayed after retries (75).
    #[error("state database {url}: {op}: {detail} (still after {attempts} attempts; nothing was committed)")]
    Contended {
        url: String,
        op: &'static str,
        detail: String,
        attempts: u32,
    },
}

impl DbError {
    /// Its exit code, one for each variant.
    pub fn exit(&self) -> Exit {
        match self {
            DbError::Unavailable { .. } => Exit::Unavailable,
            DbError::Permission { .. } => Exit::NoPerm,
            DbError::Config { .. } => Exit::Config,
            DbError::Damaged { .. } => Exit::DataErr,
            DbError::Write { .. } => Exit::IoErr,
            DbError::Contended { .. } | DbError::Fenced { .. } => Exit::TempFail,
        }
    }
}

//! Why the state database failed, and which exit code that is: SQLSTATE
//! decides, never the message text.

use super::DbUrl;
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

    /// A serialization failure or deadlock: the transaction is worth
    /// running again as a whole.
    pub(crate) fn is_retryable(e: &tokio_postgres::Error) -> bool {
        use tokio_postgres::error::SqlState;
        e.code().is_some_and(|c| {
            *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
        })
    }

    /// Maps a client error by its SQLSTATE class.
    pub(crate) fn classify(url: &DbUrl, op: &'static str, e: tokio_postgres::Error) -> DbError {
        let url = url.shown().to_string();
        let detail = describe(&e);
        let Some(code) = e.code() else {
            // No SQLSTATE: the connection (refused, timed out, closed).
            return DbError::Unavailable { url, op, detail };
        };
        match &code.code()[..2] {
            // 28: invalid authorization; 42501: insufficient privilege.
            "28" => DbError::Permission { url, op, detail },
            "42" if code.code() == "42501" => DbError::Permission { url, op, detail },
            // 3D: the database does not exist; 25006: read-only transaction.
            "3D" => DbError::Config { url, detail },
            "25" if code.code() == "25006" => DbError::Config {
                url,
                detail: format!("{detail}: the server is read-only (a replica given by mistake?)"),
            },
            // 08: connection exception; 57P: the server shut down.
            "08" | "57" => DbError::Unavailable { url, op, detail },
            // ED: this schema's own refusals (append-only, chain).
            "ED" => DbError::Damaged { url, detail },
            // 53: insufficient resources (disk full, out of memory).
            _ => DbError::Write { url, op, detail },
        }
    }
}

/// The server's message (and detail) rather than the client's generic
/// "db error".
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(d) => format!("{} ({}; SQLSTATE {})", db.message(), d, db.code().code()),
            None => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        },
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                text.push_str(": ");
                text.push_str(&s.to_string());
                source = s.source();
            }
            text
        }
    }
}

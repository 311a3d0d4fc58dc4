//! Which failure of the state database a client error is: SQLSTATE
//! decides, never the message text. ([`DbError`] itself, and its exit
//! codes, are in `db_error.rs`, below the trail and the state that report
//! it.)

use super::DbUrl;
use crate::db_error::DbError;

/// A serialization failure or deadlock: the transaction is worth
/// running again as a whole.
pub(crate) fn is_retryable(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    e.code()
        .is_some_and(|c| *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED)
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
        // ED004: a line without the MAC of the audit key the database
        // requires (a run's key that changed while it ran; the start-up
        // check names both keys before any append).
        "ED" if code.code() == "ED004" => DbError::Config { url, detail },
        // ED: this schema's own refusals (append-only, chain).
        "ED" => DbError::Damaged { url, detail },
        // 53: insufficient resources (disk full, out of memory).
        _ => DbError::Write { url, op, detail },
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

//! One audit trail shared by the tasks of a run: a file, whose appends run
//! on the blocking pool (each is an fsync), one at a time, in the order
//! they are awaited; or a state database's trail, whose appends are
//! transactions on the run's connection.

use std::sync::{Arc, Mutex};

use super::commit::{CommitReceipt, CommitRecord};
use super::log::{Appended, AuditError, AuditEvent, AuditLog};
use super::run_id::RunId;
use crate::state_db::DbTrail;

#[derive(Clone)]
pub(crate) struct SharedAudit {
    writer: Writer,
    run_id: RunId,
    path: std::path::PathBuf,
    canonical: std::path::PathBuf,
}

/// Where the lines go.
#[derive(Clone)]
enum Writer {
    File(Arc<Mutex<AuditLog>>),
    Db(Arc<DbTrail>),
}

impl SharedAudit {
    pub(crate) fn new(log: AuditLog) -> SharedAudit {
        let run_id = log.run_id().clone();
        let path = log.path().to_path_buf();
        let canonical = log.canonical_path().to_path_buf();
        SharedAudit {
            writer: Writer::File(Arc::new(Mutex::new(log))),
            run_id,
            path,
            canonical,
        }
    }

    /// The trail kept in a state database.
    pub(crate) fn in_db(trail: DbTrail) -> SharedAudit {
        let run_id = trail.run_id().clone();
        let path = trail.label();
        let canonical = std::path::PathBuf::from(trail.name());
        SharedAudit {
            writer: Writer::Db(Arc::new(trail)),
            run_id,
            path,
            canonical,
        }
    }

    /// The state database's trail, when the trail is kept there.
    pub(crate) fn db(&self) -> Option<&Arc<DbTrail>> {
        match &self.writer {
            Writer::Db(t) => Some(t),
            Writer::File(_) => None,
        }
    }

    pub(crate) fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// The trail's path (in a state database: the database and the
    /// trail's name), for messages.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// The path anchors know the trail by (in a database: its name).
    pub(crate) fn canonical_path(&self) -> &std::path::Path {
        &self.canonical
    }

    /// Appends `event`; returns once the line is durable.
    pub(crate) async fn record<E: AuditEvent + Send + 'static>(
        &self,
        event: E,
    ) -> Result<Appended, AuditError> {
        let inner = match &self.writer {
            Writer::Db(trail) => return trail.record(&event).await,
            Writer::File(inner) => inner.clone(),
        };
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || inner.lock().unwrap_or_else(|p| p.into_inner()).record(&event))
            .await
            .unwrap_or_else(|e| {
                Err(AuditError::Io {
                    path,
                    op: "append (the writer task failed)",
                    error: std::io::Error::other(e),
                })
            })
    }

    /// Appends from synchronous code (set-up and tear-down).
    pub(crate) fn record_blocking<E: AuditEvent>(&self, event: &E) -> Result<Appended, AuditError> {
        match &self.writer {
            Writer::File(inner) => inner.lock().unwrap_or_else(|p| p.into_inner()).record(event),
            Writer::Db(trail) => crate::state_db::block_on(trail.record(event)),
        }
    }

    /// Appends a page's commit record from synchronous code; returns its
    /// receipt once the line is fsynced. A database's trail commits a page
    /// with its manifest row and cursor in one transaction instead
    /// ([`DbTrail::commit_page`]), never through here.
    pub(crate) fn record_commit_blocking<C: CommitRecord>(
        &self,
        record: C,
    ) -> Result<CommitReceipt, AuditError> {
        match &self.writer {
            Writer::File(inner) => inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .record_commit(record),
            Writer::Db(trail) => Err(AuditError::Encode {
                path: trail.label(),
                error: super::EncodeError::NotAnObject {
                    event: super::commit::COMMIT_EVENT,
                    detail: "a page commit in a state database is one transaction with its manifest row and \
                             cursor (DbTrail::commit_page)"
                        .into(),
                },
            }),
        }
    }

    /// `value` as a line of this trail would record it (identifiers masked).
    pub(crate) fn as_recorded(&self, value: serde_json::Value) -> serde_json::Value {
        match &self.writer {
            Writer::File(inner) => inner.lock().unwrap_or_else(|p| p.into_inner()).as_recorded(value),
            Writer::Db(trail) => trail.as_recorded(value),
        }
    }

    /// The chain head now, to anchor outside the file (`None` for a
    /// database's trail, which anchors itself: [`DbTrail::anchor`]).
    pub(crate) fn head(&self) -> Result<Option<super::ChainHead>, AuditError> {
        match &self.writer {
            Writer::File(inner) => inner.lock().unwrap_or_else(|p| p.into_inner()).head().map(Some),
            Writer::Db(_) => Ok(None),
        }
    }

    /// Checks an anchor found after the header was written (see
    /// [`AuditLog::check_anchor`]); a database's trail has no file anchors.
    pub(crate) fn check_anchor(&self, source: &str, head: &super::ChainHead) -> Result<(), AuditError> {
        match &self.writer {
            Writer::File(inner) => inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .check_anchor(source, head),
            Writer::Db(_) => Ok(()),
        }
    }
}

//! One audit log shared by the tasks of a run. Appends run on the blocking
//! pool (each is an fsync), one at a time, in the order they are awaited.

use std::sync::{Arc, Mutex};

use super::commit::{CommitReceipt, CommitRecord};
use super::log::{Appended, AuditError, AuditEvent, AuditLog};
use super::run_id::RunId;

#[derive(Clone)]
pub struct SharedAudit {
    inner: Arc<Mutex<AuditLog>>,
    run_id: RunId,
    path: std::path::PathBuf,
    canonical: std::path::PathBuf,
}

impl SharedAudit {
    pub fn new(log: AuditLog) -> SharedAudit {
        let run_id = log.run_id().clone();
        let path = log.path().to_path_buf();
        let canonical = log.canonical_path().to_path_buf();
        SharedAudit {
            inner: Arc::new(Mutex::new(log)),
            run_id,
            path,
            canonical,
        }
    }

    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// The path anchors know the trail by.
    pub fn canonical_path(&self) -> &std::path::Path {
        &self.canonical
    }

    /// Appends `event`; returns once the line is fsynced.
    pub async fn record<E: AuditEvent + Send + 'static>(&self, event: E) -> Result<Appended, AuditError> {
        let inner = self.inner.clone();
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
    pub fn record_blocking<E: AuditEvent>(&self, event: &E) -> Result<Appended, AuditError> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).record(event)
    }

    /// Appends a page's commit record from synchronous code; returns its
    /// receipt once the line is fsynced.
    pub fn record_commit_blocking<C: CommitRecord>(&self, record: &C) -> Result<CommitReceipt, AuditError> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record_commit(record)
    }

    /// `value` as a line of this trail would record it (identifiers masked).
    pub fn as_recorded(&self, value: serde_json::Value) -> serde_json::Value {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_recorded(value)
    }

    /// The chain head now, to anchor outside the file.
    pub fn head(&self) -> Result<super::ChainHead, AuditError> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).head()
    }

    /// Checks an anchor found after the header was written (see
    /// [`AuditLog::check_anchor`]).
    pub fn check_anchor(&self, source: &str, head: &super::ChainHead) -> Result<(), AuditError> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .check_anchor(source, head)
    }
}

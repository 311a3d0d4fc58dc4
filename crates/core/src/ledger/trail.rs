//! The run's audit trail, on either backend, and its anchors.
//!
//! In files: the JSON Lines file named by `--audit-log`, whose appends run
//! on the blocking pool (each is an fsync), one at a time, in the order
//! they are awaited, with its chain head anchored in the state directory
//! (`audit-anchors/`). In a state database: the trail's rows, each append a
//! transaction on the run's connection, anchored in `edc_sync_anchor`. On
//! both, with Redis, the head is also anchored in Redis, out of reach of
//! whoever can write the state; a run checks every anchor before its first
//! line reaches anything, and refuses (65) a trail cut short, replaced or
//! rewritten below one. With the audit key, the trail's last keyed
//! checkpoint is verified before the run adds to it, on both backends.

use std::sync::{Arc, Mutex};

use quota_pacer::RedisPacer;

use crate::audit::{
    Anchors, Appended, AuditError, AuditEvent, AuditKey, AuditLog, ChainHead, CommitReceipt, CommitRecord,
    RunId, RunStarted,
};
use crate::state_db::DbTrail;

use super::LedgerError;

/// How a run treats its trail.
#[derive(Debug, Clone, Default)]
pub(crate) struct TrailOptions {
    /// `--audit-log`: the file, or (in a state database) its file name,
    /// which names the trail there.
    pub audit_log: std::path::PathBuf,
    /// `--repair-audit`: record a damaged end or a diverged anchor instead
    /// of refusing to append (files).
    pub repair: bool,
    /// Signs every `run_finished` line; its last checkpoint is verified
    /// before the run adds a line.
    pub key: Option<AuditKey>,
    /// `--adopt-unsealed-trail`: with the key, a trail no line of which is
    /// sealed is taken and the taking recorded, not refused.
    pub adopt_unsealed: bool,
    /// The state directory whose `audit-anchors/` anchors the trail, when
    /// it is not the run's own (a backfill keeps its cursors apart but
    /// appends to the same trail, so it shares the trail's one anchor).
    pub anchor_root: Option<std::path::PathBuf>,
}

/// One audit trail shared by the tasks of a run.
#[derive(Clone)]
pub(crate) struct Trail {
    writer: Writer,
    run_id: RunId,
    path: std::path::PathBuf,
    canonical: std::path::PathBuf,
}

/// Where the lines go, and where the head is anchored.
#[derive(Clone)]
enum Writer {
    File(FileTrail),
    Db(Arc<DbTrail>),
}

/// A trail kept in a file: its writer, and the anchors of its head. A
/// stream kept in files commits its pages through it (`stream.rs`).
#[derive(Clone)]
pub(crate) struct FileTrail {
    log: Arc<Mutex<AuditLog>>,
    anchors: Arc<Anchors>,
}

impl FileTrail {
    /// Appends a page's commit record from synchronous code; returns its
    /// receipt once the line is fsynced.
    pub(crate) fn record_commit_blocking<C: CommitRecord>(
        &self,
        record: C,
    ) -> Result<CommitReceipt, AuditError> {
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record_commit(record)
    }
}

/// Why the trail was not taken against its anchor in Redis: the trail
/// diverges from it (65), or Redis could not answer (69).
#[derive(Debug, thiserror::Error)]
pub(crate) enum AnchorRefused {
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error(transparent)]
    Redis(#[from] crate::audit::RedisAnchorError),
}

/// The trail's name in a state database: `--audit-log`'s file name, so
/// that `audit export --to` that name gives back the file receipts name.
pub(crate) fn name_in_db(audit_log: &std::path::Path) -> String {
    audit_log
        .file_name()
        .map_or_else(|| "audit.jsonl".into(), |n| n.to_string_lossy().into_owned())
}

impl Trail {
    /// Opens the run's trail in the state database `db`, checks its anchors
    /// (and, with the key, its last checkpoint), and writes `header` as its
    /// first line of this run.
    pub(super) async fn open_db(
        db: &crate::state_db::StateDb,
        options: &TrailOptions,
        run_id: &RunId,
        masker: crate::mask::Masker,
        header: RunStarted,
    ) -> Result<(Trail, Arc<DbTrail>), LedgerError> {
        let header = header.with_state_db(db.url().shown(), db.schema_version());
        let trail = DbTrail::new(db.clone(), name_in_db(&options.audit_log), run_id.clone())
            .with_masker(Some(masker))
            .with_key(options.key.clone())
            .with_adopt_unsealed(options.adopt_unsealed);
        let adopted = trail.check_anchors().await?;
        let db_trail = Arc::new(trail);
        let trail = Trail {
            run_id: run_id.clone(),
            path: db_trail.label(),
            canonical: std::path::PathBuf::from(db_trail.name()),
            writer: Writer::Db(db_trail.clone()),
        };
        trail.record(header).await?;
        trail.record_adoption(options, adopted).await?;
        Ok((trail, db_trail))
    }

    /// After the header: the `audit_key_adopted` line of a trail with no
    /// sealed line that this run was told to take under its key.
    async fn record_adoption(&self, options: &TrailOptions, adopted: Option<u64>) -> Result<(), LedgerError> {
        if let (Some(unsealed_lines), Some(key)) = (adopted, &options.key) {
            self.record(super::events::AuditKeyAdopted {
                key_id: key.id(),
                unsealed_lines,
                adopted_by: "--adopt-unsealed-trail",
            })
            .await?;
        }
        Ok(())
    }

    /// Opens the audit file with its anchors checked, and writes the header.
    pub(super) async fn open_file(
        state_dir: &std::path::Path,
        options: &TrailOptions,
        run_id: &RunId,
        masker: crate::mask::Masker,
        header: RunStarted,
    ) -> Result<(Trail, FileTrail), LedgerError> {
        let log = AuditLog::open(&options.audit_log, run_id.clone())?
            .with_masker(masker)
            .with_repair(options.repair)
            .with_key(options.key.clone())
            .with_adopt_unsealed(options.adopt_unsealed);
        let anchor_root = options.anchor_root.as_deref().unwrap_or(state_dir);
        let file = log.canonical_path().to_path_buf();
        let first_line = |what: &'static str| {
            crate::audit::anchor::first_line_sha256(&file).map_err(|error| AuditError::Io {
                path: file.clone(),
                op: what,
                error,
            })
        };
        let anchors = Anchors::of(
            anchor_root,
            &options.audit_log,
            &file,
            first_line("read its first line to find its anchor")?,
        );
        let found = anchors.load_file().map_err(|e| AuditError::Io {
            path: anchors
                .file()
                .unwrap_or_else(|| state_dir.join(crate::audit::ANCHOR_DIR)),
            op: "read the audit anchor",
            error: std::io::Error::other(e),
        })?;
        let log = match (&found, anchors.file()) {
            (Some(found), _) => log.with_anchor(found.source.clone(), found.head.clone()),
            (None, Some(expected)) => log.with_missing_anchor(expected),
            (None, None) => log,
        };
        let path = log.path().to_path_buf();
        let canonical = log.canonical_path().to_path_buf();
        let log = Arc::new(Mutex::new(log));
        let trail = Trail {
            writer: Writer::File(FileTrail {
                log: log.clone(),
                anchors: Arc::new(anchors.clone()),
            }),
            run_id: run_id.clone(),
            path,
            canonical,
        };
        trail.record(header).await?;
        let adopted = log.lock().unwrap_or_else(|p| p.into_inner()).adopted();
        trail.record_adoption(options, adopted).await?;
        // The header is the first line of a new trail: its identity from now.
        let anchors = anchors.with_first_line(first_line("read its first line to anchor it")?);
        if let Some(found) = found.filter(|f| f.legacy) {
            trail.record(anchors.reinterpreted(&found)).await?;
        }
        let file = FileTrail {
            log,
            anchors: Arc::new(anchors),
        };
        let trail = Trail {
            writer: Writer::File(file.clone()),
            ..trail
        };
        Ok((trail, file))
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
            Writer::File(file) => file.log.clone(),
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
            Writer::File(file) => file.log.lock().unwrap_or_else(|p| p.into_inner()).record(event),
            Writer::Db(trail) => crate::state_db::block_on(trail.record(event)),
        }
    }

    /// `value` as a line of this trail would record it (identifiers masked).
    pub(crate) fn as_recorded(&self, value: serde_json::Value) -> serde_json::Value {
        match &self.writer {
            Writer::File(file) => file
                .log
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_recorded(value),
            Writer::Db(trail) => trail.as_recorded(value),
        }
    }

    /// With Redis, the trail is also checked against the anchor kept
    /// there, as soon as Redis is reached and before any request.
    pub(crate) async fn check_redis_anchor(&self, redis: &RedisPacer) -> Result<(), AnchorRefused> {
        match &self.writer {
            Writer::File(FileTrail { log, anchors }) => {
                if let Some(found) = anchors.load_redis(redis).await? {
                    log.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .check_anchor(&found.source, &found.head)?;
                    if found.legacy {
                        self.record(anchors.reinterpreted(&found)).await?;
                    }
                }
            }
            Writer::Db(trail) => {
                let Some(first) = trail.chain_head().await?.and_then(|h| h.first_sha256) else {
                    return Ok(());
                };
                let key = ChainHead::redis_key(&first);
                if let Some(head) = crate::audit::anchor::redis_copy::load(redis, &key).await? {
                    trail
                        .check_head(&format!("anchor in Redis ({key})"), &head)
                        .await?;
                }
            }
        }
        Ok(())
    }

    /// Writes the chain head outside the trail: in the state (the state
    /// directory's anchor file, or `edc_sync_anchor`) and, with Redis, in
    /// Redis. A failure is reported on stderr and does not change the
    /// run's exit code, which `run_finished` has already recorded; the next
    /// run then checks against the older anchor. Returns whether the
    /// state's anchor was written.
    pub(crate) async fn anchor(&self, redis: Option<&RedisPacer>) -> bool {
        match &self.writer {
            Writer::File(FileTrail { log, anchors }) => {
                let head = match log.lock().unwrap_or_else(|p| p.into_inner()).head() {
                    Ok(h) => h,
                    Err(e) => {
                        eprintln!("warning: audit anchor not written: {e}");
                        return false;
                    }
                };
                let stored = match anchors.store_file(&head) {
                    Ok(()) => true,
                    Err(e) => {
                        let file = anchors.file().unwrap_or_default();
                        eprintln!("warning: audit anchor {} not written: {e}", file.display());
                        false
                    }
                };
                if let Some(redis) = redis {
                    if let Err(e) = anchors.store_redis(redis, &head).await {
                        eprintln!("warning: audit anchor not written to Redis: {e}");
                    }
                }
                stored
            }
            Writer::Db(trail) => {
                if let Err(e) = trail.anchor().await {
                    eprintln!("warning: audit anchor not written: {e}");
                    return false;
                }
                if let Some(redis) = redis {
                    let stored = match trail.chain_head().await {
                        Ok(Some(head)) => {
                            let key = ChainHead::redis_key(head.first_sha256.as_deref().unwrap_or_default());
                            crate::audit::anchor::redis_copy::store(redis, &[key], &head)
                                .await
                                .map_err(|e| e.to_string())
                        }
                        Ok(None) => Ok(()),
                        Err(e) => Err(e.to_string()),
                    };
                    if let Err(e) = stored {
                        eprintln!("warning: audit anchor not written to Redis: {e}");
                    }
                }
                true
            }
        }
    }
}

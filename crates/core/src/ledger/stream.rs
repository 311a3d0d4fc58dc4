//! One stream's state, held under its run lock, on either backend: the
//! cursor, the manifest and the page commit.
//!
//! In files: the file run lock (and, with Redis, the fenced cross-host
//! lock), the cursor file (a cache of the trail's last commit line,
//! written without an fsync and caught up from the trail at start), and
//! the manifest file in the landing directory. In a state database: the
//! advisory run lock with its fence, the cursor row and the manifest rows,
//! committed with their `page_committed` line in one transaction.
//!
//! Opening a stream (`open.rs`) takes its lock, claims its landing, then
//! runs the start-up proof (`proof.rs`, one procedure for both) before the
//! stream's first request.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use super::{FencedLock, FileTrail, LedgerError, Trail};
use crate::audit::CommitRecord;
use crate::state_db::{DbStream, DbTrail, PageRows};
use crate::store::{
    Cursor, CursorStore, LandedPage, LandingStore, ListedLine, ManifestEntry, PendingCursor, StoreError,
};
use crate::stream::StreamIdentity;

/// What opening a stream needs to know of its run.
pub(crate) struct OpenStream<'a> {
    /// The stream's name, as audit lines give it.
    pub name: &'a str,
    pub identity: &'a StreamIdentity,
    pub trail: &'a Trail,
    /// Where the stream's landing directory is made: `--out`, or for an
    /// object-store landing the state's index of it.
    pub out_dir: &'a Path,
    /// The object store pages land in, when `--out` names one.
    pub object: Option<Arc<crate::store::object::ObjectLanding>>,
    /// The landed pages' extension (`json`, `xml`).
    pub ext: &'static str,
    /// Where a stream never synced starts (`backfill --since`).
    pub since: Option<String>,
    pub dry_run: bool,
    /// `--repair-state`: take the trail's state where the state disagrees.
    pub repair_state: bool,
    /// `--accept-rollback`: record a landing newer than the state and the
    /// trail as a deviation instead of stopping.
    pub accept_rollback: bool,
    /// A backfill's keys in a state database, apart from the incremental ones.
    pub namespace: Option<&'a str>,
    /// With Redis: the pacer and the quota key under which the stream's
    /// fenced cross-host run lock is kept (files; a database fences itself).
    pub redis: Option<(&'a quota_pacer::RedisPacer, &'a str)>,
}

/// A stream opened and proven: its ledger, its landing, and the fenced
/// cross-host lock every commit proves (with Redis, in files).
pub(crate) struct Opened {
    pub ledger: StreamLedger,
    pub landing: LandingStore,
    pub fenced: Option<FencedLock>,
}

/// A stream held by this run, with the trail its commits go to: the same
/// side of the ledger as its cursor and manifest, made only by `open.rs`
/// from one [`super::Ledger`].
pub(crate) enum StreamLedger {
    /// A state directory: the cursor file, its manifest in the landing, and
    /// the audit file.
    Files {
        cursors: Box<CursorStore>,
        trail: FileTrail,
    },
    /// A state database: cursor, manifest rows and trail committed in one
    /// transaction, fenced by the stream's lock there.
    Db {
        held: Box<DbStream>,
        trail: Arc<DbTrail>,
    },
}

/// What one page commit records and moves: its `page_committed` record,
/// the cursor it makes, the landed page it moves past (if any) and its
/// manifest line (when new).
pub(crate) struct PageToCommit<'a, C> {
    pub record: C,
    pub pending: PendingCursor,
    pub landed: Option<&'a LandedPage>,
    pub listed: Option<ListedLine>,
    /// A dry run records its line and moves nothing.
    pub dry_run: bool,
}

impl StreamLedger {
    /// Where the cursor is kept, as messages and reports name it: the
    /// cursor file, or the row.
    pub(crate) fn cursor_place(&self) -> std::path::PathBuf {
        match self {
            StreamLedger::Files { cursors, .. } => cursors.path().to_path_buf(),
            StreamLedger::Db { held, .. } => held.recorded_cursor().into(),
        }
    }

    /// The state is a database's.
    pub(crate) fn is_db(&self) -> bool {
        matches!(self, StreamLedger::Db { .. })
    }

    /// The stream's cursor now.
    pub(crate) async fn load_cursor(&self) -> Result<Cursor, StoreError> {
        match self {
            StreamLedger::Files { cursors, .. } => cursors.load(),
            StreamLedger::Db { held, .. } => held.load().await,
        }
    }

    /// The end of the stream's run: a database's run lock is released at
    /// once (a file lock goes with its store).
    pub(crate) async fn release(&self) {
        if let StreamLedger::Db { held, .. } = self {
            held.unlock().await;
        }
    }

    /// A stream whose run ended cleanly. An object-store landing kept in
    /// files: every line of the manifest index has its object (each was
    /// acknowledged before its commit line), which the publication
    /// watermark records. A state database (whose manifest is its rows):
    /// the landing's head names the stream's last commit
    /// (`landing_head.rs`).
    pub(crate) async fn ended_cleanly(&self, landing: &LandingStore) -> Result<(), StoreError> {
        match (self, landing.remote()) {
            (StreamLedger::Files { .. }, Some(_)) => landing.set_published_watermark(landing.manifest_len()),
            (StreamLedger::Files { .. }, None) => Ok(()),
            (StreamLedger::Db { held, trail }, _) => super::landing_head::write(held, landing, trail).await,
        }
    }

    /// Lists a landed page in the manifest, unless it lists it already (a
    /// replay). Returns its manifest line when it is new: in files, it is
    /// appended to the manifest (and, for an object-store landing, put
    /// beside the pages before the commit line); in a database, it is
    /// handed back for the commit's transaction.
    pub(crate) async fn list(
        &self,
        landing: &mut LandingStore,
        entry: &ManifestEntry,
    ) -> Result<Option<String>, LedgerError> {
        if let StreamLedger::Db { held: db, .. } = self {
            if db.is_listed(&entry.page_key, &entry.sha256).await? {
                return Ok(None);
            }
            let line = serde_json::to_string(entry)
                .map_err(|e| StoreError::io(landing.dir(), "encode a manifest entry for", e.into()))?;
            return Ok(Some(line));
        }
        let listed = landing.list_line(entry)?;
        if let (Some(remote), Some((at, line))) = (landing.remote().cloned(), &listed) {
            let name = crate::store::object::manifest_line_name(landing.recorded_dir(), *at);
            remote
                .put(&name, bytes::Bytes::from(line.clone()))
                .await
                .map_err(StoreError::Object)?;
        }
        Ok(listed.map(|(_, line)| line))
    }

    /// Commits a page: its `page_committed` line, its manifest line (when
    /// new) and the cursor its pending cursor becomes, in the order
    /// invariant 2 requires, to this stream's own trail. `prove_lock`
    /// proves the cross-host run lock right before the cursor moves. In
    /// files: the line (fsynced), the lock proof, then the cursor file
    /// (which the line makes recoverable). In a database: the lock proof,
    /// then one transaction holding the line, the manifest row and the
    /// cursor row, with the stream's fence checked inside it. A dry run
    /// records its line and moves nothing.
    pub(crate) async fn commit<C, E, F>(
        &self,
        landing: &LandingStore,
        page: PageToCommit<'_, C>,
        prove_lock: F,
    ) -> Result<Cursor, E>
    where
        C: CommitRecord + Sync,
        E: From<LedgerError>,
        F: Future<Output = Result<(), E>>,
    {
        let PageToCommit {
            record,
            pending,
            landed,
            listed,
            dry_run,
        } = page;
        match self {
            StreamLedger::Files { cursors, trail } => {
                let audited = trail.record_commit_blocking(record).map_err(LedgerError::from)?;
                if dry_run {
                    return Ok(pending.dry_run());
                }
                prove_lock.await?;
                Ok(cursors
                    .commit(pending, &audited, landed, landing.manifest_len())
                    .map_err(LedgerError::from)?)
            }
            StreamLedger::Db { held, trail } => {
                if dry_run {
                    trail
                        .record_dry_commit(&record)
                        .await
                        .map_err(LedgerError::from)?;
                    return Ok(pending.dry_run());
                }
                prove_lock.await?;
                let rows = PageRows {
                    stream: held.key().to_string(),
                    fence: held.fence(),
                    manifest: listed,
                    memory: held
                        .memory_write(pending.cursor(), pending.memory_change())
                        .map_err(LedgerError::from)?,
                };
                let identity = held.identity();
                let committed = trail
                    .commit_page(&record, rows, |receipt| {
                        pending.clone().proven(identity, receipt, landed)
                    })
                    .await;
                match &committed {
                    Ok(cursor) => held.committed(cursor),
                    Err(_) => held.memory_unknown(),
                }
                Ok(committed.map_err(LedgerError::from)?)
            }
        }
    }
}

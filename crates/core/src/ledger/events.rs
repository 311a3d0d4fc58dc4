//! The audit events of the ledger: what a stream's start found of its
//! state and did about it (rolled forward, rebuilt, repaired, migrated,
//! its lock taken over), each written before the stream's first request.
//! docs/audit-trail.md gives every field.

use serde::Serialize;

use crate::audit::AuditEvent;
use crate::store::Receipt;

/// The cursor file was behind the trail (its last write was lost in a
/// crash): it was moved to the state the stream's last committed page
/// records, before anything was fetched.
#[derive(Debug, Serialize)]
pub(crate) struct CursorRolledForward {
    pub stream: String,
    /// Commits the cursor file had missed.
    pub pages: u64,
    pub cursor_file: String,
    pub cursor_after: serde_json::Value,
}

impl AuditEvent for CursorRolledForward {
    const NAME: &'static str = "cursor_rolled_forward";
}

/// `--repair-state`: the cursor file disagreed with the `page_committed`
/// line its receipt names and now holds the trail's cursor.
#[derive(Debug, Serialize)]
pub(crate) struct StateRepaired {
    pub stream: String,
    pub cursor_file: String,
    /// Where the line the cursor named starts in the trail.
    pub audit_offset: u64,
    /// The state the file held, as the trail records states.
    pub file_said: serde_json::Value,
    /// The state the line records, which the cursor holds now.
    pub trail_says: serde_json::Value,
}

impl AuditEvent for StateRepaired {
    const NAME: &'static str = "state_repaired";
}

/// The cursor file named no commit line of this trail (it was written
/// before cursors carried receipts, or its receipt no longer resolves)
/// and agreed with the trail's last commit of its stream: it names that
/// line now. Written once per such file; one that disagrees is refused.
#[derive(Debug, Serialize)]
pub(crate) struct CursorReceipted {
    pub stream: String,
    pub cursor_file: String,
    /// Where the commit line it names now starts in the trail.
    pub audit_offset: u64,
    /// The receipt it held (none, or one that named no line of the trail).
    pub receipt_was: Option<Receipt>,
}

impl AuditEvent for CursorReceipted {
    const NAME: &'static str = "cursor_receipted";
}

/// `--accept-rollback`: the landing's manifest listed, after the cursor's
/// point, pages of runs the trail does not record (the state and the
/// trail restored from an older backup); recorded as a deviation, and the
/// run went on (those pages are fetched again and recognised as landed).
#[derive(Debug, Serialize)]
pub(crate) struct RollbackAccepted {
    pub stream: String,
    pub manifest: String,
    /// The manifest's byte the cursor points at.
    pub cursor_points_at: u64,
    pub unrecorded: Vec<Unrecorded>,
}

impl AuditEvent for RollbackAccepted {
    const NAME: &'static str = "rollback_accepted";
}

/// A trail no line of which was sealed, taken under the audit key because
/// the run was told to (`--adopt-unsealed-trail`): from this line on every
/// line is sealed, and this line's seal and the checkpoints after it cover
/// the unsealed lines before it by the chain.
#[derive(Debug, Serialize)]
pub(crate) struct AuditKeyAdopted {
    pub key_id: String,
    /// The unsealed lines found before this run's first.
    pub unsealed_lines: u64,
    pub adopted_by: &'static str,
}

impl AuditEvent for AuditKeyAdopted {
    const NAME: &'static str = "audit_key_adopted";
}

/// A state database's landing got its head (`landing_head.rs`): recorded
/// in the database after the head was written, so the database remembers
/// the newest head it published and a start refuses a landing whose head is
/// missing or older.
#[derive(Debug, Serialize)]
pub(crate) struct LandingHeadPublished {
    pub stream: String,
    /// The head's recorded path (relative to the landing root).
    pub landing: String,
    pub trail: String,
    /// The stream's last commit line the head names, and its SHA-256.
    pub line: i64,
    pub sha256: String,
}

impl AuditEvent for LandingHeadPublished {
    const NAME: &'static str = "landing_head_published";
}

/// A manifest line of a run the trail does not record.
#[derive(Debug, Serialize)]
pub(crate) struct Unrecorded {
    pub file: String,
    pub sha256: String,
    pub records: u64,
    pub run_id: String,
    pub landed_at: String,
}

impl Unrecorded {
    pub(crate) fn of(entry: &crate::store::ManifestEntry) -> Unrecorded {
        Unrecorded {
            file: entry.file.clone(),
            sha256: entry.sha256.clone(),
            records: entry.records,
            run_id: entry.run_id.clone(),
            landed_at: entry.landed_at.clone(),
        }
    }
}

/// `--repair-state`: the stream's landing directory belonged to another
/// state directory and now belongs to this run's.
#[derive(Debug, Serialize)]
pub(crate) struct LandingOwnerChanged {
    pub stream: String,
    pub owner_file: String,
    /// The id of the state directory that owned the landing.
    pub from: String,
    /// The id of this run's state directory.
    pub to: String,
}

impl AuditEvent for LandingOwnerChanged {
    const NAME: &'static str = "landing_owner_changed";
}

/// `--repair-state`: the manifest disagreed with the trail at the
/// cursor's point (deleted, truncated, another stream's) and was rebuilt
/// from the stream's `page_committed` lines.
#[derive(Debug, Serialize)]
pub(crate) struct ManifestRepaired {
    pub stream: String,
    pub manifest: String,
    /// Where the stream's last landed `page_committed` line starts.
    pub audit_offset: u64,
    /// What the manifest held at the cursor's point.
    pub file_said: String,
    /// The page the trail says it ends with.
    pub trail_says: String,
    /// Pages the rebuilt manifest lists.
    pub listed: u64,
}

impl AuditEvent for ManifestRepaired {
    const NAME: &'static str = "manifest_repaired";
}

/// The cursor file was torn (not JSON: a write lost to a power loss) and
/// was rebuilt from the stream's last `page_committed` line.
#[derive(Debug, Serialize)]
pub(crate) struct CursorRebuilt {
    pub stream: String,
    pub cursor_file: String,
    /// Where the commit line it was rebuilt from starts in the trail.
    pub from_audit_offset: u64,
    pub cursor_after: serde_json::Value,
}

impl AuditEvent for CursorRebuilt {
    const NAME: &'static str = "cursor_rebuilt";
}

/// State written under the old, non-injective directory names was moved to
/// the new ones (see `store::migrate`): before anything else of the stream.
#[derive(Debug, Serialize)]
pub(crate) struct StateMigrated {
    pub stream: String,
    pub from: String,
    pub to: String,
}

impl AuditEvent for StateMigrated {
    const NAME: &'static str = "state_migrated";
}

/// An object of the bucket, as the trail names one it wrote or removed.
#[derive(Debug, Serialize)]
pub(crate) struct ObjectNamed {
    /// Relative to the landing's prefix.
    pub name: String,
    pub sha256: String,
    pub bytes: u64,
}

impl ObjectNamed {
    /// The object `name` holding `bytes`.
    pub(crate) fn of(name: &str, bytes: &[u8]) -> ObjectNamed {
        ObjectNamed {
            name: name.to_string(),
            sha256: crate::digest::sha256_hex(bytes),
            bytes: bytes.len() as u64,
        }
    }
}

/// `--repair-state`, on an object-store landing: the stream's last
/// published manifest line had lost its object (deleted from the bucket),
/// which was written again from the state's manifest index.
#[derive(Debug, Serialize)]
pub(crate) struct ManifestObjectsRepaired {
    pub stream: String,
    /// The manifest index, relative to the state's landing index root.
    pub index: String,
    pub written: Vec<ObjectNamed>,
}

impl AuditEvent for ManifestObjectsRepaired {
    const NAME: &'static str = "manifest_objects_repaired";
}

/// On an object-store landing: manifest line objects past the end of the
/// stream's manifest index (a line a stopped run never committed, or one
/// put there by hand), named before they were removed.
#[derive(Debug, Serialize)]
pub(crate) struct ManifestObjectsRemoved {
    pub stream: String,
    pub index: String,
    /// The index's length: every object named here starts at or past it.
    pub index_bytes: u64,
    pub removed: Vec<ObjectNamed>,
}

impl AuditEvent for ManifestObjectsRemoved {
    const NAME: &'static str = "manifest_objects_removed";
}

/// Manifest lines past the cursor's point of runs the trail records, which
/// no `page_committed` line stands for (a stopped run's line it never
/// committed, or one put there by hand), named before the manifest was cut
/// back to that point.
#[derive(Debug, Serialize)]
pub(crate) struct ManifestLinesRemoved {
    pub stream: String,
    pub manifest: String,
    /// Where the cursor points: the manifest's length after the cut.
    pub manifest_bytes: u64,
    pub removed: Vec<LineNamed>,
}

impl AuditEvent for ManifestLinesRemoved {
    const NAME: &'static str = "manifest_lines_removed";
}

/// A manifest line, as the trail names one it removed.
#[derive(Debug, Serialize)]
pub(crate) struct LineNamed {
    /// The byte of the manifest it started at.
    pub at: u64,
    /// Of the line's bytes, its newline included.
    pub sha256: String,
    pub bytes: u64,
    pub page_key: String,
    pub file: String,
    pub page_sha256: String,
    pub run_id: String,
}

impl LineNamed {
    pub(crate) fn of(line: &crate::store::tail::PastLine) -> LineNamed {
        LineNamed {
            at: line.at,
            sha256: line.sha256.clone(),
            bytes: line.bytes,
            page_key: line.entry.page_key.clone(),
            file: line.entry.file.clone(),
            page_sha256: line.entry.sha256.clone(),
            run_id: line.entry.run_id.clone(),
        }
    }
}

/// A torn final manifest line was dropped when the stream started, and the
/// pages the audit trail says were committed there but the manifest no
/// longer lists were listed again from their `page_committed` lines.
#[derive(Debug, Serialize)]
pub(crate) struct ManifestRebuilt {
    pub stream: String,
    pub manifest: String,
    pub torn_bytes: u64,
    pub relisted: u64,
}

impl AuditEvent for ManifestRebuilt {
    const NAME: &'static str = "manifest_rebuilt";
}

/// The stream's Redis run lock was held by a pid of this host that no
/// longer runs (a run killed with SIGKILL): taken over at once instead of
/// waiting out its TTL.
#[derive(Debug, Serialize)]
pub(crate) struct RunLockTakenOver {
    pub stream: String,
    pub previous_holder: String,
    pub fence: u64,
    pub reason: String,
}

impl AuditEvent for RunLockTakenOver {
    const NAME: &'static str = "run_lock_taken_over";
}

/// A stream whose state is in a database was taken for this run: its run
/// lock there, with the fencing token every commit of the run checks.
#[derive(Debug, Serialize)]
pub(crate) struct StreamLockTaken {
    pub stream: String,
    pub state_db: String,
    pub fence: i64,
    pub previous_holder: Option<String>,
    pub pages_listed: i64,
}

impl AuditEvent for StreamLockTaken {
    const NAME: &'static str = "stream_lock_taken";
}

//! The run's audit trail: opened (a file with its anchors checked, or a
//! state database's), and anchored at the start and the end, in the state
//! directory or the database and, with Redis, in Redis too; checked
//! against the Redis copy as soon as Redis is reached.

use quota_pacer::RedisPacer;

use super::RunSpec;
use crate::audit::{Anchors, AuditLog, RunId, RunStarted, SharedAudit};
use crate::error::{Error, IoContext};

/// The trail's name in a state database: `--audit-log`'s file name, so
/// that `audit export --to` that name gives back the file receipts name.
pub(super) fn trail_name(audit_log: &std::path::Path) -> String {
    audit_log
        .file_name()
        .map_or_else(|| "audit.jsonl".into(), |n| n.to_string_lossy().into_owned())
}

/// Opens the audit file with its anchors checked, and writes the header.
pub(super) async fn open_file_trail(
    spec: &RunSpec,
    run_id: &RunId,
    masker: crate::mask::Masker,
    header: RunStarted,
) -> Result<(SharedAudit, Anchors), Error> {
    let log = AuditLog::open(&spec.audit_log, run_id.clone())?
        .with_masker(masker)
        .with_repair(spec.audit.repair)
        .with_key(spec.audit.key.clone());
    let anchor_root = spec.audit.anchor_root.as_deref().unwrap_or(&spec.state);
    let trail = log.canonical_path().to_path_buf();
    let first_line = |what: &str| {
        crate::audit::anchor::first_line_sha256(&trail).io(|| {
            format!(
                "reading the first line of the audit trail {} {what}",
                trail.display()
            )
        })
    };
    let anchors = Anchors::of(
        anchor_root,
        &spec.audit_log,
        &trail,
        first_line("to find its anchor")?,
    );
    let found = anchors
        .load_file()
        .map_err(|e| Error::io("reading the audit anchor", std::io::Error::other(e)))?;
    let log = match (&found, anchors.file()) {
        (Some(found), _) => log.with_anchor(found.source.clone(), found.head.clone()),
        (None, Some(expected)) => log.with_missing_anchor(expected),
        (None, None) => log,
    };
    let audit = SharedAudit::new(log);
    audit.record(header).await?;
    // The header is the first line of a new trail: its identity from now.
    let anchors = anchors.with_first_line(first_line("to anchor it")?);
    if let Some(found) = found.filter(|f| f.legacy) {
        audit.record(anchors.reinterpreted(&found)).await?;
    }
    Ok((audit, anchors))
}

/// Writes the chain head outside the file: the state directory and, with
/// Redis, Redis. A failure is reported on stderr and does not change the
/// run's exit code, which `run_finished` has already recorded; the next run
/// then checks against the older anchor. Returns whether the state
/// directory's anchor was written.
pub(super) async fn anchor(
    audit: &SharedAudit,
    anchors: Option<&Anchors>,
    redis: Option<&RedisPacer>,
) -> bool {
    if let Some(trail) = audit.db() {
        return db_anchor(trail, redis).await;
    }
    let Some(anchors) = anchors else {
        return false;
    };
    let head = match audit.head() {
        Ok(Some(h)) => h,
        Ok(None) => return false,
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

/// A database trail's anchors: its head in `edc_sync_anchor` (insert-only
/// for the run role) and, with Redis, the same head under the trail's
/// identity there, where whoever can write the database cannot reach it.
async fn db_anchor(trail: &crate::state_db::DbTrail, redis: Option<&RedisPacer>) -> bool {
    if let Err(e) = trail.anchor().await {
        eprintln!("warning: audit anchor not written: {e}");
        return false;
    }
    if let Some(redis) = redis {
        let stored = match trail.chain_head().await {
            Ok(Some(head)) => {
                let key =
                    crate::audit::ChainHead::redis_key(head.first_sha256.as_deref().unwrap_or_default());
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

/// A database trail checked against the anchor Redis keeps under its
/// identity, as soon as Redis is reached and before any request.
pub(super) async fn check_db_redis_anchor(
    redis: &RedisPacer,
    trail: &crate::state_db::DbTrail,
) -> Result<(), Error> {
    let Some(first) = trail.chain_head().await?.and_then(|h| h.first_sha256) else {
        return Ok(());
    };
    let key = crate::audit::ChainHead::redis_key(&first);
    if let Some(head) = crate::audit::anchor::redis_copy::load(redis, &key).await? {
        trail
            .check_head(&format!("anchor in Redis ({key})"), &head)
            .await?;
    }
    Ok(())
}

/// With Redis, the trail is also checked against the anchor kept there, as
/// soon as Redis is reached and before any request.
pub(super) async fn check_redis_anchor(
    redis: &RedisPacer,
    audit: &SharedAudit,
    anchors: &Anchors,
) -> Result<(), Error> {
    if let Some(found) = anchors.load_redis(redis).await? {
        audit.check_anchor(&found.source, &found.head)?;
        if found.legacy {
            audit.record(anchors.reinterpreted(&found)).await?;
        }
    }
    Ok(())
}

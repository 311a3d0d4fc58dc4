//! Opening a stream: its run locks (file, and with Redis the fenced
//! cross-host lock), state written under old names moved, and its cursor
//! and landing stores opened, with a torn manifest tail recovered.

use super::commit::PageCommit;
use super::events::{self, RunLockTakenOver};
use super::slots::Slots;
use super::stream::Stream;
use super::window::Window;
use super::{recover, FencedLock, Loop, StreamJob, StreamReport, SyncError};
use crate::audit::PathsReinterpreted;
use crate::config::PayloadFormat;
use crate::store::{roll_forward, CursorStore, RunLock};
use quota_pacer::Pacer;

/// Takes the stream's locks and opens its cursor and landing stores.
pub(super) async fn start<P: Pacer>(job: &StreamJob<P>, name: String) -> Result<Loop<'_, P>, SyncError> {
    if let Some(db) = &job.state_db {
        return start_in_db(job, name, db).await;
    }
    let run_id = job.audit.run_id().clone();
    let lock = RunLock::acquire(&job.state_dir, &job.identity, run_id.as_str())?;
    let fenced = match &job.redis {
        Some(pacer) => {
            let holder = format!(
                "host {}, pid {}, run {run_id}",
                crate::host::name(),
                std::process::id()
            );
            let stream = crate::store::stream_dir_name(&job.identity);
            Some(FencedLock::acquire(pacer, job.limiter.quota().key(), &stream, &holder).await?)
        }
        None => None,
    };
    if let Some(previous) = fenced
        .as_ref()
        .and_then(|f| f.taken_over_from().map(|p| (p, f.fence())))
    {
        let event = RunLockTakenOver {
            stream: name.clone(),
            previous_holder: previous.0.to_string(),
            fence: previous.1,
            reason: "the holder is a pid of this host that no longer runs (killed): taken over instead of \
                     waiting out the lock's TTL"
                .into(),
        };
        job.audit.record(event).await?;
    }
    for moved in crate::store::migrate::stream(&job.state_dir, &job.out_dir, &job.identity)? {
        let event = events::StateMigrated {
            stream: name.clone(),
            from: relative(&moved.from, job).display().to_string(),
            to: relative(&moved.to, job).display().to_string(),
        };
        job.audit.record(event).await?;
    }
    let cursors = CursorStore::new(lock).starting_at(job.options.since.clone());
    let ext = match job.delta.format {
        PayloadFormat::Json => "json",
        PayloadFormat::Odm => "xml",
    };
    let mut landing = cursors
        .open_landing(&job.out_dir, ext)?
        .with_remote(job.object.clone());
    if !job.options.dry_run {
        let id = crate::store::owner::state_id(&job.state_dir)?;
        let repair = job.options.repair_state;
        let changed = match landing.remote() {
            Some(remote) => {
                crate::store::owner::claim_remote(remote, landing.recorded_dir(), &id, repair).await?
            }
            None => crate::store::owner::claim(landing.dir(), &id, repair)?,
        };
        owner_changed(job, &name, &landing, changed).await?;
    }
    recover::relist_after_torn_tail(&mut landing, &job.audit, &name).await?;
    if !job.options.dry_run {
        let trail = job.audit.canonical_path();
        if let Some(rebuilt) = roll_forward::rebuild_if_torn(&cursors, &landing, trail, &name)? {
            let event = events::CursorRebuilt {
                stream: name.clone(),
                cursor_file: cursors.recorded_file(),
                from_audit_offset: rebuilt.from_offset,
                cursor_after: rebuilt.cursor.to_json(),
            };
            job.audit.record(event).await?;
        }
        let caught = roll_forward::catch_up(
            &cursors,
            &mut landing,
            trail,
            &name,
            |v| job.audit.as_recorded(v),
            job.options.repair_state,
        )?;
        if let Some(repaired) = caught.repaired {
            let event = events::StateRepaired {
                stream: name.clone(),
                cursor_file: cursors.recorded_file(),
                audit_offset: repaired.audit_offset,
                file_said: repaired.file_said,
                trail_says: repaired.trail_says,
            };
            job.audit.record(event).await?;
        }
        if let Some(rolled) = caught.rolled {
            let event = events::CursorRolledForward {
                stream: name.clone(),
                pages: rolled.pages,
                cursor_file: cursors.recorded_file(),
                cursor_after: rolled.cursor.to_json(),
            };
            job.audit.record(event).await?;
        }
    }
    let trail = job.audit.canonical_path();
    let repair = job.options.repair_state && !job.options.dry_run;
    let proven = crate::store::tail::prove(&cursors, &mut landing, trail, &name, repair)?;
    if let Some(recorded) = proven.absolute_landing_dir {
        let event = PathsReinterpreted {
            stream: Some(name.clone()),
            what: "page_committed landing_dir".into(),
            recorded,
            read_as: landing.recorded_dir().to_string(),
        };
        job.audit.record(event).await?;
    }
    if let Some((recorded, offset)) = proven.absolute_receipt {
        let event = PathsReinterpreted {
            stream: Some(name.clone()),
            what: "cursor receipt".into(),
            recorded,
            read_as: format!(
                "the line at byte {offset} of the trail, proven by its SHA-256 wherever the trail is"
            ),
        };
        job.audit.record(event).await?;
    }
    if let Some(rebuilt) = proven.rebuilt {
        let event = events::ManifestRepaired {
            stream: name.clone(),
            manifest: landing.recorded("manifest.jsonl"),
            audit_offset: rebuilt.audit_offset,
            file_said: rebuilt.file_said,
            trail_says: rebuilt.trail_says,
            listed: rebuilt.listed,
        };
        job.audit.record(event).await?;
    }
    if !job.options.dry_run {
        publish_manifest(&landing).await?;
    }
    let report = StreamReport {
        stream: name.clone(),
        landing_dir: landing.dir().to_path_buf(),
        cursor_file: cursors.path().to_path_buf(),
        ..StreamReport::default()
    };
    let mut stream = Stream::new(job, name, report);
    if let Some(root) = &job.options.missing_from {
        if landing.remote().is_some() {
            return Err(stream.rejected(
                "backfill --missing-only compares with a landing directory; an object-store landing is not \
                 supported"
                    .into(),
            ));
        }
        if job.delta.format != crate::config::PayloadFormat::Json {
            return Err(stream.rejected(
                "backfill --missing-only tells records apart in JSON pages; this delta is ODM".into(),
            ));
        }
        let dir = crate::store::stream_dir_name(&job.identity);
        stream.landed_before = Some(super::completeness::landed_identities(
            root,
            &dir,
            &stream.name,
            &job.delta,
        )?);
    }
    Ok(Loop {
        stream,
        slots: Slots::new(fenced),
        window: Window::default(),
        commit: PageCommit::new(cursors, landing),
    })
}

/// A stream whose state is in a database: its run lock there (fenced),
/// the proof that cursor and manifest are what the trail says, and its
/// landing directory. Nothing to roll forward or relist: one transaction
/// committed each page's line, manifest row and cursor together.
async fn start_in_db<'a, P: Pacer>(
    job: &'a StreamJob<P>,
    name: String,
    db: &crate::state_db::StateDb,
) -> Result<Loop<'a, P>, SyncError> {
    let run_id = job.audit.run_id();
    let holder = format!(
        "host {}, pid {}, run {run_id}",
        crate::host::name(),
        std::process::id()
    );
    let trail = job.audit.canonical_path().to_string_lossy().into_owned();
    let namespace = job.options.state_namespace.as_deref();
    let held = crate::state_db::DbStream::lock(db, &job.identity, namespace, &holder, &trail)
        .await?
        .starting_at(job.options.since.clone());
    let proof = match held.prove().await {
        // `--repair-state`: a cursor row that disagrees with the trail
        // takes the trail's state (audited); the manifest is proven again
        // and never repaired (its rows are append-only evidence).
        Err(e) if e.is_damage() && job.options.repair_state && !job.options.dry_run => {
            if let Some((audit_offset, file_said)) = held.repair_cursor().await? {
                let trail_says = held.load().await?.to_state_json();
                let event = events::StateRepaired {
                    stream: name.clone(),
                    cursor_file: held.recorded_cursor(),
                    audit_offset,
                    file_said,
                    trail_says,
                };
                job.audit.record(event).await?;
            }
            held.prove().await?
        }
        other => other?,
    };
    let event = events::StreamLockTaken {
        stream: name.clone(),
        state_db: db.url().shown().to_string(),
        fence: held.fence(),
        previous_holder: held.previous_holder().map(str::to_string),
        pages_listed: proof.pages_listed,
    };
    job.audit.record(event).await?;
    let ext = match job.delta.format {
        PayloadFormat::Json => "json",
        PayloadFormat::Odm => "xml",
    };
    let landing = held
        .open_landing(&job.out_dir, ext)?
        .with_remote(job.object.clone());
    if !job.options.dry_run {
        let (id, repair) = (db.state_id(), job.options.repair_state);
        let changed = match landing.remote() {
            Some(remote) => {
                crate::store::owner::claim_remote(remote, landing.recorded_dir(), id, repair).await?
            }
            None => crate::store::owner::claim(landing.dir(), id, repair)?,
        };
        owner_changed(job, &name, &landing, changed).await?;
    }
    // The last page the manifest lists must still be there, whole: the
    // next page would otherwise be committed on top of a hole.
    if let Some((file, bytes)) = &proof.last_landed {
        if let Some(problem) = landing.landed_problem(file, *bytes)? {
            return Err(crate::store::StoreError::Corrupt {
                path: landing.dir().join(file),
                detail: format!(
                    "the last page the manifest of {} lists {problem}",
                    held.recorded_cursor()
                ),
            }
            .into());
        }
    }
    let report = StreamReport {
        stream: name.clone(),
        landing_dir: landing.dir().to_path_buf(),
        cursor_file: held.recorded_cursor().into(),
        ..StreamReport::default()
    };
    let stream = Stream::new(job, name, report);
    if job.options.missing_from.is_some() {
        // The manifests it would compare with are rows here, not files.
        held.unlock().await;
        return Err(stream.rejected(
            "backfill --missing-only compares with manifest files: it needs a state directory, not a state \
             database"
                .into(),
        ));
    }
    Ok(Loop {
        stream,
        slots: Slots::new(None),
        window: Window::default(),
        commit: PageCommit::in_db(held, landing),
    })
}

/// Records that `--repair-state` gave the landing a new owner, if it did.
async fn owner_changed<P: Pacer>(
    job: &StreamJob<P>,
    name: &str,
    landing: &crate::store::LandingStore,
    changed: Option<crate::store::owner::OwnerChanged>,
) -> Result<(), SyncError> {
    if let Some(changed) = changed {
        let event = events::LandingOwnerChanged {
            stream: name.to_string(),
            owner_file: landing.recorded(crate::store::owner::OWNER_FILE),
            from: changed.from,
            to: changed.to,
        };
        job.audit.record(event).await?;
    }
    Ok(())
}

/// A path below the state or landing root, as audit lines name it:
/// relative to its root.
fn relative<'a, P: Pacer>(path: &'a std::path::Path, job: &StreamJob<P>) -> &'a std::path::Path {
    path.strip_prefix(&job.state_dir)
        .or_else(|_| path.strip_prefix(&job.out_dir))
        .unwrap_or(path)
}

/// For an object-store landing: the bucket's manifest lines made the same
/// as the stream's manifest index, after everything start-up relisted or
/// rebuilt (a crash between a page's commit line and its manifest line
/// object, or a repair). Only the index past its publication watermark
/// (`manifest.published`: every line before it has its object) is checked,
/// with one LIST of the names from there on; a line object missing is
/// written, one past the index's end removed, and the watermark moves to
/// the end. So a start costs the lines written since the last one, not the
/// stream's history.
async fn publish_manifest(landing: &crate::store::LandingStore) -> Result<(), crate::store::StoreError> {
    use crate::store::object::manifest_line_name;
    use std::io::{Read, Seek};
    let Some(remote) = landing.remote() else {
        return Ok(());
    };
    let dir = landing.recorded_dir();
    let path = landing.manifest_path();
    let io = |op, error| crate::store::StoreError::Io {
        path: path.clone(),
        op,
        error,
    };
    let mut index = match std::fs::File::open(&path) {
        Ok(f) => Some(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io("open", e)),
    };
    let len = match &index {
        Some(f) => f.metadata().map_err(|e| io("stat", e))?.len(),
        None => 0,
    };
    let watermark = landing.published_watermark().filter(|&w| w <= len);
    let from = match (&mut index, watermark) {
        (Some(f), Some(w)) if w > 0 && crate::durable::is_line_start(f, w).map_err(|e| io("read", e))? => w,
        _ => 0,
    };
    let mut tail = Vec::new();
    if let Some(f) = &mut index {
        f.seek(std::io::SeekFrom::Start(from))
            .map_err(|e| io("read", e))?;
        f.read_to_end(&mut tail).map_err(|e| io("read", e))?;
    }
    let after = from.checked_sub(1).map(|last| manifest_line_name(dir, last));
    let mut there: std::collections::BTreeSet<String> = remote
        .list_after(&format!("{dir}/manifest/"), after.as_deref())
        .await?
        .into_iter()
        .collect();
    let mut at = from;
    for line in tail.split_inclusive(|b| *b == b'\n') {
        if line.last() != Some(&b'\n') {
            break;
        }
        let name = manifest_line_name(dir, at);
        if !there.remove(&name) {
            remote.put(&name, bytes::Bytes::copy_from_slice(line)).await?;
        }
        at += line.len() as u64;
    }
    for extra in there {
        remote.delete(&extra).await?;
    }
    landing.set_published_watermark(at)
}

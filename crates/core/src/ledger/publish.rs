//! The manifest of an object-store landing kept in files, published: the
//! bucket holds one object a manifest line beside the pages, so the landing
//! proves itself without the state directory.
//!
//! At a stream's start the bucket is made the same as the stream's manifest
//! index, after everything start-up relisted or rebuilt (a crash between a
//! page's commit line and its manifest line object, or a repair). Only the
//! index past its publication watermark (`manifest.published`: every line
//! before it has its object) is checked, with one LIST of the names from
//! the last published line on, so a start costs the lines written since the
//! last one, not the stream's history:
//!
//! - a line past the watermark without its object (a run stopped between
//!   the two) gets it;
//! - the last published line without its object was deleted from the
//!   bucket, where a reader of the bucket would count its pages as never
//!   landed: refused (65) as a cut manifest is, or with `--repair-state`
//!   written again from the index (`manifest_objects_repaired`);
//! - an object past the index's end (a line a stopped run never committed,
//!   or one put there by hand) is removed, each named with its SHA-256 in a
//!   `manifest_objects_removed` line first; but one that lists a page of a
//!   run the trail does not record means the state and the trail are older
//!   than the bucket (restored from a backup): refused (65), or with
//!   `--accept-rollback` recorded as a deviation (`rollback_accepted`).
//!
//! Then the watermark moves to the end. Older holes are `verify`'s to find.

use std::io::{Read, Seek};

use super::events::{self, ObjectNamed};
use super::stream::OpenStream;
use super::{LedgerError, StreamLedger};
use crate::store::object::{manifest_line_name, ObjectLanding};
use crate::store::{LandingStore, ManifestEntry, StoreError};

/// Publishes the stream's manifest index to the bucket, as the module says.
pub(super) async fn publish_manifest(
    stream: &StreamLedger,
    landing: &LandingStore,
    p: &OpenStream<'_>,
) -> Result<(), LedgerError> {
    // A state database's manifest is its rows: nothing to publish.
    let (StreamLedger::Files { .. }, Some(remote)) = (stream, landing.remote()) else {
        return Ok(());
    };
    let dir = landing.recorded_dir();
    let path = landing.manifest_path();
    let io = |op, error| StoreError::io(&path, op, error);
    let mut index = match crate::no_follow::read(&path) {
        Ok(f) => Some(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io("open", e).into()),
    };
    let len = match &index {
        Some(f) => f.metadata().map_err(|e| io("stat", e))?.len(),
        None => 0,
    };
    let watermark = landing.published_watermark().filter(|&w| w <= len);
    let (published, from) = match (&index, watermark) {
        (Some(f), Some(w)) if w > 0 && crate::durable::is_line_start(f, w).map_err(|e| io("read", e))? => {
            // The last published line is listed too: its object is proven
            // present with the same LIST.
            let last = crate::durable::line_start(f, w - 1, 1 << 20).map_err(|e| io("read", e))?;
            (w, last.unwrap_or(w))
        }
        _ => (0, 0),
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
        .await
        .map_err(StoreError::Object)?
        .into_iter()
        .collect();
    let mut at = from;
    let mut repaired = Vec::new();
    for line in tail.split_inclusive(|b| *b == b'\n') {
        if line.last() != Some(&b'\n') {
            break;
        }
        let name = manifest_line_name(dir, at);
        if !there.remove(&name) {
            if at < published {
                if !p.repair_state {
                    return Err(deleted(remote, &name, &path).into());
                }
                repaired.push(ObjectNamed::of(&name, line));
            }
            remote
                .put(&name, bytes::Bytes::copy_from_slice(line))
                .await
                .map_err(StoreError::Object)?;
        }
        at += line.len() as u64;
    }
    if !repaired.is_empty() {
        let event = events::ManifestObjectsRepaired {
            stream: p.name.to_string(),
            index: landing.recorded("manifest.jsonl"),
            written: repaired,
        };
        p.trail.record(event).await?;
    }
    if !there.is_empty() {
        let trail = p.trail.canonical_path();
        let mut removed = Vec::new();
        let mut unrecorded = Vec::new();
        for extra in &there {
            let Some(bytes) = remote.read(extra).await.map_err(StoreError::Object)? else {
                continue;
            };
            removed.push(ObjectNamed::of(extra, &bytes));
            let entry = serde_json::from_slice::<ManifestEntry>(bytes.trim_ascii_end());
            if let Ok(entry) = entry {
                let known = crate::audit::read::holds_run(trail, &entry.run_id)
                    .map_err(|e| StoreError::io(trail, "read back", e))?;
                if !known {
                    unrecorded.push(entry);
                }
            }
        }
        if !unrecorded.is_empty() {
            let found = format!(
                "{} manifest line object(s) past the end of this index (at byte {at}), in {}/{dir}/manifest/,",
                unrecorded.len(),
                remote.url()
            );
            if !p.accept_rollback {
                return Err(super::proof::rolled_back(&path, &found, &unrecorded).into());
            }
            let event = events::RollbackAccepted {
                stream: p.name.to_string(),
                manifest: landing.recorded("manifest.jsonl"),
                cursor_points_at: at,
                unrecorded: unrecorded.iter().map(events::Unrecorded::of).collect(),
            };
            p.trail.record(event).await?;
        }
        let event = events::ManifestObjectsRemoved {
            stream: p.name.to_string(),
            index: landing.recorded("manifest.jsonl"),
            index_bytes: at,
            removed,
        };
        p.trail.record(event).await?;
        for extra in there {
            remote.delete(&extra).await.map_err(StoreError::Object)?;
        }
    }
    landing.set_published_watermark(at)?;
    Ok(())
}

/// The refusal of a published manifest line whose object is gone.
fn deleted(remote: &ObjectLanding, name: &str, index: &std::path::Path) -> StoreError {
    StoreError::Corrupt {
        path: format!("{}/{name}", remote.url()).into(),
        detail: format!(
            "this manifest line was published to the bucket by an earlier run and its object is gone (deleted \
             from the bucket): a reader of the bucket would count its page as never landed; nothing was \
             fetched. Restore it from a copy or the bucket's versioning, or run again with --repair-state to \
             write it again from the manifest index {} (recorded in a manifest_objects_repaired line)",
            index.display()
        ),
    }
}

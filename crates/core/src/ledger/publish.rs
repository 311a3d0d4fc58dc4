//! The manifest of an object-store landing kept in files, published: the
//! bucket holds one object a manifest line beside the pages, so the landing
//! proves itself without the state directory.

/// For an object-store landing: the bucket's manifest lines made the same
/// as the stream's manifest index, after everything start-up relisted or
/// rebuilt (a crash between a page's commit line and its manifest line
/// object, or a repair). Only the index past its publication watermark
/// (`manifest.published`: every line before it has its object) is checked,
/// with one LIST of the names from there on; a line object missing is
/// written, one past the index's end removed, and the watermark moves to
/// the end. So a start costs the lines written since the last one, not the
/// stream's history.
pub(super) async fn publish_manifest(
    stream: &super::StreamLedger,
    landing: &crate::store::LandingStore,
) -> Result<(), crate::store::StoreError> {
    use crate::store::object::manifest_line_name;
    use std::io::{Read, Seek};
    // A state database's manifest is its rows: nothing to publish.
    let (super::StreamLedger::Files(_), Some(remote)) = (stream, landing.remote()) else {
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

//! `backfill --missing-only`: proving a past window complete. The records
//! already landed for a stream (by its incremental syncs and by every
//! earlier backfill under the same landing root) are read once, by
//! identity (`edc::payload::identity`, the rule of the delta's lookback);
//! the backfill then re-reads its window and lands only the records that
//! are in none of them. The count it lands is the number that were
//! missing: zero is the proof.
//!
//! Nothing found on disk is trusted: every page a manifest lists is
//! hashed and must match its manifest line before its records count as
//! landed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::SyncError;
use crate::config::Delta;
use crate::digest::sha256_hex;
use crate::edc::payload::record_keys;
use crate::ledger::ManifestEntry;
use crate::record::identity::IdentitySet;

/// The identities of every record landed for the stream whose landing
/// directory is `stream_dir` (relative) under `root`, or under any of
/// `root/backfill/*/`.
pub(super) fn landed_identities(
    root: &Path,
    stream_dir: &str,
    stream: &str,
    delta: &Delta,
) -> Result<IdentitySet, SyncError> {
    let mut dirs = vec![root.join(stream_dir)];
    if let Ok(backfills) = crate::no_follow::read_dir(root.join("backfill")) {
        let mut more: Vec<PathBuf> = backfills
            .filter_map(Result::ok)
            .map(|e| e.path().join(stream_dir))
            .collect();
        more.sort();
        dirs.extend(more);
    }
    let mut known = IdentitySet::default();
    for dir in dirs {
        read_landing(&dir, stream, delta, &mut known)?;
    }
    Ok(known)
}

/// Adds the identities of every record in the pages `dir`'s manifest lists.
fn read_landing(dir: &Path, stream: &str, delta: &Delta, known: &mut IdentitySet) -> Result<(), SyncError> {
    let manifest = dir.join("manifest.jsonl");
    let file = match crate::no_follow::read(&manifest) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(crate::ledger::StoreError::io(&manifest, "open", e).into()),
    };
    let records = delta.records_pointer.as_deref().unwrap_or("/data");
    let field = delta.cursor_field.as_deref().unwrap_or_default();
    let record_id = delta.lookback.as_ref().and_then(|l| l.record_id.as_deref());
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| crate::ledger::StoreError::io(&manifest, "read", e))?;
        let bad = |what: String| SyncError::Rejected {
            stream: stream.to_string(),
            reason: format!(
                "{} line {}: {what}; nothing was fetched",
                manifest.display(),
                n + 1
            ),
        };
        let entry: ManifestEntry =
            serde_json::from_str(&line).map_err(|e| bad(format!("not a manifest entry ({e})")))?;
        let page = dir.join(&entry.file);
        let bytes = crate::no_follow::read_bytes(&page)
            .map_err(|e| bad(format!("its page {} cannot be read ({e})", entry.file)))?;
        if sha256_hex(&bytes) != entry.sha256 {
            return Err(bad(format!(
                "its page {} does not hash to the SHA-256 the manifest records",
                entry.file
            )));
        }
        let keys = record_keys(&bytes[..], records, field, record_id)
            .map_err(|e| bad(format!("its page {}: {e}", entry.file)))?;
        known.extend(keys.into_iter().map(|k| k.identity));
    }
    Ok(())
}

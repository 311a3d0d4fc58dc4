//! Manifest recovery that tells the truth.
//!
//! The manifest line is written before the `page_committed` audit line, so
//! a crash mid-append leaves a torn manifest line for a page that was not
//! committed: it is replayed and listed again. But a torn line can also be
//! damage after the fact (a disk fault, a hand edit), for a page the trail
//! says *was* committed, and the cursor has moved past it: it would never
//! be replayed. So after the torn bytes are cut off, every page the trail
//! records as committed into this landing directory and the manifest no
//! longer lists is listed again from its audit line, once its file is
//! there and hashes to its name.

use super::events::ManifestRebuilt;
use super::{LedgerError, Trail};
use crate::store::{LandingStore, ManifestEntry};

/// Relists committed pages missing from the manifest after a torn tail was
/// dropped; audits what was done. No-op when the manifest was whole.
pub(super) async fn relist_after_torn_tail(
    landing: &mut LandingStore,
    audit: &Trail,
    stream: &str,
) -> Result<(), LedgerError> {
    let Some(torn_bytes) = landing.torn_tail() else {
        return Ok(());
    };
    let dir = landing.recorded_dir().to_string();
    let mut missing = Vec::new();
    crate::audit::read::each_event(audit.path(), "page_committed", |_, line| {
        let here = line["landing_dir"]
            .as_str()
            .and_then(crate::stream::relative_landing_dir);
        if here.as_deref() != Some(dir.as_str()) || line["landed"] != true {
            return;
        }
        let Some(entry) = ManifestEntry::of_commit(&line, stream) else {
            return;
        };
        if landing.is_listed(&entry.page_key, &entry.sha256)
            || missing.iter().any(|e: &ManifestEntry| e.sha256 == entry.sha256)
        {
            return;
        }
        missing.push(entry);
    })
    .map_err(|e| crate::store::StoreError::io(audit.path(), "read back", e))?;
    let mut relisted = 0;
    for entry in missing {
        // Listed only when the page is really there, byte for byte;
        // otherwise `edc-sync verify` reports it and the run goes on.
        let path = landing.dir().join(&entry.file);
        if crate::digest::sha256_file(&path).ok().as_deref() == Some(entry.sha256.as_str())
            && landing.list(&entry)?
        {
            relisted += 1;
        }
    }
    audit
        .record(ManifestRebuilt {
            stream: stream.to_string(),
            manifest: landing.recorded("manifest.jsonl"),
            torn_bytes,
            relisted,
        })
        .await?;
    Ok(())
}

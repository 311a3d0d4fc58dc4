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
use super::SyncError;
use crate::audit::SharedAudit;
use crate::store::{LandingStore, ManifestEntry};

/// Relists committed pages missing from the manifest after a torn tail was
/// dropped; audits what was done. No-op when the manifest was whole.
pub(super) async fn relist_after_torn_tail(
    landing: &mut LandingStore,
    audit: &SharedAudit,
    stream: &str,
) -> Result<(), SyncError> {
    let Some(torn_bytes) = landing.torn_tail() else {
        return Ok(());
    };
    let dir = landing.canonical_dir().display().to_string();
    let mut missing = Vec::new();
    crate::audit::read::each_event(audit.path(), "page_committed", |_, line| {
        if line["landing_dir"] != dir.as_str() || line["landed"] != true {
            return;
        }
        let Some(entry) = entry_of(&line, stream) else {
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
            manifest: landing.manifest_path().display().to_string(),
            torn_bytes,
            relisted,
        })
        .await?;
    Ok(())
}

/// The manifest entry a landed page's `page_committed` line stands for.
pub(super) fn entry_of(line: &serde_json::Value, stream: &str) -> Option<ManifestEntry> {
    let (Some(sha), Some(file)) = (line["payload_sha256"].as_str(), line["landing_file"].as_str()) else {
        return None;
    };
    Some(ManifestEntry {
        stream: line["stream"].as_str().unwrap_or(stream).to_string(),
        page_key: page_key(line["url"].as_str().unwrap_or_default()),
        cursor_before: line["cursor_before"].clone(),
        cursor_after: line["cursor_after"].clone(),
        sha256: sha.to_string(),
        bytes: line["bytes"].as_u64().unwrap_or(0),
        records: line["records"].as_u64().unwrap_or(0),
        run_id: line["run_id"].as_str().unwrap_or_default().to_string(),
        file: file.to_string(),
        landed_at: line["ts"].as_str().unwrap_or_default().to_string(),
    })
}

/// The manifest's page key (path and query) of an audited URL.
fn page_key(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => u[url::Position::BeforePath..].to_string(),
        Err(_) => url.to_string(),
    }
}

//! What the simulator's records look like once landed: the check behind
//! "every record exactly once" in the tests, the OQ and the crash soak.

use std::path::Path;

use anyhow::{bail, Context};

use crate::store::ManifestEntry;

/// The ids of the simulator's records in the JSON pages that the manifest
/// of `stream_dir` lists, in manifest order, after checking each landed
/// file against the SHA-256 the manifest recorded for it. A missing
/// manifest means nothing landed.
pub fn landed_json_record_ids(stream_dir: &Path) -> anyhow::Result<Vec<String>> {
    let manifest = stream_dir.join("manifest.jsonl");
    let text = match std::fs::read_to_string(&manifest) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", manifest.display())),
    };
    let mut ids = Vec::new();
    for line in text.lines() {
        let entry: ManifestEntry =
            serde_json::from_str(line).with_context(|| format!("a line of {}", manifest.display()))?;
        let file = stream_dir.join(&entry.file);
        let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
        if crate::digest::sha256_hex(&bytes) != entry.sha256 {
            bail!(
                "{} does not match the SHA-256 its manifest line records",
                file.display()
            );
        }
        let page: serde_json::Value = serde_json::from_slice(&bytes)?;
        for record in page["data"].as_array().into_iter().flatten() {
            ids.push(record["id"].as_str().unwrap_or_default().to_string());
        }
    }
    Ok(ids)
}

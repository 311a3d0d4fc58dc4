//! What the simulator's records look like once landed: the check behind
//! "every record exactly once" in the tests, the OQ and the crash soak.
//!
//! It reads the manifest as docs/audit-trail.md describes it (one JSON
//! object a line, `file` relative to the stream's directory, `sha256` the
//! lowercase hex of the file's bytes, `repeated` the positions of records
//! an earlier page landed) with no code of the product's, so a mistake in
//! how the product writes a manifest cannot hide itself here.

use std::path::Path;

use anyhow::{bail, Context};
use sha2::{Digest, Sha256};

/// A landed page: its bytes, and the positions of its records that an
/// earlier page landed (a lookback's re-read), which a reader skips.
struct Listed {
    bytes: Vec<u8>,
    repeated: Vec<u64>,
}

/// The bytes of every page the manifest of `stream_dir` lists, in manifest
/// order, after checking each landed file against the SHA-256 the manifest
/// recorded for it. A missing manifest means nothing landed.
fn landed_pages(stream_dir: &Path) -> anyhow::Result<Vec<Listed>> {
    let manifest = stream_dir.join("manifest.jsonl");
    let text = match edc_core::no_follow::read_string(&manifest) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", manifest.display())),
    };
    pages_listed(stream_dir, &manifest, &text)
}

/// The bytes of every page `text` (manifest lines, wherever they were
/// kept: a file, or a state database's rows read with psql) lists, each
/// checked against its SHA-256; `manifest` names where they came from.
fn pages_listed(stream_dir: &Path, manifest: &Path, text: &str) -> anyhow::Result<Vec<Listed>> {
    let mut pages = Vec::new();
    for line in text.lines() {
        let entry: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("a line of {}", manifest.display()))?;
        let (Some(name), Some(sha256)) = (entry["file"].as_str(), entry["sha256"].as_str()) else {
            bail!("a line of {} has no file or sha256", manifest.display());
        };
        let file = stream_dir.join(name);
        let bytes =
            edc_core::no_follow::read_bytes(&file).with_context(|| format!("reading {}", file.display()))?;
        if hex::encode(Sha256::digest(&bytes)) != sha256 {
            bail!(
                "{} does not match the SHA-256 its manifest line records",
                file.display()
            );
        }
        let repeated = entry["repeated"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_u64)
            .collect();
        pages.push(Listed { bytes, repeated });
    }
    Ok(pages)
}

/// The ids of the simulator's records in the landed JSON pages of
/// `stream_dir` (see [`landed_pages`]).
pub fn landed_json_record_ids(stream_dir: &Path) -> anyhow::Result<Vec<String>> {
    json_record_ids(landed_pages(stream_dir)?)
}

/// The ids of the simulator's records in the JSON pages of `stream_dir`
/// that `manifest_lines` list (a state database's manifest rows, one JSON
/// line each, read by the test itself).
pub fn listed_json_record_ids(stream_dir: &Path, manifest_lines: &str) -> anyhow::Result<Vec<String>> {
    json_record_ids(pages_listed(
        stream_dir,
        Path::new("edc_sync_manifest"),
        manifest_lines,
    )?)
}

fn json_record_ids(pages: Vec<Listed>) -> anyhow::Result<Vec<String>> {
    Ok(json_records(pages, "/data")?
        .iter()
        .map(|record| record["id"].as_str().unwrap_or_default().to_string())
        .collect())
}

/// Every record a reader of the landing takes from the JSON pages of
/// `stream_dir` (the array at `records_pointer` of each page, less the
/// positions its manifest entry lists as repeated), in landing order.
pub fn landed_json_records(
    stream_dir: &Path,
    records_pointer: &str,
) -> anyhow::Result<Vec<serde_json::Value>> {
    json_records(landed_pages(stream_dir)?, records_pointer)
}

/// The simulated record each of `events` (the castor profile's audit
/// trail) shows, from its change reason (`visit N`; a twin shows its
/// original's), sorted: what a test compares with the events listed.
pub fn event_visits(events: &[serde_json::Value]) -> Vec<u32> {
    let mut visits: Vec<u32> = events
        .iter()
        .filter_map(|e| {
            e["event_details"]["change_reason"]
                .as_str()?
                .strip_prefix("visit ")?
                .parse()
                .ok()
        })
        .collect();
    visits.sort_unstable();
    visits
}

/// The simulated records of the first `n` events an audit trail of
/// `arrivals` lists (a twin shows its original's), sorted: what
/// [`event_visits`] of a complete landing equals.
pub fn listed_visits(arrivals: &edc_sim::audit_trail::Arrivals, n: u32) -> Vec<u32> {
    let mut visits: Vec<u32> = (1..=n).map(|k| arrivals.original(k)).collect();
    visits.sort_unstable();
    visits
}

fn json_records(pages: Vec<Listed>, records_pointer: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    let mut records = Vec::new();
    for page in pages {
        let json: serde_json::Value = serde_json::from_slice(&page.bytes)?;
        let listed = json.pointer(records_pointer).and_then(|r| r.as_array());
        for (at, record) in listed.into_iter().flatten().enumerate() {
            if !page.repeated.contains(&(at as u64)) {
                records.push(record.clone());
            }
        }
    }
    Ok(records)
}

/// The `SourceID`s of the simulator's audit records in the landed ODM
/// pages of `stream_dir` (see [`landed_pages`]).
pub fn landed_odm_source_ids(stream_dir: &Path) -> anyhow::Result<Vec<u64>> {
    let mut ids = Vec::new();
    for page in landed_pages(stream_dir)? {
        let text = String::from_utf8(page.bytes)?;
        for piece in text.split("<SourceID>").skip(1) {
            let (id, _) = piece.split_once("</SourceID>").context("an unclosed SourceID")?;
            ids.push(id.trim().parse()?);
        }
    }
    Ok(ids)
}

/// The record ids (`DS-nnnnnnn`) of the simulator's study-dataset pages
/// landed in `stream_dir`, one per `SubjectData` that its page's manifest
/// entry does not list as repeated.
pub fn landed_dataset_record_ids(stream_dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::new();
    for page in landed_pages(stream_dir)? {
        let text = String::from_utf8(page.bytes)?;
        for (at, subject) in text.split("<SubjectData ").skip(1).enumerate() {
            if page.repeated.contains(&(at as u64)) {
                continue;
            }
            let (_, rest) = subject
                .split_once(r#"ItemOID="RECORD" Value=""#)
                .context("a SubjectData without its RECORD item")?;
            let (id, _) = rest.split_once('"').context("an unclosed RECORD value")?;
            ids.push(id.to_string());
        }
    }
    Ok(ids)
}

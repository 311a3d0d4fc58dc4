//! One line of a landing's manifest: which page landed, where, and what
//! it moved the cursor from and to. A line is the same whether it sits in
//! `manifest.jsonl`, in a bucket's manifest objects or in a database row,
//! and a `page_committed` audit line holds every field of it.

use serde::{Deserialize, Serialize};

/// One landed page in the manifest. Never the token, never record content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    pub stream: String,
    /// The page's request (path and query): with the SHA-256, what makes a
    /// replayed page recognisable.
    pub page_key: String,
    pub cursor_before: serde_json::Value,
    pub cursor_after: serde_json::Value,
    pub sha256: String,
    pub bytes: u64,
    pub records: u64,
    pub run_id: String,
    /// Relative to the stream's landing directory.
    pub file: String,
    pub landed_at: String,
    /// Positions (from 0) of the page's records that an earlier page
    /// landed already (a lookback's re-read): a reader skips them, so
    /// every record is new in exactly one manifest entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeated: Vec<u32>,
}

impl ManifestEntry {
    /// The manifest entry a landed page's `page_committed` line stands for.
    pub fn of_commit(line: &serde_json::Value, stream: &str) -> Option<ManifestEntry> {
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
            repeated: line["repeated"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p.as_u64().and_then(|p| u32::try_from(p).ok()))
                .collect(),
        })
    }
}

/// The manifest's page key (path and query) of an audited URL.
fn page_key(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => u[url::Position::BeforePath..].to_string(),
        Err(_) => url.to_string(),
    }
}

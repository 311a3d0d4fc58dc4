//! What a committed page wrote besides the page itself, read off a
//! finished `bench sync` phase: the floor it is compared with writes the
//! same bytes (`peers.rs`).

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// The bytes a committed page's records take, averaged over the phase: the
/// `page_committed` line (with a lookback, the page's change to the
/// memory and its seal ride in it), the manifest line, the cursor file
/// and, with a lookback, the change line of the memory's journal.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct CommitBytes {
    pub audit_line: u64,
    pub manifest_line: u64,
    pub cursor: u64,
    #[serde(default)]
    pub journal_line: u64,
}

impl CommitBytes {
    /// Read off a finished phase's trail, landing and state under `work`.
    pub fn of(work: &Path) -> anyhow::Result<CommitBytes> {
        let average = |text: &str, wanted: &dyn Fn(&str) -> bool| {
            let lines: Vec<&str> = text.lines().filter(|l| wanted(l)).collect();
            lines.iter().map(|l| l.len() as u64).sum::<u64>() / (lines.len() as u64).max(1)
        };
        let trail = std::fs::read_to_string(work.join("audit.jsonl")).context("reading the phase's trail")?;
        let mut manifest = 0;
        let mut cursor = 0;
        let mut journal_line = 0;
        let written = [work.join("landing"), work.join("state")].map(|d| edc_qualify::files::under(&d));
        for file in written.into_iter().flatten() {
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name == "manifest.jsonl" {
                manifest = average(&std::fs::read_to_string(&file)?, &|_| true);
            } else if name.ends_with(".cursor.json") {
                cursor = std::fs::metadata(&file)?.len();
            } else if name.ends_with(".memory.jsonl") {
                // Its first line is the memory whole, written now and then.
                let text = std::fs::read_to_string(&file)?;
                let changes: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
                journal_line = average(&changes, &|_| true);
            }
        }
        Ok(CommitBytes {
            audit_line: average(&trail, &|l| l.contains("\"event\":\"page_committed\"")),
            manifest_line: manifest,
            cursor,
            journal_line,
        })
    }
}

//! Start-up: the cursor caught up with the audit trail (issue 13, item 2).
//!
//! A page's commit record is its fsynced `page_committed` line, which
//! carries the whole cursor (`cursor_state`). The cursor file and the
//! manifest line are written after it without an fsync of their own, so a
//! crash can leave either a step behind the trail, never ahead of it. Before
//! a stream fetches anything, the trail is read from the line the cursor
//! file names (its receipt) to the end: each later commit of this stream
//! whose landed file is in place moves the cursor to the state the line
//! records and lists the page if the manifest lost it. Nothing before the
//! receipt is read, so the cost is the lines written since this stream's
//! last page, not the trail's history.
//!
//! A commit whose landed file is missing (the landing directory was
//! fsynced before the line, so only damage after the fact does that) stops
//! the roll: the cursor stays before that page, which is fetched and landed
//! again, and `edc-sync verify` names the file.

use std::io::{BufRead, Seek, SeekFrom};

use super::events::{CursorRebuilt, CursorRolledForward};
use super::{recover, SyncError};
use crate::audit::SharedAudit;
use crate::store::{CursorStore, LandingStore, Receipt, StoreError};

/// The longest audit line read when scanning back (a `page_committed` line
/// is a few KiB; vendor warnings can add some).
const MAX_LINE: u64 = 1 << 20;

/// An audit line that committed a page of `stream` into the landing
/// directory `dir` (a dry run commits nothing).
fn is_commit_of(value: &serde_json::Value, stream: &str, dir: &str) -> bool {
    value["event"] == "page_committed"
        && value["stream"] == stream
        && value["landing_dir"] == dir
        && value["dry_run"] != true
}

/// A torn cursor file (not JSON: empty or cut short by a power loss, since
/// it is not fsynced per page) is rebuilt from the stream's last commit
/// record, found by reading the trail backwards from its end. Audited
/// (`cursor_rebuilt`); `catch_up` then goes on from that line. With no
/// commit of the stream in the trail the file is left as it is and the
/// run stops (74) as before.
pub(super) async fn rebuild_if_torn(
    cursors: &CursorStore,
    landing: &LandingStore,
    audit: &SharedAudit,
    stream: &str,
) -> Result<(), SyncError> {
    if !cursors.is_torn() {
        return Ok(());
    }
    let trail = audit.canonical_path();
    let read = |e| StoreError::io(trail, "read back", e);
    let file = std::fs::File::open(trail).map_err(read)?;
    let dir = landing.canonical_dir().display().to_string();
    let mut end = file.metadata().map_err(read)?.len();
    while end > 0 {
        // `end` is just past a newline (or the end of the file).
        let Some(start) = crate::durable::line_start(&file, end.saturating_sub(1), MAX_LINE).map_err(read)?
        else {
            break;
        };
        let mut bytes = vec![0u8; (end - start) as usize];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut bytes, start).map_err(read)?;
        while bytes.last() == Some(&b'\n') {
            bytes.pop();
        }
        end = start;
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
            continue;
        };
        if !is_commit_of(&value, stream, &dir) || value["cursor_state"].is_null() {
            continue;
        }
        let receipt = Receipt {
            audit_log: trail.display().to_string(),
            offset: start,
            sha256: crate::digest::sha256_hex(&bytes),
        };
        let rebuilt = cursors.roll_forward(value["cursor_state"].clone(), receipt, 0)?;
        audit
            .record(CursorRebuilt {
                stream: stream.to_string(),
                cursor_file: cursors.path().display().to_string(),
                from_audit_offset: start,
                cursor_after: rebuilt.to_json(),
            })
            .await?;
        return Ok(());
    }
    Ok(())
}

/// Rolls the cursor of `stream` forward over commits the trail has and the
/// cursor file does not; audits it when it moved.
pub(super) async fn catch_up(
    cursors: &CursorStore,
    landing: &mut LandingStore,
    audit: &SharedAudit,
    stream: &str,
) -> Result<(), SyncError> {
    let cursor = cursors.load()?;
    let Some(receipt) = cursor.receipt().cloned() else {
        // Never committed, or written by a version that fsynced the cursor
        // with every page: nothing can be ahead of it.
        return Ok(());
    };
    let trail = audit.canonical_path();
    if receipt.audit_log != trail.display().to_string() {
        tracing::warn!(stream, cursor_trail = %receipt.audit_log, "the cursor was committed into another audit trail; it is not rolled forward from this one");
        return Ok(());
    }
    let read = |e| StoreError::io(trail, "read back", e);
    let mut file = std::fs::File::open(trail).map_err(read)?;
    file.seek(SeekFrom::Start(receipt.offset)).map_err(read)?;
    let mut lines = std::io::BufReader::new(file).split(b'\n');
    let mut offset = receipt.offset;
    match lines.next().transpose().map_err(read)? {
        Some(first) if crate::digest::sha256_hex(&first) == receipt.sha256 => {
            offset += first.len() as u64 + 1
        }
        _ => {
            tracing::warn!(stream, "the audit line the cursor names is not where it was (the trail was repaired or replaced); the cursor is not rolled forward");
            return Ok(());
        }
    }
    let dir = landing.canonical_dir().display().to_string();
    // Only a line that continues from where the cursor is: a commit line of
    // a run that had lost the stream's lock (written before it found out)
    // starts from an older cursor and must never move this one back.
    let mut at_cursor = cursor.to_json();
    let mut last: Option<(serde_json::Value, Receipt)> = None;
    let mut pages = 0u64;
    for line in lines {
        let bytes = line.map_err(read)?;
        let at = offset;
        offset += bytes.len() as u64 + 1;
        // A torn last line is not a commit (the next append repairs it).
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
            continue;
        };
        if !is_commit_of(&value, stream, &dir) {
            continue;
        }
        if value["cursor_state"].is_null() {
            break;
        }
        if value["cursor_before"] != at_cursor {
            continue;
        }
        if value["landed"] == true {
            let Some(entry) = recover::entry_of(&value, stream) else {
                break;
            };
            let in_place =
                std::fs::metadata(landing.dir().join(&entry.file)).is_ok_and(|m| m.len() == entry.bytes);
            if !in_place {
                tracing::warn!(stream, file = %entry.file, "a committed page's landed file is missing; the cursor stays before it and the page is fetched again");
                break;
            }
            if !landing.is_listed(&entry.page_key, &entry.sha256) {
                landing.list(&entry)?;
            }
        }
        let receipt = Receipt {
            audit_log: receipt.audit_log.clone(),
            offset: at,
            sha256: crate::digest::sha256_hex(&bytes),
        };
        at_cursor = value["cursor_after"].clone();
        last = Some((value["cursor_state"].clone(), receipt));
        pages += 1;
    }
    let Some((state, receipt)) = last else {
        return Ok(());
    };
    let rolled = cursors.roll_forward(state, receipt, landing.manifest_len())?;
    landing.settle();
    audit
        .record(CursorRolledForward {
            stream: stream.to_string(),
            pages,
            cursor_file: cursors.path().display().to_string(),
            cursor_after: rolled.to_json(),
        })
        .await?;
    Ok(())
}

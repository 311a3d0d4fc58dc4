//! Start-up: the cursor caught up with the audit trail.
//!
//! A page's commit record is its fsynced `page_committed` line, which
//! carries the whole cursor (`cursor_state`), its lookback memory by its
//! seal and the page's change to it (`cursor/seal.rs`). The cursor file and the
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
//!
//! Before that, the cursor file is checked against the line its receipt
//! names: the trail is the ledger, so a file that says otherwise (edited
//! by hand, copied from another stream) stops the run with 65 naming the
//! file and both values, unless the operator asked for the trail's cursor
//! (`--repair-state`, audited).
//!
//! Only this module moves a cursor from the trail, and only with a
//! [`CommitLine`] the audit reader made from the trail's own bytes.

use std::path::Path;

use super::cursor::memory::RecordMemory;
use super::cursor::seal::Replay;
use super::{Cursor, CursorStore, LandingStore, ManifestEntry, StoreError, Torn};
use crate::audit::commit::{commit_at, commits_after, last_commit, CommitLine, CommitsOf};

/// A torn cursor file rebuilt from the stream's last commit line.
#[derive(Debug)]
pub(crate) struct Rebuilt {
    /// Where that line starts in the trail.
    pub from_offset: u64,
    /// The cursor it holds now.
    pub cursor: Cursor,
}

/// A cursor file that disagreed with the line its receipt names, replaced
/// by the trail's cursor on request.
#[derive(Debug)]
pub(crate) struct Repaired {
    /// Where the line starts in the trail.
    pub audit_offset: u64,
    /// The state the file held (as the trail records states).
    pub file_said: serde_json::Value,
    /// The state the line records, which the cursor holds now.
    pub trail_says: serde_json::Value,
}

/// What the start-up check and catch-up did.
#[derive(Debug, Default)]
pub(crate) struct CaughtUp {
    /// The file disagreed with its line and was repaired.
    pub repaired: Option<Repaired>,
    /// Commits the file had missed, rolled over.
    pub rolled: Option<RolledForward>,
}

/// A cursor file caught up with commits it had missed.
#[derive(Debug)]
pub(crate) struct RolledForward {
    /// How many commits it had missed.
    pub pages: u64,
    /// The cursor it holds now.
    pub cursor: Cursor,
}

/// A torn cursor file (not JSON: empty or cut short by a power loss, since
/// it is not fsynced per page) is rebuilt from the stream's last commit
/// record, found by reading the trail backwards from its end. So is one
/// whose lookback memory's journal is behind it (`cursor/journal.rs`),
/// once the file is proven against the line it names (`as_recorded` turns
/// a state into what a line of this trail records of it): one that is not
/// is refused (65) naming it, unless the operator asks for the trail's
/// cursor (`repair`, which also takes a damaged journal). With no commit
/// of the stream in the trail the file is left as it is (and the run stops
/// when it loads it).
pub(crate) fn rebuild_if_torn(
    cursors: &CursorStore,
    landing: &LandingStore,
    trail: &Path,
    stream: &str,
    repair: bool,
    as_recorded: impl Fn(serde_json::Value) -> serde_json::Value,
) -> Result<Option<Rebuilt>, StoreError> {
    match cursors.torn(repair) {
        Torn::No => return Ok(None),
        Torn::File => {}
        Torn::Journal { .. } if repair => {}
        Torn::Journal { said, receipt, why } => {
            let journal = cursors.journal_path().display();
            let named = match &receipt {
                Some(r) => commit_at(trail, r.offset(), r.sha256())
                    .map_err(|e| StoreError::io(trail, "read back", e))?,
                None => None,
            };
            let said = as_recorded(said);
            let corrupt = |detail: String| StoreError::Corrupt {
                path: cursors.path().to_path_buf(),
                detail,
            };
            let named = named.map(|line| {
                let says = super::sealed(line.get("cursor_state").clone());
                (line, says)
            });
            match named {
                Some((_, says)) if says == said => {}
                Some((line, says)) => {
                    return Err(corrupt(format!(
                        "it disagrees with the page_committed line it names (byte {} of {}): {}, and the journal of \
                         its lookback memory ({journal}): {why}; nothing was fetched. Run again with \
                         --repair-state to take the trail's cursor (recorded in a cursor_rebuilt line)",
                        line.receipt().offset(),
                        trail.display(),
                        super::differences(&said, &says)
                    )));
                }
                None => {
                    return Err(corrupt(format!(
                        "it names no page_committed line of {}, and the journal of its lookback memory \
                         ({journal}): {why}; nothing was fetched. Run again with --repair-state to take the \
                         trail's cursor (recorded in a cursor_rebuilt line)",
                        trail.display()
                    )))
                }
            }
        }
    }
    let dir = landing.recorded_dir().to_string();
    let wanted = |l: &CommitLine| l.is_commit_of(stream, &dir) && !l.get("cursor_state").is_null();
    let Some(line) = last_commit(trail, &CommitsOf::new(stream, &dir), wanted)
        .map_err(|e| StoreError::io(trail, "read back", e))?
    else {
        return Ok(None);
    };
    let memory = replayed(trail, stream, &dir, &line)?;
    let cursor = cursors.roll_forward(&line, memory, landing.manifest_len())?;
    Ok(Some(Rebuilt {
        from_offset: line.receipt().offset(),
        cursor,
    }))
}

/// Checks the cursor file of `stream` against the line its receipt names,
/// then rolls it forward over commits the trail has and the file does
/// not, relisting pages the manifest lost. `as_recorded` turns a state
/// into what an audit line of this trail records of it (identifiers
/// masked); `repair` takes the trail's cursor when they disagree.
pub(crate) fn catch_up(
    cursors: &CursorStore,
    landing: &mut LandingStore,
    trail: &Path,
    stream: &str,
    as_recorded: impl Fn(serde_json::Value) -> serde_json::Value,
    repair: bool,
) -> Result<CaughtUp, StoreError> {
    let mut cursor = cursors.load()?;
    let mut done = CaughtUp::default();
    let Some(receipt) = cursor.receipt().cloned() else {
        // Never committed, or written by a version that fsynced the cursor
        // with every page: nothing can be ahead of it.
        return Ok(done);
    };
    if !receipt
        .is_in(trail)
        .map_err(|e| StoreError::io(trail, "read back", e))?
    {
        // The line it names is not in this trail: the ledger's proof holds
        // the file to the trail's last commit of the stream instead.
        return Ok(done);
    }
    let of = CommitsOf::new(stream, landing.recorded_dir());
    let lines = commits_after(trail, receipt.offset(), receipt.sha256(), Some(&of))
        .map_err(|e| StoreError::io(trail, "read back", e))?;
    let Some((named, lines)) = lines else {
        tracing::warn!(stream, "the audit line the cursor names is not where it was (the trail was repaired or replaced); the cursor is not rolled forward");
        return Ok(done);
    };
    let file_said = as_recorded(cursor.to_state_json());
    let trail_says = &super::sealed(named.get("cursor_state").clone());
    if !trail_says.is_null() && file_said != *trail_says {
        if !repair {
            return Err(StoreError::Corrupt {
                path: cursors.path().to_path_buf(),
                detail: format!(
                    "it disagrees with the page_committed line it names (byte {} of {}): {}; nothing was \
                     fetched. Run again with --repair-state to take the trail's cursor (recorded in a \
                     state_repaired line)",
                    receipt.offset(),
                    trail.display(),
                    super::differences(&file_said, trail_says)
                ),
            });
        }
        let memory = replayed(trail, stream, landing.recorded_dir(), &named)?;
        cursor = cursors.roll_forward(&named, memory, cursor.manifest_bytes().unwrap_or(0))?;
        done.repaired = Some(Repaired {
            audit_offset: receipt.offset(),
            file_said,
            trail_says: trail_says.clone(),
        });
    }
    let dir = landing.recorded_dir().to_string();
    // Only a line that continues from where the cursor is: a commit line of
    // a run that had lost the stream's lock (written before it found out)
    // starts from an older cursor and must never move this one back.
    let mut at_cursor = cursor.to_json();
    let mut memory = cursor.lookback_memory().cloned();
    let mut last: Option<CommitLine> = None;
    let mut pages = 0u64;
    for line in lines {
        if !line.is_commit_of(stream, &dir) {
            continue;
        }
        if line.get("cursor_state").is_null() {
            break;
        }
        if *line.get("cursor_before") != at_cursor {
            continue;
        }
        if line.get("landed") == true {
            let Some(entry) = ManifestEntry::of_commit(line.line(), stream) else {
                break;
            };
            if let Some(problem) = landing.landed_problem(&entry.file, entry.bytes)? {
                tracing::warn!(stream, file = %entry.file, "a committed page's landed file is {problem}; the cursor stays before it and the page is fetched again");
                break;
            }
            if !landing.is_listed(&entry.page_key, &entry.sha256) {
                landing.list(&entry)?;
            }
        }
        // The page's change to the lookback memory, proven by its seal: a
        // line that does not reach it stops the run, naming it.
        let start = at_cursor["window_start"].as_str();
        memory = super::cursor::memory_after(memory.as_ref(), start, line.line()).map_err(|detail| {
            let at = line.receipt().offset();
            StoreError::Corrupt {
                path: trail.to_path_buf(),
                detail: format!(
                    "the page_committed line at byte {at} of stream {stream}: {detail}; nothing was fetched"
                ),
            }
        })?;
        at_cursor = line.get("cursor_after").clone();
        last = Some(line);
        pages += 1;
    }
    let Some(line) = last else {
        return Ok(done);
    };
    let cursor = cursors.roll_forward(&line, memory, landing.manifest_len())?;
    done.rolled = Some(RolledForward { pages, cursor });
    Ok(done)
}

/// A cursor file that names no commit line takes the state `line` (the
/// trail's last commit of its stream) records: when it agrees with it
/// (`keeps`: its own memory, which has the line's seal), or on
/// `--repair-state` (the memory replayed from the trail). The ledger's
/// start-up proof decides when.
pub(crate) fn take_the_trails(
    cursors: &CursorStore,
    trail: &Path,
    stream: &str,
    dir: &str,
    line: &CommitLine,
    keeps: Option<&Cursor>,
    manifest_bytes: u64,
) -> Result<Cursor, StoreError> {
    let memory = match keeps {
        Some(cursor) => cursor.lookback_memory().cloned(),
        None => replayed(trail, stream, dir, line)?,
    };
    cursors.roll_forward(line, memory, manifest_bytes)
}

/// The lookback memory of `stream` (landing in `dir`) at its commit
/// `line`, replayed from the trail's first commit of the stream
/// (`seal.rs`): the one way to a memory when no cursor holds one to start
/// from. It reads the trail to that line.
fn replayed(
    trail: &Path,
    stream: &str,
    dir: &str,
    line: &CommitLine,
) -> Result<Option<RecordMemory>, StoreError> {
    let mut replay = Replay::default();
    let mut reached = false;
    crate::audit::read::each_event(trail, "page_committed", |_, value| {
        if reached || !crate::audit::commit::is_commit_of(&value, stream, dir) {
            return;
        }
        replay.line(&value);
        reached = &value == line.line();
    })
    .map_err(|e| StoreError::io(trail, "read back", e))?;
    Ok(replay.memory())
}

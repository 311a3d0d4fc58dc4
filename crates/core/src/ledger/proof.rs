//! The start-up proof: before a stream's first request, its state is
//! proven against the trail, which is the ledger. The rules are written
//! once, here, and each backend only reads what it holds:
//!
//! 1. **The cursor is what the trail's last commit of the stream says.** A
//!    cursor that says otherwise (edited, copied from another stream,
//!    moved forward with its receipt dropped, zeroed or pointed elsewhere)
//!    is refused (65) naming the file or row and both values, before
//!    anything is fetched, unless `--repair-state` takes the trail's
//!    (audited in a `state_repaired` line). A cursor of which the trail
//!    holds no commit at all is refused too: nothing proves it. A cursor
//!    that is gone while the trail holds commits of the stream starts the
//!    stream over: every page is fetched again and recognised as landed
//!    (the documented way to fetch pages again). In files the cursor is a
//!    cache written without an fsync, so a cursor behind the trail is
//!    first rolled forward over the commits it missed
//!    (`cursor_rolled_forward`), and a torn one rebuilt (`cursor_rebuilt`);
//!    a file that names no line of the trail but agrees with its last
//!    commit (written before cursors carried receipts) is given that line,
//!    once, audited (`cursor_receipted`).
//! 2. **The manifest lists the trail's last landed page** where the cursor
//!    says it ends. In files a manifest that disagrees is refused (65) or,
//!    with `--repair-state`, rebuilt from the trail (`manifest_repaired`);
//!    a database's manifest rows are evidence and never rewritten.
//! 3. **That page is in place**, byte for byte (its SHA-256), in the
//!    landing directory or the object store; otherwise refused (65) with
//!    how to fetch it again.
//!
//! Only the tail is proven (one commit, one manifest line, one page), so
//! the cost does not grow with the stream's history; `edc-sync verify`
//! re-proves all of it.

use serde_json::Value;

use super::events::{self, StreamLockTaken};
use super::stream::OpenStream;
use super::{LedgerError, StreamLedger};
use crate::audit::commit::{last_commit, CommitLine, CommitsOf};
use crate::audit::PathsReinterpreted;
use crate::state_db::DbStream;
use crate::store::{roll_forward, sealed, Cursor, CursorStore, LandingStore, ManifestEntry, StoreError};

/// Proves `stream`'s state as the module says, before anything is fetched.
pub(super) async fn prove(
    stream: &StreamLedger,
    landing: &mut LandingStore,
    p: &OpenStream<'_>,
) -> Result<(), LedgerError> {
    match stream {
        StreamLedger::Files { cursors, .. } => prove_files(cursors, landing, p).await,
        StreamLedger::Db { held, .. } => prove_db(held, landing, p).await,
    }
}

/// Rule 1's verdict on a cursor (the state it holds, as the trail records
/// states) and the state the trail's last commit of the stream records.
#[derive(Debug, PartialEq)]
enum Cursor1 {
    /// They agree, or the trail holds no commit of the stream.
    Agrees,
    /// No cursor, and the trail holds commits: the stream starts over.
    StartsOver,
    /// They differ: refused unless repaired.
    Differs,
    /// A cursor, and no commit of the stream in the trail: nothing proves
    /// it (committed into another trail, or written outside edc-sync).
    Unproven,
}

fn judge_cursor(held: Option<&Value>, trail_says: Option<&Value>) -> Cursor1 {
    match (held, trail_says) {
        (None, None) => Cursor1::Agrees,
        (Some(_), None) => Cursor1::Unproven,
        (None, Some(_)) => Cursor1::StartsOver,
        (Some(held), Some(says)) if held == says => Cursor1::Agrees,
        (Some(_), Some(_)) => Cursor1::Differs,
    }
}

/// Rule 1's refusal, worded once for every backend: `place` is the cursor
/// file or row, `line` where the trail's commit is.
fn cursor_refused(place: std::path::PathBuf, line: &str, said: &Value, says: &Value) -> StoreError {
    StoreError::Corrupt {
        path: place,
        detail: format!(
            "it disagrees with the trail's last commit of the stream ({line}): {}; it was changed outside \
             edc-sync, and nothing was fetched. Run again with --repair-state to take the trail's cursor \
             (recorded in a state_repaired line)",
            crate::store::differences(said, says)
        ),
    }
}

/// Rule 1's refusal of a cursor the trail holds no commit of: `place` is
/// the cursor file or row, `trail` the trail this run appends to.
fn cursor_unproven(place: std::path::PathBuf, trail: &str, said: &Value) -> StoreError {
    StoreError::Corrupt {
        path: place,
        detail: format!(
            "trail {trail} holds no commit of the stream, so nothing proves this cursor (window_start {}, \
             next_page {}); nothing was fetched. Give --audit-log the trail the stream was committed into, \
             or remove the cursor so that the next run fetches every page again (each recognised as landed)",
            said["window_start"], said["next_page"]
        ),
    }
}

/// Rule 2's refusal of a landing newer than the state and the trail:
/// `found` (which lines, where) lists the pages `unrecorded` of runs the
/// trail does not record; `manifest` is the stream's manifest (or index).
pub(super) fn rolled_back(
    manifest: &std::path::Path,
    found: &str,
    unrecorded: &[ManifestEntry],
) -> StoreError {
    let mut runs: Vec<(&str, usize, &str)> = Vec::new();
    for entry in unrecorded {
        match runs.iter_mut().find(|(run, ..)| *run == entry.run_id) {
            Some((_, n, _)) => *n += 1,
            None => runs.push((&entry.run_id, 1, &entry.file)),
        }
    }
    let runs: Vec<String> = runs
        .iter()
        .map(|(run, n, first)| format!("run {run}: {n} page(s), the first {first}"))
        .collect();
    StoreError::Corrupt {
        path: manifest.to_path_buf(),
        detail: format!(
            "{found} list pages of runs this trail does not record ({}): the state and the trail are older than the landing, as after a restore from an older \
             backup, and continuing would commit those pages again as this run's; nothing was fetched. Restore \
             the state and the trail that go with this landing, or, with a deviation open, run again with \
             --accept-rollback to record it (in a rollback_accepted line) and continue",
            runs.join("; ")
        ),
    }
}

/// Rule 3, for every backend: the page `entry` names is in place, byte for
/// byte. `cursor` names the stream's cursor (its file, or its row) for the
/// remedy.
fn last_landed_in_place(
    landing: &LandingStore,
    entry: &ManifestEntry,
    where_: &str,
    cursor: &str,
) -> Result<(), StoreError> {
    let path = match landing.remote() {
        Some(remote) => {
            std::path::PathBuf::from(format!("{}/{}", remote.url(), landing.recorded(&entry.file)))
        }
        None => landing.dir().join(&entry.file),
    };
    let found = match landing.landed_sha256(&entry.file)? {
        Some((sha, _)) if sha == entry.sha256 => return Ok(()),
        Some((sha, _)) => format!("its SHA-256 is {sha}"),
        None => "it is missing".to_string(),
    };
    Err(StoreError::Corrupt {
        path,
        detail: format!(
            "{where_} landed it with SHA-256 {}, but {found}; nothing was fetched. Restore the file from a \
             copy, or remove the stream's {cursor} so that the next run fetches every page again and lands \
             this one anew",
            entry.sha256,
        ),
    })
}

/// A state directory's proof: a torn manifest tail relisted, a torn cursor
/// rebuilt, a cursor behind the trail rolled forward, then the three rules.
async fn prove_files(
    cursors: &CursorStore,
    landing: &mut LandingStore,
    p: &OpenStream<'_>,
) -> Result<(), LedgerError> {
    let name = p.name;
    let trail = p.trail.canonical_path();
    super::recover::relist_after_torn_tail(landing, p.trail, name).await?;
    if !p.dry_run {
        if let Some(rebuilt) =
            roll_forward::rebuild_if_torn(cursors, landing, trail, name, p.repair_state, |v| {
                p.trail.as_recorded(v)
            })?
        {
            let event = events::CursorRebuilt {
                stream: name.to_string(),
                cursor_file: cursors.recorded_file(),
                from_audit_offset: rebuilt.from_offset,
                cursor_after: rebuilt.cursor.to_json(),
            };
            p.trail.record(event).await?;
        }
        let caught = roll_forward::catch_up(
            cursors,
            landing,
            trail,
            name,
            |v| p.trail.as_recorded(v),
            p.repair_state,
        )?;
        if let Some(repaired) = caught.repaired {
            let event = events::StateRepaired {
                stream: name.to_string(),
                cursor_file: cursors.recorded_file(),
                audit_offset: repaired.audit_offset,
                file_said: repaired.file_said,
                trail_says: repaired.trail_says,
            };
            p.trail.record(event).await?;
        }
        if let Some(rolled) = caught.rolled {
            let event = events::CursorRolledForward {
                stream: name.to_string(),
                pages: rolled.pages,
                cursor_file: cursors.recorded_file(),
                cursor_after: rolled.cursor.to_json(),
            };
            p.trail.record(event).await?;
        }
    }
    prove_cursor_named_by_no_line(cursors, landing, p).await?;
    let repair = p.repair_state && !p.dry_run;
    let proven = crate::store::tail::prove(cursors, landing, trail, name, repair)?;
    if let Some(recorded) = proven.absolute_landing_dir {
        let event = PathsReinterpreted {
            stream: Some(name.to_string()),
            what: "page_committed landing_dir".into(),
            recorded,
            read_as: landing.recorded_dir().to_string(),
        };
        p.trail.record(event).await?;
    }
    if let Some((recorded, offset)) = proven.absolute_receipt {
        let event = PathsReinterpreted {
            stream: Some(name.to_string()),
            what: "cursor receipt".into(),
            recorded,
            read_as: format!(
                "the line at byte {offset} of the trail, proven by its SHA-256 wherever the trail is"
            ),
        };
        p.trail.record(event).await?;
    }
    if let Some(rebuilt) = proven.rebuilt {
        let event = events::ManifestRepaired {
            stream: name.to_string(),
            manifest: landing.recorded("manifest.jsonl"),
            audit_offset: rebuilt.audit_offset,
            file_said: rebuilt.file_said,
            trail_says: rebuilt.trail_says,
            listed: rebuilt.listed,
        };
        p.trail.record(event).await?;
    }
    if let Some((at, unrecorded)) = proven.unrecorded {
        let manifest = landing.manifest_path();
        if !p.accept_rollback || p.dry_run {
            let found = format!(
                "{} manifest line(s) after byte {at} (where the cursor points)",
                unrecorded.len()
            );
            return Err(rolled_back(&manifest, &found, &unrecorded).into());
        }
        let event = events::RollbackAccepted {
            stream: name.to_string(),
            manifest: landing.recorded("manifest.jsonl"),
            cursor_points_at: at,
            unrecorded: unrecorded.iter().map(events::Unrecorded::of).collect(),
        };
        p.trail.record(event).await?;
    } else if let Some((at, lines)) = proven.uncommitted.filter(|_| !p.dry_run) {
        // Named first: a crash before the cut names them again next time.
        let event = events::ManifestLinesRemoved {
            stream: name.to_string(),
            manifest: landing.recorded("manifest.jsonl"),
            manifest_bytes: at,
            removed: lines.iter().map(events::LineNamed::of).collect(),
        };
        p.trail.record(event).await?;
        let removed: Vec<_> = lines.iter().map(|l| &l.entry).collect();
        landing.cut_manifest(at, &removed)?;
    }
    if let Some((entry, where_)) = proven.last_landed {
        let cursor = format!("cursor file ({})", cursors.path().display());
        last_landed_in_place(landing, &entry, &where_, &cursor)?;
    }
    Ok(())
}

/// Rule 1 for a cursor file that names no commit line of this trail (its
/// receipt dropped, zeroed or pointed past the end, or written by a
/// version before receipts): it is held to the trail's last commit of the
/// stream, found by reading the trail back from its end, as a database's
/// row is. One that agrees is given that line as its receipt, audited;
/// one that does not is refused (or, with `--repair-state`, takes the
/// trail's). A cursor file that is gone starts the stream over.
async fn prove_cursor_named_by_no_line(
    cursors: &CursorStore,
    landing: &LandingStore,
    p: &OpenStream<'_>,
) -> Result<(), LedgerError> {
    if !cursors.path().exists() {
        return Ok(());
    }
    let cursor = cursors.load()?;
    let trail = p.trail.canonical_path();
    if let Some(receipt) = cursor.receipt() {
        if receipt
            .is_in(trail)
            .map_err(|e| StoreError::io(trail, "read back", e))?
        {
            return Ok(());
        }
    }
    let dir = landing.recorded_dir().to_string();
    let wanted = |l: &CommitLine| l.is_commit_of(p.name, &dir) && !l.get("cursor_state").is_null();
    let last = last_commit(trail, &CommitsOf::new(p.name, &dir), wanted)
        .map_err(|e| StoreError::io(trail, "read back", e))?;
    let said = p.trail.as_recorded(cursor.to_state_json());
    let says = last.as_ref().map(|l| sealed(l.get("cursor_state").clone()));
    let says = says.as_ref();
    let place = cursors.path().to_path_buf();
    let verdict = judge_cursor(Some(&said), says);
    let (Some(line), Some(says)) = (last.as_ref(), says) else {
        return Err(cursor_unproven(place, &trail.display().to_string(), &said).into());
    };
    let at = format!("byte {} of {}", line.receipt().offset(), trail.display());
    let manifest_bytes = cursor.manifest_bytes().unwrap_or_else(|| landing.manifest_len());
    match verdict {
        Cursor1::Agrees if p.dry_run => {}
        Cursor1::Agrees => {
            roll_forward::take_the_trails(cursors, trail, p.name, &dir, line, Some(&cursor), manifest_bytes)?;
            let event = events::CursorReceipted {
                stream: p.name.to_string(),
                cursor_file: cursors.recorded_file(),
                audit_offset: line.receipt().offset(),
                receipt_was: cursor.receipt().cloned(),
            };
            p.trail.record(event).await?;
        }
        _ if !p.repair_state || p.dry_run => return Err(cursor_refused(place, &at, &said, says).into()),
        _ => {
            roll_forward::take_the_trails(cursors, trail, p.name, &dir, line, None, manifest_bytes)?;
            let event = events::StateRepaired {
                stream: p.name.to_string(),
                cursor_file: cursors.recorded_file(),
                audit_offset: line.receipt().offset(),
                file_said: said,
                trail_says: says.clone(),
            };
            p.trail.record(event).await?;
        }
    }
    Ok(())
}

/// A state database's proof: the facts read in one go under the held
/// lock, judged by the same rules; `--repair-state` takes the trail's
/// cursor (the manifest rows are never rewritten).
async fn prove_db(held: &DbStream, landing: &LandingStore, p: &OpenStream<'_>) -> Result<(), LedgerError> {
    let mut facts = held.facts().await?;
    let mut judged = judge_db(held, &facts, p);
    if let Err(refused) = judged {
        if !(p.repair_state && !p.dry_run && refused.is_damage()) {
            return Err(refused.into());
        }
        if let Some((audit_offset, file_said)) = held.repair_cursor().await? {
            let trail_says = held.load().await?.to_state_json();
            let event = events::StateRepaired {
                stream: p.name.to_string(),
                cursor_file: held.recorded_cursor(),
                audit_offset,
                file_said,
                trail_says,
            };
            p.trail.record(event).await?;
        }
        facts = held.facts().await?;
        judged = judge_db(held, &facts, p);
    }
    if let Some(cursor) = judged? {
        held.proven(&cursor, &facts.memory);
    }
    let event = StreamLockTaken {
        stream: p.name.to_string(),
        state_db: held.shown_db().to_string(),
        fence: held.fence(),
        previous_holder: held.previous_holder().map(str::to_string),
        pages_listed: facts.pages_listed,
    };
    p.trail.record(event).await?;
    let last_listed = facts
        .last_listed
        .as_deref()
        .and_then(|l| serde_json::from_str::<ManifestEntry>(l).ok());
    if let (Some(entry), Some(n)) = (last_listed, facts.listed_at) {
        let where_ = format!(
            "the stream's last landed page_committed line (line {n} of trail {})",
            held.trail_name()
        );
        last_landed_in_place(landing, &entry, &where_, &held.recorded_cursor())?;
    }
    Ok(())
}

/// Rules 1 and 2 on what a database holds; the cursor row's cursor, when
/// there is one and it holds.
fn judge_db(
    held: &DbStream,
    facts: &crate::state_db::StreamFacts,
    p: &OpenStream<'_>,
) -> Result<Option<Cursor>, StoreError> {
    let place = held.recorded_cursor();
    let trail = held.trail_name();
    let last: Option<Value> = facts
        .last_commit
        .as_ref()
        .map(|(_, _, _, text)| serde_json::from_str(text).unwrap_or_default());
    let row_cursor = match &facts.row {
        Some((state, row_trail, _)) => {
            if row_trail != trail {
                return Err(held.refused(format!(
                    "{place} was committed with trail {row_trail:?}, and this run appends to {trail:?}: give the \
                     same --audit-log name as the runs before"
                )));
            }
            Some(
                Cursor::from_row(Some(state), &facts.memory, p.identity, None)
                    .map_err(|d| held.refused(format!("{place}: {d}")))?,
            )
        }
        None => {
            Cursor::from_row(None, &[], p.identity, p.since.clone()).map_err(|d| held.refused(d))?;
            None
        }
    };
    let said = row_cursor
        .as_ref()
        .map(|c| p.trail.as_recorded(c.to_state_json()));
    let says = last.as_ref().map(|l| sealed(l["cursor_state"].clone()));
    let says = says.as_ref();
    let commit_n = facts.last_commit.as_ref().map(|(n, ..)| *n);
    match judge_cursor(said.as_ref(), says) {
        Cursor1::Agrees | Cursor1::StartsOver => {}
        Cursor1::Unproven => {
            let said = said.unwrap_or_default();
            return Err(cursor_unproven(
                format!("{} {place}", held.shown_db()).into(),
                &format!("{trail:?}"),
                &said,
            ));
        }
        Cursor1::Differs => {
            let (Some(said), Some(says), Some(n)) = (said.as_ref(), says, commit_n) else {
                return Ok(None);
            };
            return Err(cursor_refused(
                format!("{} {place}", held.shown_db()).into(),
                &format!("line {n} of trail {trail}"),
                said,
                says,
            ));
        }
    }
    // The row names the line of its commit: the trail's last commit of
    // the stream, or a commit was made without it.
    if let (Some((_, _, audit_n)), Some(n)) = (&facts.row, commit_n) {
        if *audit_n != n {
            return Err(held.refused(format!(
                "{place} names line {audit_n} of trail {trail}, and the trail's last commit of the stream is \
                 line {n}; the row was changed outside edc-sync"
            )));
        }
    }
    if let (Some((_, _, audit_n)), None) = (&facts.row, commit_n) {
        return Err(held.refused(format!(
            "{place} names line {audit_n} of trail {trail}, which holds no commit of the stream"
        )));
    }
    if facts.listed_at != facts.last_landed_commit {
        return Err(held.refused(format!(
            "the manifest of stream {} ends at the commit on line {}, the trail's last landed page is on line \
             {}; a manifest row was changed outside edc-sync",
            held.key(),
            facts.listed_at.map_or("(none)".into(), |n| n.to_string()),
            facts.last_landed_commit.map_or("(none)".into(), |n| n.to_string()),
        )));
    }
    Ok(row_cursor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_rule_is_one_table() {
        let a = serde_json::json!({"next_page": "/p?offset=100"});
        let b = serde_json::json!({"next_page": "/p?offset=250"});
        assert_eq!(judge_cursor(None, None), Cursor1::Agrees, "a new stream");
        assert_eq!(
            judge_cursor(Some(&a), None),
            Cursor1::Unproven,
            "nothing committed proves it"
        );
        assert_eq!(
            judge_cursor(None, Some(&a)),
            Cursor1::StartsOver,
            "a cursor removed"
        );
        assert_eq!(judge_cursor(Some(&a), Some(&a)), Cursor1::Agrees);
        assert_eq!(
            judge_cursor(Some(&b), Some(&a)),
            Cursor1::Differs,
            "moved forward"
        );
    }
}

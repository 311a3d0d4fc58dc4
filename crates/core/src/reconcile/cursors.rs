//! The cursor ledger of `verify`: every cursor is what the last committed
//! page of its stream left (or behind it by commits the next run rolls
//! over), and every stream the trail holds commits of has its cursor.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::lockstep::{self, ByDir};
use super::{lookback_digest, Discrepancy, Scope, Summary};

/// Checks the cursors under `state` that `scope` covers against the
/// commits of the trail, by landing directory.
pub(super) fn check(
    state: &Path,
    out: &Path,
    audit: &Path,
    commits: &ByDir,
    scope: &Scope,
    summary: &mut Summary,
) -> std::io::Result<()> {
    let mut cursors = Vec::new();
    find_cursors(state, true, &mut cursors)?;
    cursors.retain(|c| scope.covers(&cursor_rel(state, c)));
    summary.cursors = cursors.len();
    for cursor in &cursors {
        check_cursor(state, out, audit, cursor, commits, summary)?;
    }
    let found: BTreeSet<String> = cursors.iter().map(|c| cursor_rel(state, c)).collect();
    for (rel, trail) in commits {
        let Some(last) = &trail.last else {
            continue;
        };
        if trail.elsewhere || found.contains(rel) {
            continue;
        }
        summary.discrepancies.push(Discrepancy {
            path: state.join(format!("{rel}.cursor.json")),
            what: format!(
                "missing, while the audit trail holds {} commit(s) of its stream (the last at line {}): the \
                 state lost it or it was removed; the next run starts the stream over and fetches every page \
                 again, each recognised as landed",
                trail.committed, last.line
            ),
        });
    }
    Ok(())
}

/// `*.cursor.json` files under `dir`, without following symbolic links.
fn find_cursors(dir: &Path, root: bool, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = super::list_dir(dir, root)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            find_cursors(&path, false, found)?;
        } else if path.to_string_lossy().ends_with(".cursor.json") {
            found.push(path);
        }
    }
    Ok(())
}

/// A cursor file's stream directory, relative to the state directory (the
/// landing directory's name under the landing root).
fn cursor_rel(state: &Path, cursor: &Path) -> String {
    cursor
        .strip_prefix(state)
        .map(|r| r.to_string_lossy().trim_end_matches(".cursor.json").to_string())
        .unwrap_or_default()
}

/// Checks one cursor file against the last commit of its stream; an
/// error is the trail's, read again for a cursor that is behind.
fn check_cursor(
    state: &Path,
    out: &Path,
    audit: &Path,
    cursor: &Path,
    commits: &ByDir,
    summary: &mut Summary,
) -> std::io::Result<()> {
    let mut problem = |what: String| {
        summary.discrepancies.push(Discrepancy {
            path: cursor.to_path_buf(),
            what,
        });
        Ok(())
    };
    let rel = cursor_rel(state, cursor);
    let landing = out.join(&rel);
    let value: Value = match crate::no_follow::read_bytes(cursor).map(|b| serde_json::from_slice(&b)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => return problem(format!("not valid JSON ({e})")),
        Err(e) => return problem(format!("cannot read it ({e})")),
    };
    let Some(last) = commits.get(&rel).and_then(|t| t.last.as_ref()) else {
        return problem(format!(
            "no page_committed line in the audit trail for its landing directory {}",
            landing.display()
        ));
    };
    let now = serde_json::json!({
        "window_start": value["window_start"],
        "next_page": value["next_page"],
        "high_water": value["high_water"],
    });
    if now != last.cursor_after {
        let sha = value["last_page_sha256"].as_str();
        if let Some((at, later)) = lockstep::reflected(audit, out, &rel, &now, sha)? {
            summary.behind.push(Discrepancy {
                path: cursor.to_path_buf(),
                what: format!(
                    "behind the trail: it reflects audit line {at}; {later} later commit(s) up to line {} are in \
                     the trail, and the next run rolls it forward (cursor_rolled_forward) before fetching",
                    last.line
                ),
            });
            return Ok(());
        }
        problem(format!(
            "it is {now}; the last committed page (audit line {}) left {}",
            last.line, last.cursor_after
        ))
    } else if value["last_page_sha256"].as_str() != Some(last.sha256.as_str()) {
        problem(format!(
            "its last_page_sha256 is {}; the last committed page (audit line {}) has {}",
            value["last_page_sha256"], last.line, last.sha256
        ))
    } else if lookback_digest(&value["lookback"]) != lookback_digest(&last.lookback) {
        problem(format!(
            "it is its lookback memory (the records the next window recognises) that differs from the one the \
             last committed page (audit line {}) left",
            last.line
        ))
    } else {
        check_journal(cursor, &value, summary);
        Ok(())
    }
}

/// A cursor file that agrees with the trail and holds its lookback memory
/// by a seal: whether the journal beside it holds that memory.
fn check_journal(cursor: &Path, value: &Value, summary: &mut Summary) {
    use crate::store::JournalUnresolved as Unresolved;
    let journal = crate::store::journal_of(cursor);
    match crate::store::check_journal(cursor, &value["lookback"]) {
        Ok(()) => {}
        Err(Unresolved::Behind(why)) => summary.behind.push(Discrepancy {
            path: journal,
            what: format!(
                "the journal of the lookback memory the cursor seals is behind it: {why}; the next run \
                 rebuilds the cursor from the trail (cursor_rebuilt) before fetching"
            ),
        }),
        Err(Unresolved::Damaged(why) | Unresolved::Unreadable(why)) => {
            summary.discrepancies.push(Discrepancy {
                path: journal,
                what: format!("not the lookback memory its cursor file seals: {why}"),
            })
        }
    }
}

//! The landing's head: how far the state database had got, kept where the
//! pages are.
//!
//! With the state in PostgreSQL the landing holds pages only (the manifest
//! is rows of the database). A database restored from an older backup,
//! its trail, manifest and cursor together, agrees with itself, and
//! without Redis nothing in it says it is older than what was landed: the
//! next run would fetch the lost pages again as its own and the lost
//! history would leave no trace. So at the clean end of a stream's run the
//! landing gets `ledger-head.json` (beside the pages, or as an object
//! beside them in the bucket): the trail, line number and SHA-256 of the
//! stream's last commit. At the next start the database must hold that
//! line; one that does not is refused (65) naming the head, unless
//! `--accept-rollback` records the deviation (`rollback_accepted`). The
//! head only ever names a committed line (it is written after the run's
//! last commit), so a crash leaves it behind the database, never ahead.
//!
//! The database remembers the heads it published: after the head is
//! written, a `landing_head_published` line records the commit it names.
//! A start then also refuses (65) a landing whose head is missing, or names
//! an earlier commit than the last one the database published (the head
//! deleted, or put back from an older copy), with the same
//! `--accept-rollback`. (Written after the head, never before: a crash
//! between the two leaves the head ahead of the record, which is allowed.)
//! A database and its landing restored together from the same older
//! backup agree with each other: only a witness outside both sees that,
//! the Redis anchor (`--redis`) or Object-Locked pages, and a run with
//! neither says so in its header (`rollback_witness`).

use serde::{Deserialize, Serialize};

use super::events;
use super::trail::Trail;
use super::LedgerError;
use crate::state_db::DbStream;
use crate::store::{LandingStore, StoreError};

/// The file (or object) beside the stream's pages.
pub(crate) const HEAD_FILE: &str = "ledger-head.json";

/// The stream's last commit as a run left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Head {
    /// The trail's name in the database.
    trail: String,
    /// The commit's line number in it.
    line: i64,
    /// The line's SHA-256.
    sha256: String,
}

/// Refuses a database older than the landing's head (see the module),
/// unless `accept` (`--accept-rollback` in a run that commits): then the
/// deviation is recorded in `trail` for `stream`.
pub(super) async fn check(
    held: &DbStream,
    landing: &LandingStore,
    stream: &str,
    trail: &Trail,
    accept: bool,
) -> Result<(), LedgerError> {
    let (place, text) = read(landing).await?;
    let head: Option<Head> = match text {
        None => None,
        Some(text) => Some(serde_json::from_slice(&text).map_err(|e| StoreError::Corrupt {
            path: place.clone().into(),
            detail: format!("it is not a landing head ({e}); nothing was fetched"),
        })?),
    };
    let published = held.last_published_head(&landing.recorded(HEAD_FILE)).await?;
    let remedy = "nothing was fetched. Restore the landing head (or the database) that goes with the other, or, \
                  with a deviation open, run again with --accept-rollback, which records it (rollback_accepted)";
    let problem = match (&head, published) {
        (None, Some((n, line, sha256))) => Some(format!(
            "it is missing, and the database {} recorded publishing it naming line {line} (sha256 {sha256}) at \
             audit line {n}: the head was deleted; {remedy}",
            held.shown_db()
        )),
        (Some(head), Some((n, line, _))) if head.trail == held.trail_name() && head.line < line => Some(format!(
            "it names line {} of trail {:?}, older than line {line}, which the database {} recorded publishing at \
             audit line {n}: the head was put back from an older copy; {remedy}",
            head.line,
            head.trail,
            held.shown_db()
        )),
        (None, None) => None,
        (Some(head), _) => {
            if head.trail != held.trail_name()
                || held.commit_sha256_at(head.line).await?.as_deref() == Some(&head.sha256)
            {
                None
            } else {
                let last = held
                    .last_commit_line()
                    .await?
                    .map_or("none".to_string(), |(n, _)| n.to_string());
                Some(format!(
                    "it names line {} of trail {:?} (sha256 {}) as the stream's last commit, and the database {} does \
                     not hold it (its last commit of the stream: line {last}): the database is older than the \
                     landing, as after a restore from an older backup; nothing was fetched. Restore the database \
                     that goes with the landing, or, with a deviation open, run again with --accept-rollback, which \
                     records it (rollback_accepted) and fetches those pages again",
                    head.line,
                    head.trail,
                    head.sha256,
                    held.shown_db()
                ))
            }
        }
    };
    let Some(detail) = problem else {
        return Ok(());
    };
    if !accept {
        return Err(StoreError::Corrupt {
            path: place.into(),
            detail,
        }
        .into());
    }
    let event = events::RollbackAccepted {
        stream: stream.to_string(),
        manifest: landing.recorded(HEAD_FILE),
        cursor_points_at: head.map_or(0, |h| u64::try_from(h.line).unwrap_or(0)),
        unrecorded: Vec::new(),
    };
    trail.record(event).await?;
    Ok(())
}

/// Writes the head at the clean end of a stream's run: the stream's last
/// commit in the database, durably (a file: temp, fsync, rename, its
/// directory; an object: one PUT).
pub(crate) async fn write(
    held: &DbStream,
    landing: &LandingStore,
    trail: &crate::state_db::DbTrail,
) -> Result<(), StoreError> {
    let Some((line, sha256)) = held.last_commit_line().await? else {
        return Ok(());
    };
    let head = Head {
        trail: held.trail_name().to_string(),
        line,
        sha256,
    };
    put(landing, &head).await?;
    // After the head, never before (see the module).
    let published = events::LandingHeadPublished {
        stream: held.key().to_string(),
        landing: landing.recorded(HEAD_FILE),
        trail: head.trail,
        line,
        sha256: head.sha256,
    };
    match trail.record(&published).await {
        Ok(_) => Ok(()),
        Err(crate::audit::AuditError::Db(e)) => Err(StoreError::Db(e)),
        Err(e) => Err(StoreError::io(
            landing.dir(),
            "record the head of",
            std::io::Error::other(e.to_string()),
        )),
    }
}

/// Puts `head` beside the landing's pages.
async fn put(landing: &LandingStore, head: &Head) -> Result<(), StoreError> {
    let mut text = serde_json::to_vec(head)
        .map_err(|e| StoreError::io(landing.dir(), "encode the head of", e.into()))?;
    text.push(b'\n');
    match landing.remote() {
        Some(remote) => remote
            .put(&remote_name(landing), bytes::Bytes::from(text))
            .await
            .map_err(StoreError::Object),
        None => {
            let path = landing.dir().join(HEAD_FILE);
            crate::durable::replace_durably(&path, &path.with_extension("json.tmp"), &text)
                .map_err(|e| StoreError::io(&path, "replace", e))
        }
    }
}

/// The head's text, if the landing has one, and where it is (for messages).
async fn read(landing: &LandingStore) -> Result<(String, Option<Vec<u8>>), StoreError> {
    match landing.remote() {
        Some(remote) => {
            let name = remote_name(landing);
            let text = remote.read(&name).await.map_err(StoreError::Object)?;
            Ok((format!("{}/{name}", remote.url()), text.map(|b| b.to_vec())))
        }
        None => {
            let path = landing.dir().join(HEAD_FILE);
            let text = match crate::no_follow::read(&path) {
                Ok(mut f) => {
                    let mut text = Vec::new();
                    std::io::Read::read_to_end(&mut f, &mut text)
                        .map_err(|e| StoreError::io(&path, "read", e))?;
                    Some(text)
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(StoreError::io(&path, "open", e)),
            };
            Ok((path.display().to_string(), text))
        }
    }
}

/// The head's object name beside the stream's pages in the bucket.
fn remote_name(landing: &LandingStore) -> String {
    format!("{}/{HEAD_FILE}", landing.recorded_dir())
}

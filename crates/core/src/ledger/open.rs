//! Opening a stream: its run lock taken, its landing opened and claimed,
//! its state proven against the trail (`proof.rs`), and, for an
//! object-store landing kept in files, its manifest published.

use std::path::Path;

use super::events::{self, RunLockTakenOver};
use super::stream::{OpenStream, Opened, StreamLedger};
use super::{FencedLock, Ledger, LedgerError, Trail};
use crate::state_db::DbStream;
use crate::store::owner::{Claimant, StateKind};
use crate::store::{CursorStore, LandingStore, RunLock};

/// Who holds a lock, as lock records and audit lines name a holder.
fn holder(trail: &Trail) -> String {
    format!(
        "host {}, pid {}, run {}",
        crate::host::name(),
        std::process::id(),
        trail.run_id()
    )
}

/// Takes the stream's run lock in `ledger`, opens and claims its
/// landing, and proves its state against the trail before anything is
/// fetched.
pub(crate) async fn open(ledger: &Ledger, p: OpenStream<'_>) -> Result<Opened, LedgerError> {
    let (stream, fenced, state_id) = match ledger {
        Ledger::Files { dir, trail } => {
            let (cursors, fenced) = lock_files(dir, &p).await?;
            let id = match p.dry_run {
                true => None,
                false => Some((crate::store::owner::state_id(dir)?, StateKind::Directory)),
            };
            let stream = StreamLedger::Files {
                cursors: Box::new(cursors),
                trail: trail.clone(),
            };
            (stream, fenced, id)
        }
        Ledger::Db { db, trail } => {
            let held = DbStream::lock(
                db,
                p.identity,
                p.namespace,
                &holder(p.trail),
                &p.trail.canonical_path().to_string_lossy(),
            )
            .await?
            .starting_at(p.since.clone());
            let id = (!p.dry_run).then(|| (db.state_id().to_string(), StateKind::Database));
            let stream = StreamLedger::Db {
                held: Box::new(held),
                trail: trail.clone(),
            };
            (stream, None, id)
        }
    };
    let mut landing = match &stream {
        StreamLedger::Files { cursors, .. } => cursors.open_landing(p.out_dir, p.ext)?,
        StreamLedger::Db { held, .. } => held.open_landing(p.out_dir, p.ext)?,
    }
    .with_remote(p.object.clone());
    if let Some((id, kind)) = state_id {
        claim_landing(&landing, &Claimant { id: &id, kind }, &p).await?;
    }
    super::proof::prove(&stream, &mut landing, &p).await?;
    if let StreamLedger::Db { held, .. } = &stream {
        let accept = p.accept_rollback && !p.dry_run;
        super::landing_head::check(held, &landing, p.name, p.trail, accept).await?;
    }
    if !p.dry_run {
        super::publish::publish_manifest(&stream, &landing, &p).await?;
    }
    Ok(Opened {
        ledger: stream,
        landing,
        fenced,
    })
}

/// A state directory's locks: the stream's lock file, and with Redis its
/// fenced cross-host lock (a takeover of a dead holder's is audited);
/// then state written under an older version's names is moved (audited).
async fn lock_files(
    dir: &Path,
    p: &OpenStream<'_>,
) -> Result<(CursorStore, Option<FencedLock>), LedgerError> {
    let lock = RunLock::acquire(dir, p.identity, p.trail.run_id().as_str())?;
    let fenced = match p.redis {
        Some((pacer, quota_key)) => {
            let stream = crate::store::stream_dir_name(p.identity);
            Some(FencedLock::acquire(pacer, quota_key, &stream, &holder(p.trail)).await?)
        }
        None => None,
    };
    if let Some((previous, fence)) = fenced
        .as_ref()
        .and_then(|f| f.taken_over_from().map(|prev| (prev, f.fence())))
    {
        let event = RunLockTakenOver {
            stream: p.name.to_string(),
            previous_holder: previous.to_string(),
            fence,
            reason: "the holder is a pid of this host that no longer runs (killed): taken over instead of \
                     waiting out the lock's TTL"
                .into(),
        };
        p.trail.record(event).await?;
    }
    for moved in crate::store::migrate::stream(dir, p.out_dir, p.identity)? {
        let relative = |path: &Path| {
            path.strip_prefix(dir)
                .or_else(|_| path.strip_prefix(p.out_dir))
                .unwrap_or(path)
                .display()
                .to_string()
        };
        let event = events::StateMigrated {
            stream: p.name.to_string(),
            from: relative(&moved.from),
            to: relative(&moved.to),
        };
        p.trail.record(event).await?;
    }
    Ok((CursorStore::new(lock).starting_at(p.since.clone()), fenced))
}

/// Claims the stream's landing for the state `id` (a landing belongs to
/// the one state that proves it); `--repair-state` gives it a new owner,
/// audited.
async fn claim_landing(
    landing: &LandingStore,
    claimant: &Claimant<'_>,
    p: &OpenStream<'_>,
) -> Result<(), LedgerError> {
    let changed = match landing.remote() {
        Some(remote) => {
            crate::store::owner::claim_remote(remote, landing.recorded_dir(), claimant, p.repair_state)
                .await?
        }
        None => crate::store::owner::claim(landing.dir(), claimant, p.repair_state)?,
    };
    if let Some(changed) = changed {
        let event = events::LandingOwnerChanged {
            stream: p.name.to_string(),
            owner_file: landing.recorded(crate::store::owner::OWNER_FILE),
            from: changed.from,
            to: changed.to,
        };
        p.trail.record(event).await?;
    }
    Ok(())
}

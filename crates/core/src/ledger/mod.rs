//! The ledger: where a run's evidence and state live, chosen once.
//!
//! `--state` (or `EDC_SYNC_STATE`) is parsed once into a closed type,
//! [`StateLocation`]: a directory, or a PostgreSQL database. Everything a
//! run keeps beside its landed pages is reached through this module, which
//! holds both implementations side by side. The state is opened first
//! ([`State`], before any audit line), then its trail, which makes the
//! [`Ledger`]: one value whose each side holds its state and its own trail,
//! so that what is built from it cannot pair one backend with the other's
//! trail:
//!
//! - the audit trail, its anchors and its keyed checkpoints: [`Trail`]
//!   (`trail.rs`; a JSON Lines file with anchors in the state directory, or
//!   rows of `edc_sync_audit_line` with anchors in `edc_sync_anchor`), the
//!   run's handle for its events;
//! - a stream's run lock, cursor and manifest, and the page commit to the
//!   stream's own side of the trail: [`StreamLedger`] (`stream.rs`; a lock
//!   file, a cursor file and a manifest file, or an advisory lock, a cursor
//!   row and manifest rows committed with their line in one transaction),
//!   made from the [`Ledger`] only (`open.rs`);
//! - the start-up proof, specified once for both (`proof.rs`): the
//!   stream's cursor is what the trail's last commit of the stream says,
//!   the manifest lists the trail's last landed page, and that page is in
//!   place, byte for byte; a state that says otherwise stops the run (65)
//!   naming the file or row and both values.
//!
//! Below it, `store/` is the files, `state_db/` the database and `audit/`
//! the trail's format, chain and proofs; none of them knows the others'
//! backend. `tests/integration/ledger.rs` runs one suite of the guarantees
//! on both backends.

mod events;
mod fence;
mod landing_head;
pub(crate) use landing_head::HEAD_FILE as LANDING_HEAD_FILE;
mod open;
mod proof;
mod publish;
mod recover;
mod stream;
mod trail;

use std::path::{Path, PathBuf};

pub(crate) use fence::FencedLock;
pub(crate) use open::open as open_stream;
pub(crate) use stream::{OpenStream, PageToCommit, StreamLedger};
pub(crate) use trail::{name_in_db as trail_name_in_db, AnchorRefused, FileTrail, Trail, TrailOptions};

// What the page loop holds of a stream's state, through this seam: its
// cursor and the advance past a page, the landing a page goes to (its
// file in flight, the landed page, its manifest line), and the errors of
// both (`crate::sync` names no store of its own).
pub(crate) use crate::store::object::ObjectLanding;
pub(crate) use crate::store::object_lock::{BucketDefault, Retention};
pub(crate) use crate::store::{
    stream_dir_name, Cursor, LandedPage, LandingStore, LandingTemp, ListedLine, LockError, ManifestEntry,
    MemoryChange, PageAdvance, PendingCursor, Snapshot, StoreError, StreamLocked as Locked,
};

use crate::audit::AuditError;
use crate::config::ConfigError;
use crate::state_db::{DbUrl, StateDb};
use crate::store::StreamLocked;
use crate::stream::StreamIdentity;

/// Where the state is: the one choice every command makes once, from
/// `--state`.
#[derive(Debug, Clone)]
pub enum StateLocation {
    /// A local directory: cursor files, the trail's anchors, run locks.
    Dir(PathBuf),
    /// A PostgreSQL database: cursor and manifest rows, the trail's lines
    /// and anchors, advisory run locks.
    Db(Box<DbUrl>),
}

impl From<PathBuf> for StateLocation {
    /// A state directory.
    fn from(dir: PathBuf) -> StateLocation {
        StateLocation::Dir(dir)
    }
}

impl From<&Path> for StateLocation {
    /// A state directory.
    fn from(dir: &Path) -> StateLocation {
        StateLocation::Dir(dir.to_path_buf())
    }
}

impl StateLocation {
    /// `text`, given as `flag`: a `postgres://` (or `postgresql://`) URL is
    /// a database, checked now (its password never shown); any other URL
    /// is refused (78, naming the flag); anything else is a directory.
    pub fn parse(flag: &str, text: &Path) -> Result<StateLocation, ConfigError> {
        let shown = text.to_string_lossy();
        if crate::paths::url_scheme(&shown).is_some_and(|s| crate::state_db::SCHEMES.contains(&s)) {
            return DbUrl::parse(flag, &shown)
                .map(|url| StateLocation::Db(Box::new(url)))
                .map_err(ConfigError::Identity);
        }
        crate::paths::require_local(flag, text).map_err(ConfigError::Identity)?;
        Ok(StateLocation::Dir(text.to_path_buf()))
    }

    /// The state directory, when the state is in files.
    pub fn dir(&self) -> Option<&Path> {
        match self {
            StateLocation::Dir(d) => Some(d),
            StateLocation::Db(_) => None,
        }
    }

    /// The state for messages: the directory, or the URL without its
    /// credentials.
    pub fn shown(&self) -> String {
        match self {
            StateLocation::Dir(d) => d.display().to_string(),
            StateLocation::Db(url) => url.shown().to_string(),
        }
    }
}

/// The state, opened for a run before its trail: the directory, or the
/// database connected (unreachable 69, refused 77, read-only or of another
/// schema 78), before any audit line.
#[derive(Debug, Clone)]
pub(crate) enum State {
    Files { dir: PathBuf },
    Db(Box<StateDb>),
}

impl State {
    /// Opens `location`.
    pub(crate) async fn open(location: &StateLocation) -> Result<State, crate::db_error::DbError> {
        Ok(match location {
            StateLocation::Dir(dir) => State::Files { dir: dir.clone() },
            StateLocation::Db(url) => State::Db(Box::new(StateDb::connect(url).await?)),
        })
    }

    /// The run's trail in this state, opened (its anchors checked, and with
    /// the key its last checkpoint) and its `header` written: the ledger,
    /// whose each side holds its own trail, and the run's handle on that
    /// trail for its events.
    pub(crate) async fn open_trail(
        self,
        options: &TrailOptions,
        run_id: &crate::audit::RunId,
        masker: crate::mask::Masker,
        header: crate::audit::RunStarted,
    ) -> Result<(Ledger, Trail), LedgerError> {
        Ok(match self {
            State::Files { dir } => {
                let (run, trail) = Trail::open_file(&dir, options, run_id, masker, header).await?;
                (Ledger::Files { dir, trail }, run)
            }
            State::Db(db) => {
                let (run, trail) = Trail::open_db(&db, options, run_id, masker, header).await?;
                (Ledger::Db { db, trail }, run)
            }
        })
    }
}

/// The state and its trail, one value: a stream opened in it keeps its
/// cursor and manifest on the same side as the trail its commits go to
/// (`stream.rs`), so a stream of one backend with the trail of the other
/// cannot be made.
#[derive(Clone)]
pub(crate) enum Ledger {
    /// A state directory and the audit file.
    Files { dir: PathBuf, trail: FileTrail },
    /// A state database and its trail's rows.
    Db {
        db: Box<StateDb>,
        trail: std::sync::Arc<crate::state_db::DbTrail>,
    },
}

impl Ledger {
    /// Where an object-store landing keeps its manifest index: in the state
    /// directory, or, with a state database (which holds the manifest),
    /// nowhere but a scratch directory for the pages in flight.
    pub(crate) fn object_index_dir(&self) -> Option<PathBuf> {
        match self {
            Ledger::Files { dir, .. } => Some(dir.join(crate::store::object::INDEX_DIR)),
            Ledger::Db { .. } => None,
        }
    }
}

/// Why the ledger could not be read or written, or refused what it found.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LedgerError {
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Locked(#[from] StreamLocked),
    #[error(transparent)]
    Pacer(#[from] quota_pacer::PacerError),
}

impl From<crate::db_error::DbError> for LedgerError {
    fn from(e: crate::db_error::DbError) -> LedgerError {
        LedgerError::Store(StoreError::Db(e))
    }
}

impl From<crate::store::LockError> for LedgerError {
    fn from(e: crate::store::LockError) -> LedgerError {
        match e {
            crate::store::LockError::Locked(l) => LedgerError::Locked(l),
            crate::store::LockError::Store(s) => LedgerError::Store(s),
        }
    }
}

impl From<fence::FenceError> for LedgerError {
    fn from(e: fence::FenceError) -> LedgerError {
        match e {
            fence::FenceError::Locked(l) => LedgerError::Locked(l),
            fence::FenceError::Pacer(p) => LedgerError::Pacer(p),
        }
    }
}

/// A stream's cursor, read without its lock (`cursor show`): `None` for a
/// stream never synced.
pub async fn cursor_of(
    location: &StateLocation,
    identity: &StreamIdentity,
) -> Result<Option<crate::store::Cursor>, StoreError> {
    match location {
        StateLocation::Dir(dir) => {
            let file = crate::store::CursorFile::new(dir, identity);
            if !file.path().exists() {
                return Ok(None);
            }
            Ok(Some(file.load()?))
        }
        StateLocation::Db(url) => {
            let db = StateDb::connect(url).await?;
            crate::state_db::cursor_of(&db, identity).await
        }
    }
}

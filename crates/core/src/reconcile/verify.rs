//! `edc-sync verify` on either backend: the choice is made here, once, by
//! the state's type, and every backend is judged by the same judge
//! (`mod.rs`; a state database's ledgers are laid out as files for it).

use std::path::Path;

use super::{
    reconcile, reconcile_db, reconcile_object, DbLanding, DbUnreadable, ObjectUnreadable, Progress, Scope,
    Summary, Unreadable,
};
use crate::config::ConfigError;
use crate::db_error::DbError;
use crate::exit::Exit;
use crate::ledger::StateLocation;
use crate::store::{LandingLocation, ObjectError};

/// Why a verification could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum Unverifiable {
    /// `--out` names a URL edc-sync does not take (78).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A path named on the command line cannot be read (66).
    #[error(transparent)]
    Local(#[from] Unreadable),
    /// The object store of the landing failed or refused.
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// The state database could not be reached or read.
    #[error(transparent)]
    Db(#[from] DbError),
    /// A state database's ledgers could not be laid out for the judge.
    #[error(transparent)]
    DbLedger(#[from] DbUnreadable),
}

impl Unverifiable {
    /// Its exit code.
    pub fn exit(&self) -> Exit {
        match self {
            Unverifiable::Config(e) => e.exit(),
            Unverifiable::Local(u) if crate::no_follow::is_link_refusal(&u.error) => Exit::IoErr,
            Unverifiable::Local(_) => Exit::NoInput,
            Unverifiable::Object(o) => o.exit(),
            Unverifiable::Db(e) => e.exit(),
            Unverifiable::DbLedger(e) => e.exit(),
        }
    }
}

impl From<ObjectUnreadable> for Unverifiable {
    fn from(e: ObjectUnreadable) -> Unverifiable {
        match e {
            ObjectUnreadable::Object(o) => Unverifiable::Object(o),
            ObjectUnreadable::Local(l) => Unverifiable::Local(l),
        }
    }
}

/// `edc-sync verify`: the landing at `out` (a directory or an object
/// store's URL) reconciled with the state at `state` (a directory, or a
/// database whose trail is `--audit-log`'s file name) and the trail at
/// `audit`.
pub async fn verify(
    state: &StateLocation,
    out: &LandingLocation,
    audit: &Path,
    key: Option<&crate::audit::AuditKey>,
    scope: &Scope,
    progress: &Progress,
) -> Result<Summary, Unverifiable> {
    let proving = super::Proving { trail: audit, key };
    // A bucket is opened (configured, nothing asked of it yet).
    let object;
    let landing = match out {
        LandingLocation::Dir(dir) => DbLanding::Dir(dir),
        LandingLocation::Bucket(bucket) => {
            object = crate::store::ObjectLanding::open(bucket.as_str())?;
            DbLanding::Bucket(&object)
        }
    };
    let mut summary = match (state, landing) {
        (StateLocation::Dir(state), DbLanding::Dir(dir)) => reconcile(dir, state, proving, scope, progress)?,
        (StateLocation::Dir(state), DbLanding::Bucket(bucket)) => {
            reconcile_object(bucket, state, proving, scope, progress).await?
        }
        (StateLocation::Db(url), landing) => {
            let db = crate::state_db::StateDb::connect(url).await?;
            let trail = crate::ledger::trail_name_in_db(audit);
            reconcile_db(landing, &db, (&trail, key), scope, progress).await?
        }
    };
    // An S3 landing's pages: their retention as S3 reports it now.
    if let (DbLanding::Bucket(bucket), true) = (landing, out.is_s3()) {
        let retained = super::Retained::of(bucket).await?;
        if retained.retained > 0 {
            summary.retention = Some(retained);
        }
    }
    Ok(summary)
}

//! Why state or landing could not be read or written, and whether that is
//! damage (65) or an I/O failure (74).

use std::path::{Path, PathBuf};

/// State that cannot be read or written (74), or that is damaged (65).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: cannot {op}: {error}", path.display())]
    Io {
        path: PathBuf,
        op: &'static str,
        error: std::io::Error,
    },
    #[error("state file {}: {detail}; it was left as it is", path.display())]
    Unreadable { path: PathBuf, detail: String },
    /// A commit without the proof it needs: a defect in the caller, never
    /// written (exit 74).
    #[error("cursor {}: not committed: {detail}", path.display())]
    Unproven { path: PathBuf, detail: String },
    /// A file this tool wrote whole is damaged: data error (65), since
    /// writing on top of it would hide the damage.
    #[error("{}: {detail}; it was left as it is (run `edc-sync verify` to reconcile)", path.display())]
    Corrupt { path: PathBuf, detail: String },
    /// The object store of the landing failed or refused a request.
    #[error(transparent)]
    Object(#[from] super::object::ObjectError),
    /// The state database failed or refused.
    #[error(transparent)]
    Db(#[from] crate::db_error::DbError),
}

impl StoreError {
    /// Its exit code: damage 65; an object store's or the state
    /// database's own; anything else 74.
    pub fn exit(&self) -> crate::exit::Exit {
        match self {
            StoreError::Corrupt { .. } => crate::exit::Exit::DataErr,
            StoreError::Object(o) => o.exit(),
            StoreError::Db(e) => e.exit(),
            StoreError::Io { .. } | StoreError::Unreadable { .. } | StoreError::Unproven { .. } => {
                crate::exit::Exit::IoErr
            }
        }
    }

    /// The file is damaged (65), rather than unreadable or unwritable (74).
    pub fn is_damage(&self) -> bool {
        matches!(self, StoreError::Corrupt { .. })
            || matches!(self, StoreError::Db(e) if e.exit() == crate::exit::Exit::DataErr)
    }

    pub(crate) fn io(path: &Path, op: &'static str, error: std::io::Error) -> StoreError {
        StoreError::Io {
            path: path.to_path_buf(),
            op,
            error,
        }
    }
}

//! `audit export`: a trail kept in the database written out as the JSON
//! Lines file docs/audit-trail.md describes, byte for byte the chain the
//! rows hold. Each row's recorded byte offset is checked against the bytes
//! written before it, so the file's offsets are the receipts' offsets; the
//! file is written beside its destination, fsynced, and renamed into place
//! only when whole, and never over an existing file (evidence is not
//! overwritten).

use std::io::Write;
use std::path::Path;

use super::trail::read_lines;
use super::StateDb;
use crate::db_error::DbError;

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    pub lines: u64,
    pub bytes: u64,
    /// SHA-256 of the last line (the chain head), if any.
    pub head_sha256: Option<String>,
}

/// Why an export did not produce its file.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("audit export --to {}: {detail}", path.display())]
    Refused {
        path: std::path::PathBuf,
        detail: String,
    },
    #[error("audit export --to {}: cannot {op}: {error}", path.display())]
    Io {
        path: std::path::PathBuf,
        op: &'static str,
        error: std::io::Error,
    },
}

impl ExportError {
    /// Its exit code: the database's own; a refused target (an existing
    /// file or a link) 78; an unwritable one 74.
    pub fn exit(&self) -> crate::exit::Exit {
        match self {
            ExportError::Db(e) => e.exit(),
            ExportError::Refused { .. } => crate::exit::Exit::Config,
            ExportError::Io { .. } => crate::exit::Exit::IoErr,
        }
    }
}

/// Writes trail `name` of `db` to `to`.
pub async fn export(db: &StateDb, name: &str, to: &Path) -> Result<Exported, ExportError> {
    if to.symlink_metadata().is_ok() {
        return Err(ExportError::Refused {
            path: to.to_path_buf(),
            detail: "exists; an export never replaces a file (give a new path)".into(),
        });
    }
    let dir = to
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let io = |op| {
        let path = to.to_path_buf();
        move |error| ExportError::Io { path, op, error }
    };
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(io("create a file beside"))?;
    let (exported, gap) = write(db, name, temp.as_file_mut()).await?;
    if let Some(detail) = gap {
        return Err(DbError::Damaged {
            url: db.url().shown().to_string(),
            detail,
        }
        .into());
    }
    if exported.lines == 0 {
        return Err(ExportError::Refused {
            path: to.to_path_buf(),
            detail: format!("trail {name:?} of {} holds no line", db.url()),
        });
    }
    temp.as_file().sync_all().map_err(io("fsync"))?;
    temp.persist_noclobber(to).map_err(|e| ExportError::Io {
        path: to.to_path_buf(),
        op: "rename into place",
        error: e.error,
    })?;
    crate::durable::sync_parent_dir(to).map_err(io("fsync the directory of"))?;
    Ok(exported)
}

/// Writes trail `name` of `db` to the new file `to` for `audit verify`,
/// which judges it: every row is written even when a row's recorded byte
/// offset does not add up, and that is returned beside what was written,
/// so a line removed or moved is named as such by the chain's verifier
/// rather than as an offset.
pub async fn export_for_verify(
    db: &StateDb,
    name: &str,
    to: &Path,
) -> Result<(Exported, Option<String>), ExportError> {
    let mut file = crate::no_follow::create(to).map_err(|error| ExportError::Io {
        path: to.to_path_buf(),
        op: "create",
        error,
    })?;
    write(db, name, &mut file).await
}

/// Writes trail `name`'s lines into `out`, checking each row's offset: the
/// first that does not add up is returned with what was written.
pub(super) async fn write(
    db: &StateDb,
    name: &str,
    out: &mut impl Write,
) -> Result<(Exported, Option<String>), ExportError> {
    let mut written = Exported {
        lines: 0,
        bytes: 0,
        head_sha256: None,
    };
    let mut gap = None;
    let mut buf = std::io::BufWriter::new(out);
    read_lines(db, name, 1, &mut |line| {
        if line.byte_offset as u64 != written.bytes && gap.is_none() {
            gap = Some(format!(
                "line {} of trail {name:?} records byte offset {}, but the lines before it end at byte {}",
                line.n, line.byte_offset, written.bytes
            ));
        }
        buf.write_all(line.line.as_bytes())?;
        buf.write_all(b"\n")?;
        written.lines += 1;
        written.bytes += line.line.len() as u64 + 1;
        written.head_sha256 = Some(line.sha256);
        Ok(())
    })
    .await?;
    buf.flush().map_err(|error| ExportError::Io {
        path: name.into(),
        op: "write",
        error,
    })?;
    Ok((written, gap))
}

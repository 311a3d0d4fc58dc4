//! The append-only audit file: one writer per run, many runs per file.
//!
//! Each append takes an exclusive lock on the file, reads the last line to
//! chain to it, appends one line and fsyncs before the lock is released.
//! That makes the chain hold across concurrent processes, and makes "the
//! line is on disk" true by the time [`AuditLog::record`] returns, which is
//! what lets the page loop write the audit line *before* it sleeps or
//! commits a cursor (invariant 3).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;

use super::line;
use super::run_id::RunId;
use crate::digest::{sha256_hex, ZERO_SHA256};

/// An event that can be written to the audit trail.
///
/// The struct's fields become the line's fields, in declaration order.
pub trait AuditEvent: Serialize {
    /// The `event` value, e.g. `run_started`.
    const NAME: &'static str;
}

/// Written when an append finds the file ending in a torn line (a crash
/// mid-write). The torn bytes stay in the file, byte for byte: this line
/// acknowledges them and the chain continues from their hash, so nothing is
/// silently dropped and `audit verify` can report exactly what happened.
#[derive(Debug, Serialize)]
pub struct TailRepaired {
    pub torn_line_bytes: u64,
    pub torn_line_sha256: String,
}

impl AuditEvent for TailRepaired {
    const NAME: &'static str = "audit_tail_repaired";
}

/// Why the audit trail could not be written. Maps to exit 74 (EX_IOERR):
/// a run that cannot write its audit trail must stop before it acts.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("audit log {}: cannot {op}: {error}", path.display())]
    Io {
        path: PathBuf,
        op: &'static str,
        error: std::io::Error,
    },
    #[error("audit log {}: {error}", path.display())]
    Encode { path: PathBuf, error: EncodeError },
}

#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error(transparent)]
    Reserved(#[from] line::ReservedField),
    #[error("event {event} does not serialise to a JSON object: {detail}")]
    NotAnObject { event: &'static str, detail: String },
}

/// What an append wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub seq: u64,
    /// SHA-256 of the line written (the next line's `prev_sha256`).
    pub sha256: String,
    pub ts: String,
}

/// The audit trail of one run.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: File,
    run_id: RunId,
    next_seq: u64,
    /// Masks subject identifiers in every string field before the line is
    /// composed (and so before it is hashed into the chain).
    masker: Option<crate::mask::Masker>,
}

impl AuditLog {
    /// Opens (creating if needed) the audit file at `path` for `run_id`.
    pub fn open(path: &Path, run_id: RunId) -> Result<Self, AuditError> {
        let io = |op| io_error(path, op);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io("create its directory"))?;
        }
        let existed = path.exists();
        // Never through a symlink, and only a regular file: run as root, a
        // link would otherwise let a run append to any file on the system.
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| {
                let e = match e.raw_os_error() {
                    Some(libc::ELOOP) => {
                        std::io::Error::other("it is a symbolic link, which is never followed")
                    }
                    _ => e,
                };
                io_error(path, "open")(e)
            })?;
        if !file.metadata().map_err(io("stat"))?.is_file() {
            return Err(io_error(path, "open")(std::io::Error::other(
                "it is not a regular file",
            )));
        }
        if !existed {
            // The new directory entry must survive a crash too.
            crate::durable::sync_parent_dir(path).map_err(io("fsync its directory"))?;
        }
        Ok(AuditLog {
            path: path.to_path_buf(),
            file,
            run_id,
            next_seq: 1,
            masker: None,
        })
    }

    /// Masks identifiers in every line this log writes.
    pub fn with_masker(mut self, masker: crate::mask::Masker) -> Self {
        self.masker = Some(masker);
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// Appends `event` and returns once the line is fsynced.
    pub fn record<E: AuditEvent>(&mut self, event: &E) -> Result<Appended, AuditError> {
        let value = serde_json::to_value(event).map(|mut v| {
            if let Some(m) = &self.masker {
                m.json(&mut v);
            }
            v
        });
        let fields = match value {
            Ok(Value::Object(map)) => map,
            Ok(Value::Null) => serde_json::Map::new(),
            Ok(other) => return Err(self.encode_error(E::NAME, format!("got {other}"))),
            Err(e) => return Err(self.encode_error(E::NAME, e.to_string())),
        };
        self.file.lock().map_err(io_error(&self.path, "lock"))?;
        let result = self.append_locked(E::NAME, fields);
        // Closing the descriptor would release the lock too; unlocking
        // explicitly lets other processes in as soon as the fsync is done.
        let unlocked = self.file.unlock().map_err(io_error(&self.path, "unlock"));
        let appended = result?;
        unlocked?;
        Ok(appended)
    }

    fn encode_error(&self, event: &'static str, detail: String) -> AuditError {
        AuditError::Encode {
            path: self.path.clone(),
            error: EncodeError::NotAnObject { event, detail },
        }
    }

    fn append_locked(
        &mut self,
        event: &'static str,
        fields: serde_json::Map<String, Value>,
    ) -> Result<Appended, AuditError> {
        let tail = read_tail(&self.file).map_err(io_error(&self.path, "read its last line"))?;
        let mut buf = String::new();
        let mut prev = tail.prev_sha256;
        if let Some(torn) = tail.torn {
            let repair = TailRepaired {
                torn_line_bytes: torn.len,
                torn_line_sha256: prev.clone(),
            };
            let fields = match serde_json::to_value(&repair) {
                Ok(Value::Object(map)) => map,
                _ => serde_json::Map::new(),
            };
            let (text, _) = self.compose_next(TailRepaired::NAME, fields, &prev)?;
            buf.push('\n');
            prev = sha256_hex(text.as_bytes());
            buf.push_str(&text);
            buf.push('\n');
        }
        let (text, appended) = self.compose_next(event, fields, &prev)?;
        buf.push_str(&text);
        buf.push('\n');
        // One write of whole lines: with O_APPEND the kernel places it at the
        // end even if another writer ignored the lock.
        (&self.file)
            .write_all(buf.as_bytes())
            .map_err(io_error(&self.path, "append"))?;
        self.file.sync_data().map_err(io_error(&self.path, "fsync"))?;
        Ok(appended)
    }

    /// Builds the next line of this run and advances `seq`.
    fn compose_next(
        &mut self,
        event: &'static str,
        fields: serde_json::Map<String, Value>,
        prev: &str,
    ) -> Result<(String, Appended), AuditError> {
        let ts = now_rfc3339();
        let text =
            line::compose(self.next_seq, &ts, self.run_id.as_str(), event, fields, prev).map_err(|e| {
                AuditError::Encode {
                    path: self.path.clone(),
                    error: e.into(),
                }
            })?;
        let appended = Appended {
            seq: self.next_seq,
            sha256: sha256_hex(text.as_bytes()),
            ts,
        };
        self.next_seq += 1;
        Ok((text, appended))
    }
}

fn io_error(path: &Path, op: &'static str) -> impl FnOnce(std::io::Error) -> AuditError {
    let path = path.to_path_buf();
    move |error| AuditError::Io { path, op, error }
}

/// RFC 3339 UTC with milliseconds, the `ts` of every line.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// The end of the file as the next line must see it.
struct Tail {
    /// Hash of the last line (complete or torn), or 64 zeros.
    prev_sha256: String,
    /// Set when the file does not end with a newline.
    torn: Option<Torn>,
}

struct Torn {
    len: u64,
}

/// Reads backwards from the end to the start of the last line.
fn read_tail(file: &File) -> std::io::Result<Tail> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Tail {
            prev_sha256: ZERO_SHA256.to_string(),
            torn: None,
        });
    }
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, len - 1)?;
    let complete = last[0] == b'\n';
    let end = if complete { len - 1 } else { len };
    // Find the newline before the last line, reading 8 KiB at a time.
    let mut start = end;
    let mut chunk = vec![0u8; 8192];
    'search: while start > 0 {
        let from = start.saturating_sub(chunk.len() as u64);
        let n = (start - from) as usize;
        file.read_exact_at(&mut chunk[..n], from)?;
        for i in (0..n).rev() {
            if chunk[i] == b'\n' {
                start = from + i as u64 + 1;
                break 'search;
            }
        }
        start = from;
    }
    let mut bytes = vec![0u8; (end - start) as usize];
    file.read_exact_at(&mut bytes, start)?;
    Ok(Tail {
        prev_sha256: sha256_hex(&bytes),
        torn: (!complete).then_some(Torn { len: end - start }),
    })
}

//! One run per stream at a time: an OS file lock next to the cursor.
//!
//! The lock is held for the whole run and released when the process ends,
//! however it ends (the kernel drops it with the descriptor), so a crashed
//! run never leaves a stream locked. The file records who holds it, so a
//! second run can say whom it waited for.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use super::StoreError;
use crate::stream::StreamIdentity;

/// Another run holds the stream. Maps to exit 75: try again later.
#[derive(Debug, thiserror::Error)]
#[error("stream {stream} is locked by another run ({holder}); nothing was fetched")]
pub struct StreamLocked {
    pub stream: String,
    pub holder: String,
}

/// A held run lock; released on drop.
#[derive(Debug)]
pub(crate) struct RunLock {
    _file: File,
    state_dir: PathBuf,
    stream: StreamIdentity,
}

impl RunLock {
    /// Takes the lock of `stream` under `state_dir`, or says who has it.
    pub(crate) fn acquire(
        state_dir: &Path,
        stream: &StreamIdentity,
        run_id: &str,
    ) -> Result<RunLock, LockError> {
        let name = format!("{}.lock", super::stream_dir_name(stream));
        let rel = Path::new(&name).parent().unwrap_or(Path::new(""));
        crate::no_follow::dirs_below(state_dir, rel)
            .map_err(|e| LockError::Store(StoreError::io(&state_dir.join(rel), "create", e)))?;
        let path = state_dir.join(&name);
        let mut file = crate::no_follow::open(&path, crate::no_follow::Mode::ReadWriteCreate)
            .map_err(|e| LockError::Store(StoreError::io(&path, "open", e)))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = if holder.trim().is_empty() {
                    "holder unknown".into()
                } else {
                    holder.trim().to_string()
                };
                return Err(LockError::Locked(StreamLocked {
                    stream: super::stream_dir_name(stream),
                    holder,
                }));
            }
            Err(TryLockError::Error(e)) => return Err(LockError::Store(StoreError::io(&path, "lock", e))),
        }
        let who = format!(
            "host {}, pid {}, run {run_id}",
            crate::host::name(),
            std::process::id()
        );
        let written = file
            .set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| file.write_all(who.as_bytes()));
        written.map_err(|e| LockError::Store(StoreError::io(&path, "record the holder in", e)))?;
        Ok(RunLock {
            _file: file,
            state_dir: state_dir.to_path_buf(),
            stream: stream.clone(),
        })
    }

    /// The state directory and stream this lock holds.
    pub(super) fn held(&self) -> (&Path, &StreamIdentity) {
        (&self.state_dir, &self.stream)
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum LockError {
    #[error(transparent)]
    Locked(#[from] StreamLocked),
    #[error(transparent)]
    Store(#[from] StoreError),
}

//! Durable state in files: landed pages and their manifest, the per-stream
//! cursor file, and the file run lock (invariant 2: the cursor never runs
//! ahead of the data). The ledger (`crate::ledger`) chooses between these
//! files and a state database.

mod aws_profile;
mod cursor;
mod error;
mod landing;
mod location;
mod lock;
mod manifest_entry;
pub(crate) mod migrate;
pub(crate) mod object;
mod object_error;
pub(crate) mod object_lock;
pub(crate) mod owner;
pub(crate) mod roll_forward;
mod run_lock;
pub(crate) mod tail;

pub use cursor::CursorFile;
pub use error::StoreError;
pub use location::{BucketUrl, LandingLocation, ObjectScheme};
pub use manifest_entry::ManifestEntry;
pub use migrate::legacy_sanitize;
pub use object::{Failure, ObjectError, ObjectLanding};
pub use object_lock::Retention;
pub use run_lock::{load_script as load_run_lock_script, RunLockName};

pub(crate) use cursor::journal::{
    base_line as journal_base_line, change_line as journal_change_line, check_beside as check_journal,
    line_seal as journal_line_seal, path_beside as journal_of, Unresolved as JournalUnresolved,
};
pub(crate) use cursor::seal::{sealed, MemoryChange, Replay};
pub(crate) use cursor::{
    differences, Cursor, CursorStore, KnownCursor, PageAdvance, PendingCursor, Receipt, Snapshot, Torn,
};
pub(crate) use landing::{LandedPage, LandingStore, LandingTemp, ListedLine};
pub use lock::StreamLocked;
pub(crate) use lock::{LockError, RunLock};
pub(crate) use run_lock::LockState;

pub use crate::stream::{sanitize, stream_dir_name};

//! Which state directory owns a landing directory.
//!
//! A stream's cursor lives in a state directory; its pages in a landing
//! directory. Two state directories over one landing would each keep a
//! cursor of their own for the same pages, and each would take the other's
//! pages for its own. So a state directory has an id (`STATE/.state-id`,
//! made once, moved and restored with the directory), and each stream's
//! landing directory records the id of the state directory that first
//! landed there (`.owner`). A run whose state directory is another refuses
//! the landing (65) before anything is fetched; `--repair-state` makes it
//! the owner, in an audit line. A backfill keeps its state and landing
//! apart from the sync's, so each has its own owner.

use std::io::Read;
use std::path::Path;

use super::StoreError;
use crate::digest::sha256_hex;
use crate::durable::{replace_durably, sync_parent_dir, write_synced};
use crate::no_follow::read as read_no_follow;

const STATE_ID_FILE: &str = ".state-id";
/// The file in each stream's landing directory naming the state directory it belongs to.
pub(crate) const OWNER_FILE: &str = ".owner";

/// A landing directory that changed owner on request.
#[derive(Debug)]
pub(crate) struct OwnerChanged {
    pub from: String,
    pub to: String,
}

/// The id of the state directory at `state_root`, made on first use.
pub(crate) fn state_id(state_root: &Path) -> Result<String, StoreError> {
    let path = state_root.join(STATE_ID_FILE);
    if let Some(id) = read_id(&path)? {
        return Ok(id);
    }
    std::fs::create_dir_all(state_root).map_err(|e| StoreError::io(state_root, "create", e))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let seed = format!(
        "{}|{}|{}|{nanos}",
        crate::host::name(),
        std::process::id(),
        state_root.display()
    );
    let id = sha256_hex(seed.as_bytes())[..16].to_string();
    // Several processes may start on a fresh state directory at once (one
    // per stream): the first id linked into place is the directory's, and
    // every other process reads that one.
    let tmp = state_root.join(format!("{STATE_ID_FILE}.{}.{nanos}.tmp", std::process::id()));
    write_synced(&tmp, format!("{id}\n").as_bytes()).map_err(|e| StoreError::io(&tmp, "create", e))?;
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            sync_parent_dir(&path).map_err(|e| StoreError::io(&path, "fsync the directory of", e))?;
            Ok(id)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            read_id(&path)?.ok_or_else(|| StoreError::io(&path, "read", std::io::ErrorKind::NotFound.into()))
        }
        Err(e) => Err(StoreError::io(&path, "create", e)),
    }
}

/// The id of the state directory at `state_root`, if it has one yet
/// (nothing is created: `verify` reads, never writes).
pub(crate) fn existing_state_id(state_root: &Path) -> Result<Option<String>, StoreError> {
    read_id(&state_root.join(STATE_ID_FILE))
}

/// Claims `landing_dir` for the state directory `state_id`: the first
/// claim is recorded, the same owner passes, another is refused unless
/// `repair`, which makes `state_id` the owner.
pub(crate) fn claim(
    landing_dir: &Path,
    claimant: &Claimant<'_>,
    repair: bool,
) -> Result<Option<OwnerChanged>, StoreError> {
    let state_id = claimant.id;
    let path = landing_dir.join(OWNER_FILE);
    let owner = match read_id(&path)? {
        None => {
            write_id(&path, state_id)?;
            return Ok(None);
        }
        Some(owner) if owner == state_id => return Ok(None),
        Some(owner) => owner,
    };
    if !repair {
        return Err(another_owner(path, &owner, claimant));
    }
    write_id(&path, state_id)?;
    Ok(Some(OwnerChanged {
        from: owner,
        to: state_id.to_string(),
    }))
}

/// [`claim`] for a landing in an object store: the owner is the object
/// `<stream dir>/.owner` beside the pages.
pub(crate) async fn claim_remote(
    remote: &super::object::ObjectLanding,
    dir: &str,
    claimant: &Claimant<'_>,
    repair: bool,
) -> Result<Option<OwnerChanged>, StoreError> {
    let state_id = claimant.id;
    let name = format!("{dir}/{OWNER_FILE}");
    let body = bytes::Bytes::from(format!("{state_id}\n"));
    let owner = match remote.read(&name).await? {
        None => {
            remote.put(&name, body).await?;
            return Ok(None);
        }
        Some(text) => parse_id(&String::from_utf8_lossy(&text)).ok_or_else(|| StoreError::Corrupt {
            path: Path::new(remote.url()).join(&name),
            detail: "it does not hold a state id (hex digits; what it holds is not shown)".into(),
        })?,
    };
    if owner == state_id {
        return Ok(None);
    }
    if !repair {
        let path = Path::new(remote.url()).join(&name);
        return Err(another_owner(path, &owner, claimant));
    }
    remote.put(&name, body).await?;
    Ok(Some(OwnerChanged {
        from: owner,
        to: state_id.to_string(),
    }))
}

fn another_owner(path: std::path::PathBuf, owner: &str, claimant: &Claimant<'_>) -> StoreError {
    let (kind, id, whose) = (claimant.kind.noun(), claimant.id, claimant.kind.id_source());
    StoreError::Corrupt {
        path,
        detail: format!(
            "this landing directory belongs to the state with id {owner}, and this run's {kind} has id {id} \
             ({whose}): two states over one landing would each keep a cursor of their own; nothing was \
             fetched. Point --state at the owner, or run with --repair-state to make this {kind} the owner \
             (recorded in a landing_owner_changed line)"
        ),
    }
}

/// The state that claims a landing: its id, and what kind of state it is
/// (for the refusal's words).
pub(crate) struct Claimant<'a> {
    pub id: &'a str,
    pub kind: StateKind,
}

/// A state directory, or a state database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StateKind {
    Directory,
    Database,
}

impl StateKind {
    pub(crate) fn noun(self) -> &'static str {
        match self {
            StateKind::Directory => "state directory",
            StateKind::Database => "state database",
        }
    }

    fn id_source(self) -> &'static str {
        match self {
            StateKind::Directory => "its .state-id",
            StateKind::Database => "the identity its schema was made with",
        }
    }
}

/// The owner a landing's `.owner` at `path` names, as `verify` reads it:
/// never through a symbolic link, and only a state directory id; `Err`
/// says why not, and never repeats what the file holds.
pub(crate) fn read_owner(path: &Path) -> Result<Option<String>, String> {
    match read_id(path) {
        Ok(id) => Ok(id),
        Err(StoreError::Io { error, .. }) if error.raw_os_error() == Some(libc::ELOOP) => {
            Err("it is a symbolic link, which is never followed".into())
        }
        Err(StoreError::Corrupt { detail, .. }) => Err(detail),
        Err(e) => Err(e.to_string()),
    }
}

/// An id as a `.owner` or `.state-id` holds it (hex digits), or `None`.
pub(crate) fn parse_id(text: &str) -> Option<String> {
    let id = text.trim();
    (!id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_string())
}

/// The id in `path`, never through a link; `None` when there is none.
fn read_id(path: &Path) -> Result<Option<String>, StoreError> {
    let mut text = String::new();
    match read_no_follow(path) {
        Ok(mut f) => f
            .read_to_string(&mut text)
            .map_err(|e| StoreError::io(path, "read", e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(path, "open", e)),
    };
    match parse_id(&text) {
        Some(id) => Ok(Some(id)),
        None => Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: "it does not hold a state id (hex digits; what it holds is not shown)".into(),
        }),
    }
}

/// Writes `id` to `path` durably (temp file, fsync, rename, directory).
/// Only under the stream's run lock: the landing's `.owner`.
fn write_id(path: &Path, id: &str) -> Result<(), StoreError> {
    replace_durably(path, &path.with_extension("tmp"), format!("{id}\n").as_bytes())
        .map_err(|e| StoreError::io(path, "replace", e))
}

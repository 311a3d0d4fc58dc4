//! The one way the product opens a file or lists a directory: never
//! through a symbolic link.
//!
//! edc-sync often runs as root, over directories other people can write
//! (the state, the landing, the trail's directory, the OQ's evidence). A
//! link planted there would make a run read a file it should not (and
//! print it in a message), or truncate and overwrite one (the audit trail,
//! `/etc/shadow`). So every open here is `O_NOFOLLOW` and must find a
//! regular file, and every listing refuses a directory that is a link;
//! the refusal says "symbolic link, which is never followed", and the
//! caller names the path (74). `tests/integration/house.rs` holds the rest
//! of the shipped code to this module: nothing else opens a file.
//!
//! One kind of file is read through links on purpose: an input the
//! operator names that is not evidence ([`operator_input`]: the policy, a
//! TLS certificate or key, the audit key file, an AWS shared file), which
//! Kubernetes and similar platforms mount as links, and whose content is
//! never printed.

use std::fs::{File, OpenOptions, ReadDir};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// A symbolic link refused, inside the `io::Error` an open returns: the
/// path is there and is never followed, which is an I/O refusal (74)
/// wherever it is met, not a missing input (66).
#[derive(Debug, thiserror::Error)]
#[error("{}", match .0 { Some(p) => format!("{} is a symbolic link, which is never followed", p.display()), None => "it is a symbolic link, which is never followed".into() })]
pub struct LinkRefused(pub Option<PathBuf>);

/// Whether `e` is a link this module refused.
pub fn is_link_refusal(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<LinkRefused>())
}

/// The error of a refused link (the caller names the path).
fn a_link() -> io::Error {
    io::Error::other(LinkRefused(None))
}

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Read it; it must exist.
    Read,
    /// Read and write it in place; it must exist.
    ReadWrite,
    /// Read and write it, creating it when missing (a lock file).
    ReadWriteCreate,
    /// Append to it, creating it when missing.
    Append,
    /// Read it and append to it, creating it when missing (a trail).
    ReadAppend,
    /// Create it, or truncate it (a temp file).
    Create,
    /// Create it; it must not exist yet (a link there counts as one).
    CreateNew,
}

impl Mode {
    fn options(self) -> OpenOptions {
        let mut o = OpenOptions::new();
        match self {
            Mode::Read => o.read(true),
            Mode::ReadWrite => o.read(true).write(true),
            Mode::ReadWriteCreate => o.read(true).write(true).create(true),
            Mode::Append => o.create(true).append(true),
            Mode::ReadAppend => o.read(true).create(true).append(true),
            Mode::Create => o.write(true).create(true).truncate(true),
            Mode::CreateNew => o.write(true).create_new(true),
        };
        o
    }
}

/// Opens `path` as `mode` says, never through a symbolic link and only as
/// a regular file. The one function every other here goes through.
pub fn open(path: impl AsRef<Path>, mode: Mode) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = match mode.options().custom_flags(libc::O_NOFOLLOW).open(path) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(a_link()),
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("it is not a regular file"));
    }
    Ok(file)
}

/// Opens `path` for reading.
pub fn read(path: impl AsRef<Path>) -> io::Result<File> {
    open(path, Mode::Read)
}

/// Creates or truncates `path` for writing: how every temp file is made.
pub fn create(path: impl AsRef<Path>) -> io::Result<File> {
    open(path, Mode::Create)
}

/// Opens `path` for appending, creating it when missing.
pub fn append(path: impl AsRef<Path>) -> io::Result<File> {
    open(path, Mode::Append)
}

/// The whole of the file at `path`.
pub fn read_bytes(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    read(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The whole of the file at `path`, as UTF-8.
pub fn read_string(path: impl AsRef<Path>) -> io::Result<String> {
    let mut text = String::new();
    read(path)?.read_to_string(&mut text)?;
    Ok(text)
}

/// `bytes` as the whole of the file at `path` (created or truncated; not
/// fsynced: `crate::durable` is for files that must survive a crash).
pub fn write(path: impl AsRef<Path>, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    create(path)?.write_all(bytes.as_ref())
}

/// The entries of the directory at `path`, which must not be a link.
pub fn read_dir(path: impl AsRef<Path>) -> io::Result<ReadDir> {
    let path = path.as_ref();
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(a_link());
    }
    std::fs::read_dir(path)
}

/// The entries of a directory the operator named (`--out`, `--state`): it
/// may be a link, as a mount point often is. What is below it is listed
/// with [`read_dir`].
pub fn read_root_dir(path: impl AsRef<Path>) -> io::Result<ReadDir> {
    std::fs::read_dir(path)
}

/// `root.join(rel)`, each directory of `rel` created as needed and none
/// of them a symbolic link: a link planted inside a landing or state
/// directory would send a run's writes anywhere. `root` itself is the
/// operator's choice and may be a link (a mount point, say); it is created
/// when missing.
pub fn dirs_below(root: &Path, rel: &Path) -> io::Result<PathBuf> {
    std::fs::create_dir_all(root)?;
    let mut at = root.to_path_buf();
    for part in rel.components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => return Err(io::Error::other(LinkRefused(Some(at)))),
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(io::Error::other(format!("{} is not a directory", at.display()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => match std::fs::create_dir(&at) {
                Ok(()) => {}
                // Another run made it meanwhile: checked again below.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    if !std::fs::symlink_metadata(&at)?.is_dir() {
                        return Err(io::Error::other(format!("{} is not a directory", at.display())));
                    }
                }
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        }
    }
    Ok(at)
}

/// fsyncs the directory `dir` (so an entry made in it survives a crash).
/// It reads and writes nothing, so a directory reached through a link (an
/// operator's mount point) is synced where it is.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Reads an input the operator names that is not evidence (the policy, a
/// TLS certificate or key, the audit key file, an AWS shared file): it may
/// be a link (a mounted ConfigMap or Secret is one), so this follows it.
/// Its content is never printed. Nothing in a state, landing or evidence
/// directory is read this way.
pub fn operator_input(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    File::open(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_refused_by_every_open_and_listing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("f"), b"secret").unwrap();
        let file_link = dir.path().join("file-link");
        let dir_link = dir.path().join("dir-link");
        std::os::unix::fs::symlink(target.join("f"), &file_link).unwrap();
        std::os::unix::fs::symlink(&target, &dir_link).unwrap();
        for refused in [
            read(&file_link).map(drop),
            create(&file_link).map(drop),
            append(&file_link).map(drop),
            read_bytes(&file_link).map(drop),
            read_string(&file_link).map(drop),
            write(&file_link, b"x"),
            read_dir(&dir_link).map(drop),
        ] {
            let e = refused.unwrap_err();
            assert!(e.to_string().contains("symbolic link"), "{e}");
            assert!(is_link_refusal(&e), "{e}");
        }
        assert_eq!(std::fs::read(target.join("f")).unwrap(), b"secret", "untouched");
        assert!(dirs_below(dir.path(), Path::new("dir-link/x")).is_err());
        assert!(read(&target).is_err(), "a directory is not a regular file");
        assert_eq!(
            operator_input(&file_link).unwrap(),
            b"secret",
            "an operator's input may be a link"
        );
    }
}

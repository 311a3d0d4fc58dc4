//! Small durability primitives shared by the audit trail and the stores.

use std::fs::File;
use std::io;
use std::path::Path;

/// Whether byte `at` of `file` starts a line (0 does; otherwise the byte
/// before it is a newline).
pub(crate) fn is_line_start(file: &File, at: u64) -> io::Result<bool> {
    use std::os::unix::fs::FileExt;
    if at == 0 {
        return Ok(true);
    }
    let mut before = [0u8; 1];
    file.read_exact_at(&mut before, at - 1)?;
    Ok(before[0] == b'\n')
}

/// Where the line that ends at byte `end` of `file` starts: just after the
/// newline before it, or 0. `None` when that line is longer than `max`
/// bytes. Reads backwards in chunks, so the cost is the line's, never the
/// file's (the audit tail check and the torn-manifest check both use it).
pub(crate) fn line_start(file: &File, end: u64, max: u64) -> io::Result<Option<u64>> {
    use std::os::unix::fs::FileExt;
    let mut start = end;
    let mut chunk = vec![0u8; 8192];
    while start > 0 {
        if end - start > max {
            return Ok(None);
        }
        let from = start.saturating_sub(chunk.len() as u64);
        let n = (start - from) as usize;
        file.read_exact_at(&mut chunk[..n], from)?;
        if let Some(i) = chunk[..n].iter().rposition(|b| *b == b'\n') {
            return Ok(Some(from + i as u64 + 1));
        }
        start = from;
    }
    Ok(Some(0))
}

/// Opens `path` with `options`, never through a symbolic link and only as
/// a regular file: run as root, a link planted in a state or landing
/// directory would otherwise let a run truncate or overwrite any file
/// (the audit trail, say). A link is refused with an error that says so.
pub(crate) fn open_no_follow(options: &mut std::fs::OpenOptions, path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = match options.custom_flags(libc::O_NOFOLLOW).open(path) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(io::Error::other("it is a symbolic link, which is never followed"))
        }
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("it is not a regular file"));
    }
    Ok(file)
}

/// `root.join(rel)`, each directory of `rel` created as needed and none
/// of them a symbolic link: a link planted inside a landing or state
/// directory would send a run's writes anywhere (as root, over the audit
/// trail). `root` itself is the operator's choice and may be a link (a
/// mount point, say); it is created when missing.
pub(crate) fn dirs_below(root: &Path, rel: &Path) -> io::Result<std::path::PathBuf> {
    std::fs::create_dir_all(root)?;
    let mut at = root.to_path_buf();
    for part in rel.components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(io::Error::other(format!(
                    "{} is a symbolic link, which is never followed",
                    at.display()
                )))
            }
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

/// Creates or truncates `path` for writing, never through a symbolic link
/// (see [`open_no_follow`]): how every temp file of the tool is made.
pub(crate) fn create_no_follow(path: &Path) -> io::Result<File> {
    open_no_follow(
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true),
        path,
    )
}

/// `bytes` in a new file at `path` (never through a link), fsynced.
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut file = create_no_follow(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Replaces `path` by `bytes` so that a crash leaves the old file or the
/// new one, never a mix: written to `tmp` and fsynced, renamed over
/// `path` (a link there is replaced, never followed), the directory
/// fsynced. How every small state file of the tool is rewritten.
pub(crate) fn replace_durably(path: &Path, tmp: &Path, bytes: &[u8]) -> io::Result<()> {
    write_synced(tmp, bytes)?;
    std::fs::rename(tmp, path)?;
    sync_parent_dir(path)
}

/// Opens `path` for reading, never through a symbolic link.
pub(crate) fn read_no_follow(path: &Path) -> io::Result<File> {
    open_no_follow(std::fs::OpenOptions::new().read(true), path)
}

/// fsyncs the directory holding `path`, so a file created or renamed there
/// survives a crash (POSIX makes the directory entry durable only then).
pub fn sync_parent_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

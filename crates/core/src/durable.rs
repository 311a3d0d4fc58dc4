//! Small durability primitives shared by the audit trail and the stores.

use std::fs::File;
use std::io;
use std::path::Path;

/// Where the line that ends at byte `end` of `file` starts: just after the
/// newline before it, or 0. `None` when that line is longer than `max`
/// bytes. Reads backwards in chunks, so the cost is the line's, never the
/// file's (the audit tail check and the torn-manifest check both use it).
pub fn line_start(file: &File, end: u64, max: u64) -> io::Result<Option<u64>> {
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
pub fn open_no_follow(options: &mut std::fs::OpenOptions, path: &Path) -> io::Result<File> {
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

/// fsyncs the directory holding `path`, so a file created or renamed there
/// survives a crash (POSIX makes the directory entry durable only then).
pub fn sync_parent_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

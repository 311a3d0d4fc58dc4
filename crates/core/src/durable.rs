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

/// `bytes` in a new file at `path` (never through a link), fsynced.
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut file = crate::no_follow::create(path)?;
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

/// fsyncs the directory holding `path`, so a file created or renamed there
/// survives a crash (POSIX makes the directory entry durable only then).
pub fn sync_parent_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    crate::no_follow::sync_dir(dir)
}

//! Reading events back out of a trail: the manifest recovery and
//! `edc-sync verify` reconcile against what the trail says was committed.

use std::io::BufRead;
use std::path::Path;

use serde_json::Value;

/// Calls `f` with every complete line of `path` whose `event` is `event`,
/// in file order. Lines that are not JSON (a torn line) are skipped: the
/// chain's own verifier is the judge of those. A missing file has no events.
///
/// A line that spilled fields (a long `page_committed` line) is given
/// whole: its fields joined back from the part lines right before it
/// (`spill.rs`); one whose parts do not join is skipped like a line that
/// is not JSON.
pub fn each_event(path: &Path, event: &str, mut f: impl FnMut(u64, Value)) -> std::io::Result<()> {
    let needle = format!("\"event\":\"{event}\"");
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    // The run of part lines just read, for the line after it.
    let mut parts: Vec<Value> = Vec::new();
    each_line(path, |n, line| {
        if memchr::memmem::find(line, super::spill::PART_NEEDLE).is_some() {
            if let Ok(part) = serde_json::from_slice::<Value>(line) {
                parts.push(part);
                return;
            }
        }
        let run = std::mem::take(&mut parts);
        // Cheap filter first: most lines are other events.
        if finder.find(line).is_none() {
            return;
        }
        let Ok(mut value) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        if value["event"] != event {
            return;
        }
        let whole = match super::spill::parts_before(&value) {
            Ok(0) => true,
            Ok(p) if p <= run.len() => super::spill::join(&mut value, &run[run.len() - p..]).is_ok(),
            _ => false,
        };
        if whole {
            f(n, value);
        }
    })
}

/// Calls `f` with the number and the bytes (without the newline) of every
/// line of `path` that names the event `event`, in file order: the caller
/// parses what it needs of it and checks the event it finds there. A
/// missing file has no lines.
pub(crate) fn each_event_line(
    path: &Path,
    event: &str,
    mut f: impl FnMut(u64, &[u8]),
) -> std::io::Result<()> {
    let needle = format!("\"event\":\"{event}\"");
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    // Cheap filter first: most lines are other events.
    each_line(path, |n, line| {
        if finder.find(line).is_some() {
            f(n, line)
        }
    })
}

/// Calls `f` with the number and bytes (without the newline) of every line
/// of `path`, a last one without its newline too, in file order. A missing
/// file has no lines.
fn each_line(path: &Path, mut f: impl FnMut(u64, &[u8])) -> std::io::Result<()> {
    first_line_where(path, |n, line| {
        f(n, line);
        false
    })
    .map(|_| ())
}

/// The number of the first line of `path` (read as [`each_line`] reads
/// them) for which `found` is true; `None` when none is, or the file is
/// missing. The lines after it are not read.
pub(crate) fn first_line_where(
    path: &Path,
    mut found: impl FnMut(u64, &[u8]) -> bool,
) -> std::io::Result<Option<u64>> {
    let file = match crate::no_follow::read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, file);
    let mut line = Vec::new();
    let mut n = 0u64;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(None);
        }
        n += 1;
        if found(n, line.strip_suffix(b"\n").unwrap_or(&line)) {
            return Ok(Some(n));
        }
    }
}

/// Walks the lines of `path` from the end backwards (each without its
/// newline, with the byte it starts at) until `f` answers `Some`: the cost
/// is the lines after the one found, never the trail's history.
pub(crate) fn find_backwards<T>(
    path: &Path,
    mut f: impl FnMut(u64, &[u8]) -> Option<T>,
) -> std::io::Result<Option<T>> {
    walk_backwards(path, |start, bytes| match f(start, bytes) {
        Some(found) => Walk::Found(found),
        None => Walk::Next,
    })
}

/// What a backward walk does after a line.
pub(crate) enum Walk<T> {
    /// Ends the walk with this.
    Found(T),
    /// Goes on to the line before.
    Next,
    /// Goes on to the line before the one starting at this byte (at or
    /// before the line just met), passing over every line between: a
    /// `trail_heads` line says where a stream's last commit is.
    Before(u64),
    /// Ends the walk with nothing found.
    Stop,
}

/// Walks the lines of `path` from the end backwards as [`find_backwards`]
/// does, `f` deciding after each line whether to go on, to skip back to
/// an earlier line, or to stop.
///
/// The file is read in blocks of 64 KiB from the end, each line cut out
/// of the block in memory: a stream's start walks every line written since
/// its last commit (or its trail's last `trail_heads` line), and two reads
/// and two allocations a line were most of that walk once the lines were
/// no longer parsed.
pub(crate) fn walk_backwards<T>(
    path: &Path,
    f: impl FnMut(u64, &[u8]) -> Walk<T>,
) -> std::io::Result<Option<T>> {
    walk_backwards_from(path, None, f)
}

/// [`walk_backwards`] from the line that ends right before byte `from`
/// (`None`: the end of the file).
///
/// A line longer than [`super::line::MAX_LINE`] is no line this tool
/// writes, and the walk stops with an error naming where it ends.
pub(crate) fn walk_backwards_from<T>(
    path: &Path,
    from: Option<u64>,
    mut f: impl FnMut(u64, &[u8]) -> Walk<T>,
) -> std::io::Result<Option<T>> {
    use std::os::unix::fs::FileExt;
    const MAX_LINE: u64 = super::line::MAX_LINE as u64;
    const BLOCK: u64 = 64 * 1024;
    let file = crate::no_follow::read(path)?;
    // `buf` holds the file's bytes from `buf_start` to `end`.
    let len = file.metadata()?.len();
    let mut end = from.map_or(len, |at| at.min(len));
    let mut buf_start = end;
    let mut buf: Vec<u8> = Vec::new();
    while end > 0 {
        // `end` is just past a newline (or the end of the file); the line
        // starts after the newline before its last byte.
        let start = loop {
            if end > buf_start {
                let before_last = (end - 1 - buf_start) as usize;
                if let Some(i) = memchr::memrchr(b'\n', &buf[..before_last]) {
                    break buf_start + i as u64 + 1;
                }
            }
            if buf_start == 0 {
                break 0;
            }
            if end - buf_start > MAX_LINE {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "{}: the line ending at byte {end} is longer than the {MAX_LINE} bytes a trail line may be: \
                         no line this tool writes",
                        path.display()
                    ),
                ));
            }
            let from = buf_start.saturating_sub(BLOCK);
            let mut block = vec![0u8; (buf_start - from) as usize];
            file.read_exact_at(&mut block, from)?;
            walked(block.len());
            block.extend_from_slice(&buf[..(end - buf_start) as usize]);
            buf = block;
            buf_start = from;
        };
        let bytes = &buf[(start - buf_start) as usize..(end - buf_start) as usize];
        match f(start, bytes.strip_suffix(b"\n").unwrap_or(bytes)) {
            Walk::Found(found) => return Ok(Some(found)),
            Walk::Next => end = start,
            Walk::Stop => return Ok(None),
            Walk::Before(at) => {
                end = at.min(start);
                if end < buf_start {
                    buf.clear();
                    buf_start = end;
                } else {
                    buf.truncate((end - buf_start) as usize);
                }
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
thread_local! {
    /// Bytes the backward walks of this thread read: how a test proves a
    /// walk passed over lines without reading them.
    pub(crate) static WALKED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn walked(_bytes: usize) {
    #[cfg(test)]
    WALKED.with(|w| w.set(w.get() + _bytes as u64));
}

/// The `count` complete lines that end right before byte `offset` of
/// `path`, oldest first, each without its newline; fewer when the file
/// begins sooner.
pub(crate) fn lines_before(path: &Path, offset: u64, count: usize) -> std::io::Result<Vec<Vec<u8>>> {
    let mut lines = Vec::with_capacity(count);
    if count > 0 {
        walk_backwards_from(path, Some(offset), |_, bytes| {
            lines.push(bytes.to_vec());
            match lines.len() == count {
                true => Walk::Found(()),
                false => Walk::Next,
            }
        })?;
    }
    lines.reverse();
    Ok(lines)
}

/// Whether `path` holds a line of run `run_id`, looked for from the end
/// back: the cost is the lines after that run's last, normally few.
pub(crate) fn holds_run(path: &Path, run_id: &str) -> std::io::Result<bool> {
    let needle = format!("\"run_id\":{}", Value::from(run_id));
    let found = find_backwards(path, |_, line| {
        line.windows(needle.len())
            .any(|w| w == needle.as_bytes())
            .then_some(())
    })?;
    Ok(found.is_some())
}

#[cfg(test)]
mod tests {
    use super::find_backwards;

    /// Every line is met once, last first, with the byte it starts at,
    /// lines across the 64 KiB blocks and longer than a block included, a
    /// last line without its newline too.
    #[test]
    fn the_walk_meets_every_line_last_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lines");
        let mut text = Vec::new();
        let mut expected = Vec::new();
        for n in 0..5000usize {
            let len = if n % 1000 == 999 { 100_000 } else { n % 257 };
            expected.push((text.len() as u64, vec![b'a' + (n % 26) as u8; len]));
            text.extend(std::iter::repeat_n(b'a' + (n % 26) as u8, len));
            text.push(b'\n');
        }
        expected.push((text.len() as u64, b"torn".to_vec()));
        text.extend_from_slice(b"torn");
        std::fs::write(&path, &text).unwrap();
        let mut met = Vec::new();
        let found: Option<()> = find_backwards(&path, |start, line| {
            met.push((start, line.to_vec()));
            None
        })
        .unwrap();
        assert!(found.is_none());
        met.reverse();
        assert_eq!(met.len(), expected.len());
        assert!(met == expected, "a line was met wrong");
    }
}

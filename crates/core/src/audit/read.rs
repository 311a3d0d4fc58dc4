//! Reading events back out of a trail: the manifest recovery and
//! `edc-sync verify` reconcile against what the trail says was committed.

use std::io::BufRead;
use std::path::Path;

use serde_json::Value;

/// Calls `f` with every complete line of `path` whose `event` is `event`,
/// in file order. Lines that are not JSON (a torn line) are skipped: the
/// chain's own verifier is the judge of those. A missing file has no events.
pub fn each_event(path: &Path, event: &str, mut f: impl FnMut(u64, Value)) -> std::io::Result<()> {
    let file = match crate::no_follow::read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let needle = format!("\"event\":\"{event}\"");
    for (i, line) in std::io::BufReader::with_capacity(256 * 1024, file)
        .split(b'\n')
        .enumerate()
    {
        let line = line?;
        // Cheap filter first: most lines are other events.
        if !line.windows(needle.len()).any(|w| w == needle.as_bytes()) {
            continue;
        }
        if let Ok(value) = serde_json::from_slice::<Value>(&line) {
            if value["event"] == event {
                f(i as u64 + 1, value);
            }
        }
    }
    Ok(())
}

/// Walks the lines of `path` from the end backwards (each without its
/// newline, with the byte it starts at) until `f` answers `Some`: the cost
/// is the lines after the one found, never the trail's history. A line
/// longer than 1 MiB (none this tool writes) ends the walk.
pub(crate) fn find_backwards<T>(
    path: &Path,
    mut f: impl FnMut(u64, &[u8]) -> Option<T>,
) -> std::io::Result<Option<T>> {
    use std::os::unix::fs::FileExt;
    const MAX_LINE: u64 = 1 << 20;
    let file = crate::no_follow::read(path)?;
    let mut end = file.metadata()?.len();
    while end > 0 {
        // `end` is just past a newline (or the end of the file).
        let Some(start) = crate::durable::line_start(&file, end.saturating_sub(1), MAX_LINE)? else {
            break;
        };
        let mut bytes = vec![0u8; (end - start) as usize];
        file.read_exact_at(&mut bytes, start)?;
        end = start;
        if let Some(found) = f(start, bytes.strip_suffix(b"\n").unwrap_or(&bytes)) {
            return Ok(Some(found));
        }
    }
    Ok(None)
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

/// The last complete line of `path` whose `event` is `event`, with the
/// byte it starts at. Lines that are not JSON are passed over.
pub(crate) fn last_event(path: &Path, event: &str) -> std::io::Result<Option<(u64, Value)>> {
    find_backwards(path, |start, bytes| {
        serde_json::from_slice::<Value>(bytes)
            .ok()
            .filter(|value| value["event"] == event)
            .map(|value| (start, value))
    })
}

//! Reading events back out of a trail: the manifest recovery and
//! `edc-sync verify` reconcile against what the trail says was committed.

use std::io::BufRead;
use std::path::Path;

use serde_json::Value;

/// Calls `f` with every complete line of `path` whose `event` is `event`,
/// in file order. Lines that are not JSON (a torn line) are skipped: the
/// chain's own verifier is the judge of those. A missing file has no events.
pub fn each_event(path: &Path, event: &str, mut f: impl FnMut(u64, Value)) -> std::io::Result<()> {
    let file = match std::fs::File::open(path) {
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

/// The last complete line of `path` whose `event` is `event`, with the
/// byte it starts at, found by reading backwards from the end (the cost is
/// the lines after it, never the trail's history). Lines that are not JSON
/// are passed over.
pub fn last_event(path: &Path, event: &str) -> std::io::Result<Option<(u64, Value)>> {
    use std::os::unix::fs::FileExt;
    const MAX_LINE: u64 = 1 << 20;
    let file = std::fs::File::open(path)?;
    let mut end = file.metadata()?.len();
    while end > 0 {
        let Some(start) = crate::durable::line_start(&file, end.saturating_sub(1), MAX_LINE)? else {
            break;
        };
        let mut bytes = vec![0u8; (end - start) as usize];
        file.read_exact_at(&mut bytes, start)?;
        end = start;
        let Ok(value) = serde_json::from_slice::<Value>(bytes.strip_suffix(b"\n").unwrap_or(&bytes)) else {
            continue;
        };
        if value["event"] == event {
            return Ok(Some((start, value)));
        }
    }
    Ok(None)
}

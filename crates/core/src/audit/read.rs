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

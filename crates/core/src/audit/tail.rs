//! The end of an audit file as the next append sees it, and whether it may
//! be chained to.
//!
//! A run appends only to a trail whose end verifies: the last complete line
//! is an audit line that links to the line before it. The one exception is
//! what a crash mid-append leaves, a *torn* line: a strict prefix of a line
//! this tool writes (see [`is_torn_prefix`]). Torn lines are kept byte for
//! byte and acknowledged by an `audit_tail_repaired` line. Anything else at
//! the end (random bytes, an edited last line) is corruption: the run stops
//! with 65 unless the operator passes `--repair-audit`, which is recorded.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::line;
use crate::digest::{sha256_hex, ZERO_SHA256};

/// Every line this tool writes starts with these bytes.
const LINE_START: &[u8] = b"{\"seq\":";

/// Lines longer than this are not lines this tool writes.
const MAX_LINE: u64 = 4 * 1024 * 1024;

/// The most torn lines a run of crashes can leave before an acknowledgement:
/// the torn line itself, plus the acknowledgement torn in its turn.
const MAX_TORN: usize = 2;

/// How much of the trail's end one read takes: a few lines' worth.
const TAIL_BLOCK: u64 = 32 * 1024;

/// True when `bytes` is what an interrupted append leaves: a strict prefix
/// of a compact JSON object that starts as every audit line does. Such a
/// prefix is valid UTF-8 except for a character cut at the very end, and a
/// JSON parser reading it runs out of input rather than meeting an error.
pub(crate) fn is_torn_prefix(bytes: &[u8]) -> bool {
    if bytes.len() <= LINE_START.len() {
        return !bytes.is_empty() && LINE_START.starts_with(bytes);
    }
    if !bytes.starts_with(LINE_START) {
        return false;
    }
    if let Err(e) = std::str::from_utf8(bytes) {
        if e.error_len().is_some() {
            return false;
        }
    }
    match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
        Ok(_) => false,
        Err(e) => e.is_eof(),
    }
}

/// The end of the file, found to be safe to chain to.
#[derive(Debug)]
pub(super) struct Tail {
    /// SHA-256 of the final line (torn or complete), or 64 zeros.
    pub prev_sha256: String,
    /// The final line is torn and has no newline: the acknowledgement must
    /// start with one.
    pub needs_newline: bool,
    /// The hash of the last torn line to acknowledge, when there is one.
    pub torn: Option<TornLine>,
}

#[derive(Debug, Clone)]
pub(super) struct TornLine {
    pub bytes: u64,
    pub sha256: String,
}

/// The end of the file does not verify.
#[derive(Debug, Clone)]
pub(crate) struct Corrupt {
    /// What is wrong, in words that name the bytes.
    pub detail: String,
    /// The hash of the final bytes, which a forced repair chains to.
    pub prev_sha256: String,
    /// The final bytes have no newline.
    pub needs_newline: bool,
}

/// One line read from the end: its bytes (without newline) and offset.
struct Raw {
    offset: u64,
    bytes: Vec<u8>,
    terminated: bool,
}

/// Inspects the end of `file`. `Err(io)` only when it cannot be read.
pub(super) fn inspect(file: &File) -> std::io::Result<Result<Tail, Corrupt>> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Ok(Tail {
            prev_sha256: ZERO_SHA256.to_string(),
            needs_newline: false,
            torn: None,
        }));
    }
    if let Some(tail) = whole_and_linked(file, len)? {
        return Ok(Ok(tail));
    }
    let mut lines = match last_lines(file, len, MAX_TORN + 3)? {
        Some(lines) => lines,
        None => {
            return Ok(Err(Corrupt {
                detail: format!("its last line is longer than {MAX_LINE} bytes: not a line this tool writes"),
                prev_sha256: ZERO_SHA256.to_string(),
                needs_newline: false,
            }))
        }
    };
    let Some(final_line) = lines.last() else {
        return Ok(Ok(Tail {
            prev_sha256: ZERO_SHA256.to_string(),
            needs_newline: false,
            torn: None,
        }));
    };
    let prev_sha256 = sha256_hex(&final_line.bytes);
    let needs_newline = !final_line.terminated;
    let corrupt = |detail: String| {
        Ok(Err(Corrupt {
            detail,
            prev_sha256: prev_sha256.clone(),
            needs_newline,
        }))
    };
    // Torn lines at the end, newest first.
    let mut torn: Vec<Raw> = Vec::new();
    while let Some(last) = lines.pop() {
        let unterminated = !last.terminated;
        let parsed = if unterminated {
            None
        } else {
            line::parse(&last.bytes).ok()
        };
        let Some(parsed) = parsed else {
            if !is_torn_prefix(&last.bytes) {
                return corrupt(format!(
                    "the line at byte {} ({} bytes{}) is not an audit line and not what an interrupted \
                     write leaves",
                    last.offset,
                    last.bytes.len(),
                    if unterminated { ", no newline" } else { "" }
                ));
            }
            if torn.len() == MAX_TORN {
                return corrupt(format!(
                    "more than {MAX_TORN} unacknowledged partial lines end the file (from byte {})",
                    last.offset
                ));
            }
            torn.push(last);
            continue;
        };
        // The last complete audit line must link to the line before it.
        let Some(expected) = link_to(lines.last(), &last) else {
            return corrupt(format!(
                "the lines before byte {} could not be read back",
                last.offset
            ));
        };
        if parsed.prev_sha256 != expected {
            return corrupt(format!(
                "its last audit line (at byte {}) does not link to the line before it: the end of the \
                 trail was edited",
                last.offset
            ));
        }
        break;
    }
    Ok(Ok(Tail {
        prev_sha256: prev_sha256.clone(),
        needs_newline,
        torn: torn.first().map(|t| TornLine {
            bytes: t.bytes.len() as u64,
            sha256: prev_sha256.clone(),
        }),
    }))
}

/// The common end, read from the last two lines only: a complete audit
/// line that links to the line before it (or is the first). `None` for
/// anything else, which [`inspect`] then reads further back to judge.
fn whole_and_linked(file: &File, len: u64) -> std::io::Result<Option<Tail>> {
    let Some(lines) = last_lines(file, len, 2)? else {
        return Ok(None);
    };
    let (before, last) = match lines.as_slice() {
        [before, last] => (Some(before), last),
        [last] => (None, last),
        _ => return Ok(None),
    };
    if !last.terminated {
        return Ok(None);
    }
    let Ok(parsed) = line::parse(&last.bytes) else {
        return Ok(None);
    };
    let Some(expected) = link_to(before, last) else {
        return Ok(None);
    };
    Ok((parsed.prev_sha256 == expected).then(|| Tail {
        prev_sha256: sha256_hex(&last.bytes),
        needs_newline: false,
        torn: None,
    }))
}

/// The `prev_sha256` the complete line `last` must carry: the hash of the
/// line `before` it, or zeros when it starts the file; `None` when the
/// line before it was not read.
fn link_to(before: Option<&Raw>, last: &Raw) -> Option<String> {
    match before {
        Some(before) => Some(sha256_hex(&before.bytes)),
        None if last.offset == 0 => Some(ZERO_SHA256.to_string()),
        None => None,
    }
}

/// Up to `n` last lines, oldest first; `None` when a line is too long.
/// The end of the file is read in one block (grown only when a line is
/// longer than it), not line by line: an append reads the tail once.
fn last_lines(file: &File, len: u64, n: usize) -> std::io::Result<Option<Vec<Raw>>> {
    let mut block = TAIL_BLOCK.min(len);
    loop {
        let from = len - block;
        let mut buf = vec![0u8; block as usize];
        file.read_exact_at(&mut buf, from)?;
        let mut lines = Vec::new();
        let mut end = buf.len();
        let mut cut = None;
        while end > 0 && lines.len() < n {
            let terminated = buf[end - 1] == b'\n';
            let content_end = if terminated { end - 1 } else { end };
            let start = match memchr::memrchr(b'\n', &buf[..content_end]) {
                Some(i) => i + 1,
                None if from == 0 => 0,
                None => {
                    // The block begins inside this line.
                    cut = Some(content_end as u64);
                    break;
                }
            };
            if (content_end - start) as u64 > MAX_LINE {
                return Ok(None);
            }
            lines.push(Raw {
                offset: from + start as u64,
                bytes: buf[start..content_end].to_vec(),
                terminated,
            });
            end = start;
        }
        match cut {
            None => {
                lines.reverse();
                return Ok(Some(lines));
            }
            Some(partial) if partial > MAX_LINE => return Ok(None),
            Some(_) => block = (block * 4).min(len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_of_a_line_are_torn_and_other_bytes_are_not() {
        let full =
            r#"{"seq":3,"ts":"2026-01-01T00:00:00.000Z","run_id":"r","event":"ünï","prev_sha256":"00"}"#;
        for cut in 1..full.len() {
            assert!(is_torn_prefix(&full.as_bytes()[..cut]), "prefix of {cut} bytes");
        }
        assert!(!is_torn_prefix(full.as_bytes()), "a whole line is not torn");
        assert!(!is_torn_prefix(b""));
        assert!(!is_torn_prefix(b"garbage"));
        assert!(
            !is_torn_prefix(b"{\"seq\":1,\"ts\":\"a\x01b"),
            "control character"
        );
        assert!(
            !is_torn_prefix(b"{\"seq\":1,\"ts\":\"\xff\xfe and more"),
            "invalid UTF-8"
        );
        assert!(!is_torn_prefix(b"{\"seq\":1,}"), "a syntax error");
    }
}

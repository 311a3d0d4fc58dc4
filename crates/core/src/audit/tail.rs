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

/// Lines longer than this are not lines this tool writes (`line.rs`).
const MAX_LINE: u64 = super::line::MAX_LINE as u64;

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
    /// The file ends in a complete audit line linked to the one before it
    /// (or in nothing): what an append that chains to it leaves behind it.
    pub linked: Option<Linked>,
}

/// The final line an append chains to, when it is a linked audit line.
#[derive(Debug)]
pub(super) enum Linked {
    /// The line this writer's last append wrote ([`LeftEnd`] holds it).
    Left,
    /// The line as read from the file (empty for an empty file).
    Read(Vec<u8>),
}

/// The end is read back and compared in blocks of this size: the memory a
/// comparison needs, whatever the lines' length.
const COMPARE_BLOCK: usize = 64 * 1024;

/// The end of the trail as this writer's last append left it: the last
/// two lines (the last its own), where they end, and the last one's hash.
///
/// An append that finds the file ending in exactly these bytes knows what
/// reading the end would conclude (both lines were read or written, and
/// linked, when they were the end) without parsing or hashing 40 KB of
/// lines again; a commit line carries a lookback's memory, and that work
/// was a tenth of a small page's CPU. Anything else (another writer's
/// line, an edit, a cut) is read in full, as at the first append.
#[derive(Debug, Default)]
pub(super) struct LeftEnd {
    /// The file's length after the append.
    end: u64,
    /// The line before the appended one and the appended one, each with
    /// its newline; only the appended one when it starts the file.
    lines: Vec<u8>,
    /// SHA-256 of the appended line.
    last_sha256: String,
    /// Where the appended line starts in `lines`.
    last_start: usize,
    /// Reused for reading the end back.
    scratch: Vec<u8>,
}

impl LeftEnd {
    /// What an append of `line` (no newline, hashing to `sha256`) left,
    /// when it was the only line written and chained to `before`, the
    /// file's final line as read (empty when the file was empty); the file
    /// is then `end` bytes long.
    pub(super) fn after(before: &[u8], line: &str, sha256: &str, end: u64) -> LeftEnd {
        let mut lines = Vec::with_capacity(before.len() + line.len() + 2);
        if !before.is_empty() {
            lines.extend_from_slice(before);
            lines.push(b'\n');
        }
        let mut left = LeftEnd {
            end,
            lines,
            last_sha256: String::new(),
            last_start: 0,
            scratch: Vec::new(),
        };
        left.push(line, sha256, end);
        left
    }

    /// What the next plain append of `line` left after this end: its own
    /// line becomes the one before, in place.
    pub(super) fn advance(&mut self, line: &str, sha256: &str, end: u64) {
        self.lines.drain(..self.last_start);
        self.push(line, sha256, end);
    }

    fn push(&mut self, line: &str, sha256: &str, end: u64) {
        self.last_start = self.lines.len();
        self.lines.extend_from_slice(line.as_bytes());
        self.lines.push(b'\n');
        sha256.clone_into(&mut self.last_sha256);
        self.end = end;
    }

    /// How `file` (`len` bytes) compares with what this append left: the
    /// two lines must still be there, byte for byte, after a line
    /// boundary; after them the file may have grown (another writer).
    fn compare(&mut self, file: &File, len: u64) -> std::io::Result<Since> {
        let Some(start) = self.end.checked_sub(self.lines.len() as u64) else {
            return Ok(Since::Grown);
        };
        if len < self.end {
            return Ok(Since::Changed(format!(
                "it ends {} bytes short of where this run's last append left it (byte {}): lines were \
                 removed from its end",
                self.end - len,
                self.end
            )));
        }
        // The byte before the two lines must end a line: otherwise the
        // line before the appended one is longer than remembered.
        let mut boundary = start > 0;
        let mut at = start - u64::from(boundary);
        let mut expected = self.lines.as_slice();
        let mut same = true;
        self.scratch.resize(COMPARE_BLOCK, 0);
        while same && at < self.end {
            let block = &mut self.scratch[..(self.end - at).min(COMPARE_BLOCK as u64) as usize];
            file.read_exact_at(block, at)?;
            at += block.len() as u64;
            let mut got: &[u8] = block;
            if boundary {
                same = got.first() == Some(&b'\n');
                got = &got[1..];
                boundary = false;
            }
            let (want, rest) = expected.split_at(got.len());
            same &= got == want;
            expected = rest;
        }
        if !same {
            return Ok(Since::Changed(format!(
                "the lines at bytes {start}..{} changed since this run appended there: the end of the trail \
                 was edited",
                self.end
            )));
        }
        Ok(if len == self.end {
            Since::Same
        } else {
            Since::Grown
        })
    }
}

/// What became of the end a writer left, by its next append.
enum Since {
    /// The file ends as it was left.
    Same,
    /// What was left is intact and more follows: another writer's lines.
    Grown,
    /// What was left was edited or cut, in these words.
    Changed(String),
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

/// Inspects the end of `file`, knowing what this writer's last append
/// `left` there, if anything. `Err(io)` only when it cannot be read.
pub(super) fn inspect(file: &File, left: Option<&mut LeftEnd>) -> std::io::Result<Result<Tail, Corrupt>> {
    let len = file.metadata()?.len();
    let changed = match left {
        None => None,
        Some(left) => match left.compare(file, len)? {
            Since::Same => {
                return Ok(Ok(Tail {
                    prev_sha256: left.last_sha256.clone(),
                    needs_newline: false,
                    torn: None,
                    linked: Some(Linked::Left),
                }))
            }
            Since::Grown => None,
            Since::Changed(detail) => Some(detail),
        },
    };
    let read = read_end(file, len)?;
    // An edit the chain cannot show (the last line, or lines cut off the
    // end) is still damage: the trail is not what this run left.
    Ok(match (changed, read) {
        (None, read) => read,
        (Some(detail), Ok(tail)) => Err(Corrupt {
            detail,
            prev_sha256: tail.prev_sha256,
            needs_newline: tail.needs_newline,
        }),
        (Some(detail), Err(corrupt)) => Err(Corrupt {
            detail: format!("{detail}; {}", corrupt.detail),
            ..corrupt
        }),
    })
}

/// [`inspect`] by reading the end, with nothing known.
fn read_end(file: &File, len: u64) -> std::io::Result<Result<Tail, Corrupt>> {
    if len == 0 {
        return Ok(Ok(Tail {
            prev_sha256: ZERO_SHA256.to_string(),
            needs_newline: false,
            torn: None,
            linked: Some(Linked::Read(Vec::new())),
        }));
    }
    if let Some(tail) = whole_and_linked(file, len)? {
        return Ok(Ok(tail));
    }
    let mut lines = match last_lines(file, len, MAX_TORN + 3)? {
        Ok(lines) => lines,
        Err(ends_at) => {
            return Ok(Err(Corrupt {
                detail: format!(
                    "the line ending at byte {ends_at} is longer than the {MAX_LINE} bytes a trail line may be: not \
                     a line this tool writes"
                ),
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
            linked: None,
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
        linked: None,
    }))
}

/// The common end, read from the last two lines only: a complete audit
/// line that links to the line before it (or is the first). `None` for
/// anything else, which [`inspect`] then reads further back to judge.
fn whole_and_linked(file: &File, len: u64) -> std::io::Result<Option<Tail>> {
    let Ok(lines) = last_lines(file, len, 2)? else {
        return Ok(None);
    };
    let mut lines = lines.into_iter();
    let (before, last) = match (lines.next(), lines.next()) {
        (Some(before), Some(last)) => (Some(before), last),
        (Some(last), None) => (None, last),
        _ => return Ok(None),
    };
    if !last.terminated {
        return Ok(None);
    }
    let Ok(parsed) = line::parse(&last.bytes) else {
        return Ok(None);
    };
    let Some(expected) = link_to(before.as_ref(), &last) else {
        return Ok(None);
    };
    let linked = parsed.prev_sha256 == expected;
    Ok(linked.then(|| Tail {
        prev_sha256: sha256_hex(&last.bytes),
        needs_newline: false,
        torn: None,
        linked: Some(Linked::Read(last.bytes)),
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

/// Up to `n` last lines, oldest first; `Err(byte)` when a line is too
/// long, with the byte it ends at. The end of the file is read in one
/// block (grown only when a line is longer than it), not line by line: an
/// append reads the tail once.
fn last_lines(file: &File, len: u64, n: usize) -> std::io::Result<Result<Vec<Raw>, u64>> {
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
                return Ok(Err(from + content_end as u64));
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
                return Ok(Ok(lines));
            }
            Some(partial) if partial > MAX_LINE => return Ok(Err(from + partial)),
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

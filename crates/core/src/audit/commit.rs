//! The commit record of a page: its `page_committed` line, and the two
//! sealed proofs that such a line is in the trail.
//!
//! A cursor moves only past a page whose commit record is durable
//! (invariant 2, docs/commit.md). The store asks for proof, and only this
//! module can give it: a [`CommitReceipt`] comes from appending a
//! [`CommitRecord`] (always written as a `page_committed` line; no other
//! event may take that name), a [`CommitLine`] from reading such a line
//! back out of the trail. Their fields are private, so no caller can make
//! one up to move a cursor.

use std::io::{BufRead, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::heads;
use super::read::{walk_backwards, Walk};
use crate::digest::sha256_hex;

/// The `event` of a commit record. [`super::AuditLog::record`] refuses an
/// event of this name: only [`super::AuditLog::record_commit`] writes one.
pub(crate) const COMMIT_EVENT: &str = "page_committed";

/// An event that commits a page: written as a `page_committed` line by
/// [`super::AuditLog::record_commit`], which answers with the receipt the
/// cursor store asks for.
pub trait CommitRecord: Serialize {
    /// The line's fields, the record given up: a record holding a large
    /// value already written as JSON (a page's cursor state, with a
    /// lookback's memory) hands it over as it is, its key holding a
    /// placeholder among the values.
    fn into_fields(self) -> Result<CommitFields, serde_json::Error>
    where
        Self: Sized,
    {
        Ok(CommitFields {
            values: serde_json::to_value(&self)?,
            written: None,
        })
    }
}

/// A commit record's fields for its line: values, and at most one field
/// whose JSON is written already (`line::Written`).
#[derive(Debug)]
pub struct CommitFields {
    pub(crate) values: Value,
    pub(crate) written: Option<(&'static str, Box<RawValue>)>,
}

/// Where a `page_committed` line is: its trail, the byte it starts at, and
/// its SHA-256 (the next line's `prev_sha256`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitReceipt {
    audit_log: PathBuf,
    offset: u64,
    sha256: String,
}

impl CommitReceipt {
    /// Made by the writer once the line is fsynced.
    pub(super) fn written(audit_log: PathBuf, offset: u64, sha256: String) -> CommitReceipt {
        CommitReceipt {
            audit_log,
            offset,
            sha256,
        }
    }

    /// Made by the state database's trail once the transaction holding
    /// the line committed; `trail` is the trail's name.
    pub(crate) fn in_db(trail: PathBuf, offset: u64, sha256: String) -> CommitReceipt {
        Self::written(trail, offset, sha256)
    }

    /// The trail (absolute, resolved; in a state database, its name).
    pub fn audit_log(&self) -> &Path {
        &self.audit_log
    }

    /// The byte offset the line starts at.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The line's SHA-256, lowercase hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
}

/// A `page_committed` line read back from the trail: its receipt and what
/// it records.
#[derive(Debug, Clone)]
pub(crate) struct CommitLine {
    receipt: CommitReceipt,
    line: Value,
}

impl CommitLine {
    /// Where the line is.
    pub(crate) fn receipt(&self) -> &CommitReceipt {
        &self.receipt
    }

    /// A field of the line (`cursor_state`, `landing_file`, ...); `Null`
    /// when absent.
    pub(crate) fn get(&self, field: &str) -> &Value {
        &self.line[field]
    }

    /// The whole line.
    pub(crate) fn line(&self) -> &Value {
        &self.line
    }

    /// A commit of `stream` into the landing directory `dir` (relative to
    /// the landing root; a dry run commits nothing).
    pub(crate) fn is_commit_of(&self, stream: &str, dir: &str) -> bool {
        is_commit_of(&self.line, stream, dir)
    }

    /// The line names its landing directory by an absolute path (written
    /// before paths were recorded relative), which is read relative.
    pub(crate) fn names_landing_absolutely(&self) -> bool {
        self.line["landing_dir"]
            .as_str()
            .is_some_and(|d| Path::new(d).is_absolute())
    }

    /// The commit line `bytes`, starting at `offset` of `trail`, whole:
    /// the fields it spilled joined back from the part lines before it
    /// (`spill.rs`). `None` for another line, and for a commit whose parts
    /// do not join (the chain's verifier names it), as for a line that is
    /// not JSON.
    fn parse(trail: &Path, offset: u64, bytes: &[u8]) -> Option<CommitLine> {
        let mut line: Value = serde_json::from_slice(bytes).ok()?;
        if line["event"] != COMMIT_EVENT {
            return None;
        }
        if memchr::memmem::find(bytes, super::spill::SPILLED_NEEDLE).is_some() {
            let count = super::spill::parts_before(&line).ok()?;
            let parts = super::read::lines_before(trail, offset, count).ok()?;
            let parts: Vec<Value> = parts
                .iter()
                .map(|p| serde_json::from_slice(p))
                .collect::<Result<_, _>>()
                .ok()?;
            super::spill::join(&mut line, &parts).ok()?;
        }
        Some(CommitLine {
            receipt: CommitReceipt {
                audit_log: trail.to_path_buf(),
                offset,
                sha256: sha256_hex(bytes),
            },
            line,
        })
    }
}

/// Whether the `page_committed` line `line` (parsed) is a commit of
/// `stream` into the landing directory `dir` (relative to the landing
/// root; a line of an older version names it absolutely, read relative;
/// a dry run commits nothing).
pub(crate) fn is_commit_of(line: &Value, stream: &str, dir: &str) -> bool {
    let here = line["landing_dir"]
        .as_str()
        .and_then(crate::stream::relative_landing_dir);
    line["stream"] == stream && here.as_deref() == Some(dir) && line["dry_run"] != true
}

/// What a `page_committed` line of one stream holds in its bytes, looked
/// for before a line is parsed: a stream's start reads the lines after its
/// last commit, and in a trail shared with busier streams nearly all of
/// them are other streams' commits, which parsing and hashing whole cost
/// about a hundred times the search (3,000 lines of another stream: 1.2 s
/// before a quiet stream's first request). A line that passes is parsed
/// and judged as before; one that does not cannot be the stream's.
pub(crate) struct CommitsOf {
    stream: Vec<u8>,
    dir: Vec<u8>,
    /// The stream and directory as a `trail_heads` line names them.
    key: super::heads::StreamKey,
}

impl CommitsOf {
    /// Commits of `stream` into the landing directory `dir` (relative).
    pub(crate) fn new(stream: &str, dir: &str) -> CommitsOf {
        let quoted = |s: &str| serde_json::Value::from(s).to_string();
        CommitsOf {
            stream: format!("\"stream\":{}", quoted(stream)).into_bytes(),
            // The directory and its closing quote: a line of an older
            // version names it absolutely, ending the same way.
            dir: quoted(dir).as_bytes()[1..].to_vec(),
            key: (stream.to_string(), dir.to_string()),
        }
    }

    /// Whether the line may be such a commit (lines are written compact,
    /// so a field is `"name":value` with no space). A line naming its
    /// landing directory absolutely in another form is parsed anyway.
    fn may_be(&self, bytes: &[u8]) -> bool {
        use memchr::memmem::find;
        find(bytes, COMMIT_NEEDLE).is_some()
            && find(bytes, &self.stream).is_some()
            && (find(bytes, &self.dir).is_some() || find(bytes, b"\"landing_dir\":\"/").is_some())
    }
}

/// The stream and landing directory of a commit line, as [`is_commit_of`]
/// matches them (a dry run's line is no commit); `None` for any other
/// line: what a `trail_heads` line is made of (`heads.rs`).
pub(crate) fn commit_key(bytes: &[u8]) -> Option<heads::StreamKey> {
    // Most lines are other events: searched before they are parsed.
    memchr::memmem::find(bytes, COMMIT_NEEDLE)?;
    key_of(&super::line::parse(bytes).ok()?)
}

/// [`commit_key`] of a line already parsed.
pub(crate) fn key_of(line: &super::line::Parsed) -> Option<heads::StreamKey> {
    if line.event != COMMIT_EVENT || line.dry_run {
        return None;
    }
    let dir = crate::stream::relative_landing_dir(line.landing_dir.as_deref()?)?;
    Some((line.stream.clone()?, dir.into_owned()))
}

/// How a `page_committed` line's event field is written.
const COMMIT_NEEDLE: &[u8] = b"\"event\":\"page_committed\"";

/// The last `page_committed` line of `trail` that `wanted` accepts among
/// those [`CommitsOf`] `of` lets through, found by reading backwards from
/// the end: the cost is the lines after it, searched, not parsed, or only
/// those after the trail's last `trail_heads` line, which names the
/// stream's last commit (`heads.rs`): the walk goes on from there.
pub(crate) fn last_commit(
    trail: &Path,
    of: &CommitsOf,
    wanted: impl Fn(&CommitLine) -> bool,
) -> std::io::Result<Option<CommitLine>> {
    walk_backwards(trail, |start, bytes| {
        if of.may_be(bytes) {
            return match CommitLine::parse(trail, start, bytes).filter(|line| wanted(line)) {
                Some(line) => Walk::Found(line),
                None => Walk::Next,
            };
        }
        let Some(heads) = heads::parse(bytes) else {
            return Walk::Next;
        };
        match heads.get(&of.key) {
            // The stream has no commit before this line.
            None => Walk::Stop,
            Some((offset, sha256)) => match commit_at(trail, *offset, sha256) {
                Ok(Some(line)) if wanted(&line) => Walk::Found(line),
                // Every line between is another stream's.
                Ok(Some(_)) => Walk::Before(*offset),
                // Not where it says: walked line by line instead.
                Ok(None) | Err(_) => Walk::Next,
            },
        }
    })
}

/// Whether the line starting at `offset` of `trail` hashes to `sha256`:
/// the proof that a receipt recorded elsewhere (a cursor file) names a
/// line of this trail, wherever the trail has been moved or renamed since.
pub(crate) fn holds_line(trail: &Path, offset: u64, sha256: &str) -> std::io::Result<bool> {
    Ok(line_at(trail, offset, sha256)?.is_some())
}

/// The `page_committed` line at `offset`, provided it still hashes to
/// `sha256`; `None` when it does not (the trail was repaired or replaced
/// since).
pub(crate) fn commit_at(trail: &Path, offset: u64, sha256: &str) -> std::io::Result<Option<CommitLine>> {
    Ok(line_at(trail, offset, sha256)?.and_then(|line| CommitLine::parse(trail, offset, &line)))
}

/// The complete line starting at `offset` of `trail`, without its newline,
/// if it hashes to `sha256`.
fn line_at(trail: &Path, offset: u64, sha256: &str) -> std::io::Result<Option<Vec<u8>>> {
    let mut file = crate::no_follow::read(trail)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut line = Vec::new();
    std::io::BufReader::new(file).read_until(b'\n', &mut line)?;
    let whole = line.pop() == Some(b'\n') && sha256_hex(&line) == sha256;
    Ok(whole.then_some(line))
}

/// The line at `offset`, provided it still hashes to `sha256` and is a
/// `page_committed` line, and the `page_committed` lines written after it
/// that `of` lets through (with `None`, every one), in file order; `None`
/// when it does not (the trail was repaired or replaced since). A torn
/// last line is not a commit and is skipped.
pub(crate) fn commits_after(
    trail: &Path,
    offset: u64,
    sha256: &str,
    of: Option<&CommitsOf>,
) -> std::io::Result<Option<(CommitLine, Vec<CommitLine>)>> {
    if let Some(of) = of {
        if let Some(found) = commits_after_by_heads(trail, offset, sha256, of)? {
            return Ok(Some(found));
        }
    }
    let mut file = crate::no_follow::read(trail)?;
    file.seek(SeekFrom::Start(offset))?;
    // Large reads: the lines after a quiet stream's commit can be megabytes.
    let mut lines = std::io::BufReader::with_capacity(256 * 1024, file).split(b'\n');
    let first = match lines.next().transpose()? {
        Some(first) if sha256_hex(&first) == sha256 => first,
        _ => return Ok(None),
    };
    let mut at = offset + first.len() as u64 + 1;
    let Some(first) = CommitLine::parse(trail, offset, &first) else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for line in lines {
        let bytes = line?;
        let start = at;
        at += bytes.len() as u64 + 1;
        let may_be = match of {
            Some(of) => of.may_be(&bytes),
            None => memchr::memmem::find(&bytes, COMMIT_NEEDLE).is_some(),
        };
        if !may_be {
            continue;
        }
        out.extend(CommitLine::parse(trail, start, &bytes));
    }
    Ok(Some((first, out)))
}

/// [`commits_after`] read back from the end: the stream's lines after the
/// trail's last `trail_heads` line, when that line names the line at
/// `offset` as the stream's last commit before it (so none lies between),
/// or every line back to `offset` when no heads line comes first. `None`
/// when neither holds (a heads line names a later commit: a run that
/// crashed before its cursor moved), for the forward reading to decide.
fn commits_after_by_heads(
    trail: &Path,
    offset: u64,
    sha256: &str,
    of: &CommitsOf,
) -> std::io::Result<Option<(CommitLine, Vec<CommitLine>)>> {
    let mut after = Vec::new();
    let reached = walk_backwards(trail, |start, bytes| {
        if start <= offset {
            return match start == offset {
                true => Walk::Found(()),
                false => Walk::Stop,
            };
        }
        if of.may_be(bytes) {
            after.extend(CommitLine::parse(trail, start, bytes));
            return Walk::Next;
        }
        match heads::parse(bytes) {
            Some(heads) => match heads.get(&of.key) {
                Some((at, sha)) if *at == offset && sha == sha256 => Walk::Found(()),
                _ => Walk::Stop,
            },
            None => Walk::Next,
        }
    })?;
    if reached.is_none() {
        return Ok(None);
    }
    let Some(first) = commit_at(trail, offset, sha256)? else {
        return Ok(None);
    };
    after.reverse();
    Ok(Some((first, after)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{AuditEvent, AuditLog, RunId};

    #[derive(Serialize)]
    struct Page {
        stream: &'static str,
        landing_dir: &'static str,
        cursor_state: u32,
    }

    impl CommitRecord for Page {}

    #[derive(Serialize)]
    struct Impostor {}

    impl AuditEvent for Impostor {
        const NAME: &'static str = COMMIT_EVENT;
    }

    #[test]
    fn only_record_commit_writes_a_commit_line() {
        let dir = tempfile::tempdir().unwrap();
        let trail = dir.path().join("audit.jsonl");
        let mut log = AuditLog::open(&trail, RunId::new()).unwrap();
        let err = log.record(&Impostor {}).unwrap_err();
        assert!(err.to_string().contains("record_commit"), "{err}");
        assert!(std::fs::read_to_string(&trail).unwrap_or_default().is_empty());
    }

    #[test]
    fn a_receipt_names_its_line_and_the_reader_finds_what_follows() {
        let dir = tempfile::tempdir().unwrap();
        let trail = dir.path().join("audit.jsonl");
        let mut log = AuditLog::open(&trail, RunId::new()).unwrap();
        let page = |n| Page {
            stream: "s",
            landing_dir: "v/-/S/-/s",
            cursor_state: n,
        };
        let first = log.record_commit(page(1)).unwrap();
        log.record_commit(page(2)).unwrap();
        let trail = first.audit_log().to_path_buf();
        let text = std::fs::read(&trail).unwrap();
        let at = first.offset() as usize;
        let end = at + text[at..].iter().position(|&b| b == b'\n').unwrap();
        assert_eq!(sha256_hex(&text[at..end]), first.sha256());
        let (named, after) = commits_after(&trail, first.offset(), first.sha256(), None)
            .unwrap()
            .unwrap();
        assert_eq!(named.get("cursor_state"), 1);
        assert_eq!(after.len(), 1);
        assert_eq!(after[0].get("cursor_state"), 2);
        assert!(after[0].is_commit_of("s", "v/-/S/-/s"));
        assert!(!after[0].names_landing_absolutely());
        assert!(commits_after(&trail, first.offset(), &"0".repeat(64), None)
            .unwrap()
            .is_none());
        let of = CommitsOf::new("s", "v/-/S/-/s");
        let last = last_commit(&trail, &of, |l| l.get("cursor_state") == 1)
            .unwrap()
            .unwrap();
        assert_eq!(last.receipt(), &first);
    }

    #[test]
    fn a_line_that_names_its_landing_absolutely_is_read_relative_to_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let trail = dir.path().join("audit.jsonl");
        let mut log = AuditLog::open(&trail, RunId::new()).unwrap();
        let old = log
            .record_commit(Page {
                stream: "s",
                landing_dir: "/srv/moved-away/landing/v/-/S/-/s",
                cursor_state: 1,
            })
            .unwrap();
        let (line, _) = commits_after(&trail, old.offset(), old.sha256(), None)
            .unwrap()
            .unwrap();
        assert!(line.is_commit_of("s", "v/-/S/-/s"));
        assert!(!line.is_commit_of("s", "v/-/S/-/other"));
        assert!(line.names_landing_absolutely());
    }

    /// The search before the parse lets through every commit of the
    /// stream (its directory relative or, from an older version, absolute)
    /// and none of another stream of the same name in another directory.
    #[test]
    fn only_the_streams_own_commits_are_parsed() {
        let dir = tempfile::tempdir().unwrap();
        let trail = dir.path().join("audit.jsonl");
        let mut log = AuditLog::open(&trail, RunId::new()).unwrap();
        let page = |landing_dir, n| Page {
            stream: "default",
            landing_dir,
            cursor_state: n,
        };
        let first = log.record_commit(page("quiet/-/S/-/default", 1)).unwrap();
        log.record_commit(page("busy/-/S/-/default", 2)).unwrap();
        log.record_commit(page("/srv/old/landing/quiet/-/S/-/default", 3))
            .unwrap();
        log.record_commit(page("busy/-/S/-/default", 4)).unwrap();
        let trail = first.audit_log().to_path_buf();
        let of = CommitsOf::new("default", "quiet/-/S/-/default");
        let (_, after) = commits_after(&trail, first.offset(), first.sha256(), Some(&of))
            .unwrap()
            .unwrap();
        let states: Vec<_> = after.iter().map(|l| l.get("cursor_state").clone()).collect();
        assert_eq!(states, [3]);
        let last = last_commit(&trail, &of, |_| true).unwrap().unwrap();
        assert_eq!(last.get("cursor_state"), 3);
        let other = CommitsOf::new("other", "quiet/-/S/-/default");
        assert!(last_commit(&trail, &other, |_| true).unwrap().is_none());
    }
}

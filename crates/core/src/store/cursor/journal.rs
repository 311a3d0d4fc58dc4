//! The lookback memory's journal: the file beside a cursor file that holds
//! the memory the cursor seals (`<stream>.memory.jsonl`).
//!
//! A memory of 20,000 identities is about a megabyte; written whole into
//! the cursor file at every commit, a page of one record cost a megabyte
//! of writes. The cursor file now holds the memory's seal, as the
//! `page_committed` line does (`seal.rs`), and the journal holds the
//! memory: a first line with the memory whole (its base), then one line a
//! commit with the page's change to it and the seal after. A commit
//! appends its change; once the changes add up to the base's size (and
//! 64 KiB more) the journal is written anew with one base, by rename, and
//! the one before is kept as `<stream>.memory.jsonl.1`. So a commit writes
//! at most twice its change, never the memory.
//!
//! Nothing in the journal is trusted: the memory read back is the base
//! with the changes up to the last line that records the cursor's seal,
//! and it must then hash to that seal. The journal, like the cursor file,
//! is written without an fsync (the fsynced `page_committed` line is the
//! commit record), and a crash can leave it behind the cursor or with a
//! torn last line: a journal that never reaches the cursor's seal is
//! behind, and the cursor is rebuilt from the trail as a torn cursor file
//! is (the journal before the last rewrite is read too, so a cursor file
//! that lost its last writes is still rolled forward from the trail). One
//! that reaches the seal's line and then hashes to something else was
//! changed after it was written: damaged, refused unless the operator
//! asks for the trail's cursor (`--repair-state`). Lines after the
//! cursor's (a crash between the journal's append and the cursor's
//! rename) are passed over, and cut off before the next append.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::memory::RecordMemory;
use super::seal::{MemoryChange, Seal};
use crate::durable::sync_parent_dir;

/// Past the base's size, how much the changes may add before the journal
/// is written anew.
const SLACK: u64 = 64 * 1024;

/// The journal's first line: the memory whole.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Base<M> {
    memory: M,
    seal: Seal,
}

/// Every later line: one commit's change, and the seal after it.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Change<C> {
    change: C,
    seal: Seal,
}

/// Why the journal does not give the memory a cursor seals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unresolved {
    /// No line records the seal: the journal is missing, or a crash left it
    /// behind its cursor. The cursor is rebuilt from the trail.
    Behind(String),
    /// It reaches the seal's line and is then not the memory sealed, or a
    /// whole line is not a journal line: changed after it was written.
    Damaged(String),
    /// It cannot be read (a symbolic link is refused, never followed).
    Unreadable(String),
}

impl Unresolved {
    /// What the journal lacks, or how it is damaged.
    pub(crate) fn into_detail(self) -> String {
        match self {
            Unresolved::Behind(d) | Unresolved::Damaged(d) | Unresolved::Unreadable(d) => d,
        }
    }
}

/// Where the journal ends for this store: what the next commit appends to.
#[derive(Debug, Clone, Copy)]
enum End {
    /// Not read nor written by this store yet, or read from the journal
    /// before the last rewrite: the next write starts it anew.
    Unknown,
    /// The end of the line of the memory the cursor seals, and the length
    /// of its base line; `cut`: whatever follows it was cut off (or
    /// written by this store).
    At { bytes: u64, base: u64, cut: bool },
}

/// The journal of one cursor file.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    end: Mutex<End>,
}

impl Journal {
    /// The journal beside the cursor file `cursor`.
    pub(crate) fn beside(cursor: &Path) -> Journal {
        Journal {
            path: path_beside(cursor),
            end: Mutex::new(End::Unknown),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The journal before the last rewrite.
    fn previous(&self) -> PathBuf {
        self.path.with_extension("jsonl.1")
    }

    /// `detail` of the journal before the last rewrite, naming it.
    fn in_previous(&self, detail: String) -> String {
        format!(
            "the journal before its last rewrite ({}): {detail}",
            self.previous().display()
        )
    }

    /// The memory sealed `seal`: the base with every change up to the last
    /// line that records the seal, proven by hashing to it; from the
    /// journal before the last rewrite when the journal does not reach it.
    pub(crate) fn memory_sealed(&self, seal: &Seal) -> Result<RecordMemory, Unresolved> {
        let (memory, end) = match sealed_in(&self.path, seal) {
            Err(Unresolved::Behind(why)) => match sealed_in(&self.previous(), seal) {
                Ok((memory, _)) => (memory, End::Unknown),
                Err(Unresolved::Behind(_)) => return Err(Unresolved::Behind(why)),
                Err(Unresolved::Damaged(d)) => return Err(Unresolved::Damaged(self.in_previous(d))),
                Err(Unresolved::Unreadable(d)) => return Err(Unresolved::Unreadable(self.in_previous(d))),
            },
            found => found?,
        };
        *self.end.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = end;
        Ok(memory)
    }

    /// Whether some line of the journal, or of the one before, records
    /// `seal` (without rebuilding the memory): `Err` says why not, or that
    /// a line is not a journal line.
    pub(crate) fn reaches(&self, seal: &Seal) -> Result<(), Unresolved> {
        let in_file =
            |path: &Path| read(path).and_then(|bytes| last_sealed(&whole_lines(&bytes), seal).map(|_| ()));
        match in_file(&self.path) {
            Err(Unresolved::Behind(why)) => in_file(&self.previous()).map_err(|e| match e {
                Unresolved::Behind(_) => Unresolved::Behind(why),
                Unresolved::Damaged(d) => Unresolved::Damaged(self.in_previous(d)),
                Unresolved::Unreadable(d) => Unresolved::Unreadable(self.in_previous(d)),
            }),
            other => other,
        }
    }
    /// Records `memory` (sealed `seal`) as the cursor's: `change`, the
    /// commit's change to the memory the journal ends at, is appended; the
    /// journal is written anew with the memory whole on this store's first
    /// write, when the changes have grown past the base, when there is no
    /// change to append, or when `durable` (fsynced then, its directory
    /// too: a cursor rolled forward or rebuilt).
    pub(crate) fn record(
        &self,
        memory: &RecordMemory,
        seal: &Seal,
        change: Option<&MemoryChange>,
        durable: bool,
    ) -> std::io::Result<()> {
        let mut end = self.end.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let (End::At { bytes, base, cut }, Some(change), false) = (*end, change, durable) {
            if bytes < base.saturating_mul(2).saturating_add(SLACK) {
                let mut line = change_line(change, seal)?;
                line.push(b'\n');
                // Unknown until the write is whole: a failed append leaves
                // a journal the next write replaces.
                *end = End::Unknown;
                let mut file = crate::no_follow::append(&self.path)?;
                if !cut && file.metadata()?.len() != bytes {
                    // Lines of a commit whose cursor was never written, or
                    // a torn one: never under this commit's change.
                    file.set_len(bytes)?;
                }
                file.write_all(&line)?;
                *end = End::At {
                    bytes: bytes + line.len() as u64,
                    base,
                    cut: true,
                };
                return Ok(());
            }
        }
        *end = End::Unknown;
        let mut line = base_line(memory, seal)?;
        line.push(b'\n');
        let tmp = self.path.with_extension("jsonl.tmp");
        let mut file = crate::no_follow::create(&tmp)?;
        file.write_all(&line)?;
        if durable {
            file.sync_all()?;
        }
        drop(file);
        // The journal before is kept: a cursor file that loses its last
        // writes in a crash may seal a memory only it holds.
        match std::fs::rename(&self.path, self.previous()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        std::fs::rename(&tmp, &self.path)?;
        if durable {
            sync_parent_dir(&self.path)?;
        }
        let bytes = line.len() as u64;
        *end = End::At {
            bytes,
            base: bytes,
            cut: true,
        };
        Ok(())
    }

    /// The cursor keeps no memory: the next memory starts a new journal.
    pub(crate) fn forget(&self) {
        *self.end.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = End::Unknown;
    }
}

/// The journal's path beside the cursor file `cursor`
/// (`<stream>.cursor.json`: `<stream>.memory.jsonl`).
pub(crate) fn path_beside(cursor: &Path) -> PathBuf {
    let name = cursor
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".cursor.json").to_string())
        .unwrap_or_default();
    cursor.with_file_name(format!("{name}.memory.jsonl"))
}

/// Whether the journal beside the cursor file `cursor` gives the memory
/// its `lookback` (as the file holds it) seals; a memory held whole, or
/// none, needs no journal (`verify`).
pub(crate) fn check_beside(cursor: &Path, lookback: &serde_json::Value) -> Result<(), Unresolved> {
    match serde_json::from_value::<super::seal::LineMemory>(lookback.clone()) {
        Ok(super::seal::LineMemory::Sealed(seal)) => Journal::beside(cursor).memory_sealed(&seal).map(|_| ()),
        _ => Ok(()),
    }
}

/// The memory sealed `seal` in the journal at `path`, and where the line
/// that records it ends.
fn sealed_in(path: &Path, seal: &Seal) -> Result<(RecordMemory, End), Unresolved> {
    let bytes = read(path)?;
    let lines = whole_lines(&bytes);
    let (memory, last) = replay(&lines, seal)?;
    let end_of = |line: &[u8]| (line.as_ptr() as usize - bytes.as_ptr() as usize + line.len() + 1) as u64;
    let end = End::At {
        bytes: end_of(lines[last]),
        base: end_of(lines[0]),
        cut: false,
    };
    Ok((memory, end))
}

/// The memory sealed `seal` in a journal's `lines` (a file's, or a state
/// database's rows), and the index of the line that records it.
pub(crate) fn replay(lines: &[&[u8]], seal: &Seal) -> Result<(RecordMemory, usize), Unresolved> {
    let last = last_sealed(lines, seal)?;
    let damaged = Unresolved::Damaged;
    let base: Base<RecordMemory> = serde_json::from_slice(lines[0])
        .map_err(|e| damaged(format!("its first line is not the memory whole ({e})")))?;
    let mut memory = base.memory;
    for (n, line) in lines.iter().enumerate().take(last + 1).skip(1) {
        let change: Change<MemoryChange> = serde_json::from_slice(line)
            .map_err(|e| damaged(format!("line {} is not a change ({e})", n + 1)))?;
        memory
            .apply(&change.change, &change.seal)
            .map_err(|e| damaged(format!("line {}: {e}", n + 1)))?;
    }
    let found = memory.seal();
    if &found != seal {
        return Err(damaged(format!(
            "its lines up to line {} make a memory of {} identities with SHA-256 {}, and the cursor seals {} \
             identities with SHA-256 {}",
            last + 1,
            found.identities,
            found.sha256,
            seal.identities,
            seal.sha256
        )));
    }
    Ok((memory, last))
}

/// The journal's first line: `memory` whole, sealed `seal` (no newline).
pub(crate) fn base_line(memory: &RecordMemory, seal: &Seal) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&Base {
        memory,
        seal: seal.clone(),
    })
}

/// A later line: `change`, after which the memory is sealed `seal` (no
/// newline).
pub(crate) fn change_line(change: &MemoryChange, seal: &Seal) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&Change {
        change,
        seal: seal.clone(),
    })
}

/// The seal a journal's line records (`first`: its first line, the
/// memory whole); `None` for a line that is not one.
pub(crate) fn line_seal(line: &[u8], first: bool) -> Option<Seal> {
    if first {
        serde_json::from_slice::<Base<IgnoredAny>>(line)
            .ok()
            .map(|l| l.seal)
    } else {
        serde_json::from_slice::<Change<IgnoredAny>>(line)
            .ok()
            .map(|l| l.seal)
    }
}

/// The index of the last whole line recording `seal`.
fn last_sealed(lines: &[&[u8]], seal: &Seal) -> Result<usize, Unresolved> {
    let mut last = None;
    for (n, line) in lines.iter().enumerate() {
        let recorded = line_seal(line, n == 0).ok_or_else(|| {
            Unresolved::Damaged(format!(
                "line {} is not a line of a lookback memory's journal",
                n + 1
            ))
        })?;
        if &recorded == seal {
            last = Some(n);
        }
    }
    last.ok_or_else(|| {
        Unresolved::Behind(format!(
            "it holds no memory of {} identities with SHA-256 {}, which the cursor seals (a crash left it \
             behind the cursor, or it was removed)",
            seal.identities, seal.sha256
        ))
    })
}

fn read(path: &Path) -> Result<Vec<u8>, Unresolved> {
    crate::no_follow::read_bytes(path).map_err(|e| {
        let why = format!("cannot read it ({e})");
        if e.kind() == std::io::ErrorKind::NotFound {
            Unresolved::Behind(why)
        } else {
            Unresolved::Unreadable(why)
        }
    })
}

/// The lines of `bytes` that end with a newline: a last line without one
/// is what a crash left of an append, and is not read.
fn whole_lines(bytes: &[u8]) -> Vec<&[u8]> {
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |n| n + 1);
    bytes[..whole]
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect()
}

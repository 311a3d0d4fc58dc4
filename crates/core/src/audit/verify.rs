//! `audit verify`: proves nothing in an audit file was edited, removed or
//! reordered, and says exactly where and how when something was.
//!
//! The file is streamed, so a multi-gigabyte trail verifies in constant
//! memory (plus one `seq` per run). A second streaming pass runs only to
//! classify a broken link.
//!
//! One concept: the chain's verdict, with what the audit key adds to it
//! (seals, checkpoints) read in the same pass.

use std::collections::HashMap;
use std::fmt;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::anchor::ChainHead;
use super::checkpoint::{AuditKey, Checkpoint};
use super::line;
use super::log::AuditEvent;
use super::tail::is_torn_prefix;
use crate::digest::{sha256_hex, ZERO_SHA256};

/// What kind of damage was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// A line's bytes changed after it was written.
    Edited,
    /// One or more lines are missing.
    Removed,
    /// A line is not where it was written.
    Reordered,
    /// The final line has no newline: a write was interrupted by a crash.
    TornTail,
    /// A line is not a valid audit line (not JSON, wrong keys).
    Malformed,
    /// With a key: a `run_finished` line has no checkpoint, or the file
    /// has none at all.
    Unsigned,
    /// With a key: a checkpoint does not verify (the chain was recomputed
    /// by someone without the key).
    Forged,
    /// The trail is shorter than, or differs from, an anchor kept outside it.
    Diverged,
    /// With a key: a line's `line_mac` does not verify (the line was added
    /// or changed by someone without the key, and chained to fit).
    Unsealed,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Damage::Edited => "edited",
            Damage::Removed => "removed",
            Damage::Reordered => "reordered",
            Damage::TornTail => "torn final line",
            Damage::Malformed => "malformed",
            Damage::Unsigned => "unsigned",
            Damage::Forged => "checkpoint does not verify",
            Damage::Diverged => "diverges from its anchor",
            Damage::Unsealed => "line MAC does not verify",
        })
    }
}

/// The first problem in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// 1-based line number.
    pub line: u64,
    pub damage: Damage,
    pub detail: String,
}

/// The result of verifying a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub path: PathBuf,
    /// Lines read (including a torn final line).
    pub lines: u64,
    pub runs: usize,
    /// SHA-256 of the last complete line: quote it to anchor the file's end.
    pub last_sha256: String,
    /// Torn lines that a later run acknowledged (`audit_tail_repaired`).
    pub repaired: Vec<u64>,
    /// Keyed checkpoints verified, and the key's id.
    pub checkpoints: u64,
    pub key_id: Option<String>,
    /// Lines up to and including this one are covered by a checkpoint.
    pub covered_lines: u64,
    /// With a key: the first sealed line (every one after it is sealed).
    pub sealed_from: Option<u64>,
    /// Anchors the file was checked against.
    pub anchors: usize,
    pub finding: Option<Finding>,
}

impl Report {
    pub fn intact(&self) -> bool {
        self.finding.is_none()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        for line in &self.repaired {
            writeln!(
                f,
                "{path}:{line}: note: torn line left by a crash, acknowledged by the next line"
            )?;
        }
        match &self.finding {
            None => {
                write!(
                    f,
                    "{path}: intact: {} lines, {} runs, chain verified; last line sha256 {}",
                    self.lines, self.runs, self.last_sha256
                )?;
                if let Some(id) = &self.key_id {
                    write!(
                        f,
                        "; {} keyed checkpoints verified with key {id}, covering lines 1..{}",
                        self.checkpoints, self.covered_lines
                    )?;
                    if let Some(first) = self.sealed_from {
                        write!(f, "; lines {first}..{} sealed", self.lines)?;
                        // Lines before the key: proven by the chain to the
                        // sealed lines and the checkpoints after them.
                        if first > 1 {
                            write!(
                                f,
                                "; lines 1..{} unsealed (written before the key), covered by the chain to \
                                 line {first} and the checkpoints after it",
                                first - 1
                            )?;
                        }
                    }
                }
                if self.anchors > 0 {
                    write!(f, "; matches {} anchor(s)", self.anchors)?;
                }
                Ok(())
            }
            Some(x) => write!(f, "{path}:{}: {}: {}", x.line, x.damage, x.detail),
        }
    }
}

/// Verification could not run at all (unreadable file).
#[derive(Debug, thiserror::Error)]
#[error("cannot read audit file {}: {error}", path.display())]
pub struct ReadError {
    pub path: PathBuf,
    pub error: std::io::Error,
}

/// The file was read and is not intact. Maps to exit 65 (EX_DATAERR).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotIntact(pub Report);

/// One line as read: bytes without the newline, and whether it had one.
struct RawLine {
    bytes: Vec<u8>,
    terminated: bool,
}

fn lines(path: &Path) -> Result<impl Iterator<Item = std::io::Result<RawLine>>, ReadError> {
    let read_error = |error| ReadError {
        path: path.to_path_buf(),
        error,
    };
    // Never through a link, and only a regular file: a device or pipe may
    // never end (`/dev/zero`), and an audit trail is a file.
    let file = crate::no_follow::read(path).map_err(read_error)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    Ok(std::iter::from_fn(move || {
        let mut bytes = Vec::new();
        match reader.read_until(b'\n', &mut bytes) {
            Ok(0) => None,
            Ok(_) => {
                let terminated = bytes.last() == Some(&b'\n');
                if terminated {
                    bytes.pop();
                }
                Some(Ok(RawLine { bytes, terminated }))
            }
            Err(e) => Some(Err(e)),
        }
    }))
}

/// What to check beyond the chain.
#[derive(Debug, Default, Clone)]
pub struct Checks {
    /// Chain heads kept outside the file (`--anchors`, `--redis`), each
    /// with where it was read from (`anchor FILE`, `Redis anchor KEY`).
    pub anchors: Vec<(String, ChainHead)>,
    /// The audit key (`--key`): every `run_finished` must carry a valid
    /// checkpoint.
    pub key: Option<AuditKey>,
}

/// Verifies the chain of the audit file at `path`.
pub fn verify(path: &Path) -> Result<Report, ReadError> {
    verify_with(path, &Checks::default())
}

/// Verifies the audit file at `path`, its checkpoints and its anchors.
pub fn verify_with(path: &Path, checks: &Checks) -> Result<Report, ReadError> {
    let mut report = verify_chain(path, checks.key.as_ref())?;
    if report.finding.is_some() {
        return Ok(report);
    }
    if let Some(key) = &checks.key {
        report.key_id = Some(key.id());
        if report.checkpoints == 0 {
            report.finding = Some(Finding {
                line: report.lines,
                damage: Damage::Unsigned,
                detail: format!(
                    "no run_finished or trail_heads line carries a checkpoint with key {}",
                    key.id()
                ),
            });
            return Ok(report);
        }
    }
    let read_err = |error| ReadError {
        path: path.to_path_buf(),
        error,
    };
    let file = crate::no_follow::read(path).map_err(read_err)?;
    for (source, head) in &checks.anchors {
        if let Err(detail) = head.check(&file).map_err(read_err)? {
            report.finding = Some(Finding {
                line: head.lines.min(report.lines).max(1),
                damage: Damage::Diverged,
                detail: format!("{source}: {detail}"),
            });
            return Ok(report);
        }
        report.anchors += 1;
    }
    Ok(report)
}

fn verify_chain(path: &Path, key: Option<&AuditKey>) -> Result<Report, ReadError> {
    let read_err = |error| ReadError {
        path: path.to_path_buf(),
        error,
    };
    let mut report = Report {
        path: path.to_path_buf(),
        lines: 0,
        runs: 0,
        last_sha256: ZERO_SHA256.to_string(),
        repaired: Vec::new(),
        checkpoints: 0,
        key_id: None,
        covered_lines: 0,
        sealed_from: None,
        anchors: 0,
        finding: None,
    };
    let mut expected_prev = ZERO_SHA256.to_string();
    let mut last_seq: HashMap<String, u64> = HashMap::new();
    // Lines that failed to parse but are what an interrupted write leaves,
    // waiting to see whether the next line acknowledges them as torn:
    // (line number, its hash).
    let mut pending_torn: Vec<(u64, String)> = Vec::new();
    // A `seq` gap on a line that links correctly: if the next line does not
    // link to it, the line itself was edited; otherwise lines were removed
    // and the chain rewritten around them.
    let mut pending_gap: Option<Finding> = None;
    // A line whose seal does not hold: reported once the next line shows
    // the chain links past it (otherwise the break says what happened:
    // an edited line fails its seal too, and "edited" is the finding).
    let mut pending_seal: Option<Finding> = None;
    // Every `trail_heads` line must list the last commits before it.
    let mut heads = super::heads::HeadsCheck::default();
    // The run of part lines just read, by digest.
    let mut parts = super::spill::PartDigests::default();
    let mut offset = 0u64;
    for raw in lines(path)? {
        let raw = raw.map_err(read_err)?;
        let start = offset;
        offset += raw.bytes.len() as u64 + 1;
        report.lines += 1;
        let n = report.lines;
        let hash = sha256_hex(&raw.bytes);
        if !raw.terminated {
            report.finding = Some(if is_torn_prefix(&raw.bytes) {
                Finding {
                    line: n,
                    damage: Damage::TornTail,
                    detail: format!(
                        "the final line ({} bytes) has no newline: a write was interrupted by a crash; \
                         the next run will acknowledge it with an audit_tail_repaired line",
                        raw.bytes.len()
                    ),
                }
            } else {
                Finding {
                    line: n,
                    damage: Damage::Malformed,
                    detail: format!(
                        "the final {} bytes have no newline and are not the start of an audit line, so \
                         not what an interrupted write leaves; edited or corrupted",
                        raw.bytes.len()
                    ),
                }
            });
            return Ok(report);
        }
        if raw.bytes.len() > line::MAX_LINE {
            report.finding = Some(malformed(
                n,
                &format!(
                    "the line is {} bytes, longer than the {} bytes a trail line may be: no line this tool writes, \
                     and no run can chain to it",
                    raw.bytes.len(),
                    line::MAX_LINE
                ),
            ));
            return Ok(report);
        }
        let parsed = match line::parse(&raw.bytes) {
            Ok(p) => p,
            Err(why) => {
                if !is_torn_prefix(&raw.bytes) || pending_torn.len() == 2 {
                    report.finding = Some(malformed(n, &why));
                    return Ok(report);
                }
                pending_torn.push((n, hash.clone()));
                expected_prev = hash;
                continue;
            }
        };
        if let Some((_, torn_hash)) = pending_torn.last() {
            let acknowledged = parsed.event == super::TailRepaired::NAME
                && parsed.acknowledges.as_deref() == Some(torn_hash.as_str());
            if !acknowledged {
                report.finding = Some(malformed(
                    pending_torn[0].0,
                    "a partial line that no audit_tail_repaired line acknowledges",
                ));
                return Ok(report);
            }
            report
                .repaired
                .extend(pending_torn.drain(..).map(|(line, _)| line));
        }
        if parsed.prev_sha256 != expected_prev {
            report.finding = Some(match pending_gap.take() {
                Some(gap) => Finding {
                    line: gap.line,
                    damage: Damage::Edited,
                    detail: format!("its seq is out of sequence and line {n} does not link to it"),
                },
                None => classify_break(path, n, &parsed, &last_seq).map_err(read_err)?,
            });
            return Ok(report);
        }
        if let Some(gap) = pending_gap.take().or(pending_seal.take()) {
            report.finding = Some(gap);
            return Ok(report);
        }
        if let Some(key) = key {
            pending_seal = check_seal(key, n, &raw.bytes, &mut report.sealed_from);
        }
        let previous = last_seq.get(&parsed.run_id).copied();
        let expected_seq = previous.map_or(1, |s| s + 1);
        if parsed.seq != expected_seq {
            pending_gap = Some(Finding {
                line: n,
                damage: Damage::Removed,
                detail: match previous {
                    Some(s) => format!(
                        "run {} jumps from seq {s} to seq {} although the chain links; lines of this run \
                         were removed and the chain rewritten",
                        parsed.run_id, parsed.seq
                    ),
                    None => format!(
                        "run {} starts at seq {} instead of 1; its earlier lines were removed",
                        parsed.run_id, parsed.seq
                    ),
                },
            });
        }
        let checkpointed = parsed.event == "run_finished"
            || (parsed.event == super::heads::HEADS_EVENT && parsed.checkpoint.is_some());
        // Before the first sealed line (a trail written before the key, and
        // adopted under it since) a run_finished line carries no checkpoint:
        // the sealed lines after it cover it by the chain, and a trail with
        // none is refused at its end.
        let before_the_key = report.sealed_from.is_none() && parsed.checkpoint.is_none();
        if let (Some(key), true, false) = (key, checkpointed, before_the_key) {
            if let Some(finding) = check_checkpoint(key, n, &parsed) {
                report.finding = Some(finding);
                return Ok(report);
            }
            report.checkpoints += 1;
            report.covered_lines = n - 1;
        }
        // A commit that spilled fields names the part lines right before
        // it by their digests (`spill.rs`).
        if parsed.event == super::spill::PART_EVENT {
            match serde_json::from_slice(&raw.bytes) {
                Ok(part) => parts.part(&part),
                Err(_) => parts = Default::default(),
            }
        } else {
            let run = std::mem::take(&mut parts);
            let spilled = parsed.event == super::commit::COMMIT_EVENT
                && memchr::memmem::find(&raw.bytes, super::spill::SPILLED_NEEDLE).is_some();
            if spilled {
                let joined = serde_json::from_slice(&raw.bytes)
                    .map_err(|e| e.to_string())
                    .and_then(|commit| run.matches(&commit));
                if let Err(why) = joined {
                    report.finding = Some(Finding {
                        line: n,
                        damage: Damage::Edited,
                        detail: format!("a page_committed line whose spilled fields do not hold: {why}"),
                    });
                    return Ok(report);
                }
            }
        }
        let commits = super::commit::key_of(&parsed);
        if let Some(detail) = heads.line(start, &raw.bytes, &hash, commits) {
            report.finding = Some(Finding {
                line: n,
                damage: Damage::Edited,
                detail,
            });
            return Ok(report);
        }
        last_seq.insert(parsed.run_id, parsed.seq);
        expected_prev = hash.clone();
        report.last_sha256 = hash;
    }
    if let Some((torn, _)) = pending_torn.first() {
        report.finding = Some(malformed(
            *torn,
            "a partial line that no audit_tail_repaired line acknowledges",
        ));
    }
    if let Some(gap) = pending_gap.or(pending_seal) {
        report.finding = Some(gap);
    }
    // With a key, a trail none of whose lines is sealed proves nothing of
    // who wrote it: one written before the key and one replaced wholesale
    // by someone without it look alike (a run adopts the first only when
    // told, in a sealed audit_key_adopted line).
    if let (Some(key), None, None, true) = (key, &report.finding, report.sealed_from, report.lines > 0) {
        report.finding = Some(Finding {
            line: 1,
            damage: Damage::Unsealed,
            detail: format!(
                "not one of its {} lines is sealed with key {}: nothing proves a holder of the key wrote \
                 them (a trail written before the key is taken under it by a run given \
                 --adopt-unsealed-trail)",
                report.lines,
                key.id()
            ),
        });
    }
    // Every run writes at least its run_started line: an empty file is a
    // trail whose every line was removed, which proves nothing.
    if report.lines == 0 {
        report.finding = Some(Finding {
            line: 1,
            damage: Damage::Removed,
            detail: "the file is empty: every trail starts with a run_started line".into(),
        });
    }
    report.runs = last_seq.len();
    Ok(report)
}

/// The seal of line `n`, checked with `key`. The keyed era starts at the
/// first sealed line (`sealed_from`); lines before it were written before
/// seals or without a key, and their checkpoints prove them.
fn check_seal(key: &AuditKey, n: u64, bytes: &[u8], sealed_from: &mut Option<u64>) -> Option<Finding> {
    use super::checkpoint::Seal;
    let finding = |detail: String| {
        Some(Finding {
            line: n,
            damage: Damage::Unsealed,
            detail,
        })
    };
    match (key.seal_of(bytes), *sealed_from) {
        (Seal::Verifies, None) => {
            *sealed_from = Some(n);
            None
        }
        (Seal::Verifies, Some(_)) | (Seal::Absent, None) => None,
        (Seal::Fails, _) => finding(format!(
            "its line_mac does not verify with key {}: it was added or changed by someone without the key",
            key.id()
        )),
        (Seal::Absent, Some(first)) => finding(format!(
            "it carries no line_mac although every line from {first} on is sealed with key {}: it was added \
             by someone without the key (or by a run not given it)",
            key.id()
        )),
    }
}

/// The checkpoint of the `run_finished` line `n`, checked with `key`.
fn check_checkpoint(key: &AuditKey, n: u64, parsed: &line::Parsed) -> Option<Finding> {
    let finding = |damage, detail| {
        Some(Finding {
            line: n,
            damage,
            detail,
        })
    };
    let Some(value) = &parsed.checkpoint else {
        return finding(
            Damage::Unsigned,
            "this run_finished line has no checkpoint although an audit key is in use".into(),
        );
    };
    let Ok(mark) = serde_json::from_value::<Checkpoint>(value.clone()) else {
        return finding(Damage::Forged, "its checkpoint is not {alg, key_id, mac}".into());
    };
    if mark.alg != super::checkpoint::ALGORITHM || mark.key_id != key.id() {
        return finding(
            Damage::Forged,
            format!(
                "its checkpoint claims {} with key {}, not {} with key {}",
                mark.alg,
                mark.key_id,
                super::checkpoint::ALGORITHM,
                key.id()
            ),
        );
    }
    if !key.verifies(&parsed.run_id, parsed.seq, &parsed.prev_sha256, &mark.mac) {
        return finding(
            Damage::Forged,
            format!(
                "its checkpoint does not verify with key {}: the lines before it were rewritten and the \
                 chain recomputed by someone without the key",
                key.id()
            ),
        );
    }
    None
}

fn malformed(line: u64, why: &str) -> Finding {
    Finding {
        line,
        damage: Damage::Malformed,
        detail: format!("{why}; edited or corrupted"),
    }
}

/// Line `n` does not link to the line before it. Works out why.
fn classify_break(
    path: &Path,
    n: u64,
    parsed: &line::Parsed,
    last_seq: &HashMap<String, u64>,
) -> std::io::Result<Finding> {
    if n == 1 {
        return Ok(Finding {
            line: 1,
            damage: Damage::Removed,
            detail:
                "the first line does not start a chain (prev_sha256 is not 64 zeros): lines were removed \
                     from the start of the file"
                    .into(),
        });
    }
    // Does the recorded predecessor exist elsewhere in the file? And does
    // the line after this one still link to it?
    let mut number = 0u64;
    let mut this_hash = String::new();
    let mut next_links: Option<bool> = None;
    for raw in lines(path).map_err(|e| e.error)? {
        let raw = raw?;
        number += 1;
        let hash = sha256_hex(&raw.bytes);
        if number != n - 1 && hash == parsed.prev_sha256 {
            return Ok(Finding {
                line: n,
                damage: Damage::Reordered,
                detail: format!(
                    "this line was written right after line {number}, not after line {}",
                    n - 1
                ),
            });
        }
        if number == n {
            this_hash = hash;
        } else if number == n + 1 {
            next_links = line::parse(&raw.bytes)
                .ok()
                .map(|next| next.prev_sha256 == this_hash);
        }
    }
    let expected_seq = last_seq.get(&parsed.run_id).map_or(1, |s| s + 1);
    if parsed.seq > expected_seq {
        return Ok(Finding {
            line: n,
            damage: Damage::Removed,
            detail: format!(
                "line(s) missing before this one: run {} goes from seq {} to seq {}",
                parsed.run_id,
                expected_seq - 1,
                parsed.seq
            ),
        });
    }
    if next_links == Some(false) {
        return Ok(Finding {
            line: n,
            damage: Damage::Edited,
            detail: format!("it links neither to line {} nor from line {}", n - 1, n + 1),
        });
    }
    Ok(Finding {
        line: n - 1,
        damage: Damage::Edited,
        detail: format!("its SHA-256 does not match the prev_sha256 recorded by line {n}"),
    })
}

//! The append-only audit file: one writer per run, many runs per file.
//! One concept: the file's writer (lock, chain to the last line, append,
//! fsync, and the checks of its end and anchors before the first append).
//!
//! Each append takes an exclusive lock on the file, reads the last line to
//! chain to it, appends one line and fsyncs before the lock is released.
//! That makes the chain hold across concurrent processes, and makes "the
//! line is on disk" true by the time [`AuditLog::record`] returns, which is
//! what lets the page loop write the audit line *before* it sleeps or
//! commits a cursor (invariant 3).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;

use super::anchor::ChainHead;
use super::checkpoint::AuditKey;
use super::commit::{CommitReceipt, CommitRecord, COMMIT_EVENT};
use super::heads;
use super::line;
use super::run_id::RunId;
use super::tail;
use crate::digest::sha256_hex;

/// An event that can be written to the audit trail.
///
/// The struct's fields become the line's fields, in declaration order.
pub trait AuditEvent: Serialize {
    /// The `event` value, e.g. `run_started`.
    const NAME: &'static str;
    /// Whether the line carries a keyed checkpoint over the chain head when
    /// an audit key is set (`run_finished` does).
    const CHECKPOINT: bool = false;
}

/// Written when an append finds the file ending in a torn line (a crash
/// mid-write). The torn bytes stay in the file, byte for byte: this line
/// acknowledges them and the chain continues from their hash, so nothing is
/// silently dropped and `audit verify` can report exactly what happened.
#[derive(Debug, Serialize)]
pub(crate) struct TailRepaired {
    pub torn_line_bytes: u64,
    pub torn_line_sha256: String,
}

impl AuditEvent for TailRepaired {
    const NAME: &'static str = "audit_tail_repaired";
}

/// Written when the operator passed `--repair-audit` over a trail whose end
/// does not verify or that diverges from its anchor. The damaged bytes stay
/// as they are; this line says what was wrong and chains on from the hash
/// of the final bytes, so `audit verify` still reports the damage.
#[derive(Debug, Serialize)]
pub(super) struct AuditRepaired {
    /// What did not verify, as the refusal would have said it.
    pub problems: Vec<String>,
    /// SHA-256 of the final bytes this line chains to.
    pub tail_sha256: String,
    pub repaired_by: &'static str,
}

impl AuditEvent for AuditRepaired {
    const NAME: &'static str = "audit_repaired";
}

/// Why the audit trail could not be written. Maps to exit 74 (EX_IOERR):
/// a run that cannot write its audit trail must stop before it acts.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("audit log {}: cannot {op}: {error}", path.display())]
    Io {
        path: PathBuf,
        op: &'static str,
        error: std::io::Error,
    },
    #[error("audit log {}: {error}", path.display())]
    Encode { path: PathBuf, error: EncodeError },
    /// The trail's end does not verify, or it diverges from its anchor:
    /// nothing is appended (exit 65) unless `--repair-audit`.
    #[error(
        "audit log {}: {}; nothing was appended. Inspect it with `edc-sync audit verify`; once the damage \
         is understood, rerun with --repair-audit, which records it",
        path.display(),
        problems.join("; ")
    )]
    Damaged { path: PathBuf, problems: Vec<String> },
    /// The trail's lines are sealed with an audit key and this run holds
    /// none: the lines it would write, unsealed, would be refused by the
    /// next keyed run as forged (exit 78).
    #[error(
        "audit log {}: its lines are sealed with an audit key (the line at {place} carries a line_mac) and this \
         run has none; set {} or --audit-key-file to the key the trail's runs use; nothing was appended",
        path.display(),
        super::checkpoint::KEY_ENV
    )]
    KeyNeeded { path: PathBuf, place: String },
    /// With the audit key: a trail that holds lines, not one of them
    /// sealed. One written before the key and one replaced wholesale by
    /// someone without it look alike, so it is taken only when adopted
    /// (`--adopt-unsealed-trail`, recorded); otherwise exit 65.
    #[error(
        "audit log {}: it holds {lines} line(s) and not one is sealed with audit key {key_id}: a trail written \
         before the key was set, or one replaced by someone without the key; nothing was appended. Once it is \
         known to be the former, rerun with --adopt-unsealed-trail, which records the adoption",
        path.display()
    )]
    NeverSealed {
        path: PathBuf,
        key_id: String,
        lines: u64,
    },
    /// The trail is kept in a state database, which failed or refused.
    #[error(transparent)]
    Db(#[from] crate::db_error::DbError),
}

impl AuditError {
    /// Its exit code: damage 65, the state database's own code, else 74.
    pub fn exit(&self) -> crate::exit::Exit {
        match self {
            AuditError::Damaged { .. } => crate::exit::Exit::DataErr,
            AuditError::KeyNeeded { .. } => crate::exit::Exit::Config,
            AuditError::NeverSealed { .. } => crate::exit::Exit::DataErr,
            AuditError::Db(e) => e.exit(),
            AuditError::Io { .. } | AuditError::Encode { .. } => crate::exit::Exit::IoErr,
        }
    }

    /// A line would have been longer than a trail line may be.
    pub(crate) fn is_too_long(&self) -> bool {
        matches!(
            self,
            AuditError::Encode {
                error: EncodeError::Line(line::ComposeError::TooLong { .. }),
                ..
            }
        )
    }

    /// The trail itself is damaged (65), rather than unwritable (74).
    pub fn is_damage(&self) -> bool {
        matches!(self, AuditError::Damaged { .. } | AuditError::NeverSealed { .. })
            || matches!(self, AuditError::Db(e) if e.exit() == crate::exit::Exit::DataErr)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error(transparent)]
    Line(#[from] line::ComposeError),
    #[error("event {event} does not serialise to a JSON object: {detail}")]
    NotAnObject { event: &'static str, detail: String },
}

/// What an append wrote: the receipt that a line is on disk. Only the
/// audit log makes one, so holding it proves the append happened (the
/// cursor store asks for it before it moves a cursor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    seq: u64,
    /// Where the line starts in the file: a later run reads the trail from
    /// here on, not from its beginning (`sync::roll_forward`).
    offset: u64,
    /// The trail's absolute, resolved path.
    audit_log: PathBuf,
    /// SHA-256 of the line written (the next line's `prev_sha256`).
    sha256: String,
    ts: String,
}

impl Appended {
    /// Made by the state database's trail once its transaction committed.
    pub(crate) fn in_db(seq: u64, offset: u64, trail: PathBuf, sha256: String, ts: String) -> Appended {
        Appended {
            seq,
            offset,
            audit_log: trail,
            sha256,
            ts,
        }
    }

    /// The line's `seq` in its run.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The byte offset the line starts at.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The trail it is in (absolute, resolved).
    pub fn audit_log(&self) -> &Path {
        &self.audit_log
    }

    /// SHA-256 of the line written.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The line's `ts`.
    pub fn ts(&self) -> &str {
        &self.ts
    }
}

/// The audit trail of one run.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: File,
    run_id: RunId,
    next_seq: u64,
    /// Masks subject identifiers in every string field before the line is
    /// composed (and so before it is hashed into the chain).
    masker: Option<crate::mask::Masker>,
    /// The trail's resolved path: where runs read it back. Never recorded:
    /// anchors and receipts name the trail by its file name.
    canonical: PathBuf,
    /// Nothing appended yet: anchors are checked and a repair may happen.
    first: bool,
    /// `--repair-audit`: a damaged end is recorded instead of refused.
    repair: bool,
    /// Anchors to check before the first append, each with where it came from.
    anchors: Vec<(String, ChainHead)>,
    /// Where the anchor should have been, when none was found: a trail
    /// that already holds lines must have one (it was removed otherwise).
    missing_anchor: Option<PathBuf>,
    /// The furthest anchor that matched: lines are counted from there.
    known: Option<ChainHead>,
    /// Signs `run_finished` lines.
    key: Option<AuditKey>,
    /// `--adopt-unsealed-trail`: a trail no line of which is sealed is
    /// taken under the key ([`AuditError::NeverSealed`] otherwise).
    adopt: bool,
    /// How many unsealed lines this writer took under the key, once it has.
    adopted: Option<u64>,
    /// The end this writer's last append left, while it knows it.
    left: Option<tail::LeftEnd>,
    /// Where the trail's last `trail_heads` line starts, as this writer
    /// last found or wrote it (`heads.rs`), and how far past it the next
    /// is due.
    heads_at: Option<heads::Placed>,
}

impl AuditLog {
    /// Opens (creating if needed) the audit file at `path` for `run_id`.
    pub fn open(path: &Path, run_id: RunId) -> Result<Self, AuditError> {
        let io = |op| io_error(path, op);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io("create its directory"))?;
        }
        let existed = path.exists();
        // Never through a symlink, and only a regular file: run as root, a
        // link would otherwise let a run append to any file on the system.
        let file = crate::no_follow::open(path, crate::no_follow::Mode::ReadAppend).map_err(io("open"))?;
        if !existed {
            // The new directory entry must survive a crash too.
            crate::durable::sync_parent_dir(path).map_err(io("fsync its directory"))?;
        }
        let canonical = std::fs::canonicalize(path).map_err(io("resolve its path"))?;
        Ok(AuditLog {
            path: path.to_path_buf(),
            file,
            run_id,
            next_seq: 1,
            masker: None,
            canonical,
            first: true,
            repair: false,
            anchors: Vec::new(),
            missing_anchor: None,
            known: None,
            key: None,
            adopt: false,
            adopted: None,
            left: None,
            heads_at: None,
        })
    }

    /// `--repair-audit`: record a damaged end instead of refusing it.
    pub fn with_repair(mut self, repair: bool) -> Self {
        self.repair = repair;
        self
    }

    /// Signs every `run_finished` line with `key`.
    pub fn with_key(mut self, key: Option<AuditKey>) -> Self {
        self.key = key;
        self
    }

    /// `--adopt-unsealed-trail`: take a trail no line of which is sealed
    /// under the key instead of refusing it.
    pub fn with_adopt_unsealed(mut self, adopt: bool) -> Self {
        self.adopt = adopt;
        self
    }

    /// The unsealed lines this writer took under the key (its first append
    /// found a trail with no sealed line and was told to adopt it), for the
    /// `audit_key_adopted` line that records it.
    pub(crate) fn adopted(&self) -> Option<u64> {
        self.adopted
    }

    /// Checks the trail against `head` before the first append; `source`
    /// says where the anchor was read (for the refusal).
    pub fn with_anchor(mut self, source: String, head: ChainHead) -> Self {
        self.anchors.push((source, head));
        self
    }

    /// No anchor was found at `expected`: before the first append, a trail
    /// that already holds lines is refused (its anchor was removed, or the
    /// trail belongs to another state directory), like a diverged one.
    pub fn with_missing_anchor(mut self, expected: PathBuf) -> Self {
        self.missing_anchor = Some(expected);
        self
    }

    /// The trail's resolved path.
    pub fn canonical_path(&self) -> &Path {
        &self.canonical
    }

    /// The chain head now (under the lock), to anchor outside the file.
    pub fn head(&mut self) -> Result<ChainHead, AuditError> {
        self.file.lock().map_err(io_error(&self.path, "lock"))?;
        let head = ChainHead::of(
            &self.file,
            &self.canonical,
            self.run_id.as_str(),
            self.known.as_ref(),
        )
        .map_err(io_error(&self.path, "read its chain head"));
        let unlocked = self.file.unlock().map_err(io_error(&self.path, "unlock"));
        let head = head?;
        unlocked?;
        self.known = Some(head.clone());
        Ok(head)
    }

    /// Checks an anchor found after the first append (Redis, which the run
    /// reaches only after its header): the same rule, and `--repair-audit`
    /// records the divergence instead of refusing it.
    pub fn check_anchor(&mut self, source: &str, head: &ChainHead) -> Result<(), AuditError> {
        let verdict = head.check(&self.file).map_err(io_error(&self.path, "read it"))?;
        match verdict {
            Ok(()) => Ok(()),
            Err(detail) if self.repair => {
                let tail_sha256 = ChainHead::of(&self.file, &self.canonical, self.run_id.as_str(), None)
                    .map_err(io_error(&self.path, "read its chain head"))?
                    .last_sha256;
                self.record(&AuditRepaired {
                    problems: vec![format!("{source}: {detail}")],
                    tail_sha256,
                    repaired_by: "--repair-audit",
                })
                .map(|_| ())
            }
            Err(detail) => Err(AuditError::Damaged {
                path: self.path.clone(),
                problems: vec![format!("{source}: {detail}")],
            }),
        }
    }

    /// Masks identifiers in every line this log writes.
    pub(crate) fn with_masker(mut self, masker: crate::mask::Masker) -> Self {
        self.masker = Some(masker);
        self
    }

    /// `value` as a line of this log would record it (identifiers masked),
    /// to compare a file with what the trail says of it.
    pub fn as_recorded(&self, mut value: Value) -> Value {
        if let Some(m) = &self.masker {
            m.json(&mut value);
        }
        value
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// Appends `event` and returns once the line is fsynced. A
    /// `page_committed` line is refused here: only [`Self::record_commit`]
    /// writes one, so that its receipt is the only proof of a commit.
    pub fn record<E: AuditEvent>(&mut self, event: &E) -> Result<Appended, AuditError> {
        if E::NAME == COMMIT_EVENT {
            return Err(self.encode_error(
                E::NAME,
                "a commit record is written only by record_commit, which yields its receipt".into(),
            ));
        }
        self.append_event(E::NAME, E::CHECKPOINT, event)
    }

    /// Appends a page's commit record as a `page_committed` line and
    /// returns, once it is fsynced, the receipt the cursor store asks for.
    pub fn record_commit<C: CommitRecord>(&mut self, record: C) -> Result<CommitReceipt, AuditError> {
        let (values, written) = match record.into_fields() {
            Ok(f) => (Ok(f.values), f.written),
            Err(e) => (Err(e), None),
        };
        let appended = self.append_value(COMMIT_EVENT, false, values, written)?;
        Ok(CommitReceipt::written(
            appended.audit_log,
            appended.offset,
            appended.sha256,
        ))
    }

    fn append_event(
        &mut self,
        name: &'static str,
        checkpoint: bool,
        event: &impl Serialize,
    ) -> Result<Appended, AuditError> {
        self.append_value(name, checkpoint, serde_json::to_value(event), None)
    }

    /// Appends an event already made a value, with at most one field
    /// already written as JSON (masked here, like every line).
    fn append_value(
        &mut self,
        name: &'static str,
        checkpoint: bool,
        value: Result<Value, serde_json::Error>,
        mut written: Option<(&'static str, Box<serde_json::value::RawValue>)>,
    ) -> Result<Appended, AuditError> {
        let value = value.and_then(|mut v| {
            if let Some(m) = &self.masker {
                // A written field the masker would change is made a value
                // and masked with the rest (its text tells).
                if let Some((key, json)) = written.take_if(|(_, json)| !m.leaves_alone(json.get())) {
                    let parsed: Value = serde_json::from_str(json.get())?;
                    // An event is an object (refused below otherwise).
                    if let Some(fields) = v.as_object_mut() {
                        fields.insert(key.into(), parsed);
                    }
                }
                m.json(&mut v);
            }
            Ok(v)
        });
        let fields = match value {
            Ok(Value::Object(map)) => map,
            Ok(Value::Null) => serde_json::Map::new(),
            Ok(other) => return Err(self.encode_error(name, format!("got {other}"))),
            Err(e) => return Err(self.encode_error(name, e.to_string())),
        };
        self.file.lock().map_err(io_error(&self.path, "lock"))?;
        let written = written.as_ref().map(|(key, json)| line::Written { key, json });
        let result = self.append_locked(name, fields, checkpoint, written);
        // Closing the descriptor would release the lock too; unlocking
        // explicitly lets other processes in as soon as the fsync is done.
        let unlocked = self.file.unlock().map_err(io_error(&self.path, "unlock"));
        let appended = result?;
        unlocked?;
        Ok(appended)
    }

    fn encode_error(&self, event: &'static str, detail: String) -> AuditError {
        AuditError::Encode {
            path: self.path.clone(),
            error: EncodeError::NotAnObject { event, detail },
        }
    }

    fn append_locked(
        &mut self,
        event: &'static str,
        mut fields: serde_json::Map<String, Value>,
        checkpoint: bool,
        written: Option<line::Written<'_>>,
    ) -> Result<Appended, AuditError> {
        let seq_before = self.next_seq;
        let mut left = self.left.take();
        let inspected =
            tail::inspect(&self.file, left.as_mut()).map_err(io_error(&self.path, "read its last lines"))?;
        let mut problems = Vec::new();
        if self.first {
            problems = self.check_anchors()?;
        }
        let mut buf = String::new();
        let (mut prev, needs_newline) = match &inspected {
            Ok(t) => (t.prev_sha256.clone(), t.needs_newline),
            Err(c) => {
                problems.push(c.detail.clone());
                (c.prev_sha256.clone(), c.needs_newline)
            }
        };
        if needs_newline {
            buf.push('\n');
        }
        if let Ok(tail::Tail { torn: Some(torn), .. }) = &inspected {
            let repair = TailRepaired {
                torn_line_bytes: torn.bytes,
                torn_line_sha256: torn.sha256.clone(),
            };
            prev = self.push_line(&mut buf, TailRepaired::NAME, &repair, &prev)?;
        }
        if !problems.is_empty() {
            if !(self.first && self.repair) {
                return Err(AuditError::Damaged {
                    path: self.path.clone(),
                    problems,
                });
            }
            let repair = AuditRepaired {
                problems,
                tail_sha256: prev.clone(),
                repaired_by: "--repair-audit",
            };
            prev = self.push_line(&mut buf, AuditRepaired::NAME, &repair, &prev)?;
        }
        // A checkpoint signs the chain head: only over lines proven first
        // (those since the last checkpoint, every one sealed with the key).
        // A line chained by someone without the key while this run went on
        // is left unsigned, for the next keyed run to find and refuse.
        if checkpoint && self.key.is_some() && !self.sign(&mut fields, &prev)? {
            tracing::warn!(
                trail = %self.path.display(),
                "a line since the last keyed checkpoint is not sealed with the audit key: this line carries no \
                 checkpoint, and the next run holding the key refuses the trail"
            );
        }
        // A commit line whose page grew it past a few kilobytes carries its
        // growing fields in part lines written before it (`spill.rs`).
        let seq_at = self.next_seq;
        let composed = self.compose_next(event, &fields, written, &prev);
        let long = event == COMMIT_EVENT
            && match &composed {
                Ok((text, _)) => text.len() > super::spill::SPILL_ABOVE,
                Err(e) => e.is_too_long(),
            };
        let (text, mut appended) = match long {
            false => composed?,
            true => {
                self.next_seq = seq_at;
                for part in super::spill::split(&mut fields) {
                    prev = self.push_fields(&mut buf, super::spill::PART_EVENT, part, &prev)?;
                }
                self.compose_next(event, &fields, written, &prev)?
            }
        };
        buf.push_str(&text);
        buf.push('\n');
        let before = self.file.metadata().map_err(io_error(&self.path, "stat"))?.len();
        appended.offset = before + (buf.len() - text.len() - 1) as u64;
        // Every so often the trail's heads follow, in the same write.
        let heads = self.heads_after(
            &text,
            appended.offset,
            &appended.sha256,
            before + buf.len() as u64,
        );
        let heads_at = match heads {
            Ok(Some((line, at))) => {
                buf.push_str(&line);
                buf.push('\n');
                Some(at)
            }
            Ok(None) => None,
            Err(e) => {
                self.next_seq = seq_before;
                return Err(e);
            }
        };
        // One write of whole lines: with O_APPEND the kernel places it at the
        // end even if another writer ignored the lock.
        if let Err(e) = (&self.file).write_all(buf.as_bytes()) {
            // A short write leaves part of a line: taken back the same way.
            let _ = self.file.set_len(before);
            self.next_seq = seq_before;
            return Err(io_error(&self.path, "append")(e));
        }
        if let Err(e) = self.file.sync_data() {
            // A failed fsync means the lines may never reach the disk, and
            // the kernel may already have dropped them: they are taken back
            // (nobody may act on them, not even this run), and the run stops.
            // Never retried into a success that proves nothing.
            let _ = self.file.set_len(before);
            self.next_seq = seq_before;
            return Err(io_error(&self.path, "fsync")(e));
        }
        if heads_at.is_some() {
            self.heads_at = heads_at;
        }
        self.first = false;
        // The next append may trust this end while the file still ends in
        // it; only a plain append (no torn line, no repair) is remembered.
        let end = before + buf.len() as u64;
        let plain = buf.len() == text.len() + 1;
        self.left = match &inspected {
            Ok(tail::Tail {
                linked: Some(tail::Linked::Left),
                ..
            }) if plain => left.map(|mut left| {
                left.advance(&text, &appended.sha256, end);
                left
            }),
            Ok(tail::Tail {
                linked: Some(tail::Linked::Read(chained_to)),
                ..
            }) if plain => Some(tail::LeftEnd::after(chained_to, &text, &appended.sha256, end)),
            _ => None,
        };
        Ok(appended)
    }

    /// The `trail_heads` line to write right after `text` (the line about
    /// to be appended at `offset`, hashing to `sha256`, the write ending
    /// at `end`) when the last lies [`heads::spacing`] bytes or more
    /// before that end; with where it will start and the spacing of the
    /// next. Costs nothing while this writer knows of a recent one.
    fn heads_after(
        &mut self,
        text: &str,
        offset: u64,
        sha256: &str,
        end: u64,
    ) -> Result<Option<(String, heads::Placed)>, AuditError> {
        if self
            .heads_at
            .is_some_and(|(at, every)| end.saturating_sub(at) < every)
        {
            return Ok(None);
        }
        let found = heads::due(&self.path, end, super::commit::commit_key)
            .map_err(io_error(&self.path, "read its heads"))?;
        let mut heads = match found {
            heads::Due::Short => return Ok(None),
            heads::Due::NotYet(at, every) => {
                self.heads_at = Some((at, every));
                return Ok(None);
            }
            heads::Due::Write(heads) => heads,
        };
        if let Some(key) = super::commit::commit_key(text.as_bytes()) {
            heads.insert(key, (offset, sha256.to_string()));
        }
        let mut fields = match serde_json::to_value(heads::TrailHeads::of(&heads)) {
            Ok(Value::Object(fields)) => fields,
            _ => return Err(self.encode_error(heads::HEADS_EVENT, "not an object".into())),
        };
        // A keyed writer proves the lines since the last checkpoint (about
        // one heads line's spacing) and signs the chain head: the next
        // keyed run's proof then stops here. Lines it cannot prove get no
        // checkpoint; the next keyed run finds and refuses them.
        self.sign(&mut fields, sha256)?;
        let (line, _) = self.compose_next(heads::HEADS_EVENT, &fields, None, sha256)?;
        let every = heads::spacing(line.len());
        Ok(Some((line, (end, every))))
    }

    /// Puts a keyed checkpoint over the chain head `prev` into `fields`,
    /// the next line's, when every line of the trail since its last
    /// checkpoint is sealed with the key (read back from the end to that
    /// checkpoint: about one heads line's spacing at most); whether it did.
    /// Without a key, nothing and `false`.
    fn sign(&self, fields: &mut serde_json::Map<String, Value>, prev: &str) -> Result<bool, AuditError> {
        let Some(key) = &self.key else { return Ok(false) };
        let mut walk = super::checkpoint::SealWalk::new(key);
        let proven = super::read::find_backwards(&self.path, |_, bytes| match walk.visit("", bytes) {
            super::checkpoint::Walked::Continue => None,
            super::checkpoint::Walked::Done(verdict) => Some(verdict.is_none()),
        })
        .map_err(io_error(&self.path, "read it"))?
        .unwrap_or(true);
        if proven {
            let mark = key.checkpoint(self.run_id.as_str(), self.next_seq, prev);
            fields.insert(
                "checkpoint".into(),
                serde_json::to_value(mark).unwrap_or(Value::Null),
            );
        }
        Ok(proven)
    }

    /// Composes a line the log writes on its own behalf into `buf`; returns
    /// its hash.
    fn push_line<E: Serialize>(
        &mut self,
        buf: &mut String,
        name: &'static str,
        event: &E,
        prev: &str,
    ) -> Result<String, AuditError> {
        let fields = match serde_json::to_value(event) {
            Ok(Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        self.push_fields(buf, name, fields, prev)
    }

    /// Composes a line of `fields` into `buf`; returns its hash.
    fn push_fields(
        &mut self,
        buf: &mut String,
        name: &'static str,
        fields: serde_json::Map<String, Value>,
        prev: &str,
    ) -> Result<String, AuditError> {
        let (text, appended) = self.compose_next(name, &fields, None, prev)?;
        buf.push_str(&text);
        buf.push('\n');
        Ok(appended.sha256)
    }

    /// Checks every anchor; returns what diverged. The furthest anchor that
    /// matched becomes the base for counting lines.
    fn check_anchors(&mut self) -> Result<Vec<String>, AuditError> {
        let mut problems = Vec::new();
        if let Some(key) = &self.key {
            // A keyed run proves the trail's last checkpoint before it adds
            // to the trail: a chain rewritten and recomputed without the key
            // (its anchor forged to match) is caught here, not only by a
            // later `audit verify --key`.
            if let Some((at, line)) =
                last_checkpoint_line(&self.path).map_err(io_error(&self.path, "read it"))?
            {
                problems.extend(key.last_checkpoint_problem(&line, &format!("at byte {at}")));
            }
            // And every line after that checkpoint is sealed with the key:
            // a line chained to the end by someone without it (a forged
            // commit) is refused here, before this run signs over it.
            if problems.is_empty() {
                let mut walk = super::checkpoint::SealWalk::new(key);
                let trail = self.path.display().to_string();
                let refused = super::read::find_backwards(&self.path, |at, bytes| {
                    match walk.visit(&format!("byte {at} of {trail}"), bytes) {
                        super::checkpoint::Walked::Continue => None,
                        super::checkpoint::Walked::Done(verdict) => Some(verdict),
                    }
                })
                .map_err(io_error(&self.path, "read it"))?;
                match refused {
                    Some(verdict) => problems.extend(verdict),
                    None if walk.never_sealed() && !self.adopt => {
                        return Err(AuditError::NeverSealed {
                            path: self.path.clone(),
                            key_id: key.id().to_string(),
                            lines: walk.lines(),
                        })
                    }
                    None if walk.never_sealed() => self.adopted = Some(walk.lines()),
                    None => {}
                }
            }
        } else if let Some(n) =
            super::checkpoint::first_sealed_line(&self.path).map_err(io_error(&self.path, "read it"))?
        {
            // Any sealed line, not the last: lines chained to a sealed
            // trail's end by someone without the key would hide it.
            return Err(AuditError::KeyNeeded {
                path: self.path.clone(),
                place: format!("line {n}"),
            });
        }
        if let Some(expected) = self.missing_anchor.take() {
            // Looked for again under the trail's lock: a run of another
            // process may have finished (and anchored) since this one opened.
            match ChainHead::load(&expected) {
                Ok(Some(head)) => self
                    .anchors
                    .push((format!("anchor {}", expected.display()), head)),
                Ok(None) => {
                    // A run that finished says in its run_finished line
                    // whether it had just anchored the trail; a trail whose
                    // last such line says so and has no anchor lost it. (A
                    // first run that crashed, or could not write its
                    // anchor, left none to lose.)
                    let mut last_anchored = None;
                    super::read::each_event(&self.path, "run_finished", |n, line| {
                        last_anchored = Some((n, line["anchored"] == true));
                    })
                    .map_err(io_error(&self.path, "read it"))?;
                    if let Some((n, true)) = last_anchored {
                        problems.push(format!(
                            "no anchor at {}, but the run that finished at line {n} anchored the trail there: the \
                             anchor was removed, or the trail belongs to another state directory; a removed \
                             anchor would let a trail cut short or replaced pass unseen",
                            expected.display()
                        ));
                    }
                }
                Err(detail) => problems.push(format!("anchor {}: {detail}", expected.display())),
            }
        }
        for (source, head) in &self.anchors {
            match head.check(&self.file).map_err(io_error(&self.path, "read it"))? {
                Ok(()) => {
                    if self.known.as_ref().is_none_or(|k| k.bytes < head.bytes) {
                        self.known = Some(head.clone());
                    }
                }
                Err(detail) => problems.push(format!("{source}: {detail}")),
            }
        }
        Ok(problems)
    }

    /// Builds the next line of this run and advances `seq`.
    fn compose_next(
        &mut self,
        event: &'static str,
        fields: &serde_json::Map<String, Value>,
        written: Option<line::Written<'_>>,
        prev: &str,
    ) -> Result<(String, Appended), AuditError> {
        let ts = now_rfc3339();
        let text = line::compose_with(
            self.next_seq,
            &ts,
            self.run_id.as_str(),
            event,
            fields,
            written,
            prev,
        )
        .map_err(|e| AuditError::Encode {
            path: self.path.clone(),
            error: e.into(),
        })?;
        let text = match &self.key {
            Some(key) => key.seal(text),
            None => text,
        };
        let appended = Appended {
            seq: self.next_seq,
            offset: 0,
            audit_log: self.canonical.clone(),
            sha256: sha256_hex(text.as_bytes()),
            ts,
        };
        self.next_seq += 1;
        Ok((text, appended))
    }
}

/// The trail's last line a keyed checkpoint may be on (its last
/// `run_finished` line, or a later heads line that carries one), and where
/// it starts. Only lines naming one of those events are parsed.
fn last_checkpoint_line(path: &Path) -> std::io::Result<Option<(u64, Value)>> {
    let events = [&b"\"event\":\"run_finished\""[..], b"\"event\":\"trail_heads\""];
    super::read::find_backwards(path, |start, bytes| {
        if !events.iter().any(|e| memchr::memmem::find(bytes, e).is_some()) {
            return None;
        }
        serde_json::from_slice::<Value>(bytes)
            .ok()
            .filter(super::checkpoint::is_checkpoint_line)
            .map(|value| (start, value))
    })
}

fn io_error(path: &Path, op: &'static str) -> impl FnOnce(std::io::Error) -> AuditError {
    let path = path.to_path_buf();
    move |error| AuditError::Io { path, op, error }
}

/// RFC 3339 UTC with milliseconds, the `ts` of every line.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

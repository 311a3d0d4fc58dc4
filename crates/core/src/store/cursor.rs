//! The cursor: where a stream's next page is. One small JSON file per
//! stream, replaced by rename, so a reader sees the old cursor or the new
//! one, never a mix. With a lookback, the file holds the memory of landed
//! records by its seal, and the journal beside it holds the memory
//! (`journal.rs`), so a commit writes the page's change, not the memory.
//!
//! The cursor file is not fsynced per page: the commit
//! record is the page's fsynced `page_committed` audit line, which carries
//! the whole cursor state, and the file is a cache of it that says which
//! line it reflects (its [`Receipt`]). A run starts by reading the trail
//! from that line on and rolling the cursor forward over any later commit
//! of its stream (`sync::roll_forward`); so a cursor file that lost its last
//! write in a crash is behind, never ahead, and is caught up before a page
//! is fetched. `docs/commit.md` gives the whole transaction.
//!
//! One concept: the cursor and the one way it moves (a page advancing it),
//! with the file that caches it; split, the rules of a move would sit apart
//! from the state they guard.
//!
//! Invariant 2 is kept by types, not by the order of statements:
//!
//! - a [`CursorStore`] can only be made from a held [`RunLock`] (it owns
//!   the lock; dropping the store releases it), so no cursor is written
//!   without the stream's lock; [`CursorFile`] only reads, for
//!   `cursor show`;
//! - a [`Cursor`] has no setters: [`CursorStore::advance`] returns a
//!   [`PendingCursor`], which cannot be persisted by itself;
//! - [`CursorStore::commit`] takes the pending cursor together with the
//!   receipt of its durable `page_committed` audit line ([`CommitReceipt`],
//!   made only by the audit log when it writes that line) and, for a page with records, the receipt of
//!   its landed file ([`LandedPage`], made only by the landing store) for
//!   the same bytes, and checks the stream. `docs/commit.md` gives the
//!   whole transaction.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{LandedPage, LandingStore, RunLock, StoreError};
use crate::audit::{CommitLine, CommitReceipt};
use crate::config::Lookback;
use crate::durable::sync_parent_dir;
use crate::record::identity::RecordKey;
use crate::record::order::{compare_params, earlier};
use crate::record::CursorValue;
use crate::stream::StreamIdentity;
use journal::Journal;
use memory::RecordMemory;
pub(crate) use snapshot::Snapshot;

/// The state-file format this version writes and reads.
const FORMAT: u32 = 1;

/// A cursor's state. `M` is how it holds the lookback memory: whole
/// (the cursor file, the database row), or by its seal (what a
/// `page_committed` line records, `seal.rs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "M: Deserialize<'de>"))]
struct State<M = RecordMemory> {
    format: u32,
    stream: StreamIdentity,
    /// The cursor the current window started from (`None`: from the start).
    window_start: Option<String>,
    /// The next page of the current window, when one is in progress.
    next_page: Option<String>,
    /// A date window's fixed end while the window is in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    window_end: Option<String>,
    /// The largest cursor value seen in the current window so far.
    high_water: Option<CursorValue>,
    pages_in_window: u64,
    records_in_window: u64,
    last_page_sha256: Option<String>,
    updated_at: Option<String>,
    run_id: Option<String>,
    /// The audit line this cursor reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    receipt: Option<Receipt>,
    /// The manifest's length when this cursor was written: a run reads the
    /// manifest from here on only (the pages a replay could meet), never
    /// its whole history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    manifest_bytes: Option<u64>,
    /// With a lookback: the records landed in the span the next window
    /// re-reads (`memory.rs`). Every `page_committed` line records its
    /// seal and the page's change to it (`seal.rs`), so it is proven and
    /// rolled forward like the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lookback: Option<M>,
    /// A collection (`delta.collection`): its last consistent pass, by
    /// hash (`snapshot.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    snapshot: Option<Snapshot>,
}

impl<M> State<M> {
    /// The same state, its lookback memory held as `lookback`.
    fn holding<N>(self, lookback: Option<N>) -> State<N> {
        State {
            format: self.format,
            stream: self.stream,
            window_start: self.window_start,
            next_page: self.next_page,
            window_end: self.window_end,
            high_water: self.high_water,
            pages_in_window: self.pages_in_window,
            records_in_window: self.records_in_window,
            last_page_sha256: self.last_page_sha256,
            updated_at: self.updated_at,
            run_id: self.run_id,
            receipt: self.receipt,
            manifest_bytes: self.manifest_bytes,
            lookback,
            snapshot: self.snapshot,
        }
    }
}

/// Which `page_committed` line a cursor file reflects: the trail's file
/// name, where the line starts in it, and the line's SHA-256. Made only
/// from the audit's own proof of that line ([`CommitReceipt`]). The trail
/// is named, never located: whether a trail holds the line is proven from
/// its bytes ([`Receipt::is_in`]), so state and trail can move apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    audit_log: String,
    offset: u64,
    sha256: String,
}

impl Receipt {
    fn of(line: &CommitReceipt) -> Receipt {
        Receipt {
            audit_log: line
                .audit_log()
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            offset: line.offset(),
            sha256: line.sha256().to_string(),
        }
    }

    /// The trail the line is in, as it was written: its file name (an
    /// older version wrote its absolute path).
    pub fn audit_log(&self) -> &str {
        &self.audit_log
    }

    /// The receipt names its trail by an absolute path (written before
    /// paths were recorded relative); only its line is proven now.
    pub fn names_trail_absolutely(&self) -> bool {
        Path::new(&self.audit_log).is_absolute()
    }

    /// Whether `trail` holds the line this receipt names, byte for byte.
    pub fn is_in(&self, trail: &Path) -> std::io::Result<bool> {
        crate::audit::commit::holds_line(trail, self.offset, &self.sha256)
    }

    /// The byte offset the line starts at.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The line's SHA-256.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
}

/// Where a stream stands. Read-only outside this module.
#[derive(Debug, Clone, PartialEq)]
pub struct Cursor {
    state: State,
}

impl Cursor {
    /// The cursor of `stream` a state database's row holds (`None`: a
    /// stream never synced, starting at `initial_start`), its lookback
    /// memory replayed from the stream's `memory` rows when the row holds
    /// it by its seal; `Err` says why the row is not one.
    pub(crate) fn from_row(
        text: Option<&str>,
        memory: &[String],
        stream: &StreamIdentity,
        initial_start: Option<String>,
    ) -> Result<Cursor, String> {
        let Some(text) = text else {
            return Ok(read::initial(stream, initial_start));
        };
        read::parse(text.as_bytes(), memory, stream)
    }

    /// The cursor of `stream` the `page_committed` line `line` records,
    /// with `memory` the lookback memory replayed up to it (which must
    /// have the line's seal): `--repair-state` of a database's row.
    pub(crate) fn from_line(
        line: &serde_json::Value,
        memory: Option<RecordMemory>,
        stream: &StreamIdentity,
    ) -> Result<Cursor, String> {
        let state = from_line(line, memory)?;
        if &state.stream != stream {
            return Err("it belongs to a different stream".into());
        }
        Ok(Cursor { state })
    }

    /// This cursor as the one the `page_committed` line of `receipt`
    /// records (`--repair-state` of a state database's cursor row).
    pub(crate) fn with_receipt(mut self, receipt: &CommitReceipt) -> Cursor {
        self.state.receipt = Some(Receipt::of(receipt));
        self
    }

    /// The text a state database's cursor row keeps (the file's JSON: its
    /// lookback memory by its seal, the memory in the stream's memory rows).
    pub(crate) fn to_row(&self) -> String {
        serde_json::to_string(&self.file_state()).unwrap_or_default()
    }

    pub fn window_start(&self) -> Option<&str> {
        self.state.window_start.as_deref()
    }

    pub fn next_page(&self) -> Option<&str> {
        self.state.next_page.as_deref()
    }

    /// The fixed end of the date window in progress, if any.
    pub fn window_end(&self) -> Option<&str> {
        self.state.window_end.as_deref()
    }

    pub fn high_water(&self) -> Option<&CursorValue> {
        self.state.high_water.as_ref()
    }

    /// True between the first and last page of a window.
    pub fn in_window(&self) -> bool {
        self.state.next_page.is_some()
    }

    /// The cursor as the audit trail and manifest record it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "window_start": self.state.window_start,
            "next_page": self.state.next_page,
            "high_water": self.state.high_water,
        })
    }

    /// The whole state file, for `cursor show`.
    pub fn to_file_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.state).unwrap_or_default()
    }

    /// The state a `page_committed` line records (`cursor_state`): the
    /// file's content without its receipt, which names that line, and
    /// without its manifest length, its lookback memory sealed.
    pub fn to_state_json(&self) -> serde_json::Value {
        serde_json::to_value(self.line_state()).unwrap_or_default()
    }

    /// [`Self::to_state_json`] written as JSON straight from the state,
    /// with no value between: the same bytes (tested).
    pub(crate) fn to_state_raw(&self) -> Result<Box<serde_json::value::RawValue>, serde_json::Error> {
        serde_json::value::to_raw_value(&self.line_state())
    }

    /// The state as a line records it.
    fn line_state(&self) -> State<Seal> {
        let mut state = self.file_state();
        state.receipt = None;
        state.manifest_bytes = None;
        state
    }

    /// The state as the cursor file holds it: its lookback memory by its
    /// seal, the memory itself in the journal beside it (`journal.rs`).
    fn file_state(&self) -> State<Seal> {
        let s = &self.state;
        State {
            format: s.format,
            stream: s.stream.clone(),
            window_start: s.window_start.clone(),
            next_page: s.next_page.clone(),
            window_end: s.window_end.clone(),
            high_water: s.high_water.clone(),
            pages_in_window: s.pages_in_window,
            records_in_window: s.records_in_window,
            last_page_sha256: s.last_page_sha256.clone(),
            updated_at: s.updated_at.clone(),
            run_id: s.run_id.clone(),
            receipt: s.receipt.clone(),
            manifest_bytes: s.manifest_bytes,
            lookback: s.lookback.as_ref().map(RecordMemory::seal),
            snapshot: s.snapshot.clone(),
        }
    }

    /// The audit line this cursor reflects, if it was written with one.
    pub fn receipt(&self) -> Option<&Receipt> {
        self.state.receipt.as_ref()
    }

    /// The manifest's length when this cursor was written, if recorded.
    pub fn manifest_bytes(&self) -> Option<u64> {
        self.state.manifest_bytes
    }

    /// The identities of landed records a lookback recognises (`None`:
    /// the stream keeps none yet).
    pub fn lookback_memory(&self) -> Option<&RecordMemory> {
        self.state.lookback.as_ref()
    }

    /// A collection's last consistent pass, if one completed.
    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.state.snapshot.as_ref()
    }
}

/// What a power loss may have left of a cursor file ([`CursorStore::torn`]).
#[derive(Debug)]
pub(crate) enum Torn {
    /// Whole, or not this kind of damage.
    No,
    /// Not JSON at all.
    File,
    /// JSON, sealing a lookback memory its journal does not hold: `said`
    /// is the state it holds (as a `page_committed` line records states),
    /// `receipt` the line it names, `why` what the journal lacks. It is
    /// rebuilt only when it agrees with that line (the journal alone lost
    /// writes), or on `--repair-state`.
    Journal {
        said: serde_json::Value,
        receipt: Option<Receipt>,
        why: String,
    },
}

/// One page's effect on the cursor.
#[derive(Debug, Clone)]
pub(crate) struct PageAdvance<'a> {
    /// The next page (path and query), or `None` at the end of the window.
    pub next_page: Option<String>,
    pub high_water: Option<CursorValue>,
    pub records: u64,
    pub sha256: &'a str,
    pub run_id: &'a str,
    /// Where the next window starts after this one's high-water mark, as
    /// the stream's vendor decides it.
    pub restart: crate::record::Restart,
    /// A date window's fixed end (kept while the window is in progress).
    pub window_end: Option<String>,
    /// A date window's next start (the second after its end), used when
    /// this page completes the window instead of the high-water mark.
    pub next_start: Option<String>,
    /// A date window's format: the next window starts where its request
    /// really begins (the day its start falls in, for `date`; a wall-clock
    /// unit back, for `local_*`), and the memory keeps every record from
    /// there (`WindowFormat::aligned_start`).
    pub aligned: Option<&'a crate::config::WindowFormat>,
    /// With a lookback: its policy and the page's records that were not
    /// landed before (the ones this page lands).
    pub lookback: Option<(&'a Lookback, &'a [RecordKey])>,
    /// On an ascending endpoint, records before the high-water mark so far
    /// less the lookback can no longer come in this window nor be re-read
    /// by the next one: the memory forgets them page by page, so it holds
    /// the lookback's span, not the whole window.
    pub forget_early: bool,
    /// A collection's pass that this page completes consistently: the
    /// cursor records it.
    pub snapshot: Option<Snapshot>,
}

/// A cursor advanced past one page, not yet durable. Only
/// [`CursorStore::commit`] makes it the stream's cursor, and only with the
/// receipts of the page's audit line and landed file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PendingCursor {
    cursor: Cursor,
    page_sha256: String,
    records: u64,
    /// What the page changed in the lookback memory (`None`: the cursor
    /// keeps none), for its `page_committed` line.
    change: Option<MemoryChange>,
}

impl PendingCursor {
    /// The cursor after one page past `before`. Pure: nothing is written.
    pub(crate) fn advance(before: &Cursor, page: PageAdvance<'_>) -> Result<PendingCursor, String> {
        let high_water = match (before.state.high_water.clone(), page.high_water) {
            (Some(a), Some(b)) => Some(a.max(b)?),
            (a, b) => a.or(b),
        };
        let mut state = before.state.clone();
        state.receipt = None;
        state.manifest_bytes = None;
        // The page's change to the memory, for its line (`seal.rs`): what
        // it adds, and how many cursor values it holds then; whatever goes
        // after that goes from the oldest.
        let mut change = None;
        if let Some((lookback, landed)) = page.lookback {
            let window_start = state.window_start.clone();
            let memory = state
                .lookback
                .get_or_insert_with(|| RecordMemory::starting_at(window_start));
            for key in landed {
                memory.add(&key.at, key.identity);
            }
            change = Some((MemoryChange::added(landed), memory.values()));
            let forget = page
                .forget_early
                .then_some(high_water.as_ref())
                .flatten()
                .and_then(|hw| earlier(&hw.as_param(), lookback.span.as_secs()));
            if let Some(before) = forget {
                memory.forget_before(&before);
            }
            memory.bound(lookback.max_records as usize);
        } else {
            state.lookback = None;
        }
        state.last_page_sha256 = Some(page.sha256.to_string());
        state.run_id = Some(page.run_id.to_string());
        state.updated_at = Some(crate::audit::now_rfc3339());
        match page.next_page {
            Some(next) => {
                state.next_page = Some(next);
                state.window_end = page.window_end;
                state.high_water = high_water;
                state.pages_in_window += 1;
                state.records_in_window += page.records;
            }
            None => {
                // Window complete: the next one starts at its high-water
                // mark, but never before where this one started: records
                // older than the cursor (out of order, or a vendor's clock
                // set back) must not make the next run pull everything again.
                // With a lookback it starts that much earlier, no earlier
                // than where the memory of landed records is complete.
                let next = page
                    .next_start
                    .or_else(|| page.restart.next_start(high_water.as_ref()));
                let next = match (next, page.lookback, state.lookback.as_ref()) {
                    (Some(start), Some((lookback, _)), Some(memory)) => {
                        let wanted = earlier(&start, lookback.span.as_secs()).unwrap_or(start);
                        Some(memory.next_start(wanted))
                    }
                    (next, _, _) => next,
                };
                let next = match (next, page.aligned) {
                    (Some(start), Some(format)) => Some(format.aligned_start(&start).unwrap_or(start)),
                    (next, _) => next,
                };
                if let Some(start) = next {
                    let backwards = state
                        .window_start
                        .as_deref()
                        .is_some_and(|old| compare_params(&start, old) == std::cmp::Ordering::Less);
                    if !backwards {
                        state.window_start = Some(start);
                    }
                }
                if let (Some(memory), Some(start)) = (state.lookback.as_mut(), state.window_start.as_deref())
                {
                    memory.keep_from(start);
                }
                if let Some(snapshot) = page.snapshot {
                    state.snapshot = Some(snapshot);
                }
                state.next_page = None;
                state.window_end = None;
                state.high_water = None;
                state.pages_in_window = 0;
                state.records_in_window = 0;
            }
        }
        let change = change.map(|(mut change, values): (MemoryChange, usize)| {
            change.dropped = values.saturating_sub(state.lookback.as_ref().map_or(0, RecordMemory::values));
            change
        });
        Ok(PendingCursor {
            cursor: Cursor { state },
            page_sha256: page.sha256.to_string(),
            records: page.records,
            change,
        })
    }

    /// What the page changed in the lookback memory, for its line.
    pub(crate) fn memory_change(&self) -> Option<&MemoryChange> {
        self.change.as_ref()
    }
    /// The cursor of `stream` it becomes with the receipt of its
    /// `page_committed` line and, for a page with records, of its landed
    /// file for the same bytes; `Err` says which proof is missing.
    pub(crate) fn proven(
        self,
        stream: &StreamIdentity,
        audited: &CommitReceipt,
        landed: Option<&LandedPage>,
    ) -> Result<Cursor, String> {
        if &self.cursor.state.stream != stream {
            return Err("the pending cursor belongs to another stream".into());
        }
        match landed {
            Some(l) if l.sha256() != self.page_sha256 => {
                return Err(format!(
                    "the landed file is {}, not the page {} the cursor moves past",
                    l.file(),
                    self.page_sha256
                ))
            }
            None if self.records > 0 => {
                return Err(format!(
                    "the page {} has {} records and no landed file",
                    self.page_sha256, self.records
                ))
            }
            _ => {}
        }
        let mut cursor = self.cursor;
        cursor.state.receipt = Some(Receipt::of(audited));
        Ok(cursor)
    }

    /// The cursor it would become, for the manifest and the audit line.
    pub(crate) fn cursor(&self) -> &Cursor {
        &self.cursor
    }

    /// A dry run moves its cursor in memory only: the cursor it would
    /// have become, never persisted.
    pub(crate) fn dry_run(self) -> Cursor {
        self.cursor
    }
}

/// Reads a stream's cursor file without its lock (`cursor show`): it can
/// load and nothing else.
pub struct CursorFile {
    path: PathBuf,
    stream: StreamIdentity,
}

impl CursorFile {
    pub fn new(state_dir: &Path, stream: &StreamIdentity) -> CursorFile {
        CursorFile {
            path: state_dir.join(format!("{}.cursor.json", super::stream_dir_name(stream))),
            stream: stream.clone(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cursor in the file; a stream never synced starts from the beginning.
    pub fn load(&self) -> Result<Cursor, StoreError> {
        load(&self.path, &self.stream, None, &Journal::beside(&self.path))
    }
}

/// The cursor file of one stream, written only under its run lock.
pub(crate) struct CursorStore {
    /// Held for as long as the store exists: the capability to write.
    _lock: RunLock,
    path: PathBuf,
    stream: StreamIdentity,
    /// Where a stream with no cursor file starts (`backfill --since`).
    initial_start: Option<String>,
    /// The directory exists (created on the first commit).
    dir_ready: std::sync::atomic::AtomicBool,
    /// The lookback memory the cursor file seals (`journal.rs`).
    journal: Journal,
    /// The cursor as this store last read or wrote it (`known.rs`).
    known: KnownCursor,
}

impl CursorStore {
    /// The cursor store of the stream `lock` holds: the only way to one.
    pub(crate) fn new(lock: RunLock) -> CursorStore {
        let (state_dir, stream) = lock.held();
        let path = state_dir.join(format!("{}.cursor.json", super::stream_dir_name(stream)));
        let stream = stream.clone();
        CursorStore {
            _lock: lock,
            journal: Journal::beside(&path),
            path,
            stream,
            initial_start: None,
            dir_ready: Default::default(),
            known: Default::default(),
        }
    }

    /// The stream's landing store under `out_dir`, reachable only through
    /// the run lock this store holds; its manifest is read from the length
    /// the cursor recorded.
    pub(crate) fn open_landing(&self, out_dir: &Path, ext: &'static str) -> Result<LandingStore, StoreError> {
        let from = self.load().ok().and_then(|c| c.manifest_bytes());
        let rel = super::stream_dir_name(&self.stream);
        let dir = crate::no_follow::dirs_below(out_dir, Path::new(&rel))
            .map_err(|e| StoreError::io(&out_dir.join(&rel), "create", e))?;
        LandingStore::open(&dir, rel, ext, from)
    }

    /// A store whose first window starts at `start` instead of the beginning.
    pub(crate) fn starting_at(mut self, start: Option<String>) -> CursorStore {
        self.initial_start = start;
        self
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The journal of the lookback memory the cursor file seals.
    pub(crate) fn journal_path(&self) -> &Path {
        self.journal.path()
    }

    /// The cursor file relative to the state root, as audit lines name it.
    pub(crate) fn recorded_file(&self) -> String {
        format!("{}.cursor.json", super::stream_dir_name(&self.stream))
    }

    /// The stream's cursor; a stream never synced starts from the beginning.
    pub(crate) fn load(&self) -> Result<Cursor, StoreError> {
        if let Some(cursor) = self.known.get() {
            return Ok(cursor);
        }
        let cursor = load(
            &self.path,
            &self.stream,
            self.initial_start.clone(),
            &self.journal,
        )?;
        self.known.set(&cursor);
        Ok(cursor)
    }

    /// Whether the cursor file is what a power loss can leave of writes
    /// that were not fsynced: not JSON at all (empty, or cut short), or
    /// sealing a memory its journal does not hold (behind it). With
    /// `repair`, a journal that is damaged counts too. Any other
    /// unreadable file (a newer format, another stream's) is not torn and
    /// is never replaced.
    pub(crate) fn torn(&self, repair: bool) -> Torn {
        if self.known.is_known() {
            // Read whole, its memory proven by its seal: not torn.
            return Torn::No;
        }
        // A symbolic link is not a torn file: it is refused when loaded.
        let Ok(bytes) = crate::no_follow::read_bytes(&self.path) else {
            return Torn::No;
        };
        let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
            return Torn::File;
        };
        let Ok(LineMemory::Sealed(seal)) = serde_json::from_value(value["lookback"].clone()) else {
            return Torn::No;
        };
        let behind = match self.journal.reaches(&seal) {
            Err(journal::Unresolved::Behind(why)) => why,
            Err(journal::Unresolved::Damaged(why)) if repair => why,
            Ok(()) if repair => match self.journal.memory_sealed(&seal) {
                Err(why) => why.into_detail(),
                Ok(_) => return Torn::No,
            },
            _ => return Torn::No,
        };
        let receipt = serde_json::from_value(value["receipt"].take()).ok();
        if let Some(object) = value.as_object_mut() {
            object.remove("receipt");
            object.remove("manifest_bytes");
        }
        Torn::Journal {
            said: value,
            receipt,
            why: behind,
        }
    }

    /// Makes `pending` the stream's cursor, given the receipt of its
    /// `page_committed` audit line (the commit record) and, for a page with
    /// records, of its landed file; `manifest_bytes` is the manifest's
    /// length now. Returns the committed cursor.
    pub(crate) fn commit(
        &self,
        pending: PendingCursor,
        audited: &CommitReceipt,
        landed: Option<&LandedPage>,
        manifest_bytes: u64,
    ) -> Result<Cursor, StoreError> {
        let change = pending.change.clone();
        let mut cursor =
            pending
                .proven(&self.stream, audited, landed)
                .map_err(|detail| StoreError::Unproven {
                    path: self.path.clone(),
                    detail,
                })?;
        cursor.state.manifest_bytes = Some(manifest_bytes);
        // No fsync: the audit line just fsynced is the commit record.
        self.write(&cursor, false, change.as_ref())?;
        Ok(cursor)
    }

    /// Makes the state a later `page_committed` line of this stream
    /// records (its `cursor_state`) the cursor, durably, with `memory` the
    /// lookback memory rebuilt up to that line ([`memory_after`]): the
    /// start-up roll-forward (`roll_forward.rs`), and nothing else.
    pub(super) fn roll_forward(
        &self,
        line: &CommitLine,
        memory: Option<RecordMemory>,
        manifest_bytes: u64,
    ) -> Result<Cursor, StoreError> {
        let unproven = |detail: String| StoreError::Unproven {
            path: self.path.clone(),
            detail,
        };
        let mut state = from_line(line.line(), memory).map_err(unproven)?;
        if state.stream != self.stream {
            return Err(unproven(
                "the audit line's cursor belongs to another stream".into(),
            ));
        }
        state.receipt = Some(Receipt::of(line.receipt()));
        state.manifest_bytes = Some(manifest_bytes);
        let cursor = Cursor { state };
        self.write(&cursor, true, None)?;
        Ok(cursor)
    }

    /// Replaces the cursor file by rename; with `durable`, fsynced first
    /// and its directory after. Its lookback memory goes to the journal
    /// first (`change`: what the commit changed in it), so a cursor file
    /// never seals a memory its journal has not been given.
    fn write(&self, cursor: &Cursor, durable: bool, change: Option<&MemoryChange>) -> Result<(), StoreError> {
        // Unknown until the write is whole: a failed one is read back.
        self.known.forget();
        self.write_files(cursor, durable, change)?;
        self.known.set(cursor);
        Ok(())
    }

    fn write_files(
        &self,
        cursor: &Cursor,
        durable: bool,
        change: Option<&MemoryChange>,
    ) -> Result<(), StoreError> {
        use std::sync::atomic::Ordering;
        if !self.dir_ready.load(Ordering::Relaxed) {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, "create", e))?;
            }
            self.dir_ready.store(true, Ordering::Relaxed);
        }
        match cursor.lookback_memory() {
            Some(memory) => self
                .journal
                .record(memory, &memory.seal(), change, durable)
                .map_err(|e| StoreError::io(self.journal.path(), "write", e))?,
            None => self.journal.forget(),
        }
        let tmp = self.path.with_extension("json.tmp");
        // Compact, as the trail's `cursor_state` holds it; `cursor show` is
        // the reader's view.
        let mut text =
            serde_json::to_vec(&cursor.file_state()).map_err(|e| StoreError::io(&tmp, "encode", e.into()))?;
        text.push(b'\n');
        let mut file = crate::no_follow::create(&tmp).map_err(|e| StoreError::io(&tmp, "create", e))?;
        file.write_all(&text)
            .map_err(|e| StoreError::io(&tmp, "write", e))?;
        if durable {
            file.sync_all().map_err(|e| StoreError::io(&tmp, "fsync", e))?;
        }
        drop(file);
        std::fs::rename(&tmp, &self.path).map_err(|e| StoreError::io(&self.path, "rename into place", e))?;
        if durable {
            sync_parent_dir(&self.path)
                .map_err(|e| StoreError::io(&self.path, "fsync the directory of", e))?;
        }
        Ok(())
    }
}

/// The state a `page_committed` line records, its lookback memory the
/// one given (rebuilt up to that line, [`memory_after`]): it must have the
/// line's seal. A line of a version before seals holds the memory whole.
fn from_line(line: &serde_json::Value, memory: Option<RecordMemory>) -> Result<State, String> {
    let mut state: State<LineMemory> = serde_json::from_value(line["cursor_state"].clone())
        .map_err(|e| format!("the audit line's cursor_state is not a cursor ({e})"))?;
    let lookback = match (state.lookback.take(), memory) {
        (None, _) => None,
        (Some(LineMemory::Whole(whole)), _) => Some(whole),
        (Some(LineMemory::Sealed(seal)), Some(memory)) if memory.seal() == seal => Some(memory),
        (Some(LineMemory::Sealed(_)), _) => {
            return Err("the lookback memory rebuilt from the trail is not the one the line seals".into())
        }
    };
    let mut state = state.holding(lookback);
    state.receipt = None;
    state.manifest_bytes = None;
    Ok(state)
}

/// The lookback memory after the `page_committed` line `line` of a
/// cursor whose memory was `before` and whose window started at
/// `before_start` (the line's `cursor_before`): the line's change replayed
/// and proven by its seal; a line of a version before seals holds it
/// whole. `Err` names what does not match.
pub(crate) fn memory_after(
    before: Option<&RecordMemory>,
    before_start: Option<&str>,
    line: &serde_json::Value,
) -> Result<Option<RecordMemory>, String> {
    let recorded = &line["cursor_state"]["lookback"];
    if recorded.is_null() {
        return Ok(None);
    }
    let recorded: LineMemory = serde_json::from_value(recorded.clone())
        .map_err(|e| format!("its cursor_state's lookback is neither a memory nor a seal ({e})"))?;
    let seal = match recorded {
        LineMemory::Whole(whole) => return Ok(Some(whole)),
        LineMemory::Sealed(seal) => seal,
    };
    let change: MemoryChange = match &line["lookback_change"] {
        serde_json::Value::Null => MemoryChange::default(),
        change => serde_json::from_value(change.clone())
            .map_err(|e| format!("its lookback_change is not a change of the memory ({e})"))?,
    };
    let base = before
        .cloned()
        .unwrap_or_else(|| RecordMemory::starting_at(before_start.map(str::to_string)));
    base.changed(&change, &seal).map(Some)
}

mod difference;
pub(crate) mod journal;
mod known;
pub(crate) mod memory;
mod read;
pub(crate) mod seal;
mod snapshot;
pub(crate) use difference::differences;
pub(crate) use known::KnownCursor;
use read::load;
use seal::{LineMemory, MemoryChange, Seal};

#[cfg(test)]
mod tests;

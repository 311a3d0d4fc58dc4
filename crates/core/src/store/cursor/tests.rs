//! Unit tests of the cursor store: ordering, and the receipts a commit needs.

use super::*;
use crate::audit::{AuditLog, CommitRecord, RunId};

fn id() -> StreamIdentity {
    StreamIdentity {
        vendor: "v".into(),
        tenant: None,
        study: Some("s".into()),
        protocol_version: None,
        stream: Some("default".into()),
    }
}

fn store(dir: &Path) -> CursorStore {
    CursorStore::new(RunLock::acquire(dir, &id(), "r").unwrap())
}

/// The store of the next run: `held` dropped (its lock released) and the
/// lock taken again, so the files are read anew.
fn next_hold(held: CursorStore, dir: &Path) -> CursorStore {
    drop(held);
    store(dir)
}

fn page(high: &str, sha256: &'static str, records: u64) -> PageAdvance<'static> {
    PageAdvance {
        next_page: None,
        high_water: Some(CursorValue::Text(high.into())),
        records,
        sha256,
        run_id: "r",
        restart: crate::record::Restart::AtHighWater,
        aligned: None,
        window_end: None,
        next_start: None,
        lookback: None,
        forget_early: false,
        snapshot: None,
    }
}

fn window_of(before: &Cursor, high: &str) -> Cursor {
    PendingCursor::advance(before, page(high, "0", 1))
        .unwrap()
        .cursor()
        .clone()
}

#[test]
fn a_window_never_moves_the_cursor_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let first = window_of(&store.load().unwrap(), "2026-06-01T00:00:00Z");
    assert_eq!(first.window_start(), Some("2026-06-01T00:00:00Z"));
    // A page of records dated 1999 (a vendor clock set back).
    let second = window_of(&first, "1999-01-01T00:00:00Z");
    assert_eq!(second.window_start(), Some("2026-06-01T00:00:00Z"));
    // Larger as a string, earlier as an instant (23:59:59Z the day before).
    let third = window_of(&second, "2026-06-01T01:59:59+02:00");
    assert_eq!(third.window_start(), Some("2026-06-01T00:00:00Z"));
    // Smaller as a string ('.' < 'Z'), later as an instant: forward.
    let fourth = window_of(&third, "2026-06-01T00:00:00.500Z");
    assert_eq!(fourth.window_start(), Some("2026-06-01T00:00:00.500Z"));
}

#[derive(serde::Serialize)]
struct Committed {}

impl CommitRecord for Committed {}

/// The receipts the commit asks for: the audit line's, and the landed
/// file's for the same bytes when the page has records.
#[test]
fn a_commit_needs_the_receipts_of_its_page() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let mut log = AuditLog::open(&dir.path().join("audit.jsonl"), RunId::new()).unwrap();
    let audited = log.record_commit(Committed {}).unwrap();
    let landing = store.open_landing(&dir.path().join("out"), "json").unwrap();
    let landed_other = {
        let mut temp = landing.begin("x").unwrap();
        temp.write_all(b"other").unwrap();
        landing.commit(temp, "other-sha").unwrap()
    };
    let start = store.load().unwrap();
    let pending = PendingCursor::advance(&start, page("2026-01-01T00:00:00Z", "page-sha", 3)).unwrap();
    let err = store.commit(pending.clone(), &audited, None, 0).unwrap_err();
    assert!(
        err.to_string().contains("has 3 records and no landed file"),
        "{err}"
    );
    let err = store
        .commit(pending.clone(), &audited, Some(&landed_other), 0)
        .unwrap_err();
    assert!(err.to_string().contains("not the page page-sha"), "{err}");
    assert!(!store.path().exists(), "nothing written without proof");
    // A page without records lands nothing: the audit receipt suffices.
    let empty = PendingCursor::advance(&start, page("2026-01-01T00:00:00Z", "empty-sha", 0)).unwrap();
    let committed = store.commit(empty, &audited, None, 0).unwrap();
    assert_eq!(store.load().unwrap(), committed);
}

#[test]
fn the_store_holds_the_run_lock() {
    let dir = tempfile::tempdir().unwrap();
    let held = store(dir.path());
    assert!(
        RunLock::acquire(dir.path(), &id(), "other").is_err(),
        "a second writer is refused"
    );
    drop(held);
    assert!(
        RunLock::acquire(dir.path(), &id(), "other").is_ok(),
        "released with the store"
    );
}

#[test]
fn a_lookback_starts_the_next_window_that_much_earlier_and_remembers_that_span() {
    use crate::config::Lookback;
    use crate::record::identity::RecordKey;
    let lookback = Lookback {
        span: std::time::Duration::from_secs(60),
        record_id: None,
        max_records: 100,
        identical: crate::config::IdenticalRecords::Same,
    };
    use crate::record::identity::RecordIdentity;
    let (old, recent, newest) = (
        RecordIdentity::test(1),
        RecordIdentity::test(2),
        RecordIdentity::test(3),
    );
    let key = |at: &str, identity: RecordIdentity| RecordKey {
        position: 0,
        identity,
        at: at.into(),
    };
    let landed = [
        key("2026-01-01T00:00:00Z", old),
        key("2026-01-01T00:09:30Z", recent),
        key("2026-01-01T00:10:00Z", newest),
    ];
    let start = read::initial(&id(), Some("2025-12-31T00:00:00Z".into()));
    let mut advance = page("2026-01-01T00:10:00Z", "0", 3);
    advance.lookback = Some((&lookback, &landed));
    let after = PendingCursor::advance(&start, advance).unwrap().cursor().clone();
    assert_eq!(after.window_start(), Some("2026-01-01T00:09:00Z"));
    let memory = after.lookback_memory().unwrap();
    assert_eq!(
        memory.len(),
        2,
        "only the span the next window re-reads is remembered"
    );
    assert!(memory.identities().contains(&recent) && !memory.identities().contains(&old));

    // A re-read with nothing new: the start stays, it never moves back.
    let mut again = page("2026-01-01T00:10:00Z", "1", 0);
    again.lookback = Some((&lookback, &[]));
    let after = PendingCursor::advance(&after, again).unwrap().cursor().clone();
    assert_eq!(after.window_start(), Some("2026-01-01T00:09:00Z"));
    assert_eq!(after.lookback_memory().unwrap().len(), 2);
}

/// The state database's row and the cursor file are written straight from
/// the state, with no `Value` between: the same bytes the `Value` gave
/// (what rows and files written before hold), the lookback memory too.
#[test]
fn a_cursor_is_written_as_its_value_would_be() {
    use crate::config::Lookback;
    use crate::record::identity::{RecordIdentity, RecordKey};
    let lookback = Lookback {
        span: std::time::Duration::from_secs(60),
        record_id: None,
        max_records: 100,
        identical: crate::config::IdenticalRecords::Same,
    };
    let landed: Vec<RecordKey> = (0..5u32)
        .map(|i| RecordKey {
            position: i,
            identity: RecordIdentity::test(u128::from(i) << 100 | 7),
            at: format!("2026-01-01T00:09:{:02}Z", 50 + i),
        })
        .collect();
    let start = read::initial(&id(), Some("2025-12-31T00:00:00Z".into()));
    let mut advance = page("2026-01-01T00:10:00Z", "0", 5);
    advance.lookback = Some((&lookback, &landed));
    let after = PendingCursor::advance(&start, advance).unwrap().cursor().clone();
    assert_eq!(after.lookback_memory().unwrap().len(), 5);
    // The row holds the memory by its seal, as the file does; the memory
    // is in the rows beside it, its first the memory whole.
    let row = after.to_row();
    let mut whole = after.to_file_json();
    let memory = after.lookback_memory().unwrap();
    whole["lookback"] = serde_json::to_value(memory.seal()).unwrap();
    assert_eq!(row, whole.to_string());
    let first = String::from_utf8(journal::base_line(memory, &memory.seal()).unwrap()).unwrap();
    assert_eq!(
        Cursor::from_row(Some(&row), &[first], &id(), None).unwrap(),
        after,
        "read back whole"
    );
    assert!(
        Cursor::from_row(Some(&row), &[], &id(), None)
            .unwrap_err()
            .contains("edc_sync_memory rows"),
        "not without its memory"
    );
}

/// Pages of `per_page` new identities each, committed one after another
/// through `store` with a lookback that keeps a day (so nothing is
/// forgotten): the cursors committed.
fn commit_lookback_pages(store: &CursorStore, dir: &Path, pages: u32, per_page: u32) -> Vec<Cursor> {
    use crate::config::Lookback;
    use crate::record::identity::{RecordIdentity, RecordKey};
    let lookback = Lookback {
        span: std::time::Duration::from_secs(86_400),
        record_id: None,
        max_records: 20_000,
        identical: crate::config::IdenticalRecords::Same,
    };
    let mut log = AuditLog::open(&dir.join("audit.jsonl"), RunId::new()).unwrap();
    let mut cursor = store.load().unwrap();
    let mut committed = Vec::new();
    for p in 0..pages {
        let landed: Vec<RecordKey> = (0..per_page)
            .map(|i| RecordKey {
                position: i,
                identity: RecordIdentity::test(u128::from(p * per_page + i) << 64 | 1),
                at: format!("2026-01-01T{:02}:{:02}:{:02}Z", p / 60 % 24, p % 60, i % 60),
            })
            .collect();
        let mut advance = page("2026-01-01T00:00:00Z", "0", 0);
        advance.next_page = Some(format!("/page/{p}"));
        advance.lookback = Some((&lookback, &landed));
        let pending = PendingCursor::advance(&cursor, advance).unwrap();
        let audited = log.record_commit(Committed {}).unwrap();
        cursor = store.commit(pending, &audited, None, 0).unwrap();
        committed.push(cursor.clone());
    }
    committed
}

/// The bytes this thread has handed to `write` so far (Linux's own
/// accounting): what a commit costs, whatever files it rewrites.
fn written_by_this_thread() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("wchar: "))
        .unwrap()
        .parse()
        .unwrap()
}

/// A commit at a memory of thousands of identities writes the page's
/// change to it, not the memory: the cursor file holds the memory's seal,
/// and the memory's journal beside it grows by the page's identities
/// (rewritten whole only now and then, so a page costs at most twice its
/// change). The memory read back is the one committed.
#[test]
fn a_commit_writes_the_pages_change_to_the_lookback_memory_not_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let committed = commit_lookback_pages(&store, dir.path(), 60, 100);
    let memory = committed.last().unwrap().lookback_memory().unwrap();
    assert_eq!(memory.len(), 6_000);
    let whole = serde_json::to_vec(memory).unwrap().len() as u64;
    let cursor_file = std::fs::metadata(store.path()).unwrap().len();
    assert!(cursor_file < 2_048, "the cursor file is {cursor_file} bytes");
    // Forty more pages: what they write, trail lines and all.
    let before = written_by_this_thread();
    let more = commit_lookback_pages(&store, dir.path(), 40, 100);
    let written = written_by_this_thread() - before;
    assert!(
        written < 3 * whole,
        "40 pages of 100 records wrote {written} bytes, and a memory is {whole}"
    );
    let last = more.last().unwrap();
    let store = next_hold(store, dir.path());
    assert_eq!(&store.load().unwrap(), last, "read back with its memory");
    assert_eq!(
        &CursorFile::new(dir.path(), &id()).load().unwrap(),
        last,
        "cursor show reads it too"
    );
}

/// The journal is not fsynced: a crash can leave it behind its cursor (a
/// lost append, a torn last line), which makes the cursor one to rebuild
/// from the trail, or ahead of it (an append whose cursor never got
/// written), which is passed over. A journal changed afterwards is damage,
/// refused (65) unless the operator asks for the trail's cursor.
#[test]
fn a_journal_behind_its_cursor_needs_a_rebuild_and_a_changed_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = store(dir.path());
    let journal = Journal::beside(store.path());
    let four = commit_lookback_pages(&store, dir.path(), 4, 100);
    let cursor_of_four = std::fs::read(store.path()).unwrap();
    let five = commit_lookback_pages(&store, dir.path(), 1, 100);
    let (cursor_of_five, whole) = (
        std::fs::read(store.path()).unwrap(),
        std::fs::read(journal.path()).unwrap(),
    );
    assert_eq!(store.load().unwrap(), five[0]);

    // Ahead: the fifth page's append reached the disk, its cursor did not.
    std::fs::write(store.path(), &cursor_of_four).unwrap();
    store = next_hold(store, dir.path());
    assert_eq!(
        store.load().unwrap(),
        four[3],
        "the line past the cursor is passed over"
    );
    assert!(matches!(store.torn(false), Torn::No));

    // Behind: the last append lost, or torn half way.
    std::fs::write(store.path(), &cursor_of_five).unwrap();
    store = next_hold(store, dir.path());
    let last_line = whole[..whole.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    for cut in [last_line, last_line + (whole.len() - last_line) / 2] {
        std::fs::write(journal.path(), &whole[..cut]).unwrap();
        store = next_hold(store, dir.path());
        let err = store.load().unwrap_err();
        assert!(!err.is_damage(), "{err}");
        assert!(
            err.to_string().contains("default.memory.jsonl") && err.to_string().contains("holds no memory"),
            "{err}"
        );
        assert!(
            matches!(store.torn(false), Torn::Journal { .. }),
            "rebuilt from the trail"
        );
    }
    std::fs::remove_file(journal.path()).unwrap();
    store = next_hold(store, dir.path());
    assert!(
        matches!(store.torn(false), Torn::Journal { .. }),
        "a journal removed is behind too"
    );

    // Changed: a cursor value of the base moved by a second.
    let text = String::from_utf8(whole.clone()).unwrap();
    let changed = text.replacen("2026-01-01T00:00:00Z", "2026-01-01T00:00:09Z", 1);
    assert_ne!(changed, text);
    std::fs::write(journal.path(), changed).unwrap();
    store = next_hold(store, dir.path());
    let err = store.load().unwrap_err();
    assert!(err.is_damage(), "{err}");
    assert!(
        err.to_string().contains("default.memory.jsonl") && err.to_string().contains("--repair-state"),
        "{err}"
    );
    assert!(matches!(store.torn(false), Torn::No), "not rebuilt by itself");
    assert!(
        matches!(store.torn(true), Torn::Journal { .. }),
        "rebuilt from the trail on --repair-state"
    );

    // A line that is no journal line at all is damage too.
    let mut garbage = whole.clone();
    garbage.extend_from_slice(b"{\"not\":\"a line\"}\n");
    std::fs::write(journal.path(), garbage).unwrap();
    store = next_hold(store, dir.path());
    assert!(store.load().unwrap_err().is_damage());
}

/// A rewrite of the journal keeps the one before: a cursor file that lost
/// the writes since (a crash) still finds the memory it seals there, and
/// is rolled forward from the trail rather than rebuilt.
#[test]
fn a_cursor_from_before_the_journals_last_rewrite_still_finds_its_memory() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = store(dir.path());
    let journal = Journal::beside(store.path());
    let previous = journal.path().with_extension("jsonl.1");
    let mut saved = Vec::new();
    while !previous.exists() {
        assert!(saved.len() < 1_000, "the journal was never rewritten");
        let cursor = commit_lookback_pages(&store, dir.path(), 1, 50).remove(0);
        saved.push((cursor, std::fs::read(store.path()).unwrap()));
    }
    let (before_rewrite, bytes) = &saved[saved.len() - 2];
    std::fs::write(store.path(), bytes).unwrap();
    store = next_hold(store, dir.path());
    assert_eq!(&store.load().unwrap(), before_rewrite);
    assert!(matches!(store.torn(false), Torn::No));
}

/// While it holds the lock the store is the stream's only writer: it reads
/// the cursor file and the journal once, and knows what it wrote since.
/// The next hold of the lock reads them again.
#[test]
fn a_store_reads_its_files_once_a_hold_of_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let held = store(dir.path());
    let committed = commit_lookback_pages(&held, dir.path(), 2, 50).remove(1);
    assert_eq!(held.load().unwrap(), committed, "what it wrote");
    std::fs::write(held.path(), b"{").unwrap();
    std::fs::write(held.journal_path(), b"").unwrap();
    assert_eq!(held.load().unwrap(), committed, "not read again");
    assert!(matches!(held.torn(false), Torn::No));
    drop(held);
    let held = store(dir.path());
    assert!(held.load().is_err(), "read again by the next hold");
    assert!(matches!(held.torn(false), Torn::File));
}

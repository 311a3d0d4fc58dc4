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

fn page(high: &str, sha256: &'static str, records: u64) -> PageAdvance<'static> {
    PageAdvance {
        next_page: None,
        high_water: Some(CursorValue::Text(high.into())),
        records,
        sha256,
        run_id: "r",
        paging: &Paging::LinkHeader,
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
    let row = after.to_row();
    assert_eq!(row, after.to_file_json().to_string());
    assert_eq!(
        Cursor::from_row(Some(&row), &id(), None).unwrap(),
        after,
        "read back whole"
    );
}

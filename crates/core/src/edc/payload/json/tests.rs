use super::*;
use crate::edc::payload::CursorValue;

fn run(doc: &str) -> Result<PageSummary, InvalidPayload> {
    scan(
        doc.as_bytes(),
        "/data",
        Some("/responseDetails/next_page"),
        "modified_date__v",
    )
}

#[test]
fn counts_records_finds_next_and_high_water() {
    let doc = r#"{"responseStatus":"SUCCESS","responseDetails":{"total":3,"next_page":"/api/q?offset=2"},
        "data":[{"id":1,"modified_date__v":"2026-01-02T00:00:00Z","x":{"deep":[1,2]}},
                {"id":2,"modified_date__v":"2026-01-03T00:00:00Z"},{"id":3}]}"#;
    let s = run(doc).unwrap();
    assert_eq!(s.records, 3);
    assert_eq!(s.next_link.as_deref(), Some("/api/q?offset=2"));
    assert_eq!(
        s.high_water,
        Some(CursorValue::Text("2026-01-03T00:00:00Z".into()))
    );
}

#[test]
fn the_last_page_has_no_next() {
    let s = run(r#"{"responseDetails":{"next_page":null},"data":[]}"#).unwrap();
    assert_eq!((s.records, s.next_link, s.high_water), (0, None, None));
    assert_eq!(run(r#"{"data":[]}"#).unwrap().next_link, None);
}

#[test]
fn numeric_cursors_compare_as_numbers() {
    let s = scan(
        r#"{"data":[{"v":9},{"v":10},{"v":2}]}"#.as_bytes(),
        "/data",
        None,
        "v",
    )
    .unwrap();
    assert_eq!(s.high_water, Some(CursorValue::Number(10.into())));
}

#[test]
fn invalid_documents_are_refused() {
    for bad in [
        "",
        "{",
        r#"{"data":[1,2]"#,
        r#"{"data":{}}"#,
        r#"{"nodata":[]}"#,
        r#"{"data":[]} trailing"#,
        r#"{"data":[{"modified_date__v":true}]}"#,
        r#"{"data":[{"modified_date__v":["SUBJ-0042"]}]}"#,
        r#"{"data":[{"modified_date__v":1},{"modified_date__v":"x"}]}"#,
        r#"{"data":[], "responseDetails":{"next_page":5}}"#,
        "[1,2,3]",
    ] {
        let err = run(bad).expect_err(&format!("accepted {bad:?}"));
        assert!(
            !err.detail.contains("SUBJ-0042"),
            "record content in an error: {}",
            err.detail
        );
    }
    let invalid_utf8: &[u8] = b"{\"data\":[{\"modified_date__v\":\"\xff\"}]}";
    assert!(scan(invalid_utf8, "/data", None, "modified_date__v").is_err());
}

#[test]
fn the_vault_envelope_is_read_and_a_failure_needs_no_records() {
    let s = run(r#"{"responseStatus":"FAILURE","errors":[{"type":"INVALID_SESSION_ID","message":"Invalid or expired session ID."}]}"#).unwrap();
    assert!(!s.records_found);
    assert_eq!(s.envelope.status.as_deref(), Some("FAILURE"));
    assert_eq!(s.envelope.errors[0].kind, "INVALID_SESSION_ID");
    let w =
        run(r#"{"responseStatus":"WARNING","warnings":[{"type":"W","message":"m"}],"data":[{}]}"#).unwrap();
    assert_eq!((w.records, w.envelope.warnings.len()), (1, 1));
    // SUCCESS without records is still not a page.
    assert!(run(r#"{"responseStatus":"SUCCESS"}"#).is_err());
}

/// What a lenient parser accepts but a downstream parser may
/// read differently must never be committed.
#[test]
fn duplicate_keys_invalid_utf8_and_lone_surrogates_are_refused() {
    // Records 0 but moves the cursor past two, for a parser keeping the last key.
    let twice = r#"{"data":[{"modified_date__v":"2026-01-01T00:00:01Z"},{"modified_date__v":"2026-01-01T00:00:02Z"}],"data":[]}"#;
    assert!(run(twice).is_err(), "a duplicate top-level key");
    let nested = r#"{"data":[{"id":1,"id":2,"modified_date__v":"2026-01-01T00:00:01Z"}]}"#;
    assert!(run(nested).is_err(), "a duplicate key inside a record");
    let deep = r#"{"responseDetails":{"x":{"a":1,"a":2}},"data":[]}"#;
    assert!(run(deep).is_err(), "a duplicate key in a part nobody reads");
    let bad_utf8: &[u8] = b"{\"note\":\"\xff\xfe\",\"data\":[]}";
    assert!(
        scan(bad_utf8, "/data", None, "modified_date__v").is_err(),
        "invalid UTF-8 in a string nobody reads"
    );
    let surrogate = r#"{"data":[{"id":"\ud800","modified_date__v":"2026-01-01T00:00:01Z"}]}"#;
    assert!(run(surrogate).is_err(), "a lone surrogate");
    // Distinct keys in distinct maps are fine.
    assert!(run(r#"{"a":{"k":1},"b":{"k":1},"data":[{"k":1},{"k":2}]}"#).is_ok());
}

#[test]
fn pointers_with_escapes_and_indices() {
    let s = scan(r#"{"a/b":[{"r":[{"k":1}]}]}"#.as_bytes(), "/a~1b/0/r", None, "k").unwrap();
    assert_eq!(s.records, 1);
}

#[test]
fn a_root_array_of_server_local_times_is_read_in_the_servers_zone() {
    // REDCap's Export Logging: a bare array, newest first, minute stamps
    // without an offset (REDCap's API help, "Export Logging").
    let doc = r#"[{"timestamp":"2026-11-01 01:05","username":"u","action":"Update record 3","details":"a"},
                  {"timestamp":"2026-11-01 01:59","username":"u","action":"Update record 3","details":"a"}]"#;
    let chi = crate::zone::Zone::parse("America/Chicago").unwrap();
    let mut check = JsonCheck::of_kind("", None, "timestamp", CursorKind::ServerLocal).in_zone(&chi);
    check.feed(doc.as_bytes());
    let s = check.finish().unwrap();
    assert_eq!(s.records, 2);
    // 01:05 and 01:59 are both in the repeated hour: their later instants.
    assert_eq!(
        s.high_water,
        Some(CursorValue::Text("2026-11-01T07:59:00Z".into()))
    );
    assert_eq!(
        s.low_water,
        Some(CursorValue::Text("2026-11-01T07:05:00Z".into()))
    );
    let mut bad = JsonCheck::of_kind("", None, "timestamp", CursorKind::ServerLocal).in_zone(&chi);
    bad.feed(br#"[{"timestamp":"2026-11-01T01:05:00Z"}]"#);
    let why = bad.finish().unwrap_err().to_string();
    assert!(
        why.contains("record 1 of the document: the cursor field \"timestamp\" is not a server-local time")
            && !why.contains("01:05"),
        "{why}"
    );
}

//! The page check over the push lexer (`edc-json-lexer`) against the
//! serde_json validator it replaced (`json_oracle.rs`): the same verdict
//! and the same summary on every document, however the body is cut into
//! chunks.

use crate::edc::payload::json::JsonCheck;
use crate::edc::payload::{json_oracle, InvalidPayload, PageSummary};

const RECORDS: &str = "/data";
const NEXT: Option<&str> = Some("/responseDetails/next_page");
const FIELD: &str = "modified_date__v";

fn pushed(doc: &[u8], cuts: &[usize]) -> Result<PageSummary, InvalidPayload> {
    let mut check = JsonCheck::new(RECORDS, NEXT, FIELD);
    let mut from = 0;
    for &cut in cuts {
        check.feed(&doc[from..cut]);
        from = cut;
    }
    check.feed(&doc[from..]);
    check.finish()
}

/// The verdicts agree whole, byte by byte, and cut at every point (short
/// documents) or at a spread of points (long ones).
fn agrees(doc: &[u8]) {
    let oracle = json_oracle::scan(doc, RECORDS, NEXT, FIELD);
    let whole = pushed(doc, &[]);
    let show = String::from_utf8_lossy(doc);
    assert_eq!(
        whole.is_ok(),
        oracle.is_ok(),
        "whole: {show:?}\n push: {whole:?}\n oracle: {oracle:?}"
    );
    if let (Ok(a), Ok(b)) = (&whole, &oracle) {
        assert_eq!(a, b, "{show:?}");
    }
    let bytewise: Vec<usize> = (1..doc.len()).collect();
    assert_eq!(pushed(doc, &bytewise), whole, "byte by byte: {show:?}");
    let step = (doc.len() / 64).max(1);
    for cut in (1..doc.len()).step_by(step) {
        assert_eq!(pushed(doc, &[cut]), whole, "cut at {cut}: {show:?}");
    }
}

fn page(records: &str) -> String {
    format!(r#"{{"responseStatus":"SUCCESS","responseDetails":{{"next_page":"/q?o=2"}},"data":[{records}]}}"#)
}

#[test]
fn strings_escapes_and_utf8_are_judged_as_serde_json_judges_them() {
    let strings: &[&[u8]] = &[
        b"plain",
        b"",
        b"caf\xc3\xa9",
        b"\xe2\x82\xac and \xf0\x9f\x98\x80",
        b"\\u00e9\\n\\t\\\"\\\\\\/\\b\\f\\r",
        b"\\ud83d\\ude00",
        b"\\uD83D\\uDE00",
        b"\\ud800",
        b"\\udc00",
        b"\\ud800\\u0041",
        b"\\ud800\\n",
        b"\\ud800x",
        b"\\x",
        b"\\u12G4",
        b"\\u123",
        b"\x01",
        b"\x1f",
        b"\x7f",
        b"tab\there",
        b"\xff",
        b"\xc0\x80",
        b"\xed\xa0\x80",
        b"\xf5\x80\x80\x80",
        b"\xc3",
        b"\xe2\x82",
        b"a\xc3\xa9\xc3",
    ];
    for s in strings {
        let mut value = b"{\"note\":\"".to_vec();
        value.extend_from_slice(s);
        value.extend_from_slice(b"\",\"data\":[]}");
        agrees(&value);
        let mut key = b"{\"".to_vec();
        key.extend_from_slice(s);
        key.extend_from_slice(b"\":1,\"data\":[]}");
        agrees(&key);
        let mut cursor = b"{\"data\":[{\"modified_date__v\":\"".to_vec();
        cursor.extend_from_slice(s);
        cursor.extend_from_slice(b"\"}]}");
        agrees(&cursor);
    }
}

#[test]
fn numbers_and_literals_are_judged_as_serde_json_judges_them() {
    let values = [
        "0",
        "-0",
        "1",
        "-1",
        "01",
        "-01",
        "1.",
        ".5",
        "1.5",
        "1e5",
        "1E+5",
        "1e-5",
        "1e",
        "1e+",
        "-",
        "+1",
        "1.5e308",
        "1e308",
        "1e309",
        "2e308",
        "-1e400",
        "1e-400",
        "0e99999",
        "1.0e-99999",
        "123456789012345678901234567890",
        "true",
        "false",
        "null",
        "tru",
        "nul",
        "truex",
        "True",
        "nan",
        "Infinity",
        "[]",
        "{}",
        "[1,]",
        "{\"a\":1,}",
        "[1 2]",
        "{\"a\" 1}",
        "{\"a\":}",
        "{,}",
        "[,]",
    ];
    let big = format!("1{}", "0".repeat(308));
    let bigger = format!("1{}", "0".repeat(309));
    let long_fraction = format!("0.{}1", "0".repeat(400));
    for v in values
        .iter()
        .copied()
        .chain([big.as_str(), bigger.as_str(), long_fraction.as_str()])
    {
        agrees(format!(r#"{{"x":{v},"data":[]}}"#).as_bytes());
        agrees(format!(r#"{{"data":[{{"modified_date__v":{v}}}]}}"#).as_bytes());
        agrees(format!(r#"{{"data":[],"responseDetails":{{"next_page":{v}}}}}"#).as_bytes());
        agrees(v.as_bytes());
    }
}

#[test]
fn structure_whitespace_depth_and_trailing_bytes() {
    for doc in [
        "",
        " ",
        "{",
        "}",
        "{\"data\":[]} ",
        " \n\t\r{\"data\":[]}\n",
        "{\"data\":[]}\u{c}",
        "\u{feff}{\"data\":[]}",
        "{\"data\":[]} x",
        "{\"data\":[]}{}",
        "{\"data\":[1,2]",
        "{\"data\":[1]}",
        "{\"data\":[[]]}",
        "{\"data\":{}}",
        "{\"data\":\"x\"}",
        "{\"nodata\":[]}",
        "[1,2,3]",
        "{\"data\":[{}],\"data\":[]}",
        "{\"a\":1,\"\\u0061\":2,\"data\":[]}",
        "{\"data\":[{\"id\":1,\"id\":2}]}",
        "{\"responseDetails\":{\"x\":{\"a\":1,\"a\":2}},\"data\":[]}",
        "{\"a\":{\"k\":1},\"b\":{\"k\":1},\"data\":[{\"k\":1},{\"k\":2}]}",
        "{\"responseStatus\":\"FAILURE\",\"errors\":[{\"type\":\"INVALID_SESSION_ID\",\"message\":\"m\"}]}",
        "{\"responseStatus\":\"WARNING\",\"warnings\":[{\"type\":\"W\",\"message\":\"m\"}],\"data\":[{}]}",
        "{\"responseStatus\":\"SUCCESS\"}",
        "{\"responseStatus\":7,\"errors\":{},\"data\":[]}",
        "{\"responseDetails\":{\"next_page\":null},\"data\":[]}",
        "{\"responseDetails\":{\"next_page\":\"\"},\"data\":[]}",
        "{\"responseDetails\":[],\"data\":[]}",
        "{\"responseDetails\":{\"next_page\":{\"a\":1}},\"data\":[]}",
        "{\"data\":[{\"modified_date__v\":1},{\"modified_date__v\":\"x\"}]}",
        "{\"data\":[{\"modified_date__v\":null}]}",
        "{\"data\":[{\"modified_date__v\":{\"a\":[1]}}]}",
        "{\"data\":[{\"modified_date__v\":9},{\"modified_date__v\":10},{\"modified_date__v\":2}]}",
    ] {
        agrees(doc.as_bytes());
    }
    for depth in [125, 126, 127, 128, 129] {
        let open = "[".repeat(depth);
        let close = "]".repeat(depth);
        agrees(format!("{{\"x\":{open}{close},\"data\":[]}}").as_bytes());
        agrees(format!("{open}{close}").as_bytes());
    }
}

#[test]
fn records_of_one_shape_and_of_many() {
    let same: Vec<String> = (0..50)
        .map(|i| {
            format!(
                r#"{{"id":{i},"site":"S{i}","modified_date__v":"2026-01-01T00:00:{:02}Z"}}"#,
                i % 60
            )
        })
        .collect();
    agrees(page(&same.join(",")).as_bytes());
    let mut varied = same.clone();
    varied[10] = r#"{"site":"x","id":3,"modified_date__v":"2026-02-01T00:00:00Z"}"#.into();
    varied[11] = r#"{"id":1}"#.into();
    varied[12] =
        r#"{"id":1,"site":"y","modified_date__v":"2026-01-01T00:00:00Z","extra":[{"id":1,"id":2}]}"#.into();
    agrees(page(&varied.join(",")).as_bytes());
    varied[12] = r#"{"id":1,"site":"y","site":"z"}"#.into();
    agrees(page(&varied.join(",")).as_bytes());
    let wide: Vec<String> = (0..40).map(|k| format!(r#""k{k}":{k}"#)).collect();
    let mut twice = wide.clone();
    twice.push(r#""k7":0"#.into());
    agrees(page(&format!("{{{}}},{{{}}}", wide.join(","), wide.join(","))).as_bytes());
    agrees(page(&format!("{{{}}},{{{}}}", wide.join(","), twice.join(","))).as_bytes());
    // A record's member is read by comparing its bytes with the key the
    // records before it had there, only where that key is written plainly:
    // a key that came escaped (a quote, a newline, a backslash) is never
    // matched by its decoded bytes written raw, which is no JSON.
    for (escaped, raw) in [(r#"x\"y"#, "x\"y"), (r#"x\ny"#, "x\ny"), (r#"x\\y"#, "x\\y")] {
        let record = |key: &str, second: u32| {
            format!(r#"{{"id":1,"{key}":0,"modified_date__v":"2026-01-01T00:00:{second:02}Z"}}"#)
        };
        let records = [record(escaped, 1), record(escaped, 2), record(raw, 3)];
        agrees(page(&records.join(",")).as_bytes());
        agrees(page(&records[..2].join(",")).as_bytes());
    }
}

#[test]
fn pointers_through_arrays_and_escaped_names() {
    let check = |doc: &str, records: &str, next: Option<&str>| {
        let mut push = JsonCheck::new(records, next, "k");
        push.feed(doc.as_bytes());
        let oracle = json_oracle::scan(doc.as_bytes(), records, next, "k");
        assert_eq!(push.finish(), oracle, "{doc} at {records}");
    };
    check(r#"{"a/b":[{"r":[{"k":1}]}]}"#, "/a~1b/0/r", None);
    check(
        r#"{"a/b":[{"r":[{"k":1}]},{"r":[{"k":2},{"k":3}]}]}"#,
        "/a~1b/1/r",
        None,
    );
    check(r#"{"a":[{"r":[]}]}"#, "/a/01/r", None);
    check(r#"{"m~n":{"r":[{"k":"2026-01-01T00:00:00Z"}]}}"#, "/m~0n/r", None);
    check(r#"[{"k":1},{"k":2}]"#, "", None);
    check(r#"{"d":[{"k":1}],"p":{"n":"/next"}}"#, "/d", Some("/p/n"));
    check(r#"{"d":[{"k":1}],"p":[{"n":"/next"}]}"#, "/d", Some("/p/0/n"));
}

/// A value the page is read for is bounded in memory; anything else may
/// be as large as the body.
#[test]
fn a_read_value_over_the_capture_limit_is_refused_but_skipped_ones_are_not() {
    let long = "x".repeat(edc_json_lexer::CAPTURE_MAX + 10);
    let skipped = format!(r#"{{"note":"{long}","data":[{{"other":"{long}"}}]}}"#);
    assert!(pushed(skipped.as_bytes(), &[]).is_ok());
    let read = format!(r#"{{"data":[{{"modified_date__v":"{long}"}}]}}"#);
    let err = pushed(read.as_bytes(), &[1000, 500_000]).unwrap_err();
    assert!(err.detail.contains("larger than 1024 KiB"), "{err}");
    let key = format!(r#"{{"{long}":1,"data":[]}}"#);
    let err = pushed(key.as_bytes(), &[]).unwrap_err();
    assert!(err.detail.contains("key longer than"), "{err}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    /// Random edits of a real page: same verdict and summary as the oracle.
    #[test]
    fn edited_pages_get_the_oracles_verdict(
        edits in proptest::collection::vec((0usize..10_000, proptest::prelude::any::<u8>(), 0u8..3), 1..4),
        cuts in proptest::collection::vec(0usize..10_000, 0..6),
    ) {
        let records: Vec<String> = (0..6)
            .map(|i| format!(r#"{{"id":"\u00e9{i}","n":-1.5e3,"ok":true,"v":null,"modified_date__v":"2026-01-0{}T00:00:00Z","t":[1,{{"a":"b"}}]}}"#, i + 1))
            .collect();
        let mut doc = page(&records.join(",")).into_bytes();
        for (at, byte, how) in edits {
            let at = at % (doc.len() + 1);
            match how {
                0 if at < doc.len() => doc[at] = byte,
                1 if at < doc.len() => { doc.remove(at); }
                _ => doc.insert(at, byte),
            }
        }
        let oracle = json_oracle::scan(&doc[..], RECORDS, NEXT, FIELD);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (doc.len() + 1)).collect();
        cuts.sort_unstable();
        let push = pushed(&doc, &cuts);
        proptest::prop_assert_eq!(push.is_ok(), oracle.is_ok(), "{:?}\n{:?}\n{:?}", String::from_utf8_lossy(&doc), push, oracle);
        if let (Ok(a), Ok(b)) = (push, oracle) {
            proptest::prop_assert_eq!(a, b);
        }
    }
}

/// A cursor value is read without a parser only when it is ASCII without
/// escapes; escaped or non-ASCII ones reach the marks as serde_json reads
/// them.
#[test]
fn cursor_values_escaped_or_not_ascii_are_read_as_serde_json_reads_them() {
    let sets = [
        [
            "2026-01-01T00:00:01Z",
            r"2026-01-01T00:00:0\u0039Z",
            "2026-01-01T00:00:03Z",
        ],
        ["é", "a", r"\u00e9z"],
        [r"a\\b", "a", "ab"],
    ];
    for values in sets {
        let records: Vec<String> = values
            .iter()
            .map(|v| format!(r#"{{"id":1,"modified_date__v":"{v}"}}"#))
            .collect();
        agrees(page(&records.join(",")).as_bytes());
    }
}

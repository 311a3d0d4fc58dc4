//! Property tests of the parsers that face the outside world: they never
//! panic on arbitrary input, and they agree with generated valid input.
//! The suite runs a few hundred cases each; `scripts/properties-long` runs
//! many more (PROPTEST_CASES).

use std::path::Path;
use std::time::{Duration, SystemTime};

use edc_core::config::DateWindow;
use edc_core::edc::next_target;
use edc_core::edc::payload::{scan_json, scan_odm, CursorValue};
use edc_core::edc::{tokens, Token, VqlSelect};
use edc_core::sync::window::{after, plan, Plan};
use proptest::prelude::*;
use quota_pacer::retry_after::{self, RetryAfterSource};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn word(w: &str) -> Token {
    Token::Word(w.to_string())
}

proptest! {
    #![proptest_config(config())]

    /// Whatever a cursor holds (vendor data ends up there), the query keeps
    /// the policy's structure: one literal holding exactly the value.
    #[test]
    fn no_cursor_value_changes_a_vql_query(cursor in any::<String>(), size in 1u32..1000) {
        let template = "SELECT id, modified_date__v FROM subject__v WHERE modified_date__v > {cursor} ORDER BY modified_date__v ASC";
        match VqlSelect::new(template, &cursor, size) {
            Ok(q) => {
                let expected = vec![
                    word("SELECT"), word("id,"), word("modified_date__v"), word("FROM"), word("subject__v"),
                    word("WHERE"), word("modified_date__v"), word(">"), Token::Literal(cursor.clone()),
                    word("ORDER"), word("BY"), word("modified_date__v"), word("ASC"), word("PAGESIZE"),
                    word(&size.to_string()),
                ];
                prop_assert_eq!(tokens(q.as_str()).unwrap(), expected);
            }
            Err(_) => prop_assert!(cursor.chars().any(char::is_control)),
        }
    }

    /// Consecutive runs of a date-window delta tile time: each window starts
    /// the second after the last one ended, none overlaps, none is skipped.
    #[test]
    fn date_windows_tile_time_without_gap_or_overlap(
        first in 1_700_000_000u64..1_800_000_000,
        steps in proptest::collection::vec(prop_oneof![0u64..200_000, 2_500_000u64..3_500_000], 1..12),
        lag in 0u64..600,
    ) {
        let window = DateWindow {
            end_param: "end_date".into(),
            max_age: Some(Duration::from_secs(30 * 86_400)),
            settle_lag: Duration::from_secs(lag),
            format: Default::default(),
        };
        let mut now = std::time::UNIX_EPOCH + Duration::from_secs(first);
        let mut start: Option<String> = None;
        let mut last_end: Option<String> = None;
        for step in steps {
            now += Duration::from_secs(step);
            match plan(&window, start.as_deref(), None, now).unwrap() {
                Plan::Fetch { start: s, end } => {
                    let s = s.unwrap();
                    prop_assert!(s <= end, "{} > {}", s, end);
                    if let Some(prev) = &last_end {
                        prop_assert_eq!(&s, &after(prev).unwrap(), "gap or overlap");
                    }
                    start = Some(after(&end).unwrap());
                    last_end = Some(end);
                }
                Plan::UpToDate { next_start, end } => {
                    prop_assert!(next_start > end);
                }
                Plan::TooOld { .. } => {
                    // Only when a run came more than the maximum age (less the
                    // settle lag) after the last window's end.
                    prop_assert!(last_end.is_some());
                    prop_assert!(step + lag + 1 > 30 * 86_400, "too old after a step of {} s", step);
                    break;
                }
            }
        }
    }

    #[test]
    fn retry_after_never_panics(values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..3)) {
        let slices: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let r = retry_after::parse(&slices, SystemTime::now(), Duration::from_secs(7));
        if values.is_empty() {
            prop_assert_eq!(r.source, RetryAfterSource::Absent);
        }
        prop_assert!(r.raw.as_ref().is_none_or(|raw| raw.chars().count() <= 64));
    }

    #[test]
    fn delta_seconds_are_exact(secs in 0u64..10_000_000, pad in 0usize..3) {
        let text = format!("{}{secs}{}", " ".repeat(pad), " ".repeat(pad));
        let r = retry_after::parse(&[text.as_bytes()], SystemTime::now(), Duration::from_secs(7));
        prop_assert_eq!((r.source, r.wait), (RetryAfterSource::Seconds, Duration::from_secs(secs)));
    }

    #[test]
    fn http_dates_round_trip(offset in 0u64..86_400 * 3650) {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let text = httpdate::fmt_http_date(now + Duration::from_secs(offset));
        let r = retry_after::parse(&[text.as_bytes()], now, Duration::from_secs(7));
        prop_assert_eq!((r.source, r.wait), (RetryAfterSource::Date, Duration::from_secs(offset)));
    }

    #[test]
    fn link_parser_never_panics(value in ".{0,120}") {
        let _ = next_target(&[value.as_str()]);
    }

    #[test]
    fn generated_next_links_are_found(path in "/[a-z0-9/_.-]{0,30}(\\?[a-z]{1,5}=[0-9]{1,5}(&[a-z]{1,5}=[0-9]{1,5}){0,3})?",
                                      other in "/[a-z]{1,10}") {
        let value = format!("<{other}>; rel=\"prev\", <{path}>; rel=\"next\"; title=\"x, y\"");
        prop_assert_eq!(next_target(&[value.as_str()]).unwrap(), Some(path));
    }

    #[test]
    fn config_loader_never_panics(text in "(?s).{0,400}") {
        let _ = edc_core::config::parse(Path::new("fuzz.yaml"), &text);
    }

    #[test]
    fn config_loader_never_panics_on_yaml_shaped_input(
        keys in proptest::collection::vec("[a-z_]{1,25}", 1..8),
        values in proptest::collection::vec(prop_oneof!["-?[0-9]{1,25}(\\.[0-9]{1,5})?", "[a-z{}:/ ]{0,20}", Just("[1, 2]".to_string()), Just("{a: 1}".to_string())], 1..8),
    ) {
        let mut text = String::from("v:\n");
        for (k, v) in keys.iter().zip(values.iter()) {
            text.push_str(&format!("  {k}: {v}\n"));
        }
        let _ = edc_core::config::parse(Path::new("fuzz.yaml"), &text);
    }

    #[test]
    fn json_validator_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = scan_json(&bytes[..], "/data", Some("/responseDetails/next_page"), "t");
    }

    #[test]
    fn json_validator_counts_generated_pages(stamps in proptest::collection::vec(0u32..1_000_000, 0..40), next in proptest::option::of("/[a-z]{1,10}")) {
        let records: Vec<String> = stamps.iter().map(|s| format!(r#"{{"id":{s},"t":"{s:07}","x":[1,{{"y":null}}]}}"#)).collect();
        let next_json = next.as_ref().map_or("null".to_string(), |n| format!("\"{n}\""));
        let doc = format!(r#"{{"responseDetails":{{"next_page":{next_json}}},"data":[{}]}}"#, records.join(","));
        let s = scan_json(doc.as_bytes(), "/data", Some("/responseDetails/next_page"), "t").unwrap();
        prop_assert_eq!(s.records, stamps.len() as u64);
        prop_assert_eq!(s.next_link, next);
        prop_assert_eq!(s.high_water, stamps.iter().max().map(|m| CursorValue::Text(format!("{m:07}"))));
    }

    #[test]
    fn odm_validator_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = scan_odm(&bytes[..]);
    }

    #[test]
    fn odm_validator_counts_generated_audit_records(ids in proptest::collection::vec(1u64..1_000_000, 0..30)) {
        let mut doc = String::from(r#"<?xml version="1.0"?><ODM ODMVersion="1.3" FileType="Transactional" xmlns="http://www.cdisc.org/ns/odm/v1.3" xmlns:mdsol="http://www.mdsol.com/ns/odm/metadata"><ClinicalData StudyOID="S">"#);
        for id in &ids {
            doc.push_str(&format!("<SubjectData SubjectKey=\"k\"><AuditRecord><DateTimeStamp>2026-01-01T00:00:00</DateTimeStamp><SourceID>{id}</SourceID></AuditRecord></SubjectData>"));
        }
        doc.push_str("</ClinicalData></ODM>");
        let s = scan_odm(doc.as_bytes()).unwrap();
        prop_assert_eq!(s.audit_records, ids.len() as u64);
        prop_assert_eq!(s.max_source_id, ids.iter().max().copied());
    }
}

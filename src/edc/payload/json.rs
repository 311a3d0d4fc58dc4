//! Streaming JSON validation: walks the document with serde, materialising
//! only the values at the configured pointers (the records array's cursor
//! fields and the next-page link); everything else is skipped unread.

use std::fmt;
use std::io::Read;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::order::Mark;
use super::strict_json::{Keys, Strict, StrictValue};
use super::{CursorValue, Envelope, InvalidPayload, PageSummary, VendorMessage};

/// Splits an RFC 6901 pointer into unescaped tokens.
fn tokens(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

struct Targets {
    records: Vec<String>,
    next: Option<Vec<String>>,
    cursor_field: String,
}

#[derive(Default)]
struct Found {
    records: Option<u64>,
    next: Option<Option<String>>,
    high_water: Option<Mark>,
    low_water: Option<Mark>,
    error: Option<String>,
    envelope: Envelope,
}

/// Validates a JSON page and summarises it.
pub fn scan(
    reader: impl Read,
    records_pointer: &str,
    next_pointer: Option<&str>,
    cursor_field: &str,
) -> Result<PageSummary, InvalidPayload> {
    let targets = Targets {
        records: tokens(records_pointer),
        next: next_pointer.map(tokens),
        cursor_field: cursor_field.to_string(),
    };
    let mut found = Found::default();
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(64 * 1024, reader));
    let seed = Node {
        path: Vec::new(),
        targets: &targets,
        found: &mut found,
    };
    seed.deserialize(&mut de)
        .map_err(|e| InvalidPayload::json(e.to_string()))?;
    de.end().map_err(|e| InvalidPayload::json(e.to_string()))?;
    if let Some(error) = found.error {
        return Err(InvalidPayload::json(error));
    }
    // A vendor's failure document has no records array; whether that is
    // an error or a vendor error is for the dialect to say (`payload::validate`).
    if found.records.is_none() && !found.envelope.reports_failure() {
        return Err(InvalidPayload::json(format!(
            "no records array at {records_pointer}"
        )));
    }
    Ok(PageSummary {
        records: found.records.unwrap_or(0),
        records_found: found.records.is_some(),
        next_link: found.next.flatten().filter(|s| !s.is_empty()),
        high_water: found.high_water.map(Mark::into_value),
        low_water: found.low_water.map(Mark::into_value),
        envelope: found.envelope,
    })
}

/// The top-level members in which Vault says how a request went (Vault
/// REST API reference, "Errors": `responseStatus`, `errors[{type,
/// message}]`; WARNING responses carry `warnings` the same way).
fn envelope_member(path: &[String]) -> Option<&str> {
    match path {
        [one] if matches!(one.as_str(), "responseStatus" | "errors" | "warnings") => Some(one.as_str()),
        _ => None,
    }
}

/// The envelope of a small error document (an HTTP 4xx/5xx body, already
/// capped in size); `None` when it is not a JSON object.
pub fn envelope_of(bytes: &[u8]) -> Option<Envelope> {
    let serde_json::Value::Object(mut map) = serde_json::from_slice(bytes).ok()? else {
        return None;
    };
    Some(Envelope {
        status: map
            .get("responseStatus")
            .and_then(serde_json::Value::as_str)
            .map(|s| s.chars().take(32).collect()),
        errors: map.remove("errors").map(messages).unwrap_or_default(),
        warnings: map.remove("warnings").map(messages).unwrap_or_default(),
        ..Envelope::default()
    })
}

/// Vendor messages are short; longer ones are cut, never quoted whole.
const MESSAGE_MAX: usize = 200;

fn messages(value: serde_json::Value) -> Vec<VendorMessage> {
    let serde_json::Value::Array(items) = value else {
        return Vec::new();
    };
    items
        .into_iter()
        .take(20)
        .map(|item| {
            let text = |k: &str| {
                item.get(k)
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .chars()
                    .take(MESSAGE_MAX)
                    .collect::<String>()
            };
            VendorMessage {
                kind: text("type"),
                message: text("message"),
            }
        })
        .collect()
}

/// A value at `path`.
struct Node<'a> {
    path: Vec<String>,
    targets: &'a Targets,
    found: &'a mut Found,
}

impl Node<'_> {
    fn is_prefix_of_a_target(&self) -> bool {
        let under = |t: &Vec<String>| t.len() > self.path.len() && t[..self.path.len()] == self.path[..];
        under(&self.targets.records) || self.targets.next.as_ref().is_some_and(under)
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.path == self.targets.records {
            let count = d.deserialize_seq(Records {
                field: &self.targets.cursor_field,
                found: self.found,
            })?;
            self.found.records = Some(count);
            Ok(())
        } else if self.targets.next.as_ref() == Some(&self.path) {
            let next: Option<String> = de::Deserialize::deserialize(d)
                .map_err(|_| de::Error::custom("the next-page value must be a string or null"))?;
            self.found.next = Some(next);
            Ok(())
        } else if let Some(member) = envelope_member(&self.path) {
            let value = d.deserialize_any(StrictValue)?;
            match member {
                "responseStatus" => {
                    self.found.envelope.status = value.as_str().map(|s| s.chars().take(32).collect())
                }
                "errors" => self.found.envelope.errors = messages(value),
                _ => self.found.envelope.warnings = messages(value),
            }
            Ok(())
        } else if self.is_prefix_of_a_target() {
            d.deserialize_any(self)
        } else {
            d.deserialize_any(Strict)
        }
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an object or array on the way to a configured pointer")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys = Keys::default();
        while let Some(key) = map.next_key::<String>()? {
            keys.insert::<A::Error>(&key)?;
            let mut path = self.path.clone();
            path.push(key);
            map.next_value_seed(Node {
                path,
                targets: self.targets,
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0usize;
        loop {
            let mut path = self.path.clone();
            path.push(index.to_string());
            if seq
                .next_element_seed(Node {
                    path,
                    targets: self.targets,
                    found: &mut *self.found,
                })?
                .is_none()
            {
                return Ok(());
            }
            index += 1;
        }
    }

    // A scalar where an object was expected: the pointer simply does not
    // exist in this document, which `scan` reports afterwards.
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// The records array: counts elements and tracks the largest cursor field.
struct Records<'a> {
    field: &'a str,
    found: &'a mut Found,
}

impl<'de> Visitor<'de> for Records<'_> {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "the records array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u64, A::Error> {
        let mut count = 0;
        while let Some(value) = seq.next_element_seed(Record { field: self.field })? {
            count += 1;
            if let Some(v) = value {
                // One parse per record; a clone only when a mark moves.
                let mark = Mark::new(v);
                let lower = match &self.found.low_water {
                    None => true,
                    Some(lw) => mark.compare(lw).map_err(de::Error::custom)? == std::cmp::Ordering::Less,
                };
                if lower {
                    self.found.low_water = Some(mark.clone());
                }
                let higher = match &self.found.high_water {
                    None => true,
                    Some(hw) => mark.compare(hw).map_err(de::Error::custom)? == std::cmp::Ordering::Greater,
                };
                if higher {
                    self.found.high_water = Some(mark);
                }
            }
        }
        Ok(count)
    }
}

/// One record: an object whose cursor field (if present) is kept.
struct Record<'a> {
    field: &'a str,
}

impl<'de> DeserializeSeed<'de> for Record<'_> {
    type Value = Option<CursorValue>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Record<'_> {
    type Value = Option<CursorValue>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a record object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut value = None;
        let mut keys = Keys::default();
        while let Some(key) = map.next_key::<String>()? {
            keys.insert::<A::Error>(&key)?;
            if key == self.field {
                let v = map.next_value_seed(StrictValue)?;
                value = Some(match v {
                    serde_json::Value::Number(n) => CursorValue::Number(n),
                    serde_json::Value::String(s) => CursorValue::Text(s),
                    // The kind, never the value: error messages reach the
                    // audit trail, and record content must not.
                    other => {
                        let kind = match other {
                            serde_json::Value::Null => "null",
                            serde_json::Value::Bool(_) => "a boolean",
                            serde_json::Value::Array(_) => "an array",
                            _ => "an object",
                        };
                        return Err(de::Error::custom(format!(
                            "cursor field {:?} must be a string or a number, got {kind}",
                            self.field
                        )));
                    }
                });
            } else {
                map.next_value_seed(Strict)?;
            }
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let w = run(r#"{"responseStatus":"WARNING","warnings":[{"type":"W","message":"m"}],"data":[{}]}"#)
            .unwrap();
        assert_eq!((w.records, w.envelope.warnings.len()), (1, 1));
        // SUCCESS without records is still not a page.
        assert!(run(r#"{"responseStatus":"SUCCESS"}"#).is_err());
    }

    /// Issue 12: what a lenient parser accepts but a downstream parser may
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
}

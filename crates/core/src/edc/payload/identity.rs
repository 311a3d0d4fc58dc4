//! Which records of a page are which: the identity a lookback recognises a
//! record by when a later window reads it again.
//!
//! A record's identity is the SHA-256 of its `record_id` field together
//! with its cursor value (so a record modified again, with a new cursor
//! value, is a new version to land), or, when the policy names no
//! `record_id`, of the record's whole content as canonical JSON (compact,
//! the vendor's key order: whitespace does not matter, any changed value
//! does). Only the first 128 bits are kept: the state then holds no
//! record content, and two different records share an identity with a
//! probability of about 1e-30 within a lookback span.
//!
//! The page was checked in one streaming pass already
//! (`payload::PageCheck`); this second pass runs only for a delta with a
//! lookback, after the body is whole, reading the landed temp file as a
//! stream (one record in memory at a time).

use serde::de::Deserialize;
use sha2::{Digest, Sha256};

use super::InvalidPayload;

/// One record of a page: where it is, what it is, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordKey {
    /// Its position in the page's records array, from 0.
    pub position: u32,
    /// 32 lowercase hex digits.
    pub identity: String,
    /// Its cursor value, as a query parameter would carry it.
    pub at: String,
}

/// The keys of every record of a JSON page, in page order, read from
/// `page` as a stream: one record is in memory at a time, however large
/// the page.
pub fn record_keys<R: std::io::Read>(
    page: R,
    records_pointer: &str,
    cursor_field: &str,
    record_id: Option<&str>,
) -> Result<Vec<RecordKey>, InvalidPayload> {
    let path: Vec<String> = super::json::tokens(records_pointer);
    let mut keys = Keys {
        cursor_field,
        record_id,
        out: Vec::new(),
        problem: None,
        found: false,
    };
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(page));
    let walked = serde::de::DeserializeSeed::deserialize(
        Walk {
            path: &path,
            keys: &mut keys,
        },
        &mut de,
    );
    if let Some(problem) = keys.problem.take() {
        return Err(InvalidPayload::json(problem));
    }
    walked.map_err(|e| InvalidPayload::json(format!("the page does not parse a second time ({e})")))?;
    if !keys.found {
        return Err(InvalidPayload::json(format!(
            "no records array at {records_pointer}"
        )));
    }
    Ok(keys.out)
}

/// The keys of the records (`SubjectData` elements) of an ODM page, read
/// as a stream: each identity is the SHA-256 of the element's markup and
/// text as the server wrote them; `at` is the same for all (the page's
/// `CreationDateTime`, a study dataset's mark).
pub fn odm_record_keys<R: std::io::Read>(page: R, at: &str) -> Result<Vec<RecordKey>, InvalidPayload> {
    use quick_xml::events::Event;
    let text = super::xml_text::XmlText::new(page)
        .map_err(|e| InvalidPayload::odm(format!("not well-formed XML: {e}")))?;
    let mut reader = quick_xml::Reader::from_reader(std::io::BufReader::new(text));
    let mut buf = Vec::new();
    let mut keys = Vec::new();
    // Inside a SubjectData: its depth below it, and the hash so far.
    let mut open: Option<(usize, Sha256)> = None;
    loop {
        let event = reader
            .read_event_into(&mut buf)
            .map_err(|e| InvalidPayload::odm(format!("the page does not parse a second time ({e})")))?;
        let (kind, bytes): (u8, &[u8]) = match &event {
            Event::Eof => break,
            Event::Start(e) => {
                if open.is_none() && e.local_name().as_ref() == b"SubjectData" {
                    open = Some((0, Sha256::new()));
                } else if let Some((depth, _)) = open.as_mut() {
                    *depth += 1;
                }
                (b'<', e.as_ref())
            }
            Event::Empty(e) => (b'/', e.as_ref()),
            Event::End(e) => {
                let closing = matches!(open, Some((0, _)));
                if let Some((depth, hash)) = open.as_mut() {
                    hash.update(b">");
                    hash.update(e.as_ref());
                    *depth = depth.saturating_sub(1);
                }
                if closing {
                    if let Some((_, hash)) = open.take() {
                        keys.push(RecordKey {
                            position: u32::try_from(keys.len()).unwrap_or(u32::MAX),
                            identity: hex::encode(&hash.finalize()[..16]),
                            at: at.to_string(),
                        });
                    }
                }
                buf.clear();
                continue;
            }
            Event::Text(t) => (b't', t.as_ref()),
            Event::CData(t) => (b'c', t.as_ref()),
            _ => (0, &[][..]),
        };
        if let (Some((_, hash)), true) = (open.as_mut(), kind != 0) {
            hash.update([kind]);
            hash.update(bytes);
        }
        buf.clear();
    }
    Ok(keys)
}

/// What the walk collects, and the first record that has no key.
struct Keys<'a> {
    cursor_field: &'a str,
    record_id: Option<&'a str>,
    out: Vec<RecordKey>,
    problem: Option<String>,
    found: bool,
}

impl Keys<'_> {
    fn push(&mut self, i: usize, record: &serde_json::Value) {
        if self.problem.is_some() {
            return;
        }
        match key_of(i, record, self.cursor_field, self.record_id) {
            Ok(k) => self.out.push(k),
            Err(e) => self.problem = Some(e),
        }
    }
}

fn key_of(
    i: usize,
    record: &serde_json::Value,
    cursor_field: &str,
    record_id: Option<&str>,
) -> Result<RecordKey, String> {
    let at = match record.get(cursor_field) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => return Err(format!("record {i} has no cursor field {cursor_field:?}")),
    };
    let mut hash = Sha256::new();
    match record_id {
        Some(field) => {
            let id = record
                .get(field)
                .filter(|v| !v.is_null())
                .ok_or_else(|| format!("record {i} has no {field:?} (delta.lookback.record_id)"))?;
            hash.update(b"record_id\0");
            hash.update(id.to_string().as_bytes());
            hash.update(b"\0");
            hash.update(at.as_bytes());
        }
        None => {
            hash.update(b"content\0");
            hash.update(record.to_string().as_bytes());
        }
    }
    Ok(RecordKey {
        position: u32::try_from(i).unwrap_or(u32::MAX),
        identity: hex::encode(&hash.finalize()[..16]),
        at,
    })
}

/// Walks down the records pointer, skipping every other value unread
/// into memory, and hands each record of the array it names to [`Keys`].
struct Walk<'p, 'k, 'a> {
    path: &'p [String],
    keys: &'k mut Keys<'a>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Walk<'_, '_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Walk<'_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON page")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Walk { path, keys } = self;
        while let Some(name) = map.next_key::<String>()? {
            match path.split_first() {
                Some((first, rest)) if *first == name => map.next_value_seed(Walk {
                    path: rest,
                    keys: &mut *keys,
                })?,
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Walk { path, keys } = self;
        match path.split_first() {
            // The records array: one record at a time.
            None => {
                keys.found = true;
                let mut i = 0;
                while let Some(record) = seq.next_element::<serde_json::Value>()? {
                    keys.push(i, &record);
                    i += 1;
                }
            }
            Some((first, rest)) => {
                let wanted = first.parse::<usize>().ok();
                let mut i = 0;
                while seq
                    .next_element_seed(Elem {
                        walk: (Some(i) == wanted).then_some(Walk {
                            path: rest,
                            keys: &mut *keys,
                        }),
                    })?
                    .is_some()
                {
                    i += 1;
                }
            }
        }
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
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
}

/// An array element on the way: walked into when it is on the pointer,
/// skipped otherwise.
struct Elem<'p, 'k, 'a> {
    walk: Option<Walk<'p, 'k, 'a>>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Elem<'_, '_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match self.walk {
            Some(walk) => walk.deserialize(d),
            None => serde::de::IgnoredAny::deserialize(d).map(|_| ()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_the_id_with_its_cursor_value_or_the_content() {
        let page = br#"{"data":[{"id":"A","t":"2026-01-01T00:00:00Z","v":1},
                                {"id":"A","t":"2026-01-01T00:00:09Z","v":2},
                                {"id": "A","t":"2026-01-01T00:00:00Z","v":1}]}"#;
        let by_id = record_keys(&page[..], "/data", "t", Some("id")).unwrap();
        assert_eq!(by_id.len(), 3);
        assert_ne!(
            by_id[0].identity, by_id[1].identity,
            "a new version of A is a new record"
        );
        assert_eq!(by_id[0].identity, by_id[2].identity);
        assert_eq!(by_id[1].at, "2026-01-01T00:00:09Z");
        assert_eq!(by_id[2].position, 2);
        let by_content = record_keys(&page[..], "/data", "t", None).unwrap();
        assert_eq!(
            by_content[0].identity, by_content[2].identity,
            "whitespace is not content"
        );
        assert_ne!(by_content[0].identity, by_id[0].identity);
        assert_eq!(by_content[0].identity.len(), 32);
    }

    #[test]
    fn an_odm_records_identity_is_its_markup() {
        let page = br#"<?xml version="1.0"?><ODM><ClinicalData><SubjectData SubjectKey="1"><FormData FormOID="F"><ItemData ItemOID="I" Value="a"/></FormData></SubjectData><SubjectData SubjectKey="2"><FormData FormOID="F"/></SubjectData><SubjectData SubjectKey="1"><FormData FormOID="F"><ItemData ItemOID="I" Value="a"/></FormData></SubjectData><SubjectData SubjectKey="1"><FormData FormOID="F"><ItemData ItemOID="I" Value="b"/></FormData></SubjectData></ClinicalData></ODM>"#;
        let keys = odm_record_keys(&page[..], "2026-12-04T03:10:05Z").unwrap();
        assert_eq!(keys.len(), 4);
        assert_eq!(keys[0].identity, keys[2].identity);
        assert_ne!(keys[0].identity, keys[1].identity);
        assert_ne!(
            keys[0].identity, keys[3].identity,
            "a changed value is a new record"
        );
        assert_eq!(
            (keys[3].position, keys[3].at.as_str()),
            (3, "2026-12-04T03:10:05Z")
        );
    }

    #[test]
    fn a_record_without_its_id_is_named() {
        let page = br#"{"data":[{"t":"2026-01-01T00:00:00Z"}]}"#;
        let err = record_keys(&page[..], "/data", "t", Some("id")).unwrap_err();
        assert!(err.detail.contains("record 0 has no \"id\""), "{err}");
        let nested = br#"{"a":[1,{"b":{"skip":[1,2,{"x":3}],"data":[{"t":"2026-01-01T00:00:00Z"}]}}]}"#;
        assert_eq!(
            record_keys(&nested[..], "/a/1/b/data", "t", None).unwrap().len(),
            1
        );
        let missing = record_keys(&nested[..], "/a/0/data", "t", None).unwrap_err();
        assert!(missing.detail.contains("no records array"), "{missing}");
    }
}

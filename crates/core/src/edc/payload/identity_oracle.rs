//! The record identities as they were computed before the page's first
//! pass learned them: the landed page read again through serde_json, each
//! record made a `serde_json::Value` and written back compact. Kept, for
//! tests only, as the oracle the first pass (`identity.rs`, fed by the
//! push lexer) is compared with: the identities a cursor's lookback memory
//! holds must not change from one version to the next, or a re-read span
//! would land its records again.

use serde::de::Deserialize;
use sha2::{Digest, Sha256};

use super::InvalidPayload;
use crate::record::identity::RecordKey;

/// The keys of every record of a JSON page, in page order, read from
/// `page` as a stream: one record is in memory at a time, however large
/// the page.
pub(super) fn record_keys<R: std::io::Read>(
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
        // The rule as first written: the hex of the first 16 bytes.
        identity: hex::encode(&hash.finalize()[..16])
            .parse()
            .expect("32 hex digits"),
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

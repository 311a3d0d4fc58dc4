//! The page validator as it was before the push lexer: serde_json
//! walking the document, strings decoded, keys checked with a set. Kept,
//! for tests only, as the oracle the push lexer (`json.rs`) is compared
//! with on every document the tests and the property tests generate.

use std::fmt;
use std::io::Read;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::json::{envelope_member, messages, not_a_cursor, tokens, Found};
use super::{InvalidPayload, PageSummary};
use crate::record::order::Mark;
use crate::record::CursorValue;
use edc_json_lexer::oracle::{Keys, Strict, StrictValue};

struct Targets {
    records: Vec<String>,
    next: Option<Vec<String>>,
    cursor_field: String,
}

/// Validates a JSON page read from `reader` and summarises it.
pub(super) fn scan(
    reader: impl Read,
    records_pointer: &str,
    next_pointer: Option<&str>,
    cursor_field: &str,
) -> Result<PageSummary, InvalidPayload> {
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(64 * 1024, reader));
    scan_with(&mut de, records_pointer, next_pointer, cursor_field)
}

fn scan_with<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
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
    let seed = Node {
        path: Vec::new(),
        targets: &targets,
        found: &mut found,
    };
    seed.deserialize(&mut *de)
        .map_err(|e| InvalidPayload::json(e.to_string()))?;
    de.end().map_err(|e| InvalidPayload::json(e.to_string()))?;
    found.into_summary(records_pointer)
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
                    other => return Err(de::Error::custom(not_a_cursor(self.field, &other))),
                });
            } else {
                map.next_value_seed(Strict)?;
            }
        }
        Ok(value)
    }
}

#[cfg(test)]
mod pushed;

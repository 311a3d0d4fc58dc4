//! The oracle the lexer is held to: serde_json, read strictly. Every
//! string decoded (invalid UTF-8 and lone surrogates are errors, where
//! skipping would let them through) and every object's keys unique
//! (parsers disagree on which duplicate wins). For tests only (this
//! crate's, and the page check's in `edc-core`, with the `oracle` feature).

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// The keys of one object: a key twice is an error, because parsers
/// disagree on which value wins (`{"data":[...],"data":[]}` reads as no
/// records to one and as records to another).
#[derive(Default)]
pub struct Keys(HashSet<String>);

impl Keys {
    pub fn insert<E: de::Error>(&mut self, key: &str) -> Result<(), E> {
        if self.0.insert(key.to_string()) {
            Ok(())
        } else {
            Err(E::custom(format!("the key {key:?} appears twice in one object")))
        }
    }
}

/// Walks a value nobody reads, strictly: every string is decoded (so
/// invalid UTF-8 and lone surrogates are errors, where skipping would let
/// them through) and every object's keys are unique.
pub struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(Strict)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys = Keys::default();
        while let Some(key) = map.next_key::<String>()? {
            keys.insert::<A::Error>(&key)?;
            map.next_value_seed(Strict)?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Strict)?.is_some() {}
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
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// [`Strict`], keeping the value (for the few members that are read whole).
pub struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = serde_json::Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<serde_json::Value, D::Error> {
        d.deserialize_any(StrictValue)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut keys = Keys::default();
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            keys.insert::<A::Error>(&key)?;
            let value = map.next_value_seed(StrictValue)?;
            out.insert(key, value);
        }
        Ok(serde_json::Value::Object(out))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(StrictValue)? {
            out.push(v);
        }
        Ok(serde_json::Value::Array(out))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, serde_json::Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
}

/// serde_json's verdict on a whole document, read strictly: what the lexer
/// must say of it.
pub fn verdict(doc: &[u8]) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_slice(doc);
    Strict.deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())
}

/// The document as serde_json reads it strictly, every object's keys in
/// their order.
pub fn value(doc: &[u8]) -> Result<serde_json::Value, String> {
    let mut de = serde_json::Deserializer::from_slice(doc);
    let v = StrictValue.deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(v)
}

/// The handler a bare verdict is taken with: it validates and reports
/// nothing.
pub struct Skip;

impl crate::Handler for Skip {
    fn begin(&mut self, _: crate::Kind) -> Result<crate::Want, String> {
        Ok(crate::Want::Skip)
    }
    fn key(&mut self, _: &[u8]) -> Result<(), String> {
        Ok(())
    }
    fn end(&mut self) -> Result<(), String> {
        Ok(())
    }
    fn captured(&mut self, _: &[u8], _: Option<&str>) -> Result<(), String> {
        Ok(())
    }
    fn kept(&mut self, _: &[u8]) -> Result<(), String> {
        Ok(())
    }
}

//! The audit line format, in one place (`docs/audit-trail.md` is its prose).
//!
//! A line is one compact JSON object: `seq`, `ts`, `run_id`, `event`, then
//! the event's own fields in their declared order, then `prev_sha256`, the
//! lowercase hex SHA-256 of the previous line's bytes (without its newline),
//! and, when the run holds the audit key, `line_mac`, its seal
//! (`checkpoint.rs`).

use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Keys every line carries, which an event's fields may not reuse.
pub(crate) const RESERVED: [&str; 6] = ["seq", "ts", "run_id", "event", "prev_sha256", "line_mac"];
/// The keys a line starts with, in order.
pub(crate) const LEADING: [&str; 4] = ["seq", "ts", "run_id", "event"];
/// The key a line ends with.
pub(crate) const TRAILING: &str = "prev_sha256";
/// The key a sealed line ends with, after [`TRAILING`] (`checkpoint.rs`).
pub const LINE_MAC: &str = "line_mac";

/// Why a line cannot be composed: a programming error, caught before
/// anything is written.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    /// A field name clashes with one of the line's own keys.
    #[error("event {event} has a field named {field:?}, which is reserved for the line itself")]
    Reserved { event: &'static str, field: String },
    /// The serialiser refused the fields (a `Map` of JSON values never
    /// is refused; said rather than assumed).
    #[error("event {event} does not serialise: {detail}")]
    Unserialisable { event: &'static str, detail: String },
    /// The line would be longer than any reader of the trail takes: what
    /// grows with a page is carried by part lines (`spill.rs`), so only a
    /// field this tool did not expect to grow can get here.
    #[error(
        "a {event} line of {bytes} bytes would be longer than the {MAX_LINE} bytes a trail line may be; nothing \
         was written"
    )]
    TooLong { event: &'static str, bytes: usize },
}

/// The longest line a trail may hold: the writer never writes a longer one
/// (a commit's growing fields go to part lines, `spill.rs`), and every
/// reader (the end an append chains to, the backward walks, `audit
/// verify`) takes lines up to it and names a longer one as what it is.
pub(crate) const MAX_LINE: usize = 4 * 1024 * 1024;

/// Builds the bytes of one line (without the newline).
pub fn compose(
    seq: u64,
    ts: &str,
    run_id: &str,
    event: &'static str,
    fields: Map<String, Value>,
    prev_sha256: &str,
) -> Result<String, ComposeError> {
    compose_with(seq, ts, run_id, event, &fields, None, prev_sha256)
}

/// A field whose JSON is already written: a page's cursor state, whose
/// lookback memory (thousands of identities) is serialised once from the
/// cursor rather than made a value, copied into the line and freed. Its
/// key keeps a placeholder in the fields, so the line's order is theirs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Written<'a> {
    pub key: &'a str,
    pub json: &'a RawValue,
}

/// [`compose`], with `written` in its key's place: the bytes serde_json
/// gives the same line with that JSON parsed into the field (tested).
pub(crate) fn compose_with(
    seq: u64,
    ts: &str,
    run_id: &str,
    event: &'static str,
    fields: &Map<String, Value>,
    written: Option<Written<'_>>,
    prev_sha256: &str,
) -> Result<String, ComposeError> {
    if let Some(k) = fields.keys().find(|k| RESERVED.contains(&k.as_str())) {
        return Err(ComposeError::Reserved {
            event,
            field: k.clone(),
        });
    }
    if let Some(w) = written.as_ref().filter(|w| !fields.contains_key(w.key)) {
        return Err(ComposeError::Unserialisable {
            event,
            detail: format!("the written field {:?} has no place among the fields", w.key),
        });
    }
    let unserialisable = |e: serde_json::Error| ComposeError::Unserialisable {
        event,
        detail: e.to_string(),
    };
    let size = 256 + written.as_ref().map_or(0, |w| w.json.get().len());
    let mut out = Vec::with_capacity(size);
    let entry = |out: &mut Vec<u8>, key: &str, value: &Value| -> Result<(), serde_json::Error> {
        out.push(if out.is_empty() { b'{' } else { b',' });
        serde_json::to_writer(&mut *out, key)?;
        out.push(b':');
        match &written {
            Some(w) if w.key == key => out.extend_from_slice(w.json.get().as_bytes()),
            _ => serde_json::to_writer(&mut *out, value)?,
        }
        Ok(())
    };
    let own = [
        ("seq", Value::from(seq)),
        ("ts", Value::from(ts)),
        ("run_id", Value::from(run_id)),
        ("event", Value::from(event)),
    ];
    for (key, value) in &own {
        entry(&mut out, key, value).map_err(unserialisable)?;
    }
    for (key, value) in fields {
        entry(&mut out, key, value).map_err(unserialisable)?;
    }
    entry(&mut out, TRAILING, &Value::from(prev_sha256)).map_err(unserialisable)?;
    out.push(b'}');
    // With its seal, a line is about 100 bytes longer.
    if out.len() + 128 > MAX_LINE {
        return Err(ComposeError::TooLong {
            event,
            bytes: out.len(),
        });
    }
    // serde_json wrote only UTF-8, and the written field is a `str`.
    String::from_utf8(out).map_err(|e| ComposeError::Unserialisable {
        event,
        detail: e.to_string(),
    })
}

/// The parts of a line the verifier checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub seq: u64,
    pub run_id: String,
    pub event: String,
    pub prev_sha256: String,
    /// For `audit_tail_repaired`: the hash of the torn line it acknowledges.
    pub acknowledges: Option<String>,
    /// A keyed checkpoint (`run_finished` with an audit key).
    pub checkpoint: Option<Value>,
    /// The line's `stream` and `landing_dir` when both are strings, and
    /// whether it says `dry_run: true`: what a commit line commits to
    /// (`commit.rs` decides which lines are commits).
    pub stream: Option<String>,
    pub landing_dir: Option<String>,
    pub dry_run: bool,
}

/// Parses and shape-checks one line; the error says what is wrong.
///
/// Only the line's own fields are made values; an event's fields (a
/// page's cursor state holds a lookback's identities: kilobytes) are
/// checked as JSON and skipped, since every append reads the trail's last
/// line back through here.
pub(crate) fn parse(bytes: &[u8]) -> Result<Parsed, String> {
    own_fields(bytes)?.checked()
}

/// The fields [`parse`] reads; every other value is skipped.
const OWN: [&str; 10] = [
    "seq",
    "ts",
    "run_id",
    "event",
    "prev_sha256",
    "torn_line_sha256",
    "checkpoint",
    "stream",
    "landing_dir",
    "dry_run",
];

/// A line's keys in order (a key given twice keeps its first place and
/// its last value, as a JSON object read into a map does) and its own
/// fields' values.
struct OwnFields {
    keys: Vec<String>,
    values: Vec<(&'static str, Value)>,
}

impl OwnFields {
    /// The line's shape, checked: its keys in the published order, its
    /// own fields of the right kinds.
    fn checked(&self) -> Result<Parsed, String> {
        let keys: Vec<&str> = self.keys.iter().map(String::as_str).collect();
        // A sealed line ends with its seal, after `prev_sha256`.
        let keys = match keys.split_last() {
            Some((&LINE_MAC, rest)) => rest,
            _ => &keys[..],
        };
        if keys.len() < LEADING.len() + 1
            || keys[..LEADING.len()] != LEADING
            || keys.last() != Some(&TRAILING)
        {
            return Err(format!(
                "keys out of the published order (must start with {}, end with {TRAILING}, then {} when sealed)",
                LEADING.join(", "),
                LINE_MAC
            ));
        }
        let get = |k: &str| self.values.iter().find(|(name, _)| *name == k).map(|(_, v)| v);
        let seq = get("seq")
            .and_then(Value::as_u64)
            .filter(|s| *s >= 1)
            .ok_or("seq is not an integer >= 1")?;
        let text = |k: &str| {
            get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or(format!("{k} is not a string"))
        };
        let (run_id, event, prev_sha256) = (text("run_id")?, text("event")?, text(TRAILING)?);
        text("ts")?;
        if prev_sha256.len() != 64
            || !prev_sha256
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err("prev_sha256 is not 64 lowercase hex digits".into());
        }
        let acknowledges = get("torn_line_sha256")
            .and_then(Value::as_str)
            .map(str::to_string);
        let checkpoint = get("checkpoint").cloned();
        let string = |k: &str| get(k).and_then(Value::as_str).map(str::to_string);
        Ok(Parsed {
            seq,
            run_id,
            event,
            prev_sha256,
            acknowledges,
            checkpoint,
            stream: string("stream"),
            landing_dir: string("landing_dir"),
            dry_run: get("dry_run") == Some(&Value::Bool(true)),
        })
    }
}

fn own_fields(bytes: &[u8]) -> Result<OwnFields, String> {
    let invalid = |e: serde_json::Error| format!("not valid JSON ({e})");
    // Strings are skipped unread below: their UTF-8 is checked here.
    let text = std::str::from_utf8(bytes).map_err(|_| match serde_json::from_slice::<Value>(bytes) {
        Err(e) => invalid(e),
        Ok(_) => "not valid UTF-8".to_string(),
    })?;
    if !text.trim_start().starts_with('{') {
        return match serde_json::from_str::<Value>(text) {
            Err(e) => Err(invalid(e)),
            Ok(_) => Err("not a JSON object".into()),
        };
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let own = serde::Deserializer::deserialize_map(&mut de, OwnVisitor).map_err(invalid)?;
    de.end().map_err(invalid)?;
    Ok(own)
}

struct OwnVisitor;

impl<'de> serde::de::Visitor<'de> for OwnVisitor {
    type Value = OwnFields;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<OwnFields, A::Error> {
        let mut own = OwnFields {
            keys: Vec::new(),
            values: Vec::new(),
        };
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match OWN.iter().find(|k| **k == key) {
                Some(&name) => {
                    let value = map.next_value::<Value>()?;
                    own.values.retain(|(n, _)| *n != name);
                    own.values.push((name, value));
                }
                None => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
            if !own.keys.iter().any(|k| *k == key) {
                own.keys.push(key.into_owned());
            }
        }
        Ok(own)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields of a line read whole into a value, as lines were read
    /// before the event's fields were skipped: the oracle [`own_fields`]
    /// is held to (both then go through the same shape checks).
    fn parse_by_value(bytes: &[u8]) -> Result<Parsed, String> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON ({e})"))?;
        let Value::Object(obj) = value else {
            return Err("not a JSON object".into());
        };
        OwnFields {
            keys: obj.keys().cloned().collect(),
            values: OWN
                .iter()
                .filter_map(|name| obj.get(*name).map(|v| (*name, v.clone())))
                .collect(),
        }
        .checked()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]

        /// Edited lines get the same verdict and the same parts as when
        /// the whole line was read into a value.
        #[test]
        fn skipping_the_events_fields_changes_no_verdict(
            edits in proptest::collection::vec((0usize..400, proptest::prelude::any::<u8>(), 0u8..3), 0..3),
        ) {
            let mut f = Map::new();
            f.insert("cursor_state".into(), serde_json::json!({"seen": [["2026-01-01T00:00:00Z", ["ab", "c\u{e9}\n"]]], "n": 1.5}));
            f.insert("torn_line_sha256".into(), "x".into());
            f.insert("checkpoint".into(), serde_json::json!({"mac": "00"}));
            let line = compose(7, "2026-12-02T17:00:00.000Z", "r1", "page_committed", f, ZERO_SHA256).unwrap();
            let mut bytes = line.into_bytes();
            for (at, byte, how) in edits {
                let at = at % (bytes.len() + 1);
                match how {
                    0 if at < bytes.len() => bytes[at] = byte,
                    1 if at < bytes.len() => { bytes.remove(at); }
                    _ => bytes.insert(at, byte),
                }
            }
            let (new, old) = (parse(&bytes), parse_by_value(&bytes));
            proptest::prop_assert_eq!(new.is_ok(), old.is_ok(), "{:?}: {:?} / {:?}", String::from_utf8_lossy(&bytes), new, old);
            if let (Ok(a), Ok(b)) = (new, old) {
                proptest::prop_assert_eq!(a, b);
            }
        }
    }
    use crate::digest::ZERO_SHA256;

    #[test]
    fn composes_in_the_published_order() {
        let mut f = Map::new();
        f.insert("zeta".into(), 1.into());
        f.insert("alpha".into(), "a".into());
        let line = compose(1, "2026-12-02T17:00:00.000Z", "r1", "run_started", f, ZERO_SHA256).unwrap();
        assert_eq!(
            line,
            format!(
                "{{\"seq\":1,\"ts\":\"2026-12-02T17:00:00.000Z\",\"run_id\":\"r1\",\"event\":\"run_started\",\
                 \"zeta\":1,\"alpha\":\"a\",\"prev_sha256\":\"{ZERO_SHA256}\"}}"
            )
        );
        let parsed = parse(line.as_bytes()).unwrap();
        assert_eq!((parsed.seq, parsed.event.as_str()), (1, "run_started"));
    }

    /// The bytes are those of the value's `Display`, which every line
    /// written before was: escapes, non-ASCII text, floats and nesting.
    #[test]
    fn a_line_is_the_bytes_its_value_displays_as() {
        let mut f = Map::new();
        f.insert("text".into(), "tab\t quote\" back\\ \u{1} é 𝄞 </script>".into());
        f.insert(
            "n".into(),
            serde_json::json!([1.5, -0.0, 1e300, 12345678901234567890u64, -7, null, true]),
        );
        f.insert(
            "cursor_state".into(),
            serde_json::json!({"z": {"a": []}, "a": [{}]}),
        );
        let line = compose(3, "t", "r", "x", f.clone(), ZERO_SHA256).unwrap();
        let mut whole = Map::new();
        whole.insert("seq".into(), 3.into());
        whole.insert("ts".into(), "t".into());
        whole.insert("run_id".into(), "r".into());
        whole.insert("event".into(), "x".into());
        whole.extend(f);
        whole.insert("prev_sha256".into(), ZERO_SHA256.into());
        assert_eq!(line, Value::Object(whole).to_string());
    }

    /// A written field without its placeholder among the fields would be
    /// dropped from the line: refused instead.
    #[test]
    fn a_written_field_without_its_place_is_refused() {
        let json = RawValue::from_string("{\"a\":1}".into()).unwrap();
        let mut f = Map::new();
        f.insert("other".into(), 1.into());
        let written = Some(Written {
            key: "cursor_state",
            json: &json,
        });
        assert!(compose_with(1, "t", "r", "x", &f, written, ZERO_SHA256).is_err());
        f.insert("cursor_state".into(), Value::Null);
        let written = Some(Written {
            key: "cursor_state",
            json: &json,
        });
        let line = compose_with(1, "t", "r", "x", &f, written, ZERO_SHA256).unwrap();
        assert!(line.contains(r#""cursor_state":{"a":1}"#), "{line}");
    }

    #[test]
    fn reserved_fields_are_refused() {
        let mut f = Map::new();
        f.insert("seq".into(), 9.into());
        assert!(compose(1, "t", "r", "x", f, ZERO_SHA256).is_err());
    }

    #[test]
    fn shape_errors_are_named() {
        assert!(parse(b"{\"ts\":1}").unwrap_err().contains("order"));
        assert!(parse(b"[1]").unwrap_err().contains("object"));
        assert!(
            parse(b"{\"seq\":0,\"ts\":\"t\",\"run_id\":\"r\",\"event\":\"e\",\"prev_sha256\":\"x\"}")
                .unwrap_err()
                .contains("seq")
        );
    }
}

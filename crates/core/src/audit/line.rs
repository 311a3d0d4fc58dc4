//! The audit line format, in one place (`docs/audit-trail.md` is its prose).
//!
//! A line is one compact JSON object: `seq`, `ts`, `run_id`, `event`, then
//! the event's own fields in their declared order, then `prev_sha256`, the
//! lowercase hex SHA-256 of the previous line's bytes (without its newline).

use serde_json::{Map, Value};

/// Keys every line carries, which an event's fields may not reuse.
pub const RESERVED: [&str; 5] = ["seq", "ts", "run_id", "event", "prev_sha256"];
/// The keys a line starts with, in order.
pub const LEADING: [&str; 4] = ["seq", "ts", "run_id", "event"];
/// The key a line ends with.
pub const TRAILING: &str = "prev_sha256";

/// A field name clashes with one of the line's own keys: a programming
/// error, caught before anything is written.
#[derive(Debug, thiserror::Error)]
#[error("event {event} has a field named {field:?}, which is reserved for the line itself")]
pub struct ReservedField {
    pub event: &'static str,
    pub field: String,
}

/// Builds the bytes of one line (without the newline).
pub fn compose(
    seq: u64,
    ts: &str,
    run_id: &str,
    event: &'static str,
    fields: Map<String, Value>,
    prev_sha256: &str,
) -> Result<String, ReservedField> {
    let mut obj = Map::with_capacity(fields.len() + RESERVED.len());
    obj.insert("seq".into(), seq.into());
    obj.insert("ts".into(), ts.into());
    obj.insert("run_id".into(), run_id.into());
    obj.insert("event".into(), event.into());
    for (k, v) in fields {
        if RESERVED.contains(&k.as_str()) {
            return Err(ReservedField { event, field: k });
        }
        obj.insert(k, v);
    }
    obj.insert(TRAILING.into(), prev_sha256.into());
    // A `Map` of plain JSON values always serialises.
    Ok(Value::Object(obj).to_string())
}

/// The parts of a line the verifier checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub seq: u64,
    pub run_id: String,
    pub event: String,
    pub prev_sha256: String,
    /// For `audit_tail_repaired`: the hash of the torn line it acknowledges.
    pub acknowledges: Option<String>,
    /// A keyed checkpoint (`run_finished` with an audit key).
    pub checkpoint: Option<Value>,
}

/// Parses and shape-checks one line; the error says what is wrong.
pub fn parse(bytes: &[u8]) -> Result<Parsed, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON ({e})"))?;
    let Value::Object(obj) = value else {
        return Err("not a JSON object".into());
    };
    let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    if keys.len() < LEADING.len() + 1 || keys[..LEADING.len()] != LEADING || keys.last() != Some(&TRAILING) {
        return Err(format!(
            "keys out of the published order (must start with {} and end with {TRAILING})",
            LEADING.join(", ")
        ));
    }
    let seq = obj["seq"]
        .as_u64()
        .filter(|s| *s >= 1)
        .ok_or("seq is not an integer >= 1")?;
    let text = |k: &str| {
        obj[k]
            .as_str()
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
    let acknowledges = obj
        .get("torn_line_sha256")
        .and_then(Value::as_str)
        .map(str::to_string);
    let checkpoint = obj.get("checkpoint").cloned();
    Ok(Parsed {
        seq,
        run_id,
        event,
        prev_sha256,
        acknowledges,
        checkpoint,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
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

//! A commit line's growing fields, carried by lines of their own.
//!
//! A `page_committed` line records what its page changed: the lookback
//! identities it added (`lookback_change`, about 35 bytes a record), the
//! positions of records landed before (`repeated`), a collection pass's
//! page hashes (`snapshot`), the vendor's warnings. Those grow with the
//! page, and a trail line may not: every reader of the trail's end takes a
//! line of at most [`super::line::MAX_LINE`] bytes, and a line above it
//! would leave the trail unappendable. So when a commit line would be
//! longer than [`SPILL_ABOVE`], each growing field longer than
//! [`KEEP_UP_TO`] leaves it: its compact JSON is cut into `page_committed_part`
//! lines written right before the commit line, in the same append (one
//! write and one fsync on a file, one transaction in a database), and the
//! commit line names them in `spilled`:
//!
//! ```text
//! {"seq":7,…,"event":"page_committed_part","stream":"log","field":"lookback_change","part":1,"of":2,"text":"{\"added\":[…","prev_sha256":…}
//! {"seq":8,…,"event":"page_committed_part","stream":"log","field":"lookback_change","part":2,"of":2,"text":"…],\"dropped\":3}","prev_sha256":…}
//! {"seq":9,…,"event":"page_committed",…,"spilled":{"lookback_change":{"parts":2,"bytes":412733,"sha256":"…"}},"prev_sha256":…}
//! ```
//!
//! The digest in the commit line proves the parts, as a page's SHA-256
//! proves its landed bytes: a reader takes the lines just before the
//! commit line, joins each field's texts, and uses the field only when its
//! length and SHA-256 are the ones recorded ([`join`]). Parts a crash left
//! without their commit line are inert: no commit names them.

use serde_json::{Map, Value};

use crate::digest::sha256_hex;

/// The event of a line carrying part of a commit line's field.
pub(crate) const PART_EVENT: &str = "page_committed_part";

/// How a part line's event field is written (lines are compact).
pub(crate) const PART_NEEDLE: &[u8] = b"\"event\":\"page_committed_part\"";

/// The commit line's field that names its spilled fields.
pub(crate) const SPILLED: &str = "spilled";

/// How `"spilled":` is written in a commit line that has one.
pub(crate) const SPILLED_NEEDLE: &[u8] = b"\"spilled\":{";

/// A commit line up to this long is written as it is: the common page,
/// whose line is a few kilobytes, costs nothing more.
pub(crate) const SPILL_ABOVE: usize = 64 * 1024;

/// A growing field up to this long stays in a long commit line.
const KEEP_UP_TO: usize = 4 * 1024;

/// The most text one part line carries, counted as written (escaped), so
/// a part line is about this long whatever the field holds.
const PART_TEXT: usize = 256 * 1024;

/// The fields of a commit line that grow with its page, in the order
/// their parts are written.
const GROWING: [&str; 4] = ["lookback_change", "repeated", "snapshot", "vendor_warnings"];

/// What `spilled` records of one field: how many part lines carry it, and
/// the length and SHA-256 of its compact JSON.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Carried {
    pub parts: usize,
    pub bytes: usize,
    pub sha256: String,
}

/// Moves the growing fields longer than [`KEEP_UP_TO`] out of a commit
/// line's `fields` (already masked) into the fields of part lines, in the
/// order they are to be written, and records them in `fields` as
/// `spilled`. Called only for a commit line longer than [`SPILL_ABOVE`].
pub(crate) fn split(fields: &mut Map<String, Value>) -> Vec<Map<String, Value>> {
    let stream = fields.get("stream").cloned().unwrap_or(Value::Null);
    let mut spilled = Map::new();
    let mut parts = Vec::new();
    for name in GROWING {
        let Some(value) = fields.get(name) else { continue };
        let text = value.to_string();
        if text.len() <= KEEP_UP_TO {
            continue;
        }
        fields.shift_remove(name);
        let pieces = cut(&text);
        let of = pieces.len();
        for (i, piece) in pieces.into_iter().enumerate() {
            let mut part = Map::new();
            part.insert("stream".into(), stream.clone());
            part.insert("field".into(), name.into());
            part.insert("part".into(), (i + 1).into());
            part.insert("of".into(), of.into());
            part.insert("text".into(), piece.into());
            parts.push(part);
        }
        let carried = Carried {
            parts: of,
            bytes: text.len(),
            sha256: sha256_hex(text.as_bytes()),
        };
        spilled.insert(name.into(), serde_json::to_value(carried).unwrap_or(Value::Null));
    }
    if !spilled.is_empty() {
        fields.insert(SPILLED.into(), Value::Object(spilled));
    }
    parts
}

/// `text` cut into pieces of at most [`PART_TEXT`] bytes as a JSON string
/// writes them, each cut on a character boundary.
fn cut(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let (mut start, mut written) = (0, 0);
    for (at, c) in text.char_indices() {
        let cost = match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        };
        if written + cost > PART_TEXT {
            pieces.push(&text[start..at]);
            (start, written) = (at, 0);
        }
        written += cost;
    }
    pieces.push(&text[start..]);
    pieces
}

/// What a commit line (parsed) records in `spilled`, field by field in
/// the order of their parts; empty when it spilled nothing. `Err` when
/// `spilled` is there and is not such a record.
pub(crate) fn carried(commit: &Value) -> Result<Vec<(String, Carried)>, String> {
    match commit.get(SPILLED) {
        None => Ok(Vec::new()),
        Some(Value::Object(fields)) => fields
            .iter()
            .map(|(name, carried)| {
                serde_json::from_value(carried.clone())
                    .map(|c| (name.clone(), c))
                    .map_err(|e| format!("its spilled {name} is not a record of parts ({e})"))
            })
            .collect(),
        Some(other) => Err(format!("its spilled is {other}, not a record of parts")),
    }
}

/// How many lines right before a commit line carry its spilled fields.
pub(crate) fn parts_before(commit: &Value) -> Result<usize, String> {
    Ok(carried(commit)?.iter().map(|(_, c)| c.parts).sum())
}

/// Restores the spilled fields of `commit` (a `page_committed` line,
/// parsed) from `parts`, the lines right before it, oldest first: each
/// field's texts joined must have the length and SHA-256 `spilled` records.
/// `commit` then holds its fields as if they had never left, without
/// `spilled`. `Err` says what does not match; `commit` is then unchanged.
pub(crate) fn join(commit: &mut Value, parts: &[Value]) -> Result<(), String> {
    let carried = carried(commit)?;
    let wanted: usize = carried.iter().map(|(_, c)| c.parts).sum();
    if parts.len() != wanted {
        return Err(format!(
            "it names {wanted} part lines before it, and {} were read",
            parts.len()
        ));
    }
    let mut parts = parts.iter();
    let mut restored = Vec::new();
    for (name, carried) in carried {
        let mut text = String::with_capacity(carried.bytes);
        for i in 1..=carried.parts {
            let part = parts.next().ok_or("a part line is missing")?;
            let is_it = part["event"] == PART_EVENT
                && part["field"] == name.as_str()
                && part["part"] == i
                && part["of"] == carried.parts
                && part["stream"] == commit["stream"]
                && part["run_id"] == commit["run_id"];
            let piece = part["text"].as_str().filter(|_| is_it).ok_or_else(|| {
                format!(
                    "the line before it that should carry part {i} of {} of its {name} does not",
                    carried.parts
                )
            })?;
            text.push_str(piece);
        }
        if text.len() != carried.bytes || sha256_hex(text.as_bytes()) != carried.sha256 {
            return Err(format!(
                "its {name} joined from the part lines before it is {} bytes with SHA-256 {}, not the {} bytes \
                 with SHA-256 {} it records",
                text.len(),
                sha256_hex(text.as_bytes()),
                carried.bytes,
                carried.sha256
            ));
        }
        let value: Value =
            serde_json::from_str(&text).map_err(|e| format!("its {name} joined is not JSON ({e})"))?;
        restored.push((name, value));
    }
    if let Some(fields) = commit.as_object_mut() {
        fields.shift_remove(SPILLED);
        fields.extend(restored);
    }
    Ok(())
}

/// The parts of a run of `page_committed_part` lines, followed as they are
/// read, by digest alone: what `audit verify` holds of them (constant
/// memory, whatever the page), checked against the commit line after them.
#[derive(Debug, Default)]
pub(crate) struct PartDigests {
    /// Each field carried so far: its name, parts seen, of how many, its
    /// length so far and its hash state.
    fields: Vec<(String, usize, usize, usize, sha2::Sha256)>,
    /// The run holds a line that is no well-formed next part.
    broken: Option<String>,
}

impl PartDigests {
    /// A part line (parsed), the next of the run.
    pub(crate) fn part(&mut self, line: &Value) {
        use sha2::Digest;
        let (Some(field), Some(part), Some(of), Some(text)) = (
            line["field"].as_str(),
            line["part"].as_u64().map(|p| p as usize),
            line["of"].as_u64().map(|p| p as usize),
            line["text"].as_str(),
        ) else {
            self.broken
                .get_or_insert_with(|| "a part line lacks field, part, of or text".into());
            return;
        };
        let continues = matches!(self.fields.last(), Some((f, seen, o, ..)) if f == field && *seen + 1 == part && *o == of);
        if part == 1 {
            self.fields
                .push((field.to_string(), 0, of, 0, sha2::Sha256::new()));
        } else if !continues {
            self.broken
                .get_or_insert_with(|| format!("part {part} of {field} does not follow the part before it"));
            return;
        }
        if let Some((_, seen, _, bytes, hasher)) = self.fields.last_mut() {
            *seen += 1;
            *bytes += text.len();
            hasher.update(text.as_bytes());
        }
    }

    /// Whether the run so far is exactly what `commit` records in
    /// `spilled` (for a line that spilled nothing: that no run precedes
    /// it, or that it is not checked); `Err` says how it is not.
    pub(crate) fn matches(self, commit: &Value) -> Result<(), String> {
        use sha2::Digest;
        let carried = carried(commit)?;
        if carried.is_empty() {
            return Ok(());
        }
        if let Some(broken) = self.broken {
            return Err(broken);
        }
        // The run may begin with parts a crash left without their commit:
        // the commit's own are its last fields.
        let Some(own) = self.fields.len().checked_sub(carried.len()) else {
            return Err(format!(
                "it names {} spilled fields and fewer are carried by the lines before it",
                carried.len()
            ));
        };
        for ((name, c), (field, seen, of, bytes, hasher)) in
            carried.into_iter().zip(self.fields.into_iter().skip(own))
        {
            let sha256 = hex::encode(hasher.finalize());
            if field != name || seen != of || of != c.parts || bytes != c.bytes || sha256 != c.sha256 {
                return Err(format!(
                    "its spilled {name} ({} parts, {} bytes, SHA-256 {}) is not what the part lines before it \
                     carry ({field}: {seen} of {of} parts, {bytes} bytes, SHA-256 {sha256})",
                    c.parts, c.bytes, c.sha256
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit_fields(identities: usize) -> Map<String, Value> {
        let added: Vec<Value> = (0..identities)
            .map(|i| serde_json::json!(["2026-11-01 01:00", [format!("{i:032x}")]]))
            .collect();
        let mut fields = Map::new();
        fields.insert("stream".into(), "log".into());
        fields.insert("url".into(), "https://r.example/api/".into());
        fields.insert("repeated".into(), serde_json::json!([1, 2, 3]));
        fields.insert(
            "lookback_change".into(),
            serde_json::json!({"added": added, "dropped": 7}),
        );
        fields
    }

    fn as_lines(parts: Vec<Map<String, Value>>) -> Vec<Value> {
        parts
            .into_iter()
            .map(|mut p| {
                p.insert("event".into(), PART_EVENT.into());
                p.insert("run_id".into(), "r1".into());
                Value::Object(p)
            })
            .collect()
    }

    #[test]
    fn a_field_split_into_parts_joins_back_to_itself() {
        let original = commit_fields(20_000);
        let mut fields = original.clone();
        let parts = split(&mut fields);
        assert!(parts.len() > 2, "{} parts", parts.len());
        assert!(fields.get("lookback_change").is_none());
        // A short growing field stays.
        assert_eq!(fields["repeated"], serde_json::json!([1, 2, 3]));
        for part in &parts {
            assert!(Value::Object(part.clone()).to_string().len() < PART_TEXT + 1024);
        }
        let mut commit = Value::Object(fields);
        commit["run_id"] = "r1".into();
        let lines = as_lines(parts);
        let mut digests = PartDigests::default();
        for line in &lines {
            digests.part(line);
        }
        assert_eq!(digests.matches(&commit), Ok(()));
        assert_eq!(parts_before(&commit), Ok(lines.len()));
        join(&mut commit, &lines).unwrap();
        assert_eq!(commit["lookback_change"], original["lookback_change"]);
        assert!(commit.get(SPILLED).is_none());
    }

    #[test]
    fn a_part_changed_missing_or_of_another_stream_is_refused() {
        let mut fields = commit_fields(20_000);
        let parts = split(&mut fields);
        let mut commit = Value::Object(fields);
        commit["run_id"] = "r1".into();
        let lines = as_lines(parts);
        let mut changed = lines.clone();
        let text = changed[1]["text"].as_str().unwrap().replacen('a', "b", 1);
        changed[1]["text"] = text.into();
        let mut digests = PartDigests::default();
        changed.iter().for_each(|l| digests.part(l));
        assert!(digests.matches(&commit).is_err());
        assert!(join(&mut commit.clone(), &changed)
            .unwrap_err()
            .contains("SHA-256"));
        assert!(join(&mut commit.clone(), &lines[1..]).is_err());
        let mut other = lines.clone();
        other[0]["stream"] = "records".into();
        assert!(join(&mut commit.clone(), &other).is_err());
        // Parts a crash left before the commit's own are passed over.
        let mut digests = PartDigests::default();
        lines[..1]
            .iter()
            .chain(lines.iter())
            .for_each(|l| digests.part(l));
        assert_eq!(digests.matches(&commit), Ok(()));
    }

    #[test]
    fn cuts_fall_on_characters_and_count_escapes() {
        let text = format!("{}é\"{}", "x".repeat(PART_TEXT - 1), "\u{1}".repeat(10));
        let pieces = cut(&text);
        assert_eq!(pieces.concat(), text);
        for piece in &pieces {
            assert!(
                serde_json::to_string(piece).unwrap().len() <= PART_TEXT + 2,
                "{}",
                piece.len()
            );
        }
    }
}

//! Which records of a page are which: the identity a lookback recognises a
//! record by when a later window reads it again.
//!
//! A record's identity is the SHA-256 of its `record_id` field together
//! with its cursor value (so a record modified again, with a new cursor
//! value, is a new version to land), or, when the policy names no
//! `record_id`, of the record's whole content as canonical JSON (compact,
//! the vendor's key order, strings and numbers as serde_json writes them
//! back: whitespace and escapes do not matter, any changed value does).
//! Only the first 128 bits are kept: the state then holds no record
//! content, and two different records share an identity with a
//! probability of about 1e-30 within a lookback span.
//!
//! A JSON page's identities are learned in its one streaming pass: the
//! push lexer hands each record's bytes over as it closes
//! ([`Identities`]), and most records are already canonical, so they are
//! hashed as they came. The rule must never change between versions (a
//! cursor's lookback memory holds these identities); the tests hold it to
//! the serde_json round trip it was first written as (`identity_oracle.rs`).
//! An ODM page is read a second time from its temp file.
//!
//! One concept: the rule that makes a record's identity (for a JSON record
//! by id or by content, for an ODM record by its markup), kept in one file
//! because it must never change between versions and is reviewed in one
//! place; most of the length is the tests that hold it to its first form.
//! The identity itself, a value the state keeps, is `crate::record`'s.

use std::borrow::Cow;

use sha2::{Digest, Sha256};

use super::InvalidPayload;
use crate::record::identity::{RecordIdentity, RecordKey};

/// Whether `raw`, a JSON value the lexer found valid, is already what
/// serde_json writes back for it: no whitespace between tokens, no escape
/// in any string (serde_json writes back only `\"`, `\\` and control
/// characters escaped, and decodes every other escape), and no number it
/// would write otherwise (a fraction or an exponent goes through binary64;
/// `-0` becomes `-0.0`; an integer of 19 digits or more may not fit 64
/// bits). Anything else is a plain token. Only a sufficient test: a
/// `false` sends the value the long way, which is always right.
fn is_canonical(raw: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        i = match b {
            b'"' => match memchr::memchr2(b'"', b'\\', &raw[i + 1..]) {
                Some(n) if raw[i + 1 + n] == b'"' => i + n + 2,
                _ => return false,
            },
            b'{' | b'}' | b'[' | b']' | b',' | b':' => i + 1,
            b't' | b'n' => i + 4,
            b'f' => i + 5,
            b'-' | b'0'..=b'9' => {
                let digits = raw[i + 1..].iter().take_while(|d| d.is_ascii_digit()).count() + 1;
                let end = i + digits;
                let negative = b == b'-';
                if matches!(raw.get(end), Some(b'.' | b'e' | b'E'))
                    || digits - usize::from(negative) > 18
                    || &raw[i..end] == b"-0"
                {
                    return false;
                }
                end
            }
            _ => return false,
        };
    }
    true
}

/// `raw` written back as serde_json writes a `Value` (see the module
/// comment): borrowed when it already is.
fn canonical(raw: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    if is_canonical(raw) {
        return Ok(Cow::Borrowed(raw));
    }
    let value: serde_json::Value = serde_json::from_slice(raw).map_err(|e| e.to_string())?;
    Ok(Cow::Owned(value.to_string().into_bytes()))
}

/// A record's key from its hash: the identity is its first 128 bits.
fn key(position: usize, hash: Sha256, at: String) -> RecordKey {
    RecordKey {
        position: u32::try_from(position).unwrap_or(u32::MAX),
        identity: RecordIdentity::of(hash),
        at,
    }
}

/// The identities of a JSON page's records, collected while the lexer
/// reads them: the JSON handler (`json.rs`) tells it where each record
/// begins and ends and what its cursor and `record_id` fields hold.
pub(super) struct Identities {
    /// The policy's `delta.lookback.record_id`; `None`: by content.
    record_id: Option<Vec<u8>>,
    cursor_field: String,
    keys: Vec<RecordKey>,
    /// The first record that has no key; no key is made after it.
    problem: Option<String>,
    /// The record being read: its cursor value and raw `record_id` value.
    at: Option<String>,
    /// The time of every record of a page whose records carry none (the
    /// window's end: REDCap's records).
    stamp: Option<String>,
    id: Option<Vec<u8>>,
}

impl Identities {
    pub(super) fn new(record_id: Option<&str>, cursor_field: &str) -> Identities {
        Identities {
            record_id: record_id.map(|f| f.as_bytes().to_vec()),
            cursor_field: cursor_field.to_string(),
            keys: Vec::new(),
            problem: None,
            at: None,
            stamp: None,
            id: None,
        }
    }

    /// Every record of the page is remembered at `at` (it carries no time).
    pub(super) fn stamp_all(&mut self, at: &str) {
        self.stamp = Some(at.to_string());
    }

    /// Identities by content need each record's bytes.
    pub(super) fn by_content(&self) -> bool {
        self.record_id.is_none()
    }

    /// Whether `key` (of a record's member) is the `record_id` field.
    pub(super) fn is_id(&self, key: &[u8]) -> bool {
        self.record_id.as_deref() == Some(key)
    }

    pub(super) fn begin_record(&mut self) {
        self.at = None;
        self.id = None;
    }

    /// The record's cursor value, as a query parameter carries it.
    pub(super) fn cursor(&mut self, at: String) {
        self.at = Some(at);
    }

    /// The raw bytes of the record's `record_id` value.
    pub(super) fn id_value(&mut self, raw: &[u8]) {
        self.id = (raw != b"null").then(|| raw.to_vec());
    }

    /// The record at `position` ended; `raw` is its bytes when identities
    /// are by content.
    pub(super) fn end_record(&mut self, position: usize, raw: Option<&[u8]>) {
        if self.problem.is_some() {
            return;
        }
        match self.key_of(position, raw) {
            Ok(k) => self.keys.push(k),
            Err(e) => self.problem = Some(e),
        }
    }

    fn key_of(&mut self, position: usize, raw: Option<&[u8]>) -> Result<RecordKey, String> {
        let at = self
            .at
            .take()
            .or_else(|| self.stamp.clone())
            .ok_or_else(|| format!("record {position} has no cursor field {:?}", self.cursor_field))?;
        let mut hash = Sha256::new();
        match (&self.record_id, raw) {
            (Some(field), _) => {
                let id = self.id.take().ok_or_else(|| {
                    format!(
                        "record {position} has no {:?} (delta.lookback.record_id)",
                        String::from_utf8_lossy(field)
                    )
                })?;
                hash.update(b"record_id\0");
                hash.update(&canonical(&id)?);
                hash.update(b"\0");
                hash.update(at.as_bytes());
            }
            (None, Some(raw)) => {
                hash.update(b"content\0");
                hash.update(&canonical(raw)?);
            }
            (None, None) => return Err(format!("record {position}: its bytes were not kept")),
        }
        Ok(key(position, hash, at))
    }

    /// Every record's key, or the first record that has none.
    pub(super) fn finish(self) -> Result<Vec<RecordKey>, InvalidPayload> {
        match self.problem {
            Some(p) => Err(InvalidPayload::json(p)),
            None => Ok(self.keys),
        }
    }
}

/// The keys of the records (`SubjectData` elements) of an ODM page, read
/// as a stream: each identity is the SHA-256 of the element's markup and
/// text as the server wrote them; `at` is the same for all (the page's
/// `CreationDateTime`, a study dataset's mark).
pub(crate) fn odm_record_keys<R: std::io::Read>(page: R, at: &str) -> Result<Vec<RecordKey>, InvalidPayload> {
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
                        keys.push(key(keys.len(), hash, at.to_string()));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edc::payload::record_keys;

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
        // The id and the cursor value in either order, the id as any JSON
        // value written canonically or not: the same identity.
        let reordered = br#"{"data":[{"t":"2026-01-01T00:00:00Z","v":1,"id":"A"},
                                     {"t":"2026-01-01T00:00:00Z","id":"\u0041"}]}"#;
        let again = record_keys(&reordered[..], "/data", "t", Some("id")).unwrap();
        assert_eq!(again[0].identity, by_id[0].identity, "cursor before id");
        assert_eq!(again[1].identity, by_id[0].identity, "an escaped id");
        assert_eq!(by_id[1].at, "2026-01-01T00:00:09Z");
        assert_eq!(by_id[2].position, 2);
        let by_content = record_keys(&page[..], "/data", "t", None).unwrap();
        assert_eq!(
            by_content[0].identity, by_content[2].identity,
            "whitespace is not content"
        );
        assert_ne!(by_content[0].identity, by_id[0].identity);
        assert_eq!(by_content[0].identity.to_string().len(), 32);
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

    /// The first pass's keys of `doc`, fed in pieces cut at `cuts`.
    fn pushed(doc: &[u8], cuts: &[usize], record_id: Option<&str>) -> Result<Vec<RecordKey>, InvalidPayload> {
        let mut check = crate::edc::payload::JsonCheck::new("/data", None, "t").identifying(record_id);
        let mut from = 0;
        for &cut in cuts {
            check.feed(&doc[from..cut]);
            from = cut;
        }
        check.feed(&doc[from..]);
        check.finish()?.keys.expect("asked for")
    }

    /// Tokens serde_json writes back otherwise than they came, or not.
    const STRINGS: &[&str] = &[
        "",
        "plain",
        "caf\u{e9}",
        "\\u00e9",
        "\\n\\t\\r\\b\\f",
        "\\\"",
        "\\\\",
        "\\/",
        "\\ud83d\\ude00",
        "\u{20ac}",
        "\\u001f",
        "\\u007f",
        "\u{7f}",
        "a b",
        "2026-01-01T00:00:00Z",
    ];
    const NUMBERS: &[&str] = &[
        "0",
        "-0",
        "1",
        "-1",
        "123456789012345678",
        "-123456789012345678",
        "1234567890123456789",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "1.0",
        "1.50",
        "1e2",
        "1E-7",
        "-0.0",
        "0.1",
        "2.5e+3",
        "100000000000000000000000",
    ];

    fn value() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let ws = prop::sample::select(vec!["", "", "", " ", "\n  ", "\t"]);
        let leaf = prop_oneof![
            prop::sample::select(STRINGS).prop_map(|s| format!("\"{s}\"")),
            prop::sample::select(NUMBERS).prop_map(str::to_string),
            prop::sample::select(vec!["true", "false", "null"]).prop_map(str::to_string),
        ];
        leaf.prop_recursive(3, 24, 4, move |inner| {
            let ws = ws.clone();
            prop_oneof![
                (prop::collection::vec(inner.clone(), 0..4), ws.clone())
                    .prop_map(|(items, w)| format!("[{w}{}{w}]", items.join(&format!("{w},")))),
                (prop::collection::vec((inner, any::<bool>()), 0..4), ws).prop_map(|(members, w)| {
                    let members: Vec<String> = members
                        .into_iter()
                        .enumerate()
                        // Escaped and plain names, never the same name twice.
                        .map(|(k, (v, escaped))| {
                            let name = if escaped {
                                format!("m\\u00e9{k}")
                            } else {
                                format!("m{k}")
                            };
                            format!("\"{name}\"{w}:{w}{v}")
                        })
                        .collect();
                    format!("{{{w}{}}}", members.join(","))
                }),
            ]
        })
    }

    fn record() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        (
            prop::sample::select(vec![
                "\"2026-01-01T00:00:00Z\"",
                "\"2026-01-01T00:00:00.5+01:00\"",
            ]),
            prop::option::of(value()),
            prop::collection::vec(value(), 0..3),
            prop::sample::select(vec!["", " ", "\n"]),
        )
            .prop_map(|(t, id, rest, w)| {
                let mut members = vec![format!("\"t\":{w}{t}")];
                if let Some(id) = id {
                    members.insert(0, format!("\"id\"{w}:{id}"));
                }
                members.extend(rest.into_iter().enumerate().map(|(k, v)| format!("\"r{k}\":{v}")));
                format!("{{{}{w}}}", members.join(&format!(",{w}")))
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// The first pass's identities are the serde_json round trip's,
        /// bit for bit, by content and by record_id, however the body is
        /// cut: a cursor's lookback memory must still recognise what an
        /// earlier version landed.
        #[test]
        fn first_pass_identities_are_the_round_trips(
            records in proptest::collection::vec(record(), 1..6),
            cuts in proptest::collection::vec(0usize..4000, 0..5),
            numeric in proptest::prelude::any::<bool>(),
        ) {
            let mut doc = format!("{{\"data\":[{}]}}", records.join(", "));
            if numeric {
                // A page's cursor values are all numbers or all strings.
                doc = doc.replace("\"2026-01-01T00:00:00Z\"", "17").replace("\"2026-01-01T00:00:00.5+01:00\"", "1.5e3");
            }
            let doc = doc.into_bytes();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (doc.len() + 1)).collect();
            cuts.sort_unstable();
            for record_id in [None, Some("id")] {
                let oracle = super::super::identity_oracle::record_keys(&doc[..], "/data", "t", record_id);
                let first = pushed(&doc, &cuts, record_id);
                proptest::prop_assert_eq!(&first, &oracle, "{}", String::from_utf8_lossy(&doc));
            }
        }
    }

    #[test]
    fn records_already_canonical_are_hashed_as_they_came() {
        assert!(is_canonical(
            "{\"a\":[1,-2,true,null,\"caf\u{e9}\"],\"b\":{}}".as_bytes()
        ));
        for not in [
            &br#"{"a": 1}"#[..],
            br#"{"a":"\n"}"#,
            br#"{"a":1.0}"#,
            br#"{"a":-0}"#,
            br#"{"a":1e2}"#,
            b"1234567890123456789",
        ] {
            assert!(!is_canonical(not), "{}", String::from_utf8_lossy(not));
        }
        let page =
            br#"{"data":[{"t":"2026-01-01T00:00:00Z","v":1}, {"t" : "2026-01-01T00:00:00Z", "v" : 1.0}]}"#;
        let keys = record_keys(page, "/data", "t", None).unwrap();
        assert_ne!(
            keys[0].identity, keys[1].identity,
            "1 and 1.0 are different content"
        );
        assert_eq!(
            keys,
            super::super::identity_oracle::record_keys(&page[..], "/data", "t", None).unwrap()
        );
    }
}

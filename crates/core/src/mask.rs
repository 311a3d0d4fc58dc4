//! Masking identifiers in logs and audit lines.
//!
//! Record content never reaches a log or an audit line (payload values are
//! not quoted in errors). What can: query parameters of the delta URL that
//! carry a subject or patient identifier, when a policy's stream selects
//! by one. Those values are replaced by a keyed hash, `masked-` and 12 hex
//! digits, stable for a run configuration so lines can still be correlated
//! ("the same subject as line 40") without revealing who.
//!
//! The key is `$EDC_SYNC_MASK_KEY` when set (stable across token rotation),
//! else derived from the policy's SHA-256 and the token: secret, because
//! the token is, and so not open to a dictionary of subject numbers.
//! Manifests and cursor files keep URLs as they are: they are the data
//! side's state, needed byte for byte to resume and deduplicate.

use sha2::{Digest, Sha256};

/// Query parameters masked when the policy does not list its own.
pub(crate) const DEFAULT_PARAMS: [&str; 10] = [
    "subject",
    "subjectkey",
    "subject_key",
    "subject_id",
    "subjectname",
    "subject_name",
    "patient",
    "patient_id",
    "mrn",
    "initials",
];

#[derive(Clone, Default)]
pub(crate) struct Masker {
    key: [u8; 32],
    params: Vec<String>,
}

impl std::fmt::Debug for Masker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Masker")
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

impl Masker {
    /// A masker keyed by `key_material` for the given parameter names
    /// (compared case-insensitively).
    pub(crate) fn new(key_material: &[u8], params: &[String]) -> Masker {
        let mut h = Sha256::new();
        h.update(b"edc-sync mask v1\0");
        h.update(key_material);
        Masker {
            key: h.finalize().into(),
            params: params.iter().map(|p| p.to_ascii_lowercase()).collect(),
        }
    }

    /// The key for a run: `$EDC_SYNC_MASK_KEY`, else policy hash + token.
    pub(crate) fn for_run(config_sha256: &str, secret: &str, params: &[String]) -> Masker {
        match std::env::var("EDC_SYNC_MASK_KEY") {
            Ok(k) if !k.is_empty() => Masker::new(k.as_bytes(), params),
            _ => Masker::new(format!("{config_sha256}\0{secret}").as_bytes(), params),
        }
    }

    /// `masked-` and 12 hex digits of the keyed hash of `value`.
    pub(crate) fn mask(&self, value: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.key);
        h.update([0u8]);
        h.update(value.as_bytes());
        format!("masked-{}", &hex::encode(h.finalize())[..12])
    }

    /// `text` with the value of every `name=value` whose name is an
    /// identifier parameter (after `?`, `&` or at the start) replaced by its
    /// mask. Idempotent: a value already masked is left alone.
    pub(crate) fn text(&self, text: &str) -> String {
        self.params_in(&crate::redact::scrub(text))
    }

    /// `text` with identifier parameters masked, secrets left to the
    /// caller (a structured value is never scrubbed).
    fn params_in(&self, text: &str) -> String {
        if self.params.is_empty() || !text.contains('=') {
            return text.to_string();
        }
        let bytes = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        while i < text.len() {
            let at_boundary = i == 0 || matches!(bytes[i - 1], b'?' | b'&');
            let hit = at_boundary.then(|| self.param_at(bytes, i)).flatten();
            let Some(equals) = hit else {
                let ch = text[i..].chars().next().map_or(1, char::len_utf8);
                out.push_str(&text[i..i + ch]);
                i += ch;
                continue;
            };
            let value_start = equals + 1;
            let value_end = text[value_start..]
                .find(|c: char| matches!(c, '&' | '"' | '\'' | ')' | '>' | ',' | '#') || c.is_whitespace())
                .map_or(text.len(), |n| value_start + n);
            out.push_str(&text[i..value_start]);
            let value = &text[value_start..value_end];
            if value.starts_with("masked-") || value.is_empty() {
                out.push_str(value);
            } else {
                out.push_str(&self.mask(value));
            }
            i = value_end;
        }
        out
    }

    /// Whether [`Self::json`] would leave every string of the structured
    /// value written as `json` (compact JSON) as it is, told from the text
    /// without parsing it: no identifier parameter follows a `?`, a `&`,
    /// a quote or the start. A string is masked only where a parameter
    /// starts it or follows `?` or `&`, and in JSON text a string starts
    /// after a quote; `?`, `&`, `=` and parameter names are never escaped.
    /// A `false` may be needless (a key, an escaped quote); it is never
    /// wrong.
    ///
    /// A parameter ends at an `=`, so only the few places before an `=`
    /// are looked at: the text of a lookback's memory (thousands of quoted
    /// identities, one `=` in a next-page link) costs a `memchr`, not a
    /// comparison with every parameter at every quote.
    pub(crate) fn leaves_alone(&self, json: &str) -> bool {
        let bytes = json.as_bytes();
        !memchr::memchr_iter(b'=', bytes).any(|equals| {
            let name_end = before_index(bytes, equals);
            self.params.iter().any(|p| {
                // [`Self::params_in`]'s boundaries, and a quote: a string's start.
                name_end.checked_sub(p.len()).is_some_and(|i| {
                    (i == 0 || matches!(bytes[i - 1], b'?' | b'&' | b'"'))
                        && self.param_at(bytes, i).is_some()
                })
            })
        })
    }

    /// The identifier parameter `text` names at byte `i`, in any ASCII
    /// case, with or without an array index (`records[0]`, or encoded
    /// `records%5B0%5D`: REDCap's list of record ids): where its `=` is.
    fn param_at(&self, text: &[u8], i: usize) -> Option<usize> {
        self.params.iter().find_map(|p| {
            let end = i + p.len();
            let named = text
                .get(i..end)
                .is_some_and(|name| name.eq_ignore_ascii_case(p.as_bytes()));
            named.then(|| after_index(text, end)).flatten()
        })
    }

    /// Masks every string inside a JSON value (for audit lines): identifier
    /// parameters everywhere, secrets in free text only. A structured
    /// field (see [`is_structured`]) is evidence another program reads
    /// back (a hash, a path, a cursor, an id): scrubbing a short password
    /// out of a SHA-256 would make `verify` report false discrepancies and
    /// a cursor unrebuildable, so its values are left whole.
    pub(crate) fn json(&self, value: &mut serde_json::Value) {
        self.json_in(value, false);
    }

    fn json_in(&self, value: &mut serde_json::Value, structured: bool) {
        match value {
            serde_json::Value::String(s) => {
                if !structured {
                    if let std::borrow::Cow::Owned(clean) = crate::redact::scrub(s) {
                        *s = clean;
                    }
                }
                if s.contains('=') {
                    *s = self.params_in(s);
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.json_in(v, structured)),
            serde_json::Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    self.json_in(v, structured || is_structured(key));
                }
            }
            _ => {}
        }
    }
}

/// Audit fields whose values are structured evidence: hashes, landed files
/// and directories, cursors and cursor states, ids, and the request URL
/// (a manifest entry's page key is rebuilt from it). A secret cannot reach
/// them through a vendor: a next link that echoes one is refused
/// (`edc::origin`), and the URL is built from the policy, not a variable.
fn is_structured(key: &str) -> bool {
    key.ends_with("sha256")
        || key.ends_with("_file")
        || key.ends_with("_dir")
        || key.ends_with("_id")
        || key.starts_with("cursor")
        || matches!(
            key,
            "url"
                | "file"
                | "manifest"
                | "path"
                | "audit_log"
                | "file_said"
                | "trail_says"
                | "mac"
                | "checkpoint"
        )
}

/// The masker of this process's current run, for text that leaves by
/// stderr (errors, logs). Audit lines use their run's own masker.
static GLOBAL: std::sync::RwLock<Option<Masker>> = std::sync::RwLock::new(None);

/// Makes `masker` the one stderr output goes through.
/// The two spellings of an array index's brackets: as written, and as a
/// URL's query encodes them.
const BRACKETS: [(&[u8], &[u8]); 2] = [(b"[", b"]"), (b"%5B", b"%5D")];

/// Where the `=` is after a name ending at `end`: right there, or after an
/// array index of digits (`[0]`, `%5B0%5D`).
fn after_index(text: &[u8], end: usize) -> Option<usize> {
    if text.get(end) == Some(&b'=') {
        return Some(end);
    }
    BRACKETS.iter().find_map(|(open, close)| {
        let digits_at = end + open.len();
        let opened = text
            .get(end..digits_at)
            .is_some_and(|o| o.eq_ignore_ascii_case(open));
        let digits = text
            .get(digits_at..)?
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let closed_at = digits_at + digits;
        let equals = closed_at + close.len();
        let closed = text
            .get(closed_at..equals)
            .is_some_and(|c| c.eq_ignore_ascii_case(close));
        (opened && digits > 0 && closed && text.get(equals) == Some(&b'=')).then_some(equals)
    })
}

/// Where a name ends that an `=` at `equals` follows: before its array
/// index, if it has one (the reverse of [`after_index`]).
fn before_index(text: &[u8], equals: usize) -> usize {
    BRACKETS
        .iter()
        .find_map(|(open, close)| {
            let closed_at = equals.checked_sub(close.len())?;
            if !text[closed_at..equals].eq_ignore_ascii_case(close) {
                return None;
            }
            let digits = text[..closed_at]
                .iter()
                .rev()
                .take_while(|b| b.is_ascii_digit())
                .count();
            let name_end = (closed_at - digits).checked_sub(open.len())?;
            (digits > 0 && text[name_end..closed_at - digits].eq_ignore_ascii_case(open)).then_some(name_end)
        })
        .unwrap_or(equals)
}

pub(crate) fn set_global(masker: Masker) {
    *GLOBAL.write().unwrap_or_else(|p| p.into_inner()) = Some(masker);
}

/// A whole identifier (a record id, not a `name=value`) masked by the
/// current run's masker; before a run, by a masker of no key, so an
/// identifier never appears in clear.
pub(crate) fn global_mask(value: &str) -> String {
    match GLOBAL.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
        Some(m) => m.mask(value),
        None => Masker::new(b"", &[]).mask(value),
    }
}

/// `text` masked by the current run's masker (unchanged before a run).
pub fn global_text(text: &str) -> String {
    match GLOBAL.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
        Some(m) => m.text(text),
        None => crate::redact::scrub(text).into_owned(),
    }
}

/// stderr, with identifiers masked: the writer of the tracing subscriber.
pub struct MaskedStderr;

impl std::io::Write for MaskedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match std::str::from_utf8(buf) {
            Ok(text) => std::io::stderr().write_all(global_text(text).as_bytes())?,
            Err(_) => std::io::stderr().write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_array_parameter_is_masked_like_its_name() {
        let m = Masker::new(b"k", &["records".to_string()]);
        let url =
            "https://redcap.example/api/?content=record&records%5B0%5D=1001&records%5B1%5D=1002&recordsx=3";
        let masked = m.text(url);
        assert_eq!(
            masked,
            format!(
                "https://redcap.example/api/?content=record&records%5B0%5D={}&records%5B1%5D={}&recordsx=3",
                m.mask("1001"),
                m.mask("1002")
            )
        );
        assert!(!m.leaves_alone(&format!("\"{url}\"")));
        assert!(m.leaves_alone("\"https://redcap.example/api/?records%5B%5D=1&recordsx=3\""));
        assert_eq!(m.text("records[12]=7"), format!("records[12]={}", m.mask("7")));
        assert_eq!(m.text("records[x]=7"), "records[x]=7");
    }

    fn masker() -> Masker {
        Masker::new(b"k", &DEFAULT_PARAMS.map(String::from))
    }

    fn piece() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::sample::select(vec![
            "subject",
            "SUBJECT",
            "Mrn",
            "patient_id",
            "=",
            "?",
            "&",
            "\"",
            "\\",
            "\n",
            "é",
            "a",
            "x",
            "masked-",
            "https://h/p",
        ])
        .prop_map(String::from)
    }

    fn text() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::collection::vec(piece(), 0..8).prop_map(|p| p.concat())
    }

    fn value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            text().prop_map(serde_json::Value::from),
            Just(serde_json::Value::Null)
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                proptest::collection::vec((text(), inner), 0..4)
                    .prop_map(|kv| serde_json::Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    use proptest::strategy::Strategy;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Where the text check says a structured value is left alone,
        /// masking it changes nothing: its JSON can be written as it is.
        #[test]
        fn a_value_the_text_check_passes_is_left_alone(v in value()) {
            let m = masker();
            let json = serde_json::to_string(&v).unwrap();
            if m.leaves_alone(&json) {
                let mut masked = v.clone();
                m.json_in(&mut masked, true);
                proptest::prop_assert_eq!(masked, v, "{}", json);
            }
        }
    }

    #[test]
    fn the_text_check_sees_a_parameter_where_masking_would() {
        let m = masker();
        assert!(m.leaves_alone(r#"{"next_page":"https://h/p?page=2&size=10","seen":[["t",["ab"]]]}"#));
        assert!(!m.leaves_alone(r#"{"next_page":"https://h/p?page=2&Subject=S-1"}"#));
        assert!(!m.leaves_alone(r#"{"high_water":"mrn=7"}"#));
        assert!(
            Masker::default().leaves_alone(r#"{"a":"?subject=1"}"#),
            "no parameters: nothing masked"
        );
    }

    #[test]
    fn identifier_values_are_masked_stably_and_others_kept() {
        let m = masker();
        let text = "GET https://h/api?subject=SUBJ-0007&limit=40&Patient_ID=P1 answered 404";
        let masked = m.text(text);
        assert!(
            !masked.contains("SUBJ-0007") && !masked.contains("=P1"),
            "{masked}"
        );
        assert!(
            masked.contains(&format!("subject={}&limit=40", m.mask("SUBJ-0007"))),
            "{masked}"
        );
        assert!(masked.ends_with(" answered 404"));
        assert_eq!(m.text(&masked), masked, "idempotent");
        assert_eq!(m.text(text), masked, "stable");
        assert_ne!(
            Masker::new(b"other", &DEFAULT_PARAMS.map(String::from)).mask("SUBJ-0007"),
            m.mask("SUBJ-0007")
        );
        assert_eq!(
            m.text("/api?limit=40&objectsubject=x"),
            "/api?limit=40&objectsubject=x",
            "whole names only"
        );
        let mut v = serde_json::json!({"url": "/a?subject=S1", "n": 1, "list": ["/b?mrn=M2"]});
        m.json(&mut v);
        assert!(
            !v.to_string().contains("S1") && !v.to_string().contains("M2"),
            "{v}"
        );
    }
}

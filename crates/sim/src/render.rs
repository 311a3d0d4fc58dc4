//! Pages of the dataset in the two vendor shapes.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::dataset::Page;
use super::SimConfig;

fn param<T: std::str::FromStr>(q: &BTreeMap<String, String>, name: &str, default: T) -> T {
    q.get(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `path?query` with `name` set to `value`, other parameters kept.
fn link(path: &str, q: &BTreeMap<String, String>, name: &str, value: &str) -> String {
    let mut url = url::Url::parse("http://sim/").unwrap_or_else(|_| unreachable!("a constant URL parses"));
    url.set_path(path);
    {
        let mut pairs = url.query_pairs_mut();
        for (k, v) in q.iter().filter(|(k, _)| k.as_str() != name) {
            pairs.append_pair(k, v);
        }
        pairs.append_pair(name, value);
    }
    format!("{}?{}", url.path(), url.query().unwrap_or_default())
}

/// The JSON endpoint's next page by offset, whether or not records remain
/// (for the `endless` fault).
pub fn next_offset_link(cfg: &SimConfig, q: &BTreeMap<String, String>) -> String {
    let limit: u32 = param(q, "limit", 200u32).clamp(1, 1_000_000);
    let offset: u32 = param(q, "offset", 0u32);
    link(&cfg.json_path, q, "offset", &(offset + limit).to_string())
}

/// What a JSON page says for each record's `modified_date__v`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Modified {
    /// The dataset's own timestamps.
    Real,
    /// Dated 1999 (a vendor clock set back).
    Backdated,
    /// This text, for every record (hostile values).
    Fixed(String),
}

/// A Vault-style page: `modified_since` (exclusive), `limit`, `offset`;
/// the next page in `responseDetails.next_page` (and in a Link header).
pub fn json_page(
    cfg: &SimConfig,
    q: &BTreeMap<String, String>,
    garbage: bool,
    modified: Modified,
    next_override: Option<String>,
) -> (Page, Option<String>) {
    if garbage {
        return (
            Page::whole(r#"{"responseStatus":"SUCCESS","data":[{"id":"AT-"#),
            None,
        );
    }
    let ds = cfg.dataset.clone();
    let limit: u32 = param(q, "limit", 200u32).clamp(1, 1_000_000);
    let offset: u32 = param(q, "offset", 0u32);
    let first_in_window = ds.first_after_modified(q.get("modified_since").map(String::as_str));
    let total = (ds.records + 1).saturating_sub(first_in_window);
    let start = first_in_window.saturating_add(offset);
    let end = start.saturating_add(limit).min(ds.records + 1); // exclusive
    let size = end.saturating_sub(start);
    let next = next_override.or_else(|| {
        (end <= ds.records).then(|| link(&cfg.json_path, q, "offset", &(offset + limit).to_string()))
    });
    let next_json = match &next {
        Some(n) => format!(r#","next_page":{}"#, serde_json::Value::String(n.clone())),
        None => String::new(),
    };
    let head = format!(
        r#"{{"responseStatus":"SUCCESS","responseDetails":{{"limit":{limit},"offset":{offset},"size":{size},"total":{total}{next_json}}},"data":["#
    );
    // Newest first: position p of the window holds the record p places
    // from its newest end, so offset 0 starts with the latest record.
    let newest_first = cfg.newest_first;
    let last = ds.records;
    let page = Page::from_fn(move || {
        let ds = ds.clone();
        let modified = modified.clone();
        std::iter::once(Bytes::from(head.clone()))
            .chain((start..end).map(move |p| {
                let mut s = if p > start {
                    String::from(",")
                } else {
                    String::new()
                };
                let n = if newest_first {
                    last + first_in_window - p
                } else {
                    p
                };
                let mut record = ds.record(n);
                match &modified {
                    Modified::Real => {}
                    Modified::Backdated => record.modified = format!("1999-01-01T00:00:{:02}Z", n % 60),
                    Modified::Fixed(text) => record.modified = text.clone(),
                }
                s.push_str(&ds.json_record(&record));
                Bytes::from(s)
            }))
            .chain(std::iter::once(Bytes::from_static(b"]}")))
    });
    (page, next)
}

/// A Rave-style ClinicalAuditRecords page: `studyoid`, `startid`,
/// `per_page`; the next page only in a Link header.
pub fn odm_page(
    cfg: &SimConfig,
    q: &BTreeMap<String, String>,
    garbage: bool,
    next_override: Option<String>,
) -> (Page, Option<String>) {
    if garbage {
        return (
            Page::whole(
                r#"<?xml version="1.0"?><ODM ODMVersion="1.3" FileType="Transactional"><ClinicalData>"#,
            ),
            None,
        );
    }
    let ds = cfg.dataset.clone();
    let study = q.get("studyoid").cloned().unwrap_or_else(|| "Study(Prod)".into());
    let per_page: u32 = param(q, "per_page", 1000u32).clamp(1, 1_000_000);
    let start = ds.first_at_source_id(param(q, "startid", 1u64));
    let end = start.saturating_add(per_page).min(ds.records + 1); // exclusive
    let rave = cfg.profile.pages_audit_records_as_rave();
    // Rave's Link names the next page by `startid` and need not repeat the
    // request's other parameters: the RWS help's examples show it with
    // `studyoid`, `startid` and `per_page` only, and rwslib's ODMAdapter
    // reads nothing but `startid` from it (`get_next_start_id`). The rave
    // profile drops `mode` and `unicode` from it, so a client that follows
    // the link verbatim gets pages 2 onward without them.
    let link_query: BTreeMap<String, String> = q
        .iter()
        .filter(|(k, _)| !rave || matches!(k.as_str(), "studyoid" | "per_page"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let next = next_override.or_else(|| {
        (end <= ds.records && end > start).then(|| {
            link(
                &cfg.odm_path,
                &link_query,
                "startid",
                &(ds.record(end - 1).source_id + 1).to_string(),
            )
        })
    });
    // Without `unicode=true` RWS answers in a legacy code page: a character
    // outside it becomes '?' (rwslib `AuditRecordsRequest(unicode=...)`).
    // The rave profile's reason for change names a user with an umlaut.
    let reason = rave.then(|| {
        if q.get("unicode").is_some_and(|v| v == "true") {
            "Korrigiert von Müller"
        } else {
            "Korrigiert von M?ller"
        }
    });
    // Rave stamps every response with the time it made it (and a fresh
    // FileOID), so two answers with the same records differ in bytes; the
    // rave profile does the same. The generic profile keeps fixed bytes.
    let created = match rave {
        true => humantime::format_rfc3339_millis(std::time::SystemTime::now())
            .to_string()
            .replace('Z', "-00:00"),
        false => "2026-12-02T00:00:00.000-00:00".to_string(),
    };
    let head = format!(
        r#"<?xml version="1.0" encoding="utf-8"?><ODM FileType="Transactional" FileOID="sim-{}-{start}" CreationDateTime="{created}" ODMVersion="1.3" xmlns:mdsol="http://www.mdsol.com/ns/odm/metadata" xmlns="http://www.cdisc.org/ns/odm/v1.3"><ClinicalData StudyOID="{}" MetaDataVersionOID="1">"#,
        ds.seed,
        xml_escape(&study)
    );
    let page = Page::from_fn(move || {
        let ds = ds.clone();
        let study = study.clone();
        std::iter::once(Bytes::from(head.clone()))
            .chain((start..end).map(move |n| Bytes::from(ds.odm_record(&ds.record(n), &study, reason))))
            .chain(std::iter::once(Bytes::from_static(b"</ClinicalData></ODM>")))
    });
    (page, next)
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

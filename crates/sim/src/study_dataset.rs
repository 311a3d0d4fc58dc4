//! Rave study datasets as the rave profile serves them (mdsol/rwslib
//! `StudyDatasetRequest`: `GET studies/{project}({env})/datasets/{regular|raw}
//! [/{formoid}]` with an optional `start` of `YYYY-mm-ddTHH:MM:SS`, rwslib's
//! `format_date_argument`; the answer is one ODM document, ClinicalData of
//! SubjectData). `start` is read as UTC and inclusive: a dataset holds the
//! records changed at or after it and visible now. The document's
//! `CreationDateTime` is the server's clock with milliseconds, as Rave
//! writes it (`2013-04-08T10:28:49.578-00:00` in rwslib's tests).
//!
//! Record times come from the audit-trail arrivals when the simulator has
//! them (records appear over time), else from the dataset's fixed times.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::dataset::Page;
use super::SimConfig;

/// A dataset request's answer, or `None` when `path` is not one.
pub fn page(cfg: &SimConfig, path: &str, q: &BTreeMap<String, String>, now: SystemTime) -> Option<Page> {
    let rest = path.strip_prefix("/RaveWebServices/studies/")?;
    let (study, kind) = rest.split_once("/datasets/")?;
    let kind = kind.split('/').next().unwrap_or_default();
    if !matches!(kind, "regular" | "raw") {
        return None;
    }
    let study = percent_decode(study);
    let start_ms = match q.get("start") {
        None => i64::MIN,
        Some(s) => match humantime::parse_rfc3339(&format!("{s}Z")) {
            Ok(t) if s.len() == 19 => millis(t),
            _ => {
                return Some(Page::whole(super::vendor::rave::response_error(
                    "RWS00092",
                    "Invalid start date",
                )))
            }
        },
    };
    let now_ms = millis(now);
    let ds = cfg.dataset.clone();
    let arrivals = cfg.audit_trail.clone();
    let stamp = move |n: u32| match &arrivals {
        Some(a) => (a.stamp_ms(n), a.visible_ms(n)),
        None => {
            let t = humantime::parse_rfc3339(&ds.record(n).modified).map_or(0, millis);
            (t, t)
        }
    };
    let served: Vec<u32> = (1..=cfg.dataset.records)
        .filter(|n| {
            let (at, visible) = stamp(*n);
            at >= start_ms && visible <= now_ms
        })
        .collect();
    let created = humantime::format_rfc3339_millis(now)
        .to_string()
        .replace('Z', "-00:00");
    let head = format!(
        r#"<?xml version="1.0" encoding="utf-8"?><ODM FileType="Snapshot" FileOID="sim-dataset-{created}" CreationDateTime="{created}" ODMVersion="1.3" xmlns:mdsol="http://www.mdsol.com/ns/odm/metadata" xmlns="http://www.cdisc.org/ns/odm/v1.3"><ClinicalData StudyOID="{}" MetaDataVersionOID="1">"#,
        xml_escape(&study)
    );
    let ds = cfg.dataset.clone();
    let raw = kind == "raw";
    Some(Page::from_fn(move || {
        let ds = ds.clone();
        let served = served.clone();
        std::iter::once(Bytes::from(head.clone()))
            .chain(served.into_iter().map(move |n| {
                let r = ds.record(n);
                let value = if raw { format!("{}", r.value) } else { format!("{} mg", r.value) };
                Bytes::from(format!(
                    r#"<SubjectData SubjectKey="SUBJ-{:04}" TransactionType="Upsert"><SiteRef LocationOID="SITE-{:02}"/><StudyEventData StudyEventOID="VISIT"><FormData FormOID="{}" FormRepeatKey="1"><ItemGroupData ItemGroupOID="{}" ItemGroupRepeatKey="{n}"><ItemData ItemOID="RECORD" Value="DS-{n:07}"/><ItemData ItemOID="{}" Value="{value}"/></ItemGroupData></FormData></StudyEventData></SubjectData>"#,
                    r.subject,
                    r.subject % 10 + 1,
                    r.form,
                    r.form,
                    r.field
                ))
            }))
            .chain(std::iter::once(Bytes::from_static(b"</ClinicalData></ODM>")))
    }))
}

fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={s}").as_bytes())
        .next()
        .map_or_else(|| s.to_string(), |(_, v)| v.into_owned())
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

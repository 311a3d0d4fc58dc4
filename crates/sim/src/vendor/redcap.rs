//! The redcap profile: REDCap's API as its API help describes it and its
//! clients use it (PyCap `redcap/request.py`, REDCapR `R/redcap-read.R`
//! and `R/redcap-log-read.R`, redcapAPI `R/exportLogging.R` and
//! `R/makeApiCall.R`):
//!
//! - one endpoint, `POST /api/`, form fields only; the token is the form
//!   field `token` (every client puts it in the body);
//! - `content=version`: plain text (`14.0.1`; `SimConfig::redcap_version`);
//! - `content=log` (Export Logging, REDCap >= 10.8.0): a bare JSON array of
//!   `timestamp` (`YYYY-MM-DD HH:MM`, the server's local time, no offset),
//!   `username`, `action`, `details`, `record`, newest first, the rows
//!   `beginTime`..`endTime` (wall-clock minutes) of the `logtype` asked (all
//!   but page views when none). The API help says "after" and "before";
//!   redcapAPI reads them as inclusive: the profile does, unless
//!   `redcap_exclusive_bounds` makes it read them strictly. Rows carry no
//!   id: two identical changes in one minute are two identical rows;
//! - every export the profile answers is itself logged, as REDCap logs an
//!   API export (`logtype=export`, "Data export (API)");
//! - errors in the format asked for, at their status: a refused token is
//!   403 `{"error":"You do not have permissions to use the API"}`, an
//!   unknown content 400.
//!
//! Records *arrive* over time (`Arrivals`), stamped on the simulator's
//! clock (`clock_skew_s` puts it near a DST change) in `SimConfig::
//! server_zone`, which compares wall times as REDCap's database does.

use std::collections::BTreeMap;
use std::time::SystemTime;

use hyper::StatusCode;
use jiff::civil::DateTime;

use super::Authn;
use crate::audit_trail::Arrivals;
use crate::Dataset;

/// The one API path.
pub const API_PATH: &str = "/api/";

/// The version a server answers when the simulator is not told otherwise.
pub const VERSION: &str = "14.0.1";

/// The token is the form field `token` (PyCap `_RCRequest`: `payload["token"]`).
pub fn authenticate(form: &BTreeMap<String, String>, config: &crate::SimConfig) -> Authn {
    match form.get("token") {
        None => Authn::Missing,
        Some(t) if *t == config.token => Authn::Ok,
        Some(_) => Authn::Invalid,
    }
}

/// REDCap's refusal of a token (REDCap's API help, "Error handling": 403
/// "You do not have permissions to use the API").
pub fn refused_credential() -> (StatusCode, Option<(&'static str, String)>) {
    (
        StatusCode::FORBIDDEN,
        Some((
            "application/json",
            error("You do not have permissions to use the API"),
        )),
    )
}

/// `{"error": text}`.
pub fn error(text: &str) -> String {
    serde_json::json!({ "error": text }).to_string()
}

/// A form body's fields (later ones of the same name win, as PHP's do).
pub fn form_fields(form: &[u8]) -> BTreeMap<String, String> {
    url::form_urlencoded::parse(form)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// The answer to an export: status, content type, body.
pub fn export(
    config: &crate::SimConfig,
    form: &BTreeMap<String, String>,
    now: SystemTime,
    own_exports: &[i64],
) -> (StatusCode, &'static str, String) {
    match form.get("content").map(String::as_str) {
        Some("version") => (StatusCode::OK, "text/plain", config.redcap_version.clone()),
        Some("log") => match log(config, form, now, own_exports) {
            Ok(body) => (StatusCode::OK, "application/json", body),
            Err(text) => (StatusCode::BAD_REQUEST, "application/json", error(&text)),
        },
        _ => (
            StatusCode::BAD_REQUEST,
            "application/json",
            error("The value of the parameter \"content\" is not valid"),
        ),
    }
}

/// Export Logging: the rows of `beginTime`..`endTime`, newest first.
fn log(
    config: &crate::SimConfig,
    form: &BTreeMap<String, String>,
    now: SystemTime,
    own_exports: &[i64],
) -> Result<String, String> {
    let tz = jiff::tz::TimeZone::get(&config.server_zone).map_err(|e| e.to_string())?;
    let bound = |name: &str| -> Result<Option<DateTime>, String> {
        match form.get(name).map(|v| v.trim()).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(text) => {
                let ok = text.len() == 16 && text.as_bytes()[10] == b' ';
                ok.then(|| text.replacen(' ', "T", 1).parse::<DateTime>().ok())
                    .flatten()
                    .map(Some)
                    .ok_or_else(|| format!("The value of the parameter \"{name}\" is not a valid datetime (YYYY-MM-DD HH:MM)"))
            }
        }
    };
    let (begin, end) = (bound("beginTime")?, bound("endTime")?);
    let logtype = form.get("logtype").map(String::as_str).unwrap_or("");
    let now_ms = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let wall = |ms: i64| {
        let ts = jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let dt = ts.to_zoned(tz.clone()).datetime();
        dt.with().second(0).subsec_nanosecond(0).build().unwrap_or(dt)
    };
    let inside = |at: DateTime| {
        let after = begin.is_none_or(|b| {
            if config.redcap_exclusive_bounds {
                at > b
            } else {
                at >= b
            }
        });
        let before = end.is_none_or(|e| {
            if config.redcap_exclusive_bounds {
                at < e
            } else {
                at <= e
            }
        });
        after && before
    };
    // (instant ms, row): record changes, and this server's own API exports.
    let mut rows: Vec<(i64, serde_json::Value)> = Vec::new();
    if matches!(logtype, "" | "record" | "record_edit") {
        if let Some(arrivals) = &config.audit_trail {
            rows.extend(record_rows(&config.dataset, arrivals, now_ms, &wall, &inside));
        }
    }
    if matches!(logtype, "" | "export") {
        for ms in own_exports.iter().filter(|ms| **ms <= now_ms) {
            let at = wall(*ms);
            if inside(at) {
                rows.push((
                    *ms,
                    serde_json::json!({
                        "timestamp": at.strftime("%Y-%m-%d %H:%M").to_string(),
                        "username": config.username,
                        "action": "Data export (API)",
                        "details": "Export logging (API)",
                        "record": "",
                    }),
                ));
            }
        }
    }
    // Newest first, as REDCap's Logging page and its export list them.
    rows.sort_by_key(|row| std::cmp::Reverse(row.0));
    let rows: Vec<serde_json::Value> = rows.into_iter().map(|(_, row)| row).collect();
    Ok(serde_json::Value::Array(rows).to_string())
}

/// The record changes visible at `now_ms` whose wall minute is inside.
fn record_rows(
    ds: &Dataset,
    arrivals: &Arrivals,
    now_ms: i64,
    wall: &dyn Fn(i64) -> DateTime,
    inside: &dyn Fn(DateTime) -> bool,
) -> Vec<(i64, serde_json::Value)> {
    (1..=ds.records)
        .filter(|n| arrivals.visible_ms(*n) <= now_ms)
        .filter_map(|n| {
            let at = wall(arrivals.stamp_ms(n));
            if !inside(at) {
                return None;
            }
            let shown = arrivals.original(n);
            let rec = ds.record(shown);
            // The fields changed, as REDCap's log lists them; `visit` numbers
            // the change, so a test can tell which it is (a twin shows its
            // original's).
            let row = serde_json::json!({
                "timestamp": at.strftime("%Y-%m-%d %H:%M").to_string(),
                "username": "sim_user",
                "action": format!("Update record {}", rec.subject),
                "details": format!("{} = '{}', visit = '{shown}'", rec.field, rec.value),
                "record": rec.subject.to_string(),
            });
            Some((arrivals.stamp_ms(n), row))
        })
        .collect()
}

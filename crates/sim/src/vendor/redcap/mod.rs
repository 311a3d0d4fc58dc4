//! The redcap profile: REDCap's API as its API help describes it and its
//! clients use it (PyCap `redcap/request.py`, REDCapR `R/redcap-read.R`
//! and `R/redcap-log-read.R`, redcapAPI `R/exportLogging.R` and
//! `R/makeApiCall.R`):
//!
//! - one endpoint, `POST /api/`, form fields only; the token is the form
//!   field `token` (every client puts it in the body);
//! - `content=version`: plain text (`14.0.1`; `SimConfig::redcap_version`);
//! - `content=log`: Export Logging (`log.rs`);
//! - `content=record`: Export Records, `content=exportFieldNames` and
//!   `content=dag` (`records.rs`);
//! - every export the profile answers is itself logged, as REDCap logs an
//!   API export (`logtype=export`, "Data export (API)");
//! - errors in the format asked for, at their status: a refused token is
//!   403 `{"error":"You do not have permissions to use the API"}`, an
//!   unknown content 400.
//!
//! Changes *arrive* over time (`Arrivals`), stamped on the simulator's
//! clock (`clock_skew_s` puts it near a DST change) in `SimConfig::
//! server_zone`, which compares wall times as REDCap's database does. The
//! API help says a range's bounds are "after" and "before"; redcapAPI reads
//! them as inclusive: the profile does, unless `redcap_exclusive_bounds`
//! makes it read them strictly.

mod log;
pub mod records;

use std::collections::BTreeMap;
use std::time::SystemTime;

use hyper::StatusCode;
use jiff::civil::DateTime;

use super::Authn;

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
    deleted: &std::collections::BTreeSet<u32>,
) -> (StatusCode, &'static str, String) {
    match form.get("content").map(String::as_str) {
        Some("version") => (StatusCode::OK, "text/plain", config.redcap_version.clone()),
        Some("log") => match log::export(config, form, now, own_exports) {
            Ok(body) => (StatusCode::OK, "application/json", body),
            Err(text) => (StatusCode::BAD_REQUEST, "application/json", error(&text)),
        },
        Some("record") => match records::export(config, form, now, deleted) {
            Ok(body) => (StatusCode::OK, "application/json", body),
            Err(text) => (StatusCode::BAD_REQUEST, "application/json", error(&text)),
        },
        Some("exportFieldNames") => (StatusCode::OK, "application/json", records::field_names()),
        Some("dag") => (StatusCode::OK, "application/json", records::groups()),
        _ => (
            StatusCode::BAD_REQUEST,
            "application/json",
            error("The value of the parameter \"content\" is not valid"),
        ),
    }
}

/// The server's wall clock as REDCap's database compares it.
struct Wall {
    tz: jiff::tz::TimeZone,
    strict: bool,
}

impl Wall {
    fn of(config: &crate::SimConfig) -> Result<Wall, String> {
        Ok(Wall {
            tz: jiff::tz::TimeZone::get(&config.server_zone).map_err(|e| e.to_string())?,
            strict: config.redcap_exclusive_bounds,
        })
    }

    /// The wall time of an instant in ms since the epoch, whole seconds.
    fn at(&self, ms: i64) -> DateTime {
        let ts = jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let dt = ts.to_zoned(self.tz.clone()).datetime();
        dt.with().subsec_nanosecond(0).build().unwrap_or(dt)
    }

    /// The bound `name` of `form`, `len` characters (16: `YYYY-MM-DD
    /// HH:MM`; 19: with seconds), or `None` when not sent.
    fn bound(form: &BTreeMap<String, String>, name: &str, len: usize) -> Result<Option<DateTime>, String> {
        match form.get(name).map(|v| v.trim()).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(text) => {
                let ok = text.len() == len && text.as_bytes()[10] == b' ';
                let shape = if len == 16 {
                    "YYYY-MM-DD HH:MM"
                } else {
                    "YYYY-MM-DD HH:MM:SS"
                };
                ok.then(|| text.replacen(' ', "T", 1).parse::<DateTime>().ok())
                    .flatten()
                    .map(Some)
                    .ok_or_else(|| {
                        format!("The value of the parameter \"{name}\" is not a valid datetime ({shape})")
                    })
            }
        }
    }

    /// Whether `at` lies between `begin` and `end` as the server reads them.
    fn inside(&self, at: DateTime, begin: Option<DateTime>, end: Option<DateTime>) -> bool {
        let after = begin.is_none_or(|b| if self.strict { at > b } else { at >= b });
        let before = end.is_none_or(|e| if self.strict { at < e } else { at <= e });
        after && before
    }
}

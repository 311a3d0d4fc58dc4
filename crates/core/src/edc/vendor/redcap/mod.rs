//! REDCap: its error dialect (REDCap's API help, "Error handling"; PyCap
//! `redcap/request.py`, REDCapR `R/redcap-read.R`, redcapAPI
//! `R/makeApiCall.R`). An error comes in the format the request asked for,
//! at any status: `{"error": "..."}` (JSON), `<hash><error>...</error></hash>`
//! (XML) or `ERROR: ...` (CSV). A token REDCap does not accept is 403 ("You
//! do not have permissions to use the API"): exit 77.
//!
//! REDCap also bans an address that crosses its per-minute hit threshold
//! (`page_hit_threshold_per_minute`): every later request is a 429 whose
//! body says the address "has been banned due to suspected abuse", with no
//! Retry-After; only an administrator can lift the ban, and it stops every
//! REDCap user behind the same address. Such an answer is never retried:
//! the run stops at once (exit 76), saying so.
//!
//! The simulator's `redcap-error` fault answers in these shapes.

pub(crate) mod export;
pub(crate) mod facts;
pub(crate) mod records;
pub(crate) mod scope;
pub(crate) mod version;

use super::{scrubbed, NotAPage, VendorError, VendorErrorKind};
use crate::edc::payload::PageSummary;

/// The words REDCap's ban answer carries.
const BANNED: &str = "banned due to suspected abuse";

/// A scanned 2xx body: a page only with its records array (an HTML login
/// page at 200 is not JSON and never reaches here).
pub(super) fn judge(
    page: PageSummary,
    missing_records: impl Fn() -> NotAPage,
) -> Result<PageSummary, NotAPage> {
    if !page.records_found {
        return Err(missing_records());
    }
    Ok(page)
}

/// The error in a non-2xx body at `status`, in any of REDCap's three
/// formats, or its ban in any body.
pub(super) fn in_error_body(status: u16, body: &[u8]) -> Option<VendorError> {
    let text = String::from_utf8_lossy(body);
    if text.to_ascii_lowercase().contains(BANNED) {
        return Some(VendorError {
            kind: VendorErrorKind::Banned,
            code: format!("HTTP {status} banned"),
            message: scrubbed(&first_line(&text)),
        });
    }
    let message = json_error(body)
        .or_else(|| xml_error(&text))
        .or_else(|| csv_error(&text))?;
    let kind = match status {
        401 | 403 => VendorErrorKind::Permission,
        429 => VendorErrorKind::Throttled,
        _ => VendorErrorKind::Other,
    };
    Some(VendorError {
        kind,
        code: format!("HTTP {status}"),
        message: scrubbed(&first_line(&message)),
    })
}

/// `{"error": "..."}`.
fn json_error(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    value.get("error")?.as_str().map(str::to_string)
}

/// `<hash><error>...</error></hash>`.
fn xml_error(text: &str) -> Option<String> {
    let start = text.find("<error>")? + "<error>".len();
    let end = start + text[start..].find("</error>")?;
    text.contains("<hash>").then(|| text[start..end].to_string())
}

/// `ERROR: ...`.
fn csv_error(text: &str) -> Option<String> {
    text.trim_start()
        .strip_prefix("ERROR:")
        .map(|m| m.trim().to_string())
}

/// The first line, at most 200 characters: a message, never a page.
fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .trim()
        .chars()
        .take(200)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redcap_errors_are_read_in_each_format() {
        let json = in_error_body(
            400,
            br#"{"error":"The value of the parameter \"content\" is not valid"}"#,
        )
        .unwrap();
        assert_eq!(
            (json.kind, json.message.as_str()),
            (
                VendorErrorKind::Other,
                "The value of the parameter \"content\" is not valid"
            )
        );
        let xml = in_error_body(
            403,
            b"<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n<hash><error>You do not have permissions to use the API</error></hash>",
        )
        .unwrap();
        assert_eq!(
            (xml.kind, xml.message.as_str()),
            (
                VendorErrorKind::Permission,
                "You do not have permissions to use the API"
            )
        );
        let csv = in_error_body(400, b"ERROR: The field 'dob' does not exist").unwrap();
        assert_eq!(csv.message, "The field 'dob' does not exist");
        assert_eq!(in_error_body(502, b"<html><body>Bad Gateway</body></html>"), None);
        assert_eq!(in_error_body(400, br#"{"records":[]}"#), None);
    }

    #[test]
    fn a_ban_is_told_in_any_body_and_never_taken_for_a_throttle() {
        let ban = in_error_body(
            429,
            b"Your IP address (203.0.113.7) has been banned due to suspected abuse. Please contact your REDCap administrator.",
        )
        .unwrap();
        assert_eq!(ban.kind, VendorErrorKind::Banned);
        assert!(
            ban.message.contains("banned due to suspected abuse"),
            "{}",
            ban.message
        );
        let json = in_error_body(
            429,
            br#"{"error":"The IP address has been BANNED due to suspected abuse"}"#,
        )
        .unwrap();
        assert_eq!(json.kind, VendorErrorKind::Banned);
        assert_eq!(
            in_error_body(429, br#"{"error":"too many requests"}"#)
                .unwrap()
                .kind,
            VendorErrorKind::Throttled
        );
    }
}

//! Castor EDC: its error dialect and its authentication.
//!
//! Errors: every Castor API error is a JSON body with `type`, `title`,
//! `status` and `detail` at the HTTP status it names (Castor helpdesk,
//! "Application Programming Interface (API)"; castoredc_api
//! `CastorClient.handle_response` raises on the status and its callers read
//! `error.response.json()["detail"]`). An empty collection is answered
//! that way too, a 404 whose detail says there are none ("There are no
//! report instances.", castoredc_api `all_report_instances`): that is an
//! empty result, not a failure. Authentication is OAuth2 client
//! credentials (`edc/oauth.rs`). The simulator's `castor` profile imitates
//! the same documents.

pub(crate) mod pass;

use super::{scrubbed, NotAPage, VendorError, VendorErrorKind};
use crate::edc::payload::PageSummary;

/// The status Castor answers an empty collection with: a 404 whose
/// `detail` says "There are no ..." (castoredc_api `all_report_instances`).
pub(super) const NO_ITEMS_STATUS: u16 = 404;

/// What a Castor error body holds that we read.
#[derive(serde::Deserialize)]
struct Problem {
    status: Option<serde_json::Value>,
    title: Option<String>,
    detail: Option<String>,
}

/// A scanned 2xx body: a page only with its records array (a HAL document
/// without `_embedded`, or an HTML page at 200, is never landed).
pub(super) fn judge(
    page: PageSummary,
    missing_records: impl Fn() -> NotAPage,
) -> Result<PageSummary, NotAPage> {
    if !page.records_found {
        return Err(missing_records());
    }
    Ok(page)
}

/// The error in a non-2xx body, if it holds Castor's error document.
pub(super) fn in_error_body(body: &[u8]) -> Option<VendorError> {
    let problem: Problem = serde_json::from_slice(body).ok()?;
    let detail = problem.detail?;
    let status = match &problem.status {
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    let kind = match status {
        Some(401) => VendorErrorKind::InvalidSession,
        Some(403) => VendorErrorKind::Permission,
        Some(429) => VendorErrorKind::Throttled,
        Some(404) if says_none(&detail) => VendorErrorKind::NoItems,
        // An unknown study, or one this client may not see, is a 404
        // naming it: this credential cannot read what --study names (77).
        Some(404) if detail.to_ascii_lowercase().contains("study") => VendorErrorKind::Permission,
        _ => VendorErrorKind::Other,
    };
    let code = match (status, problem.title) {
        (Some(s), Some(t)) => format!("{s} {}", t.chars().take(64).collect::<String>()),
        (Some(s), None) => s.to_string(),
        (None, Some(t)) => t.chars().take(64).collect(),
        (None, None) => "error".into(),
    };
    Some(VendorError {
        kind,
        code: scrubbed(&code),
        message: scrubbed(&detail.chars().take(200).collect::<String>()),
    })
}

/// "There are no data points.", "There are no report instances.": the
/// way Castor says a collection is empty.
fn says_none(detail: &str) -> bool {
    detail
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("there are no ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Dialect;
    use crate::edc::vendor::error_in_body;

    fn kind(body: &str) -> Option<VendorErrorKind> {
        error_in_body(Dialect::Castor, 0, body.as_bytes()).map(|e| e.kind)
    }

    #[test]
    fn castor_errors_are_read_by_their_status_and_detail() {
        let doc = |status: u16, title: &str, detail: &str| {
            format!(
                r#"{{"type":"http://www.w3.org/Protocols/rfc2616/rfc2616-sec10.html","title":"{title}","status":{status},"detail":"{detail}"}}"#
            )
        };
        assert_eq!(
            kind(&doc(401, "Unauthorized", "x")),
            Some(VendorErrorKind::InvalidSession)
        );
        assert_eq!(
            kind(&doc(403, "Forbidden", "x")),
            Some(VendorErrorKind::Permission)
        );
        assert_eq!(
            kind(&doc(429, "Too Many Requests", "x")),
            Some(VendorErrorKind::Throttled)
        );
        assert_eq!(
            kind(&doc(404, "Not Found", "There are no report instances.")),
            Some(VendorErrorKind::NoItems)
        );
        assert_eq!(
            kind(&doc(404, "Not Found", "Study not found")),
            Some(VendorErrorKind::Permission)
        );
        assert_eq!(
            kind(&doc(500, "Internal Server Error", "boom")),
            Some(VendorErrorKind::Other)
        );
        let e = error_in_body(
            Dialect::Castor,
            422,
            doc(422, "Unprocessable Entity", "bad page").as_bytes(),
        )
        .unwrap();
        assert_eq!(
            (e.code.as_str(), e.message.as_str()),
            ("422 Unprocessable Entity", "bad page")
        );
        // Not Castor's document: no vendor error, the status decides.
        assert_eq!(kind("<html>Bad gateway</html>"), None);
        assert_eq!(kind(r#"{"status":404}"#), None);
    }
}

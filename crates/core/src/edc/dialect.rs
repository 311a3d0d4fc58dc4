//! Vendor error dialects: what a response *body* says about the request.
//!
//! Vault answers most errors with HTTP 200 and a JSON envelope (Vault REST
//! API reference, "Errors": `responseStatus` SUCCESS | WARNING | FAILURE |
//! EXCEPTION, `errors[{type, message}]`; "Error Types" lists the types).
//! Rave Web Services answers with `<Response ReasonCode="RWS000nn"
//! ErrorClientResponseMessage="...">` or an ODM whose root carries
//! `mdsol:ErrorDescription` ("Incorrect login and password combination.
//! [RWS00008]"), at 4xx and sometimes at 200 (mdsol/rwslib
//! `RWSConnection.send_request`, `RWSError`, `RWSErrorResponse`).
//!
//! This module is pure: it turns what the payload scanners found into a
//! page or a [`VendorError`] whose kind decides what the page loop does.
//! A vendor error is never landed as data and never ends a window.

use std::fmt;

use serde::Serialize;

use super::payload::{self, Envelope, InvalidPayload, PageSummary};
use crate::config::{Dialect, PayloadFormat};

/// What the page loop does about a vendor error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VendorErrorKind {
    /// The session is no longer valid: renew once, repeat the request.
    InvalidSession,
    /// The vendor's own rate limit: audit, pause the quota, wait, retry.
    Throttled,
    /// The credential or its privileges were refused: exit 77.
    Permission,
    /// Anything else: exit 65, naming the vendor's code.
    Other,
}

/// An error the vendor reported in a response body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VendorError {
    pub kind: VendorErrorKind,
    /// Vault: every `errors[].type`, comma-separated; Rave: the reason code.
    pub code: String,
    /// The vendor's message (at most 200 characters, secrets scrubbed).
    pub message: String,
}

impl fmt::Display for VendorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.code)
        } else {
            write!(f, "{}: {}", self.code, self.message)
        }
    }
}

/// Why a 2xx body is not a page.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NotAPage {
    Vendor(VendorError),
    Invalid(InvalidPayload),
}

/// Vault error types that mean "this credential may not do this" (Vault
/// REST API reference, "Error Types"): exit 77, not a data error.
const VAULT_PERMISSION: [&str; 6] = [
    "INSUFFICIENT_ACCESS",
    "USERNAME_OR_PASSWORD_INCORRECT",
    "NO_PASSWORD_PROVIDED",
    "INACTIVE_USER",
    "USER_LOCKED_OUT",
    "PASSWORD_CHANGE_REQUIRED",
];

/// Rave's reason code for a bad login (mdsol/rwslib tests: "Incorrect login
/// and password combination. [RWS00008]").
const RAVE_BAD_LOGIN: &str = "RWS00008";

/// Judges a scanned 2xx body under `dialect`.
pub(crate) fn judge(
    dialect: Dialect,
    format: PayloadFormat,
    records_pointer: &str,
    page: PageSummary,
) -> Result<PageSummary, NotAPage> {
    let missing_records = || {
        NotAPage::Invalid(InvalidPayload::json(format!(
            "no records array at {records_pointer}"
        )))
    };
    match dialect {
        Dialect::Generic => {
            if page.envelope.rave_response.is_some() {
                return Err(NotAPage::Invalid(InvalidPayload::odm(
                    "the root element is <Response>, not <ODM>",
                )));
            }
            if format == PayloadFormat::Json && !page.records_found {
                return Err(missing_records());
            }
            Ok(page)
        }
        Dialect::Vault => match page.envelope.status.as_deref() {
            Some("SUCCESS" | "WARNING") if page.records_found => Ok(page),
            Some("SUCCESS" | "WARNING") => Err(missing_records()),
            Some("FAILURE" | "EXCEPTION") => Err(NotAPage::Vendor(vault_error(&page.envelope))),
            Some(other) => Err(NotAPage::Invalid(InvalidPayload::json(format!(
                "responseStatus {other:?} is none of SUCCESS, WARNING, FAILURE, EXCEPTION"
            )))),
            None => Err(NotAPage::Invalid(InvalidPayload::json(
                "no responseStatus: not a Vault response",
            ))),
        },
        Dialect::Rave => match rave_error(&page.envelope) {
            Some(e) => Err(NotAPage::Vendor(e)),
            None => Ok(page),
        },
    }
}

/// The vendor error in a non-2xx body (at most [`super::ERROR_BODY_CAP`]
/// bytes), if the dialect finds one.
pub(crate) fn in_error_body(dialect: Dialect, body: &[u8]) -> Option<VendorError> {
    match dialect {
        Dialect::Generic => None,
        Dialect::Vault => {
            let envelope = payload::json_envelope_of(body)?;
            (envelope.reports_failure() || !envelope.errors.is_empty()).then(|| vault_error(&envelope))
        }
        Dialect::Rave => {
            let odm = payload::scan_odm(body).ok()?;
            rave_error(&Envelope {
                rave_response: odm.rave_response,
                rave_error_description: odm.error_description,
                ..Envelope::default()
            })
        }
    }
}

fn scrubbed(message: &str) -> String {
    crate::redact::scrub(message).into_owned()
}

/// The most consequential of Vault's errors decides the kind: a session
/// to renew first, then a limit to wait for, then a refusal.
fn vault_error(envelope: &Envelope) -> VendorError {
    let types: Vec<&str> = envelope.errors.iter().map(|e| e.kind.as_str()).collect();
    let (kind, index) = if let Some(i) = types.iter().position(|t| *t == "INVALID_SESSION_ID") {
        (VendorErrorKind::InvalidSession, i)
    } else if let Some(i) = types.iter().position(|t| *t == "API_LIMIT_EXCEEDED") {
        (VendorErrorKind::Throttled, i)
    } else if let Some(i) = types.iter().position(|t| VAULT_PERMISSION.contains(t)) {
        (VendorErrorKind::Permission, i)
    } else {
        (VendorErrorKind::Other, 0)
    };
    let code = if types.iter().all(|t| t.is_empty()) {
        envelope.status.clone().unwrap_or_else(|| "FAILURE".into())
    } else {
        types.join(",")
    };
    VendorError {
        kind,
        code,
        message: envelope
            .errors
            .get(index)
            .map(|e| scrubbed(&e.message))
            .unwrap_or_default(),
    }
}

fn rave_error(envelope: &Envelope) -> Option<VendorError> {
    let (code, message) = if let Some(r) = &envelope.rave_response {
        let message = r.message.clone().unwrap_or_default();
        let code = r
            .reason_code
            .clone()
            .or_else(|| bracketed_code(&message))
            .unwrap_or_else(|| "Response".into());
        (code, message)
    } else {
        let description = envelope.rave_error_description.clone()?;
        let code = bracketed_code(&description).unwrap_or_else(|| "ErrorDescription".into());
        (code, description)
    };
    let kind = if code == RAVE_BAD_LOGIN {
        VendorErrorKind::Permission
    } else {
        VendorErrorKind::Other
    };
    Some(VendorError {
        kind,
        code,
        message: scrubbed(&message),
    })
}

/// `RWS00008` from "Incorrect login and password combination. [RWS00008]".
fn bracketed_code(text: &str) -> Option<String> {
    let open = text.rfind('[')?;
    let close = open + text[open..].find(']')?;
    let code = &text[open + 1..close];
    (code.len() >= 4 && code.starts_with("RWS") && code[3..].bytes().all(|b| b.is_ascii_digit()))
        .then(|| code.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edc::payload::{scan_json, scan_odm, RaveResponse};

    fn vault(doc: &str) -> Result<PageSummary, NotAPage> {
        let page = scan_json(doc.as_bytes(), "/data", None, "modified_date__v").unwrap();
        judge(Dialect::Vault, PayloadFormat::Json, "/data", page)
    }

    fn kind_of(r: Result<PageSummary, NotAPage>) -> VendorErrorKind {
        match r {
            Err(NotAPage::Vendor(e)) => e.kind,
            other => panic!("expected a vendor error, got {other:?}"),
        }
    }

    #[test]
    fn vault_success_and_warning_are_pages_failure_and_exception_never() {
        assert_eq!(
            vault(r#"{"responseStatus":"SUCCESS","data":[{}]}"#)
                .unwrap()
                .records,
            1
        );
        let w = vault(r#"{"responseStatus":"WARNING","warnings":[{"type":"X","message":"y"}],"data":[]}"#)
            .unwrap();
        assert_eq!(w.envelope.warnings.len(), 1);
        // A defect once shipped: a FAILURE with an empty data array.
        let failure =
            r#"{"responseStatus":"FAILURE","errors":[{"type":"INVALID_DATA","message":"bad"}],"data":[]}"#;
        assert_eq!(kind_of(vault(failure)), VendorErrorKind::Other);
        assert_eq!(
            kind_of(vault(
                r#"{"responseStatus":"EXCEPTION","errors":[{"type":"UNEXPECTED_ERROR","message":""}]}"#
            )),
            VendorErrorKind::Other
        );
        assert!(matches!(vault(r#"{"data":[]}"#), Err(NotAPage::Invalid(_))));
    }

    #[test]
    fn vault_error_types_decide_the_action() {
        let doc =
            |t: &str| format!(r#"{{"responseStatus":"FAILURE","errors":[{{"type":"{t}","message":"m"}}]}}"#);
        assert_eq!(
            kind_of(vault(&doc("INVALID_SESSION_ID"))),
            VendorErrorKind::InvalidSession
        );
        assert_eq!(
            kind_of(vault(&doc("API_LIMIT_EXCEEDED"))),
            VendorErrorKind::Throttled
        );
        assert_eq!(
            kind_of(vault(&doc("INSUFFICIENT_ACCESS"))),
            VendorErrorKind::Permission
        );
        assert_eq!(kind_of(vault(&doc("MALFORMED_URL"))), VendorErrorKind::Other);
        let both = r#"{"responseStatus":"FAILURE","errors":[{"type":"INVALID_DATA","message":"a"},{"type":"INVALID_SESSION_ID","message":"b"}]}"#;
        match vault(both) {
            Err(NotAPage::Vendor(e)) => {
                assert_eq!(e.kind, VendorErrorKind::InvalidSession);
                assert_eq!(e.code, "INVALID_DATA,INVALID_SESSION_ID");
                assert_eq!(e.message, "b");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rave_error_documents_are_errors_at_any_status() {
        let odm = r#"<ODM xmlns:mdsol="http://www.mdsol.com/ns/odm/metadata" FileType="Snapshot" ODMVersion="1.3" mdsol:ErrorDescription="Incorrect login and password combination. [RWS00008]" xmlns="http://www.cdisc.org/ns/odm/v1.3" />"#;
        let page = scan_odm(odm.as_bytes()).unwrap();
        let summary = PageSummary {
            records: 0,
            records_found: true,
            next_link: None,
            high_water: None,
            low_water: None,
            envelope: Envelope {
                rave_error_description: page.error_description.clone(),
                ..Envelope::default()
            },
            keys: None,
        };
        match judge(Dialect::Rave, PayloadFormat::Odm, "", summary.clone()) {
            Err(NotAPage::Vendor(e)) => assert_eq!(
                (e.kind, e.code.as_str()),
                (VendorErrorKind::Permission, "RWS00008")
            ),
            other => panic!("{other:?}"),
        }
        // The generic dialect keeps today's behaviour: an empty page.
        assert!(judge(Dialect::Generic, PayloadFormat::Odm, "", summary).is_ok());
        let resp = br#"<Response ReferenceNumber="r" IsTransactionSuccessful="0" ReasonCode="RWS00092" ErrorClientResponseMessage="CRF version not found"/>"#;
        let e = in_error_body(Dialect::Rave, resp).unwrap();
        assert_eq!(
            (e.kind, e.code.as_str(), e.message.as_str()),
            (VendorErrorKind::Other, "RWS00092", "CRF version not found")
        );
        assert_eq!(in_error_body(Dialect::Generic, resp), None);
        let _ = RaveResponse::default();
    }

    #[test]
    fn reason_codes_are_read_only_from_a_trailing_bracket() {
        assert_eq!(bracketed_code("x [RWS00008]").as_deref(), Some("RWS00008"));
        assert_eq!(bracketed_code("x [abc]"), None);
        assert_eq!(bracketed_code("no code"), None);
    }
}

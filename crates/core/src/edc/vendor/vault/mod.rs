//! Veeva Vault: its error dialect (most errors at HTTP 200, in a JSON
//! envelope: Vault REST API reference, "Errors": `responseStatus` SUCCESS |
//! WARNING | FAILURE | EXCEPTION and `errors[{type, message}]`; "Error
//! Types" lists the types), its session login (`login.rs`, "Authentication"
//! / "User Name and Password"), and its VQL queries (`vql.rs`, "VQL").
//! The simulator's `vault` profile imitates the same documents.

pub(crate) mod burst;
pub(crate) mod daily;
pub(crate) mod login;
pub(crate) mod vql;

use super::{scrubbed, NotAPage, VendorError, VendorErrorKind};
use crate::edc::payload::{self, Envelope, InvalidPayload, PageSummary};

pub use vql::{tokens, Token, VqlSelect};

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

/// A scanned 2xx body: SUCCESS and WARNING are pages (a records array
/// required), FAILURE and EXCEPTION vendor errors, anything else not a
/// Vault response.
pub(super) fn judge(
    page: PageSummary,
    missing_records: impl Fn() -> NotAPage,
) -> Result<PageSummary, NotAPage> {
    match page.envelope.status.as_deref() {
        Some("SUCCESS" | "WARNING") if page.records_found => Ok(page),
        Some("SUCCESS" | "WARNING") => Err(missing_records()),
        Some("FAILURE" | "EXCEPTION") => Err(NotAPage::Vendor(vault_error(&page.envelope))),
        Some(other) => Err(NotAPage::Invalid(InvalidPayload::json(format!(
            "responseStatus {other:?} is none of SUCCESS, WARNING, FAILURE, EXCEPTION"
        )))),
        None => Err(NotAPage::Invalid(InvalidPayload::json(
            "no responseStatus: not a Vault response",
        ))),
    }
}

/// The error in a non-2xx body, if it holds Vault's envelope.
pub(super) fn in_error_body(body: &[u8]) -> Option<VendorError> {
    let envelope = payload::json_envelope_of(body)?;
    (envelope.reports_failure() || !envelope.errors.is_empty()).then(|| vault_error(&envelope))
}

/// The most consequential of Vault's errors decides the kind: a session
/// to renew first, then a limit to wait for, then a refusal.
pub(super) fn vault_error(envelope: &Envelope) -> VendorError {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Dialect, PayloadFormat};
    use crate::edc::payload::scan_json;
    use crate::edc::vendor::judge as judge_as;

    fn vault(doc: &str) -> Result<PageSummary, NotAPage> {
        let page = scan_json(doc.as_bytes(), "/data", None, "modified_date__v").unwrap();
        judge_as(Dialect::Vault, PayloadFormat::Json, "/data", page)
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
}

//! The rave profile: Medidata Rave Web Services, as its help pages and
//! mdsol/rwslib use it.

use hyper::StatusCode;

/// RWS: HTTP Basic with the Rave user's name and password (mdsol/rwslib
/// `RWSConnection.__init__`: `self.auth = (username, password)`, handed to
/// requests as Basic auth).
pub(super) fn authenticate(value: &[u8], config: &crate::SimConfig) -> super::Authn {
    use base64::Engine;
    let expected =
        base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", config.username, config.password));
    if value == format!("Basic {expected}").as_bytes() {
        super::Authn::Ok
    } else {
        super::Authn::Invalid
    }
}

/// mdsol/rwslib: RWS answers bad credentials with 401 and an error ODM
/// (`RWSConnection.send_request`, the 401 branch; `RWSError`).
pub(super) fn refused_credential() -> (StatusCode, Option<(&'static str, String)>) {
    (
        StatusCode::UNAUTHORIZED,
        Some((
            "text/xml",
            odm_error("RWS00008", "Incorrect login and password combination."),
        )),
    )
}

/// Rave's answer to bad credentials: HTTP 401 with an ODM whose root
/// carries `mdsol:ErrorDescription` (mdsol/rwslib `RWSError` docstring and
/// tests: "Incorrect login and password combination. [RWS00008]").
pub fn odm_error(code: &str, description: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?><ODM xmlns:mdsol="http://www.mdsol.com/ns/odm/metadata" FileType="Snapshot" CreationDateTime="2026-12-02T00:00:00.000-00:00" FileOID="4d13722a-ceb6-4419-a917-b6ad5d0bc30e" ODMVersion="1.3" mdsol:ErrorDescription="{description} [{code}]" xmlns="http://www.cdisc.org/ns/odm/v1.3" />"#
    )
}

/// Rave's `<Response>` error document (mdsol/rwslib `RWSErrorResponse`:
/// `ReferenceNumber`, `InboundODMFileOID`, `IsTransactionSuccessful="0"`,
/// `ReasonCode`, `ErrorClientResponseMessage`).
pub fn response_error(code: &str, message: &str) -> String {
    format!(
        r#"<Response ReferenceNumber="0b47fe86-542f-4070-9e7d-16396a5ef08a" InboundODMFileOID="Not Supplied" IsTransactionSuccessful="0" ReasonCode="{code}" ErrorClientResponseMessage="{message}"></Response>"#
    )
}

//! Medidata Rave Web Services: its error dialect (`<Response
//! ReasonCode="RWS000nn" ErrorClientResponseMessage="...">`, or an ODM whose
//! root carries `mdsol:ErrorDescription`, at 4xx and sometimes at 200:
//! mdsol/rwslib `RWSConnection.send_request`, `RWSError`,
//! `RWSErrorResponse`) and its paging (`paging.rs`: `startid` audit records
//! and study datasets, as rwslib's requests build them). Its
//! authentication is HTTP Basic (`RWSConnection` sends `auth=(username,
//! password)`), the client's `basic` scheme. The simulator's `rave`
//! profile imitates the same documents.

pub(crate) mod paging;

use super::{scrubbed, NotAPage, VendorError, VendorErrorKind};
use crate::edc::payload::{self, Envelope, PageSummary};

/// Rave's reason code for a bad login (mdsol/rwslib tests: "Incorrect login
/// and password combination. [RWS00008]").
const RAVE_BAD_LOGIN: &str = "RWS00008";

/// A scanned 2xx body: an error document is a vendor error, anything else
/// the page.
pub(super) fn judge(page: PageSummary) -> Result<PageSummary, NotAPage> {
    match rave_error(&page.envelope) {
        Some(e) => Err(NotAPage::Vendor(e)),
        None => Ok(page),
    }
}

/// The error in a non-2xx body, if it holds one of Rave's documents.
pub(super) fn in_error_body(body: &[u8]) -> Option<VendorError> {
    let odm = payload::scan_odm(body).ok()?;
    rave_error(&Envelope {
        rave_response: odm.rave_response,
        rave_error_description: odm.error_description,
        ..Envelope::default()
    })
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
    use crate::config::{Dialect, PayloadFormat};
    use crate::edc::payload::{scan_odm, RaveResponse};
    use crate::edc::vendor::{error_in_body, judge as judge_as};

    #[test]
    fn rave_error_documents_are_errors_at_any_status() {
        let odm = r#"<ODM xmlns:mdsol="http://www.mdsol.com/ns/odm/metadata" FileType="Snapshot" ODMVersion="1.3" mdsol:ErrorDescription="Incorrect login and password combination. [RWS00008]" xmlns="http://www.cdisc.org/ns/odm/v1.3" />"#;
        let page = scan_odm(odm.as_bytes()).unwrap();
        let summary = PageSummary {
            records: 0,
            records_found: true,
            next_link: None,
            page_count: None,
            total_items: None,
            other_day: None,
            high_water: None,
            low_water: None,
            envelope: Envelope {
                rave_error_description: page.error_description.clone(),
                ..Envelope::default()
            },
            keys: None,
        };
        match judge_as(Dialect::Rave, PayloadFormat::Odm, "", summary.clone()) {
            Err(NotAPage::Vendor(e)) => assert_eq!(
                (e.kind, e.code.as_str()),
                (VendorErrorKind::Permission, "RWS00008")
            ),
            other => panic!("{other:?}"),
        }
        // The generic dialect keeps today's behaviour: an empty page.
        assert!(judge_as(Dialect::Generic, PayloadFormat::Odm, "", summary).is_ok());
        let resp = br#"<Response ReferenceNumber="r" IsTransactionSuccessful="0" ReasonCode="RWS00092" ErrorClientResponseMessage="CRF version not found"/>"#;
        let e = error_in_body(Dialect::Rave, 0, resp).unwrap();
        assert_eq!(
            (e.kind, e.code.as_str(), e.message.as_str()),
            (VendorErrorKind::Other, "RWS00092", "CRF version not found")
        );
        assert_eq!(error_in_body(Dialect::Generic, 0, resp), None);
        let _ = RaveResponse::default();
    }

    #[test]
    fn reason_codes_are_read_only_from_a_trailing_bracket() {
        assert_eq!(bracketed_code("x [RWS00008]").as_deref(), Some("RWS00008"));
        assert_eq!(bracketed_code("x [abc]"), None);
        assert_eq!(bracketed_code("no code"), None);
    }
}

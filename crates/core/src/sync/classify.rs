//! What a response that is not a 2xx page asks the loop to do: a pure
//! function of the status, the vendor's verdict on the body and whether the
//! credential can be renewed, so every branch is unit-tested without I/O.

use reqwest::StatusCode;

use crate::edc::vendor::{VendorError, VendorErrorKind};

/// The loop's next step after a non-2xx response.
#[derive(Debug)]
pub(super) enum Verdict {
    /// 429 or 503: wait as the server says, then the same page.
    Throttled,
    /// The vendor reported an error in the body (its dialect decides).
    Vendor(VendorError),
    /// 5xx: back off, then the same page.
    Retry(String),
    /// 401 with a credential that can be renewed: renew once, same page.
    Renew(String),
    /// 401 or 403: the credential is refused (exit 77).
    Refused(String),
    /// Any other status: the stream stops uncommitted (exit 65).
    Failed(String),
}

/// Judges a non-2xx response. A throttle wins over a body error (a 429
/// whose body also says "limit" is waited out once, not twice).
pub(super) fn classify(
    status: StatusCode,
    vendor: Option<VendorError>,
    renewable: bool,
    request: &str,
) -> Verdict {
    // A ban is not a throttle, though it comes as a 429: waiting cannot
    // lift it, and asking again keeps the address banned.
    if let Some(error) = vendor.as_ref().filter(|e| e.kind == VendorErrorKind::Banned) {
        return Verdict::Vendor(error.clone());
    }
    if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
        return Verdict::Throttled;
    }
    if let Some(error) = vendor {
        // A 5xx is the server's own failure, whatever document comes with
        // it (Rave answers an internal error with a `<Response>` or an ODM
        // error document): retried within the budget like a bare 5xx. A
        // throttle, a refused session or a refused privilege keeps its own
        // step at any status.
        if status.is_server_error() && error.kind == VendorErrorKind::Other {
            return Verdict::Retry(format!("status {status} with the vendor error {error}"));
        }
        return Verdict::Vendor(error);
    }
    if status.is_server_error() {
        return Verdict::Retry(format!("status {status}"));
    }
    if status == StatusCode::UNAUTHORIZED && renewable {
        return Verdict::Renew(format!("HTTP {}", status.as_u16()));
    }
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        return Verdict::Refused(format!("{request} answered {status}"));
    }
    Verdict::Failed(format!("{request} answered {status}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(code: u16, renewable: bool) -> Verdict {
        classify(
            StatusCode::from_u16(code).unwrap(),
            None,
            renewable,
            "GET https://edc.example/api/x",
        )
    }

    #[test]
    fn every_status_class_has_one_step() {
        assert!(matches!(judge(429, false), Verdict::Throttled));
        assert!(matches!(judge(503, true), Verdict::Throttled));
        assert!(matches!(judge(500, false), Verdict::Retry(r) if r.contains("500")));
        assert!(matches!(judge(502, false), Verdict::Retry(_)));
        assert!(matches!(judge(401, true), Verdict::Renew(r) if r == "HTTP 401"));
        assert!(matches!(judge(401, false), Verdict::Refused(_)));
        assert!(matches!(judge(403, true), Verdict::Refused(d) if d.contains("403")));
        assert!(
            matches!(judge(404, false), Verdict::Failed(d) if d == "GET https://edc.example/api/x answered 404 Not Found")
        );
        assert!(matches!(judge(400, true), Verdict::Failed(_)));
    }

    #[test]
    fn a_5xx_with_an_error_document_is_retried_a_4xx_is_not() {
        let error = |kind| VendorError {
            kind,
            code: "RWS00100".into(),
            message: "Internal error".into(),
        };
        let judge = |code, kind| {
            classify(
                StatusCode::from_u16(code).unwrap(),
                Some(error(kind)),
                false,
                "GET https://edc.example/api/x",
            )
        };
        assert!(matches!(judge(500, VendorErrorKind::Other), Verdict::Retry(r) if r.contains("RWS00100")));
        assert!(matches!(judge(502, VendorErrorKind::Other), Verdict::Retry(_)));
        assert!(matches!(judge(404, VendorErrorKind::Other), Verdict::Vendor(_)));
        // A ban comes as a 429 but is never a throttle to wait out.
        assert!(
            matches!(judge(429, VendorErrorKind::Banned), Verdict::Vendor(e) if e.kind == VendorErrorKind::Banned)
        );
        assert!(matches!(
            judge(429, VendorErrorKind::Throttled),
            Verdict::Throttled
        ));
        assert!(matches!(judge(200, VendorErrorKind::Other), Verdict::Vendor(_)));
        assert!(matches!(
            judge(500, VendorErrorKind::Permission),
            Verdict::Vendor(_)
        ));
        assert!(matches!(
            judge(500, VendorErrorKind::Throttled),
            Verdict::Vendor(_)
        ));
    }
}

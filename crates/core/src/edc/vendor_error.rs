//! What a vendor said in a response body about the request, in the terms
//! the page loop acts on: below the vendors' folders and the client, which
//! both speak of it.

use std::fmt;

use serde::Serialize;

use super::payload::InvalidPayload;

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
    /// The vendor says the collection is empty, as an error (Castor's 404
    /// "There are no ..."): the window has nothing more; nothing is landed
    /// and the cursor stays.
    NoItems,
    /// The vendor banned this address (REDCap's hit threshold): no request
    /// will succeed until an administrator lifts it; never retried, exit 76.
    Banned,
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

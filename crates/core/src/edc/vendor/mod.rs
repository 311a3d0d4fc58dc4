//! The vendors: one folder each (`generic.rs`; `rave/`; `vault/`; `castor/`;
//! `redcap/`), holding
//! what that vendor does differently (its error dialect, its
//! authentication's login, its paging, its delta endpoints), each citing
//! the vendor's documentation or its own clients. The page loop calls
//! only what this file offers, for the closed list of vendors the policy's
//! `dialect` names, and never matches on a vendor itself; adding one is
//! the checklist in docs/architecture.md ("Adding a vendor").
//!
//! Judging is pure: what the payload scanners found becomes a page or a
//! [`VendorError`] whose kind decides what the page loop does. A vendor
//! error is never landed as data and never ends a window, save the
//! vendor's own word that the collection is empty (`NoItems`), which ends
//! it with nothing landed and the cursor where it was.

pub(crate) mod castor;
mod generic;
pub(crate) mod rave;
pub(crate) mod redcap;
pub(crate) mod vault;

use super::payload::{InvalidPayload, PageSummary};
use crate::config::{Dialect, PayloadFormat};

pub(crate) use super::vendor_error::{NotAPage, VendorError, VendorErrorKind};

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
        Dialect::Generic => generic::judge(format, page, missing_records),
        Dialect::Vault => vault::judge(page, missing_records),
        Dialect::Rave => rave::judge(page),
        Dialect::Castor => castor::judge(page, missing_records),
        Dialect::Redcap => redcap::judge(page, missing_records),
    }
}

/// Whether a non-2xx body is worth reading for a vendor error (at most
/// [`super::ERROR_BODY_CAP`] bytes): not for the generic dialect, which
/// judges by status alone.
pub(crate) fn reads_error_bodies(dialect: Dialect) -> bool {
    dialect != Dialect::Generic
}

/// The vendor error in a non-2xx body at `status`, if the dialect finds
/// one.
pub(crate) fn error_in_body(dialect: Dialect, status: u16, body: &[u8]) -> Option<VendorError> {
    match dialect {
        Dialect::Generic => None,
        Dialect::Vault => vault::in_error_body(body),
        Dialect::Rave => rave::in_error_body(body),
        Dialect::Castor => castor::in_error_body(body),
        Dialect::Redcap => redcap::in_error_body(status, body),
    }
}

pub(super) fn scrubbed(message: &str) -> String {
    crate::redact::scrub(message).into_owned()
}

//! The vendors: one folder each (`generic.rs`; `rave/`; `vault/`; `castor/`;
//! `redcap/`), holding
//! what that vendor does differently (its error dialect, its
//! authentication's login, its paging, its delta endpoints, the facts it
//! is asked before a window), each citing the vendor's documentation or
//! its own clients. This file is the door: the folders are private, and
//! what the rest of the tool may use of them is re-exported here under
//! names of no vendor. The page loop calls only what the door offers (the
//! delta kind, `kind.rs`, and the judging below), for the closed list of
//! vendors the policy names, and never matches on a vendor itself; adding
//! one is the checklist in docs/architecture.md ("Adding a vendor"), and
//! a test-only vendor (`toy/`) runs a sync through the loop to hold it.
//!
//! Judging is pure: what the payload scanners found becomes a page or a
//! [`VendorError`] whose kind decides what the page loop does. A vendor
//! error is never landed as data and never ends a window, save the
//! vendor's own word that the collection is empty (`NoItems`), which ends
//! it with nothing landed and the cursor where it was.

mod answer;
mod castor;
mod generic;
mod kind;
mod paging;
mod rave;
mod redcap;
#[cfg(test)]
mod toy;
mod vault;

pub(crate) use answer::{Probe, Refused};
pub(crate) use kind::{DeltaKind, Endpoint, Follow, Following, PageView, Sends};
pub use paging::{first_page, next_page, next_window_start, PagingError};

// The closed request shapes the read-only client builds (`edc/client.rs`):
// REDCap's export form, Vault's session login and its VQL query.
pub(crate) use redcap::export::{Export as ExportForm, NotAnExport};
pub(crate) use vault::login::{LoginForm, LoginReply};
pub use vault::{tokens, Token, VqlSelect};

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

/// Whether the vendor's word that a collection holds no items
/// ([`VendorErrorKind::NoItems`]) is believed for the answer of HTTP
/// `status` to a request whose page can (`can_be_empty`) or cannot be
/// empty ([`kind::DeltaKind::may_be_empty`]: the first page of a window or
/// pass, or the page after a full one of a window read until a short
/// page; not a later page of a collection whose page count its pages
/// stated). Only with the status the vendor documents for that answer
/// (Castor's 404 "There are no ..."), and only where it can be true: a page
/// the collection said it has cannot be empty unless items went while it
/// was read, and an answer at another status (a 500 whose body claims it)
/// is not the vendor's documented word. `Err` says why it is not believed:
/// the loop then takes it for a failed page, retried within the budget,
/// never a completed window.
pub(crate) fn believes_no_items(dialect: Dialect, status: u16, can_be_empty: bool) -> Result<(), String> {
    let documented = match dialect {
        Dialect::Castor => castor::NO_ITEMS_STATUS,
        Dialect::Generic | Dialect::Vault | Dialect::Rave | Dialect::Redcap => {
            return Err("this vendor documents no answer that a collection is empty".into())
        }
    };
    match (status == documented, can_be_empty) {
        (true, true) => Ok(()),
        (false, _) => Err(format!(
            "the vendor's answer that the collection holds no items came with HTTP {status}, not the {documented} \
             it documents for it"
        )),
        (true, false) => Err(
            "the vendor answered that the collection holds no items on a page its pass said it has (after the \
             first), which cannot be empty unless items went while it was read"
                .into(),
        ),
    }
}

pub(super) fn scrubbed(message: &str) -> String {
    crate::redact::scrub(message).into_owned()
}

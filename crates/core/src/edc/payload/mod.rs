//! Payload validation before anything is committed: a page must be what the
//! policy says it is, or it is not landed as data (exit 65).
//!
//! Both validators take the body chunk by chunk as it streams in
//! (`PageCheck`), so a 64 MiB page is checked in one pass and in a few
//! hundred kilobytes of memory.

mod check;
pub(crate) mod identity;
#[cfg(test)]
mod identity_oracle;
mod json;
#[cfg(test)]
mod json_oracle;
mod odm;
pub(crate) mod xml_text;

use serde::Serialize;

pub use crate::record::order::{compare_params, earlier};
pub use crate::record::CursorValue;
pub use check::validate;
pub use json::{scan as scan_json, JsonCheck};
pub use odm::scan as scan_odm;

pub(crate) use check::{Checked, PageCheck};
pub(crate) use json::{envelope_of as json_envelope_of, record_keys};

/// Why a page is not a valid payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {format} payload: {detail}")]
pub struct InvalidPayload {
    pub format: &'static str,
    pub detail: String,
}

impl InvalidPayload {
    pub(crate) fn json(detail: impl Into<String>) -> Self {
        InvalidPayload {
            format: "JSON",
            detail: detail.into(),
        }
    }

    pub(crate) fn odm(detail: impl Into<String>) -> Self {
        InvalidPayload {
            format: "ODM",
            detail: detail.into(),
        }
    }
}

/// One `{type, message}` a vendor reported (message cut to 200 characters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VendorMessage {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

/// A Rave `<Response>` document: what RWS answers instead of data when a
/// request fails (mdsol/rwslib `RWSErrorResponse`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RaveResponse {
    pub reason_code: Option<String>,
    pub message: Option<String>,
    pub is_transaction_successful: Option<String>,
}

/// What the vendor said about the request inside the body, as opposed to
/// the data. Read for every page; the policy's dialect decides what it means.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Envelope {
    /// Vault `responseStatus`: SUCCESS | WARNING | FAILURE | EXCEPTION.
    pub status: Option<String>,
    pub errors: Vec<VendorMessage>,
    pub warnings: Vec<VendorMessage>,
    /// Rave: the root was `<Response>`, not `<ODM>`.
    pub rave_response: Option<RaveResponse>,
    /// Rave: `mdsol:ErrorDescription` on the ODM root (mdsol/rwslib `RWSError`).
    pub rave_error_description: Option<String>,
}

impl Envelope {
    /// Vault said FAILURE or EXCEPTION.
    pub fn reports_failure(&self) -> bool {
        matches!(self.status.as_deref(), Some("FAILURE" | "EXCEPTION"))
    }
}

/// What a valid page holds, as far as paging and the audit trail care.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PageSummary {
    /// Records on the page (JSON: the records array; ODM: AuditRecords, or
    /// SubjectData when there are none).
    pub records: u64,
    /// False when a JSON document had no records array (a vendor failure).
    #[serde(skip)]
    pub records_found: bool,
    /// JSON: the value at the next-page pointer, if any.
    pub next_link: Option<String>,
    /// A collection's page (`delta.collection`): how many pages and items
    /// the server says the collection has now.
    pub page_count: Option<u64>,
    pub total_items: Option<u64>,
    /// A window of whole days: the first record whose own day (its PHP
    /// DateTime's date, in the zone it names) is another day in the
    /// window's zone, described; the page is never committed.
    pub other_day: Option<String>,
    /// JSON: the largest `cursor_field`; ODM: the largest `SourceID`.
    pub high_water: Option<CursorValue>,
    /// The smallest of the same: below the cursor means records arrived
    /// out of order (audited, landed, never a reason to move back).
    pub low_water: Option<CursorValue>,
    /// What the vendor said besides the data.
    #[serde(skip)]
    pub envelope: Envelope,
    /// A JSON page checked for a lookback: every record's identity,
    /// learned in the same pass, or why a record has none (`None`: not
    /// asked for, or an ODM page).
    #[serde(skip)]
    pub keys: Option<Result<Vec<crate::record::identity::RecordKey>, InvalidPayload>>,
}

impl PageSummary {
    /// A page the vendor said holds nothing (Castor's "There are no ..."):
    /// no records, no next page, no marks.
    pub fn empty() -> PageSummary {
        PageSummary {
            records: 0,
            records_found: true,
            next_link: None,
            // A collection of no items on no pages.
            page_count: Some(0),
            total_items: Some(0),
            other_day: None,
            high_water: None,
            low_water: None,
            envelope: Envelope::default(),
            keys: Some(Ok(Vec::new())),
        }
    }
}

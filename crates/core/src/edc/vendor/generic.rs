//! The generic dialect: HTTP status only, the behaviour before vendor
//! dialects existed. A body that is Rave's `<Response>` is still no ODM
//! page, and a JSON page must have its records array.

use super::NotAPage;
use crate::config::PayloadFormat;
use crate::edc::payload::{InvalidPayload, PageSummary};

/// A scanned 2xx body.
pub(super) fn judge(
    format: PayloadFormat,
    page: PageSummary,
    missing_records: impl Fn() -> NotAPage,
) -> Result<PageSummary, NotAPage> {
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

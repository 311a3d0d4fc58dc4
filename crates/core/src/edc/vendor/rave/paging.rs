//! Rave's paging styles, as mdsol/rwslib pages them (the policy's
//! `delta.paging`):
//!
//! - `rave_startid`: ODM audit records (`datasets/ClinicalAuditRecords.odm`);
//!   `startid` / `per_page` on the first request, the next page's `startid`
//!   in a `Link` header, and the window's high-water mark is the largest
//!   `AuditRecord/SourceID` plus one. Only the link's `startid` is read: the
//!   next request is the page's own request with that `startid`, as
//!   rwslib's ODMAdapter does (`get_next_start_id` parses `startid` out of
//!   the link and builds a new `AuditRecordsRequest`). A link that drops
//!   `mode` or `unicode` would otherwise change what pages 2 onward hold
//!   (`M?ller` for `Müller`).
//! - `rave_dataset`: a study dataset (`studies/{study}/datasets/regular` or
//!   `raw`, rwslib `StudyDatasetRequest`): one ODM document a run, no next
//!   page, incremental with `start=YYYY-mm-ddTHH:MM:SS` (rwslib
//!   `format_date_argument`: whole seconds, no zone; sent in UTC). The
//!   cursor is the document's `CreationDateTime` (the server's clock), cut
//!   to its second: that second is read again by the next run, and its
//!   records recognised (`delta.lookback`).
//!
//! Where each style's next window starts (the SourceID after the largest,
//! the second a dataset was made in) is a rule of cursor values, in
//! `crate::record::Restart`; `paging.rs` picks it for the style.

use reqwest::Url;

use crate::edc::link::MalformedLink;

/// Rave numbers audit records from 1: a stream's very first request.
pub(crate) const FIRST_SOURCE_ID: &str = "1";

/// A dataset's `start` as RWS reads it: the cursor is kept as `...Z`, and
/// RWS reads `start` without a zone.
pub(crate) fn dataset_start(start: &str) -> &str {
    start.trim_end_matches('Z')
}

/// The page's own request with the `startid` the link names: every other
/// parameter (`studyoid`, `per_page`, `mode`, `unicode`, ...) stays what
/// the policy sent. A link without a numeric `startid`, or one that does not
/// move forward, is malformed (following it would repeat or skip records).
pub(crate) fn with_start_id(page_url: &Url, link: &Url, param: &str) -> Result<Url, MalformedLink> {
    let number = |u: &Url| {
        u.query_pairs()
            .find(|(k, _)| k == param)
            .and_then(|(_, v)| v.parse::<u64>().ok())
    };
    let next =
        number(link).ok_or_else(|| MalformedLink(format!("the next link {link} has no numeric {param}")))?;
    if number(page_url).is_some_and(|current| next <= current) {
        return Err(MalformedLink(format!(
            "the next link's {param}={next} does not move past this page's"
        )));
    }
    let next = next.to_string();
    let pairs: Vec<(String, String)> = page_url
        .query_pairs()
        .map(|(k, v)| {
            let v = if k == param { next.clone() } else { v.into_owned() };
            (k.into_owned(), v)
        })
        .collect();
    let mut url = page_url.clone();
    url.query_pairs_mut().clear().extend_pairs(&pairs);
    if !pairs.iter().any(|(k, _)| k == param) {
        url.query_pairs_mut().append_pair(param, &next);
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rave_next_page_is_the_request_itself_with_the_links_start_id() {
        let page = Url::parse("https://r.example/RaveWebServices/datasets/ClinicalAuditRecords.odm?studyoid=S%28Prod%29&mode=default&unicode=true&startid=1&per_page=2").unwrap();
        let link = Url::parse("https://r.example/RaveWebServices/datasets/ClinicalAuditRecords.odm?studyoid=S%28Prod%29&startid=3&per_page=2").unwrap();
        let next = with_start_id(&page, &link, "startid").unwrap();
        assert_eq!(
            next.query(),
            Some("studyoid=S%28Prod%29&mode=default&unicode=true&startid=3&per_page=2")
        );
        assert!(
            with_start_id(&page, &page, "startid").is_err(),
            "a link back to the same startid"
        );
        let no_id = Url::parse("https://r.example/x?per_page=2").unwrap();
        assert!(with_start_id(&page, &no_id, "startid").is_err());
    }
}

//! Paging styles (chosen per vendor in the policy) and window cursors.
//!
//! - `json_next`: the next page's link is in the body at a JSON pointer
//!   (Vault: `/responseDetails/next_page`);
//! - `link_header`: RFC 8288 `Link: <...>; rel="next"`;
//! - `rave_startid`: Rave ODM audit records; `startid` / `per_page` on the
//!   first request, the next page's `startid` in a `Link` header, and the
//!   window's high-water mark is the largest `AuditRecord/SourceID` plus one.
//!   Only the link's `startid` is read: the next request is the page's own
//!   request with that `startid`, as rwslib's ODMAdapter does
//!   (`get_next_start_id` parses `startid` out of the link and builds a new
//!   `AuditRecordsRequest`). A link that drops `mode` or `unicode` would
//!   otherwise change what pages 2 onward hold (`M?ller` for `Müller`).
//! - `rave_dataset`: a Rave study dataset (`studies/{study}/datasets/regular`
//!   or `raw`, rwslib `StudyDatasetRequest`): one ODM document a run, no next
//!   page, incremental with `start=YYYY-mm-ddTHH:MM:SS` (rwslib
//!   `format_date_argument`: whole seconds, no zone; sent in UTC). The
//!   cursor is the document's `CreationDateTime` (the server's clock), cut
//!   to its second: that second is read again by the next run, and its
//!   records recognised (`delta.lookback`).
//!
//! Every link is resolved against the page it came from and must stay on
//! the configured origin.

use reqwest::Url;

use super::link::{self, MalformedLink};
use super::origin::{Origin, OriginError};
use super::payload::{CursorValue, PageSummary};
use crate::config::{Delta, MissingValue, Paging, StreamSpec};
use crate::stream::StreamIdentity;

/// Why the next request cannot be formed.
#[derive(Debug, thiserror::Error)]
pub enum PagingError {
    #[error(transparent)]
    Origin(#[from] OriginError),
    #[error(transparent)]
    Link(#[from] MalformedLink),
    #[error(transparent)]
    Template(#[from] MissingValue),
}

/// The first page of a window starting at `window_start` (the cursor;
/// `None` for the very first run of a stream).
pub fn first_page(
    origin: &Origin,
    base: &Url,
    delta: &Delta,
    stream: &StreamSpec,
    id: &StreamIdentity,
    window_start: Option<&str>,
    window_end: Option<&str>,
) -> Result<Url, PagingError> {
    let mut url = origin.endpoint(base, &delta.path.fill(id)?)?;
    {
        let mut query = url.query_pairs_mut();
        query.clear();
        for (name, value) in delta.query.iter().chain(stream.query.iter()) {
            query.append_pair(name, &value.fill(id)?);
        }
        let start = match (window_start, &delta.paging) {
            (Some(s), _) => Some(s),
            // Rave numbers audit records from 1.
            (None, Paging::RaveStartid) => Some("1"),
            (None, _) => None,
        };
        match (start, &delta.paging) {
            // Kept as `...Z`; RWS reads `start` without a zone.
            (Some(start), Paging::RaveDataset) => {
                query.append_pair(&delta.cursor_param, start.trim_end_matches('Z'));
            }
            (Some(start), _) => {
                query.append_pair(&delta.cursor_param, start);
            }
            (None, _) => {}
        }
        if let (Some(window), Some(end)) = (&delta.window, window_end) {
            query.append_pair(&window.end_param, end);
        }
        if delta.paging != Paging::RaveDataset {
            query.append_pair(&delta.page_size_param, &delta.page_size.to_string());
        }
    }
    Ok(url)
}

/// The next page after one that arrived from `page_url`, or `None` at the
/// end of the window.
pub fn next_page(
    origin: &Origin,
    delta: &Delta,
    page_url: &Url,
    link_headers: &[String],
    summary: &PageSummary,
) -> Result<Option<Url>, PagingError> {
    let link = match delta.paging {
        Paging::RaveDataset => None,
        Paging::JsonNext { .. } => summary.next_link.clone(),
        Paging::LinkHeader | Paging::RaveStartid => {
            let values: Vec<&str> = link_headers.iter().map(String::as_str).collect();
            link::next_target(&values)?
        }
    };
    let Some(link) = link else { return Ok(None) };
    let target = origin.resolve(page_url, &link)?;
    Ok(Some(match delta.paging {
        Paging::RaveStartid => with_start_id(page_url, &target, &delta.cursor_param)?,
        _ => target,
    }))
}

/// The page's own request with the `startid` the link names: every other
/// parameter (`studyoid`, `per_page`, `mode`, `unicode`, ...) stays what
/// the policy sent. A link without a numeric `startid`, or one that does not
/// move forward, is malformed (following it would repeat or skip records).
fn with_start_id(page_url: &Url, link: &Url, param: &str) -> Result<Url, MalformedLink> {
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

/// The cursor a completed window leaves for the next one: the largest
/// cursor value seen (JSON), or the largest SourceID + 1 (Rave).
pub fn next_window_start(paging: &Paging, high_water: Option<&CursorValue>) -> Option<String> {
    match (paging, high_water) {
        (Paging::RaveStartid, Some(CursorValue::Number(n))) => n.as_u64().map(|id| (id + 1).to_string()),
        (Paging::RaveDataset, Some(CursorValue::Text(created))) => whole_second_utc(created),
        (_, Some(v)) => Some(v.as_param()),
        (_, None) => None,
    }
}

/// `2026-12-04T03:10:05.600-00:00` as `2026-12-04T03:10:05Z`: the second
/// it falls in, in UTC.
fn whole_second_utc(t: &str) -> Option<String> {
    crate::record::order::instant(t).map(|at| crate::record::order::utc_text(at, 0))
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

    #[test]
    fn a_dataset_restarts_at_the_second_its_document_was_made_in() {
        let made = CursorValue::Text("2026-12-04T05:10:05.600+02:00".into());
        assert_eq!(
            next_window_start(&Paging::RaveDataset, Some(&made)).as_deref(),
            Some("2026-12-04T03:10:05Z")
        );
    }

    #[test]
    fn rave_high_water_is_the_next_start_id() {
        let hw = CursorValue::Number(2351u64.into());
        assert_eq!(
            next_window_start(&Paging::RaveStartid, Some(&hw)).as_deref(),
            Some("2352")
        );
        let ts = CursorValue::Text("2026-01-03T00:00:00Z".into());
        assert_eq!(
            next_window_start(&Paging::LinkHeader, Some(&ts)).as_deref(),
            Some("2026-01-03T00:00:00Z")
        );
        assert_eq!(next_window_start(&Paging::LinkHeader, None), None);
    }
}

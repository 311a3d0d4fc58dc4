//! Paging styles (chosen per vendor in the policy) and window cursors.
//!
//! - `json_next`: the next page's link is in the body at a JSON pointer
//!   (Vault: `/responseDetails/next_page`);
//! - `link_header`: RFC 8288 `Link: <...>; rel="next"`;
//! - `page_number`: `page=1, 2, ...` until a page holds fewer records than
//!   the page size (Castor's audit trail), or for a `delta.collection` up
//!   to the `page_count` every page states (Castor's HAL collections);
//! - `rave_startid` and `rave_dataset`: Rave's, in its vendor folder
//!   (`vendor/rave/paging.rs`), which says how rwslib pages them.
//!
//! Every link is resolved against the page it came from and must stay on
//! the configured origin.

use reqwest::Url;

use super::rave::paging as rave;
use crate::config::{Delta, MissingValue, Paging, StreamSpec, WindowFormat};
use crate::edc::link::{self, MalformedLink};
use crate::edc::origin::{Origin, OriginError};
use crate::edc::payload::{CursorValue, PageSummary};
use crate::record::Restart;
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
    /// A window end that is no instant (a cursor edited by hand).
    #[error("the window's date: {0}")]
    Window(String),
    /// A collection's page that does not say how many pages there are.
    #[error(
        "the page does not state the collection's page count at {0} (delta.collection.page_count_pointer)"
    )]
    NoPageCount(String),
    /// A query that cannot be made (a cursor value no query can carry).
    #[error("{0}")]
    Query(String),
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
        let bounds = written_bounds(delta, window_start, window_end)?;
        let start = match (window_start, &delta.paging) {
            (Some(_), _) => bounds.0,
            (None, Paging::RaveStartid) => Some(rave::FIRST_SOURCE_ID.to_string()),
            (None, _) => None,
        };
        let start = start.as_deref();
        match (start, &delta.paging) {
            (Some(start), Paging::RaveDataset) => {
                query.append_pair(&delta.cursor_param, rave::dataset_start(start));
            }
            (Some(start), _) => {
                query.append_pair(&delta.cursor_param, start);
            }
            (None, _) => {}
        }
        if let (Some(window), Some(end)) = (&delta.window, bounds.1) {
            query.append_pair(&window.end_param, &end);
        }
        match &delta.paging {
            // The id list: only the record id field, for the window's range.
            Paging::RedcapRecords { id_field, .. } => {
                query.append_pair("fields[0]", id_field);
            }
            paging if !one_document_a_window(paging) => {
                query.append_pair(&delta.page_size_param, &delta.page_size.to_string());
            }
            _ => {}
        }
        if let Paging::PageNumber { page_param } = &delta.paging {
            query.append_pair(page_param, "1");
        }
    }
    Ok(url)
}

/// A window's start (or cursor) and end as the request writes them:
/// themselves; for a window of calendar dates their dates in the window's
/// zone; for a wall-clock window the server's wall times that cover it,
/// widened across a DST fall-back (`Zone::wall_bounds`).
fn written_bounds(
    delta: &Delta,
    start: Option<&str>,
    end: Option<&str>,
) -> Result<(Option<String>, Option<String>), PagingError> {
    let format = delta.window.as_ref().map(|w| &w.format);
    let date = |zone: &crate::zone::Zone, at: Option<&str>| {
        at.map(|a| zone.date_of(a))
            .transpose()
            .map_err(PagingError::Window)
    };
    match (format, end) {
        (Some(WindowFormat::Date { zone }), _) => Ok((date(zone, start)?, date(zone, end)?)),
        (Some(WindowFormat::Local { zone, precision }), Some(end)) => {
            let (begin, end) = zone
                .wall_bounds(start, end, *precision)
                .map_err(PagingError::Window)?;
            Ok((begin, Some(end)))
        }
        // A wall-clock window is always planned with its end.
        (Some(WindowFormat::Local { .. }), None) => Err(PagingError::Window(
            "a wall-clock window has no end to ask up to".into(),
        )),
        _ => Ok((start.map(str::to_string), end.map(str::to_string))),
    }
}

/// The page number `page_url` asks for (1 when it names none).
pub(crate) fn page_number(page_url: &Url, page_param: &str) -> u64 {
    page_url
        .query_pairs()
        .find(|(k, _)| k == page_param)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(1)
}

/// `page_url` asking for page `number` instead.
pub(crate) fn numbered(page_url: &Url, page_param: &str, number: u64) -> Url {
    let pairs: Vec<(String, String)> = page_url
        .query_pairs()
        .filter(|(k, _)| k != page_param)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let mut next = page_url.clone();
    {
        let mut query = next.query_pairs_mut();
        query.clear();
        for (k, v) in &pairs {
            query.append_pair(k, v);
        }
        query.append_pair(page_param, &number.to_string());
    }
    next
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
    let link = match &delta.paging {
        Paging::PageNumber { page_param } => {
            // A collection is paged by the count the server states (it may
            // serve fewer items a page than asked); a log until a short page.
            let current = page_number(page_url, page_param);
            let more = match &delta.collection {
                Some(c) => {
                    let count = summary
                        .page_count
                        .ok_or_else(|| PagingError::NoPageCount(c.page_count_pointer.clone()))?;
                    current < count
                }
                None => summary.records >= u64::from(delta.page_size),
            };
            return Ok(more.then(|| numbered(page_url, page_param, current + 1)));
        }
        // REDCap's batches follow from the id list (`redcap/records.rs`).
        Paging::RaveDataset | Paging::WholeWindow | Paging::RedcapRecords { .. } => None,
        Paging::JsonNext { .. } => summary.next_link.clone(),
        Paging::LinkHeader | Paging::RaveStartid => {
            let values: Vec<&str> = link_headers.iter().map(String::as_str).collect();
            link::next_target(&values)?
        }
    };
    let Some(link) = link else { return Ok(None) };
    let target = origin.resolve(page_url, &link)?;
    Ok(Some(match delta.paging {
        Paging::RaveStartid => rave::with_start_id(page_url, &target, &delta.cursor_param)?,
        _ => target,
    }))
}

/// Where a completed window's next one starts after its high-water mark:
/// the largest cursor value seen (JSON), the largest SourceID + 1 (Rave's
/// audit records), or the second a study dataset was made in.
pub(crate) fn restart(paging: &Paging) -> Restart {
    match paging {
        Paging::RaveStartid => Restart::AfterNumber,
        Paging::RaveDataset => Restart::AtItsSecond,
        _ => Restart::AtHighWater,
    }
}

/// The cursor a completed window leaves for the next one ([`restart`]).
pub fn next_window_start(paging: &Paging, high_water: Option<&CursorValue>) -> Option<String> {
    restart(paging).next_start(high_water)
}

/// A style that serves one document a window, with no next page and no
/// page size (a Rave study dataset, a whole window): nothing older than
/// the high-water mark can come later in the window.
pub(crate) fn one_document_a_window(paging: &Paging) -> bool {
    matches!(paging, Paging::RaveDataset | Paging::WholeWindow)
}

/// A style whose cursor is the server's own clock in the document (a Rave
/// study dataset's `CreationDateTime`): evidence only within
/// `clock_skew_max_s`, as a `Date` header is.
pub(crate) fn cursor_is_server_clock(paging: &Paging) -> bool {
    *paging == Paging::RaveDataset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_numbered_page_is_followed_by_the_next_number() {
        let first = Url::parse(
            "https://castor.example/api/study/S/audit-trail?date_from=2026-12-01&page_size=3&page=1",
        )
        .unwrap();
        assert_eq!(page_number(&first, "page"), 1);
        let second = numbered(&first, "page", page_number(&first, "page") + 1);
        assert_eq!(
            second.as_str(),
            "https://castor.example/api/study/S/audit-trail?date_from=2026-12-01&page_size=3&page=2"
        );
        assert_eq!(page_number(&second, "page"), 2);
        let without = Url::parse("https://castor.example/x?page_size=3").unwrap();
        assert_eq!(page_number(&without, "page"), 1);
        assert_eq!(numbered(&without, "page", 2).query(), Some("page_size=3&page=2"));
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

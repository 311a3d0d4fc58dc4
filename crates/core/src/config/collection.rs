//! `delta.collection`: a live collection read whole on every run (Castor's
//! study data, `GET /api/study/{study}/data-points/study`, which has no
//! since-filter). Castor pages its HAL collections by number and states
//! `page_count` and `total_items` on every page (castoredc_api
//! `retrieve_multiple_pages` reads `page_count` from the first page; the
//! item count is how a reader tells the collection changed under it).
//!
//! `collection: {page_count_pointer: /page_count, total_items_pointer:
//! /total_items, max_passes: 3}`, every key optional with those defaults.

use super::check::{integer, json_pointer, or_default, Fields, Report};
use super::policy::Collection;
use super::yaml::Node;

const KEYS: [&str; 3] = ["page_count_pointer", "total_items_pointer", "max_passes"];

const DEFAULT_PAGE_COUNT_POINTER: &str = "/page_count";
const DEFAULT_TOTAL_ITEMS_POINTER: &str = "/total_items";
const DEFAULT_MAX_PASSES: i64 = 3;

pub(super) fn collection(report: &mut Report, path: Vec<String>, node: &Node) -> Option<Collection> {
    let mut f = Fields::of(report, path, node)?;
    let pointer = |f: &mut Fields, report: &mut Report, key: &str, default: &str| match f.optional(key) {
        Some((p, n)) => json_pointer(report, &p, n),
        None => Some(default.to_string()),
    };
    let page_count_pointer = pointer(&mut f, report, "page_count_pointer", DEFAULT_PAGE_COUNT_POINTER);
    let total_items_pointer = pointer(&mut f, report, "total_items_pointer", DEFAULT_TOTAL_ITEMS_POINTER);
    let max_passes = or_default(f.optional("max_passes"), DEFAULT_MAX_PASSES, |p, n| {
        integer(report, p, n, 1, 100)
    });
    f.finish(report, &KEYS);
    Some(Collection {
        page_count_pointer: page_count_pointer?,
        total_items_pointer: total_items_pointer?,
        max_passes: u32::try_from(max_passes?).ok()?,
    })
}

//! `object_lock`: how long a vendor's landed pages must stay unchangeable
//! (S3 Object Lock), for the retention period a GxP record needs.
//!
//! `object_lock: {mode: governance|compliance, days: N}`. Where it is set
//! the landing must be an S3 bucket that locks objects: Object Lock enabled
//! and a default retention of this mode for at least N days, so that S3
//! itself locks every page as it is written (no moment in which a landed
//! page is not locked). A run proves the bucket's configuration before it
//! fetches and each page's retention after it lands (`store::object_lock`).

use super::check::{integer, string, Fields, Report};
use super::policy::{LockMode, ObjectLock};
use super::yaml::Node;

const KEYS: [&str; 2] = ["mode", "days"];

/// The longest retention taken: a hundred years, more than any GxP record
/// keeps (S3 itself takes up to 100 years).
const MAX_DAYS: i64 = 36_500;

pub(super) fn object_lock(report: &mut Report, path: Vec<String>, node: &Node) -> Option<ObjectLock> {
    let mut f = Fields::of(report, path, node)?;
    let mode = f
        .required(report, "mode")
        .and_then(|(p, n)| match string(report, &p, n)? {
            "governance" => Some(LockMode::Governance),
            "compliance" => Some(LockMode::Compliance),
            other => {
                report.add(
                    &p,
                    format!("must be governance or compliance (S3 Object Lock's modes), got {other:?}"),
                );
                None
            }
        });
    let days = f
        .required(report, "days")
        .and_then(|(p, n)| integer(report, &p, n, 1, MAX_DAYS))
        .map(|d| d as u32);
    f.finish(report, &KEYS);
    Some(ObjectLock {
        mode: mode?,
        days: days?,
    })
}

//! One request attempt's context: what every step of an attempt (permit,
//! credential, fetch, classification, waits, commit, audit lines) needs to
//! know about it, passed as one value instead of five parameters.

use reqwest::Url;

use crate::ledger::Cursor;

#[derive(Clone, Copy)]
pub(super) struct Request<'r> {
    /// The page asked for.
    pub url: &'r Url,
    /// The cursor before this page: what a failure leaves in place.
    pub cursor: &'r Cursor,
    /// `<run_id>:<stream>:<n>`, on every audit line about the attempt.
    pub id: &'r str,
    /// 1-based attempt at this page.
    pub attempt: u32,
    /// The policy's `max_retry_attempts`.
    pub budget: u32,
}

//! What a vendor asks of the server besides pages, and what it refuses of
//! an answer: the values its delta kind (`kind.rs`) and its folders hand
//! back to the page loop, below both.

use reqwest::Url;

/// A request the vendor asks before a window: read, never landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Probe {
    pub url: Url,
    /// What it asks, as messages name it (`content=version`).
    pub what: &'static str,
    /// Its answer may be as long as a page (a project's field list), not
    /// only an error body's length.
    pub page_sized: bool,
}

/// Why the vendor will not take what a page or a probe answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The answer is not what it should be (65).
    Invalid(String),
    /// A restricted token's subset the policy does not declare (77).
    Restricted(String),
    /// The server cannot serve what the stream asks (78).
    Unsupported(String),
}

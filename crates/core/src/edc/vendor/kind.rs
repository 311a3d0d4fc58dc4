//! The delta kind: what a stream's vendor decides about its requests and
//! its pages, one closed type built once from the policy's delta, whose
//! methods are pure. The page loop sends, lands, commits and audits; what
//! it sends first, what it asks before a window, and what follows a page
//! are the vendor's answers, never a vendor's name in the loop.
//!
//! Each vendor's part lives in its folder: Rave's paging in `rave/`, a
//! Vault VQL query in `vault/`, Castor's live collections read whole in
//! `castor/pass.rs`, REDCap's facts, batches and scope in `redcap/`; the
//! paging styles vendors share in `paging.rs`. Adding a vendor is its
//! folder, a variant here, and its arms below (docs/architecture.md,
//! "Adding a vendor").

use std::sync::Arc;

use reqwest::Url;

use super::answer::{Probe, Refused};
use super::castor::pass::{self, Pass};
use super::paging::{self, PagingError};
use super::redcap::{self, records::Records};
use super::vault::VqlSelect;
use crate::config::{Delta, Paging, Policy, StreamSpec};
use crate::edc::origin::Origin;
use crate::edc::payload::PageSummary;
use crate::record::Restart;
use crate::stream::StreamIdentity;

/// How a delta's requests are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sends {
    /// `GET` (and `HEAD`).
    Get,
    /// A query `POST`ed on its first page, its next pages `POST`s with no
    /// body (Vault VQL).
    Query,
    /// Every request an export form `POST`ed with the token in it (REDCap).
    Export,
}

impl Sends {
    /// The method a request line names.
    pub(crate) fn method(self) -> &'static str {
        match self {
            Sends::Get => "GET",
            Sends::Query | Sends::Export => "POST",
        }
    }
}

/// Where a stream's requests go.
#[derive(Clone, Copy)]
pub(crate) struct Endpoint<'a> {
    pub origin: &'a Origin,
    pub base: &'a Url,
    pub spec: &'a StreamSpec,
    pub identity: &'a StreamIdentity,
}

/// What a page says follows it.
#[derive(Debug, Default)]
pub(crate) struct Follow {
    /// The next request; `None` when the window is read.
    pub next: Option<Url>,
    /// A request to ask, and prove with [`Following::prove`], before this
    /// page lands (REDCap: one record exported as the batches will be, to
    /// see the token's scope before an id list lands).
    pub probe: Option<Url>,
    /// Records a batch asked for and holds no row of: deleted since the
    /// window's id list, audited once the page is committed.
    pub vanished: Option<(Url, redcap::records::Vanished)>,
    /// The pass this page ends consistently: its pages with items (their
    /// SHA-256s, in order) and the item count, the collection's snapshot.
    pub snapshot: Option<(Vec<String>, u64)>,
    /// The page's bytes were landed already (by the last snapshot or an
    /// earlier pass): nothing to land or list.
    pub unchanged: bool,
    /// The pass this page ends changed while it was read: audited once the
    /// page is committed, and read again from its first page (`next`).
    pub changed: Option<pass::Changed>,
}

/// A page as the vendor judges what follows it.
pub(crate) struct PageView<'a> {
    /// The request the page answers.
    pub url: &'a Url,
    /// Where the body came from after same-origin redirects.
    pub page_url: &'a Url,
    pub links: &'a [String],
    pub summary: &'a PageSummary,
    /// The whole body, when [`DeltaKind::reads_body`].
    pub body: Option<&'a [u8]>,
    pub sha256: &'a str,
}

/// What a page's headers announce of the vendor's own limits (Vault's
/// burst and daily allowances, `vault/burst.rs`, `vault/daily.rs`).
#[derive(Debug, Default)]
pub(crate) struct Announced {
    pub burst: Option<Burst>,
    pub daily: Option<Daily>,
}

/// A burst allowance: what is left of it in its window, of how many, the
/// spacing that spends the window evenly, and the key of the one gate every
/// request to the host passes while it is at the policy's floor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Burst {
    pub remaining: u64,
    pub limit: Option<u64>,
    pub spacing: std::time::Duration,
    pub header: &'static str,
}

/// A daily allowance: the calls left in its period and the period's limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Daily {
    pub remaining: u64,
    pub limit: Option<u64>,
    pub header: &'static str,
}

impl Daily {
    /// Nothing is left: the next call would be refused.
    pub(crate) fn spent(&self) -> bool {
        self.remaining == 0
    }
}

/// A delta as its vendor reads it.
#[derive(Debug, Clone)]
pub(crate) struct DeltaKind {
    delta: Arc<Delta>,
    sends: Sends,
    style: Style,
}

/// The closed list of what a vendor does beyond the shared paging styles.
#[derive(Debug, Clone)]
enum Style {
    /// Pages by a paging style of `paging.rs` (Rave's among them).
    Paged,
    /// A Vault VQL query.
    Vql,
    /// A live collection read whole (Castor's study data).
    Collection,
    /// REDCap's records: an id list, then batches.
    Records(redcap::records::RecordsPaging),
    /// The tests' vendor (`toy/`): keyset pages it asks itself.
    #[cfg(test)]
    Toy,
}

/// What a window of a stream holds of its vendor's reading between pages.
#[derive(Debug)]
pub(crate) struct Following {
    state: State,
    /// The window's (or a collection's pass's) first request, once asked
    /// this run: the one page whose vendor's word "no items" can be true.
    first: Option<Url>,
}

#[derive(Debug)]
enum State {
    Plain,
    /// The query POSTed on the first page (next pages are POSTs with no
    /// body).
    Vql {
        first: Url,
        select: VqlSelect,
    },
    /// The collection's first page, which every pass starts from, and the
    /// pass in progress.
    Collection {
        first: Option<Url>,
        pass: Pass,
    },
    Records(Records),
}

impl DeltaKind {
    /// The kind of `delta`, a delta of `policy`.
    pub(crate) fn of(policy: &Policy, delta: &Arc<Delta>) -> DeltaKind {
        let sends = if delta.vql.is_some() {
            Sends::Query
        } else if policy.auth.exports_by_form() {
            Sends::Export
        } else {
            Sends::Get
        };
        let style = match &delta.paging {
            #[cfg(test)]
            _ if policy.vendor == super::toy::NAME => Style::Toy,
            _ if delta.vql.is_some() => Style::Vql,
            _ if delta.collection.is_some() => Style::Collection,
            Paging::RedcapRecords {
                id_field,
                batch_size,
                declared,
            } => Style::Records(redcap::records::RecordsPaging {
                id_field: id_field.clone(),
                batch_size: *batch_size,
                begin: delta.cursor_param.clone(),
                end: delta
                    .window
                    .as_ref()
                    .map_or(String::new(), |w| w.end_param.clone()),
                declared: declared.clone(),
            }),
            _ => Style::Paged,
        };
        DeltaKind {
            delta: delta.clone(),
            sends,
            style,
        }
    }

    /// How its requests are sent.
    pub(crate) fn sends(&self) -> Sends {
        self.sends
    }

    /// What a window holds between pages, starting after the last
    /// snapshot's pages (a collection's; none otherwise).
    pub(crate) fn following(&self, last_snapshot: &[String]) -> Following {
        let state = match &self.style {
            #[cfg(test)]
            Style::Toy => State::Plain,
            Style::Paged => State::Plain,
            // Made with the first page.
            Style::Vql => State::Plain,
            Style::Collection => State::Collection {
                first: None,
                pass: Pass::new(last_snapshot),
            },
            Style::Records(paging) => State::Records(Records::new(paging.clone())),
        };
        Following { state, first: None }
    }

    /// Whether a window left part-way is read on from the page it stopped
    /// at; otherwise it is read again from its first (a collection's pass
    /// is consistent only whole; REDCap's batches follow from the id list,
    /// which only the first page holds).
    pub(crate) fn resumes_mid_window(&self) -> bool {
        match self.style {
            Style::Paged | Style::Vql => true,
            #[cfg(test)]
            Style::Toy => true,
            Style::Collection | Style::Records(_) => false,
        }
    }

    /// The first request of a window `[start, end]` (`start` absent: from
    /// the beginning; a collection is read whole, whatever its bounds).
    pub(crate) fn first_page(
        &self,
        at: Endpoint<'_>,
        start: Option<&str>,
        end: Option<&str>,
        following: &mut Following,
    ) -> Result<Url, PagingError> {
        let url = self.first_request(at, start, end, following)?;
        following.first = Some(url.clone());
        Ok(url)
    }

    /// [`Self::first_page`] as each style makes it.
    fn first_request(
        &self,
        at: Endpoint<'_>,
        start: Option<&str>,
        end: Option<&str>,
        following: &mut Following,
    ) -> Result<Url, PagingError> {
        let first = |start: Option<&str>, end: Option<&str>| {
            paging::first_page(at.origin, at.base, &self.delta, at.spec, at.identity, start, end)
        };
        match (&self.style, &mut following.state) {
            (Style::Vql, state) => {
                let vql = self
                    .delta
                    .vql
                    .as_ref()
                    .ok_or(PagingError::Query("no VQL query".into()))?;
                let select = VqlSelect::new(
                    &vql.select,
                    start.unwrap_or(&vql.initial_cursor),
                    self.delta.page_size,
                )
                .map_err(PagingError::Query)?;
                let url = at.origin.endpoint(at.base, &self.delta.path.fill(at.identity)?)?;
                *state = State::Vql {
                    first: url.clone(),
                    select,
                };
                Ok(url)
            }
            (Style::Collection, State::Collection { first: kept, .. }) => {
                let url = first(None, None)?;
                *kept = Some(url.clone());
                Ok(url)
            }
            _ => first(start, end),
        }
    }

    /// What to ask before a window (`planned`: a new window is planned;
    /// otherwise an interrupted one resumes), at the stream's `endpoint`.
    pub(crate) fn preflight(&self, endpoint: &Url, planned: bool) -> Vec<Probe> {
        match self.sends {
            Sends::Export => {
                redcap::facts::probes(endpoint, planned, matches!(self.style, Style::Records(_)))
            }
            Sends::Get | Sends::Query => Vec::new(),
        }
    }

    /// Judges the answers to [`Self::preflight`]'s probes, in their order,
    /// and keeps what the window needs of them.
    pub(crate) fn facts(
        &self,
        answers: &[(Probe, Vec<u8>)],
        following: &mut Following,
    ) -> Result<(), Refused> {
        if self.sends != Sends::Export {
            return Ok(());
        }
        let facts = redcap::facts::read(answers, self.content())?;
        if let (Some(scope), State::Records(records)) = (facts.scope, &mut following.state) {
            records.set_scope(scope);
        }
        Ok(())
    }

    /// The read content the delta exports (REDCap).
    fn content(&self) -> Option<crate::config::ExportContent> {
        self.delta
            .query
            .iter()
            .find(|(name, _)| name == "content")
            .and_then(|(_, value)| crate::config::ExportContent::parse(value.as_str()))
    }

    /// Whether what follows a page is read from its whole body.
    pub(crate) fn reads_body(&self) -> bool {
        matches!(self.style, Style::Records(_))
    }

    /// Whether the page `url` asks can hold no items in the window
    /// `following` reads: the first page of a window or of a collection's
    /// pass, or any page of a window read until a short page (it was asked
    /// because the page before it was full); not a later page of a
    /// collection, whose page count its first page stated.
    pub(crate) fn may_be_empty(&self, following: &Following, url: &Url) -> bool {
        following.first.as_ref() == Some(url) || !matches!(self.style, Style::Collection)
    }

    /// Whether the page's records carry no time of their own, and are
    /// remembered at the window's end (REDCap's records).
    pub(crate) fn stamps_records(&self) -> bool {
        matches!(self.style, Style::Records(_))
    }

    /// Whether the cursor is the server's clock in the document (a Rave
    /// study dataset's `CreationDateTime`): evidence only within
    /// `clock_skew_max_s`, as a `Date` header is.
    pub(crate) fn cursor_is_server_clock(&self) -> bool {
        paging::cursor_is_server_clock(&self.delta.paging)
    }

    /// Whether a window is one document, with no next page and no page
    /// size: nothing older than its high-water mark can come later in it.
    pub(crate) fn one_document_a_window(&self) -> bool {
        paging::one_document_a_window(&self.delta.paging)
    }

    /// What a page's (lowercase) quota headers announce of the vendor's
    /// own limits.
    pub(crate) fn announced(&self, headers: &std::collections::BTreeMap<String, String>) -> Announced {
        use super::vault::{burst, daily};
        Announced {
            burst: burst::Allowance::of(headers).map(|a| Burst {
                remaining: a.remaining,
                limit: a.limit,
                spacing: a.spacing(),
                header: burst::REMAINING,
            }),
            daily: daily::DailyAllowance::of(headers).map(|a| Daily {
                remaining: a.remaining,
                limit: a.limit,
                header: daily::REMAINING,
            }),
        }
    }

    /// The key of the one gate every request to `host` passes while the
    /// vendor's burst allowance is at the policy's floor.
    pub(crate) fn burst_gate_key(&self, host: &str) -> String {
        super::vault::burst::gate_key(host)
    }

    /// Where a completed window's next one starts after its high-water mark.
    pub(crate) fn restart(&self) -> Restart {
        paging::restart(&self.delta.paging)
    }

    /// What follows `page` in the window `following` holds.
    pub(crate) fn after(
        &self,
        origin: &Origin,
        following: &mut Following,
        page: PageView<'_>,
    ) -> Result<Follow, Refused> {
        #[cfg(test)]
        if let Style::Toy = self.style {
            let high_water = page.summary.high_water.as_ref().map(|v| v.as_param());
            let next = super::toy::next(
                page.url,
                page.summary.records,
                self.delta.page_size,
                &self.delta.cursor_param,
                high_water.as_deref(),
            );
            return Ok(Follow {
                next,
                ..Follow::default()
            });
        }
        let next = paging::next_page(origin, &self.delta, page.page_url, page.links, page.summary)
            .map_err(|e| Refused::Invalid(e.to_string()))?;
        match &mut following.state {
            State::Plain | State::Vql { .. } => Ok(Follow {
                next,
                ..Follow::default()
            }),
            State::Records(records) => {
                let body = page.body.unwrap_or_default();
                let after = records.after(page.url, body)?;
                Ok(Follow {
                    next: after.next,
                    probe: after.probe,
                    vanished: after.vanished.map(|v| (page.url.clone(), v)),
                    ..Follow::default()
                })
            }
            State::Collection { first, pass } => {
                let Some(total) = page.summary.total_items else {
                    let pointer = self
                        .delta
                        .collection
                        .as_ref()
                        .map_or("", |c| c.total_items_pointer.as_str());
                    return Err(Refused::Invalid(format!(
                        "it does not state the collection's item count at {pointer} \
                         (delta.collection.total_items_pointer)"
                    )));
                };
                let unchanged = pass.knows(page.sha256);
                let mut follow = Follow {
                    unchanged,
                    ..Follow::default()
                };
                match pass.page(page.summary.records, total, page.sha256, next.is_none()) {
                    pass::Step::Going => follow.next = next,
                    pass::Step::Consistent { pages, total } => follow.snapshot = Some((pages, total)),
                    pass::Step::ReadAgain => {
                        follow.next = first.clone();
                        follow.changed = pass.take_changed();
                    }
                }
                Ok(follow)
            }
        }
    }
}

impl Following {
    /// A window the vendor reads by its paging style alone.
    pub(crate) fn plain() -> Following {
        Following {
            state: State::Plain,
            first: None,
        }
    }

    /// The query to POST to `url`: a VQL delta's, on its first page only.
    pub(crate) fn query_for(&self, url: &Url) -> Option<&VqlSelect> {
        match &self.state {
            State::Vql { first, select } if first == url => Some(select),
            _ => None,
        }
    }

    /// Proves what the probe `probe` of a [`Follow`] answered (`body`).
    pub(crate) fn prove(&mut self, probe: &Url, body: &[u8]) -> Result<(), Refused> {
        match &mut self.state {
            State::Records(records) => records.prove(probe, body),
            _ => Ok(()),
        }
    }
}

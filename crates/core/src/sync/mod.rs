//! The page loop: one stream, window by window, page by page.
//!
//! Invariant 2, the cursor never runs ahead of the data. A page is
//! committed only after: a 2xx, the whole body read and hashed, the payload
//! validated, the bytes fsynced under their content address (and the
//! directory), then by its fsynced `page_committed` audit line, which
//! carries the cursor; the manifest line and the cursor file follow without
//! fsyncs of their own and are caught up from the trail at the next start
//! (`roll_forward.rs`, docs/commit.md). A crash at any point either re-reads
//! the page next run (landing is content-addressed and the manifest
//! deduplicates, so a replay never duplicates data) or rolls past it.
//!
//! Invariant 3, audit first: every wait (429/503, retry backoff, vendor
//! burst floor) is written to the audit trail and fsynced before the sleep.
//!
//! This file only sequences a stream: windows, pages, attempts. The
//! concepts it sequences live beside it, one noun a file: `open.rs` (locks,
//! migration, stores), `request.rs` (one attempt's context), `classify.rs`
//! (a non-2xx answer to a step, pure), `session.rs` (login and renewal),
//! `waits.rs` (throttle, backoff, vendor burst, server clock), `vendor.rs`
//! (errors a vendor reports in a body), `commit.rs` (check a body, make a
//! page durable), `failure.rs` (budgets spent, requests that end the
//! stream), `recover.rs` (a torn manifest), `roll_forward.rs` (the cursor
//! caught up with the trail), `window.rs` (date windows),
//! `fence.rs` (the cross-host lock), `error.rs`, `options.rs`, `report.rs`.

mod classify;
mod commit;
mod error;
pub mod events;
mod failure;
mod fence;
mod open;
mod options;
mod recover;
mod report;
mod request;
mod session;
mod vendor;
mod waits;
pub mod window;

use classify::{classify, Verdict};
pub use error::SyncError;
pub use fence::{FenceError, FencedLock};
use options::beyond;
pub use options::SyncOptions;
pub use report::{StreamOutcome, StreamReport, Wait, WaitKind};
use request::Request;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;

use crate::audit::{RunId, SharedAudit};
use crate::config::{Delta, Policy, RecordOrder, StreamSpec};
use crate::edc::dialect::{self};
use crate::edc::paging;
use crate::edc::{ReadOnlyClient, ERROR_BODY_CAP};
use crate::store::{Cursor, CursorStore, LandingStore};
use crate::stream::StreamIdentity;
use events::*;
use quota_pacer::{AcquireError, Booking, Limiter, Pacer, Permit};

/// Longest backoff after a 5xx or a transport error.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Everything one stream's loop needs.
pub struct StreamJob<P: Pacer> {
    pub policy: Arc<Policy>,
    /// The policy's delta endpoint (a run refuses a policy without one).
    pub delta: Arc<Delta>,
    pub spec: StreamSpec,
    pub identity: StreamIdentity,
    pub client: ReadOnlyClient,
    pub limiter: Limiter<P>,
    pub audit: SharedAudit,
    pub out_dir: PathBuf,
    pub state_dir: PathBuf,
    pub options: SyncOptions,
    /// With Redis: also take the stream's cross-host, fenced run lock.
    pub redis: Option<quota_pacer::RedisPacer>,
}

/// How one request attempt ended.
enum Attempt {
    /// A page was committed; `None` next means the window is complete.
    Committed { next: Option<Url>, cursor: Box<Cursor> },
    /// Worth another attempt after a wait that is already audited.
    Retry { wait: Duration, reason: String },
    /// The EDC refused credential generation `refused`: renew once and
    /// repeat the same request (not counted against the retry budget).
    Renew { refused: u64, reason: String },
}

struct Loop<'a, P: Pacer> {
    job: &'a StreamJob<P>,
    name: String,
    run_id: RunId,
    cursors: CursorStore,
    landing: LandingStore,
    report: StreamReport,
    requests: u64,
    fenced: Option<FencedLock>,
    /// The permit of the request in flight, until its page is committed
    /// (which hands its slot on) or the attempt ends.
    holding: Option<Permit<P>>,
    /// The next page's slot and token, booked by the call that proved the
    /// run lock for the previous page's commit.
    booked: Option<Booking<P>>,
    /// A clock-skew warning was logged for this stream already.
    skew_warned: bool,
    /// The fixed end of the date window this run is paging, if any.
    window_end: Option<String>,
    /// A VQL delta: the first page's URL and the query it is POSTed with
    /// (next pages are POSTs with no body).
    vql_first: Option<(Url, crate::edc::vql::VqlSelect)>,
}

/// Runs one stream until its window is complete, `max_pages` is reached, or
/// something stops it. The run lock is held throughout.
pub async fn run_stream<P: Pacer>(job: &StreamJob<P>) -> StreamOutcome {
    let name = job
        .identity
        .stream
        .clone()
        .unwrap_or_else(|| job.spec.name.clone());
    let mut l = match open::start(job, name.clone()).await {
        Ok(l) => l,
        Err(e) => {
            return StreamOutcome {
                report: StreamReport {
                    stream: name,
                    ..StreamReport::default()
                },
                result: Err(e),
            }
        }
    };
    let mut result = l.pages().await;
    // A booking the loop did not use goes back with any other lease this
    // stream gave back, in one call, before the run lock is let go.
    l.booked = None;
    l.holding = None;
    if let Err(e) = job.limiter.flush().await {
        tracing::warn!(stream = %l.name, error = %e, "giving back concurrency leases failed; they expire by their TTL");
    }
    if let Some(fenced) = l.fenced.take() {
        fenced.release().await;
    }
    let cursor = l.cursors.load().map(|c| c.to_json()).unwrap_or_default();
    let outcome = match &result {
        Ok(()) => "ok".to_string(),
        Err(e) => e.to_string(),
    };
    let finished = StreamFinished {
        stream: l.name.clone(),
        outcome,
        pages: l.report.pages,
        records: l.report.records,
        bytes: l.report.bytes,
        replayed_pages: l.report.replayed_pages,
        window_complete: l.report.window_complete,
        cursor,
    };
    if let Err(e) = job.audit.record(finished).await {
        result = result.and(Err(e.into()));
    }
    StreamOutcome {
        report: l.report,
        result,
    }
}

impl<P: Pacer> Loop<'_, P> {
    fn url_key(url: &Url) -> String {
        url[url::Position::BeforePath..].to_string()
    }

    async fn pages(&mut self) -> Result<(), SyncError> {
        let job = self.job;
        let mut cursor = self.cursors.load()?;
        // A backfill is done once its window completed in an earlier run,
        // or (on an ascending endpoint only) once its records went past `until`.
        if let Some(until) = &job.options.until {
            let completed = !cursor.in_window() && cursor.window_start() != job.options.since.as_deref();
            let so_far = match cursor.high_water() {
                Some(hw) if cursor.in_window() => Some(hw.as_param()),
                _ => cursor.window_start().map(str::to_string),
            };
            let past = job.delta.order == RecordOrder::Ascending && so_far.is_some_and(|s| beyond(&s, until));
            if completed || past {
                self.report.window_complete = true;
                return Ok(());
            }
        }
        let mut url = match self.start_url(&cursor).await? {
            Some(url) => url,
            None => {
                self.report.window_complete = true;
                return Ok(());
            }
        };
        let mut seen: HashSet<String> = HashSet::new();
        loop {
            if job.options.interrupt.requested() {
                return Err(SyncError::Interrupted {
                    stream: self.name.clone(),
                });
            }
            if job.options.max_pages.is_some_and(|max| self.report.pages >= max) {
                return Ok(());
            }
            if !seen.insert(Self::url_key(&url)) {
                return Err(self.rejected(format!(
                    "the next link {url} repeats a page already fetched in this window"
                )));
            }
            let limit = job.delta.max_pages_per_window;
            if seen.len() as u64 > limit {
                return Err(self.rejected(format!(
                    "the window is still going after {limit} pages (delta.max_pages_per_window): a next link that never ends"
                )));
            }
            let (next, new_cursor) = self.page_with_retries(&url, cursor).await?;
            cursor = new_cursor;
            // Only records in ascending order let a backfill stop before the
            // window's end: newest-first or unordered data may still hold
            // records inside [since, until] on any later page.
            let past_until = match (&job.options.until, cursor.high_water()) {
                (Some(until), Some(hw)) => {
                    job.delta.order == RecordOrder::Ascending && beyond(&hw.as_param(), until)
                }
                _ => false,
            };
            if past_until {
                self.report.window_complete = true;
                return Ok(());
            }
            match next {
                Some(next) => url = next,
                None => {
                    self.report.window_complete = true;
                    return Ok(());
                }
            }
        }
    }

    /// The URL to fetch first: the page a previous run was on, or the first
    /// page of a new window from the cursor; `None` when a date window has
    /// nothing to ask for yet.
    async fn start_url(&mut self, cursor: &Cursor) -> Result<Option<Url>, SyncError> {
        let job = self.job;
        if let Some(next) = cursor.next_page() {
            self.window_end = cursor.window_end().map(str::to_string);
            let url = job.client.resolve(job.client.base(), next);
            return url.map(Some).map_err(|e| self.rejected(e.to_string()));
        }
        if let Some(vql) = &job.delta.vql {
            let start = cursor.window_start().unwrap_or(&vql.initial_cursor);
            let select = crate::edc::vql::VqlSelect::new(&vql.select, start, job.delta.page_size)
                .map_err(|e| self.rejected(e))?;
            let path = job
                .delta
                .path
                .fill(&job.identity)
                .map_err(|e| self.rejected(e.to_string()))?;
            let url = job
                .client
                .origin()
                .endpoint(job.client.base(), &path)
                .map_err(|e| self.rejected(e.to_string()))?;
            self.vql_first = Some((url.clone(), select));
            return Ok(Some(url));
        }
        let (start, end) = match &job.delta.window {
            Some(window) => match self.plan_window(window, cursor).await? {
                Some((start, end)) => (start, Some(end)),
                None => return Ok(None),
            },
            None => (cursor.window_start().map(str::to_string), None),
        };
        self.window_end = end;
        paging::first_page(
            job.client.origin(),
            job.client.base(),
            &job.delta,
            &job.spec,
            &job.identity,
            start.as_deref(),
            self.window_end.as_deref(),
        )
        .map(Some)
        .map_err(|e| self.rejected(e.to_string()))
    }

    fn rejected(&self, reason: String) -> SyncError {
        SyncError::Rejected {
            stream: self.name.clone(),
            reason,
        }
    }

    /// One page, with up to `max_retry_attempts` attempts. A refused
    /// session is renewed once per page without spending an attempt; a
    /// second refusal of the same page is exit 77.
    async fn page_with_retries(
        &mut self,
        url: &Url,
        cursor: Cursor,
    ) -> Result<(Option<Url>, Cursor), SyncError> {
        let budget = self.job.policy.max_retry_attempts;
        let mut last_reason = String::new();
        let mut renewed = false;
        let mut attempt = 1;
        while attempt <= budget {
            self.requests += 1;
            let request_id = format!("{}:{}:{}", self.run_id, self.name, self.requests);
            let req = Request {
                url,
                cursor: &cursor,
                id: &request_id,
                attempt,
                budget,
            };
            match self.attempt(&req).await? {
                Attempt::Committed { next, cursor } => return Ok((next, *cursor)),
                Attempt::Retry { wait, reason } => {
                    last_reason = reason;
                    if attempt < budget {
                        self.sleep(wait).await?;
                    }
                    attempt += 1;
                }
                Attempt::Renew { refused, reason } if !renewed => {
                    renewed = true;
                    self.renew(refused, &req, reason).await?;
                }
                Attempt::Renew { reason, .. } => {
                    return Err(SyncError::Permission {
                        stream: self.name.clone(),
                        detail: format!("GET {url}: the renewed credential was refused too ({reason})"),
                        hint: self.job.policy.auth.hint(),
                    });
                }
            }
        }
        let reason = format!("retry budget of {budget} attempt(s) spent on {url} (last: {last_reason})");
        self.exhausted(url, budget, reason, &cursor, Spent::Quota).await
    }

    /// A slot in the quota, or why there is none: a stop request, or a
    /// slot further away than `max_wait_s` (audited, exit 75).
    async fn permit(&mut self, req: &Request<'_>) -> Result<Permit<P>, SyncError> {
        let Request {
            url, cursor, attempt, ..
        } = *req;
        let job = self.job;
        let acquired = tokio::select! {
            acquired = job.limiter.acquire() => acquired,
            _ = job.options.interrupt.wait() => return Err(SyncError::Interrupted { stream: self.name.clone() }),
        };
        match acquired {
            Ok(p) => Ok(p),
            Err(AcquireError::WaitTooLong { wait, horizon, .. }) => {
                let reason =
                    format!("the quota's next slot is {wait:?} away, beyond max_wait_s ({horizon:?})");
                self.exhausted(url, attempt, reason, cursor, Spent::Quota).await
            }
            Err(AcquireError::Pacer(e)) => Err(e.into()),
            // The stream's quota was formed before the run started.
            Err(AcquireError::Quota(e)) => Err(self.rejected(e.to_string())),
        }
    }

    /// The booked slot's instant, unless a stop is requested first.
    async fn ready(&self, booking: Booking<P>) -> Result<Permit<P>, SyncError> {
        tokio::select! {
            permit = booking.ready() => Ok(permit),
            _ = self.job.options.interrupt.wait() => Err(SyncError::Interrupted { stream: self.name.clone() }),
        }
    }

    /// One attempt at a page: a credential, a slot in the quota (booked
    /// already by the previous page's commit, or asked for now), then the
    /// exchange. A committed page hands its slot on; otherwise the permit
    /// goes back here, whatever the exchange's outcome.
    async fn attempt(&mut self, req: &Request<'_>) -> Result<Attempt, SyncError> {
        self.ensure_credential(req).await?;
        let permit = match self.booked.take() {
            Some(booking) => self.ready(booking).await?,
            None => self.permit(req).await?,
        };
        self.holding = Some(permit);
        let outcome = self.exchange(req).await;
        if let Some(permit) = self.holding.take() {
            permit.release();
        }
        outcome
    }

    /// Sends the request and acts on the answer: a 2xx is landed; anything
    /// else is judged by the pure classifier and handled by its step.
    async fn exchange(&mut self, req: &Request<'_>) -> Result<Attempt, SyncError> {
        let url = req.url;
        let job = self.job;
        let sent = match &job.delta.vql {
            None => job.client.get(url).await,
            Some(_) => {
                let first = self.vql_first.as_ref().filter(|(u, _)| u == url).map(|(_, q)| q);
                job.client.query(url, first).await
            }
        };
        let reply = match sent {
            Ok(reply) => reply,
            Err(e) => return self.fetch_failed(req, e).await,
        };
        self.note_clock(&reply.meta);
        if reply.status.is_success() {
            return self.land(req, reply).await;
        }
        let meta = reply.meta.clone();
        let vendor = match job.policy.dialect {
            crate::config::Dialect::Generic => None,
            dialect => dialect::in_error_body(dialect, &reply.error_body(ERROR_BODY_CAP).await),
        };
        match classify(meta.status, vendor, job.client.renewable(), url) {
            Verdict::Throttled => self.throttled(req, &meta, None).await,
            Verdict::Vendor(error) => self.vendor_error(req, &meta, error).await,
            Verdict::Retry(reason) => self.retry_later(req, reason, meta.execution_id).await,
            Verdict::Renew(reason) => Ok(Attempt::Renew {
                refused: meta.credential_generation,
                reason,
            }),
            Verdict::Refused(detail) => self.refused(req, &meta, None, detail).await,
            Verdict::Failed(reason) => {
                self.failed(req, Some(&meta), None, reason.clone()).await?;
                Err(self.rejected(reason))
            }
        }
    }
}

/// A 2xx response whose body is in a temp file, before it is committed.
struct Received {
    url: Url,
    /// Where the body came from after same-origin redirects.
    page_url: Url,
    status: u16,
    links: Vec<String>,
    quota_headers: std::collections::BTreeMap<String, String>,
    execution_id: Option<String>,
    request_id: String,
    attempt: u32,
}

/// A page made durable.
struct CommittedPage {
    next: Option<Url>,
    cursor: Cursor,
    records: u64,
    replayed: bool,
}

/// What an exhausted budget was spent on: it decides the exit code.
enum Spent {
    /// Throttling or the maximum wait: exit 75, try later.
    Quota,
    /// Transport failures: exit 69, the EDC is unavailable.
    Unreachable,
}

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
//! This file only sequences a stream: windows, pages, attempts. What a
//! vendor does differently is its delta kind's to decide
//! (`crate::edc::vendor::DeltaKind`: what is sent and how, what is asked
//! before a window, what follows a page); the loop sends, lands, commits
//! and audits, and names no vendor. The loop
//! holds four owners, each with one job and its own state, one file each:
//! `stream::Stream` (`stream.rs`: who the stream is, its report, and
//! every audited way an attempt ends without a commit: waits, budgets,
//! failures, vendor errors), `slots::Slots` (`slots.rs`: the permit in
//! flight, the next page's booking, the fenced run lock),
//! `window::Window` (`window.rs`: where the window starts and ends), and
//! `commit::PageCommit` (`commit.rs`: the cursor and landing stores, and
//! the page commit in the order invariant 2 requires). Beside them:
//! `open.rs` (locks, migration, stores, the roll-forward), `session.rs`
//! (login and renewal), `preflight.rs` (what the vendor asks before a
//! window), `request.rs` (one attempt's context),
//! `classify.rs` (a non-2xx answer to a step, pure), `recover.rs` (a torn
//! manifest), `fence.rs` (the cross-host lock), `events.rs`, `error.rs`,
//! `options.rs`, `report.rs`.

mod classify;
mod commit;
mod completeness;
mod error;
pub(crate) mod events;

mod lookback;
mod open;
mod options;
mod preflight;
mod progress;

mod report;
mod request;
mod session;
mod slots;
mod stream;
mod visited;
pub mod window;

pub(crate) use crate::ledger::FencedLock;
use classify::{classify, Verdict};
pub use error::SyncError;
pub use lookback::{restart_at, settled_window_start};
use options::beyond;
pub use options::SyncOptions;
pub(crate) use report::{StreamOutcome, StreamReport, Wait, WaitKind};
use request::Request;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;

use crate::config::{Delta, Policy, RecordOrder, StreamSpec};
use crate::edc::vendor::{self, DeltaKind, Sends};
use crate::edc::{ReadOnlyClient, ERROR_BODY_CAP};
use crate::ledger::Cursor;
use crate::ledger::{Ledger, Trail};
use crate::stream::StreamIdentity;
use commit::PageCommit;
use events::*;
use quota_pacer::{Limiter, Pacer};
use slots::Slots;
use stream::Stream;
use window::Window;

/// Longest backoff after a 5xx or a transport error.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Everything one stream's loop needs.
pub(crate) struct StreamJob<P: Pacer> {
    pub policy: Arc<Policy>,
    /// The policy's delta endpoint (a run refuses a policy without one).
    pub delta: Arc<Delta>,
    /// What the delta's vendor decides of its requests and pages.
    pub kind: DeltaKind,
    pub spec: StreamSpec,
    pub identity: StreamIdentity,
    pub client: ReadOnlyClient,
    pub limiter: Limiter<P>,
    pub audit: Trail,
    /// Where the stream's landing directory is made: `--out`, or for an
    /// object-store landing the state directory's index of it.
    pub out_dir: PathBuf,
    /// The object store pages land in, when `--out` names one.
    pub object: Option<Arc<crate::ledger::ObjectLanding>>,
    /// Where the stream's state is (files or a database).
    pub ledger: Ledger,
    pub options: SyncOptions,
    /// With Redis: also take the stream's cross-host, fenced run lock.
    pub redis: Option<quota_pacer::RedisPacer>,
}

impl<P: Pacer> StreamJob<P> {
    /// A data request as the audit trail and messages name it: its method
    /// and URL (a VQL query and a REDCap export are POSTs; the page key of
    /// an export is the API URL with its form fields, never the token).
    pub(crate) fn request_line(&self, url: &Url) -> String {
        format!("{} {url}", self.kind.sends().method())
    }
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

/// One stream's loop: its four owners, sequenced below.
struct Loop<'a, P: Pacer> {
    stream: Stream<'a, P>,
    slots: Slots<P>,
    window: Window,
    commit: PageCommit,
}

/// Runs one stream until its window is complete, `max_pages` is reached, or
/// something stops it. The run lock is held throughout.
pub(crate) async fn run_stream<P: Pacer>(job: &StreamJob<P>) -> StreamOutcome {
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
    if result.is_ok() && !job.options.dry_run {
        // Every line the run listed had its object acknowledged before its
        // commit line, and the start published the rest: the next start
        // checks none of them again. A database's landing gets its head.
        // (A dry run published nothing.)
        if let Err(e) = l.commit.ended_cleanly().await {
            result = Err(e.into());
        }
    }
    let Loop {
        stream: l,
        slots,
        commit,
        ..
    } = l;
    slots.finish(job, &l.name).await;
    let cursor = commit
        .load_cursor()
        .await
        .map(|c| c.to_json())
        .unwrap_or_default();
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
        repeated_records: l.report.repeated_records,
        window_complete: l.report.window_complete,
        cursor,
    };
    if let Err(e) = job.audit.record(finished).await {
        result = result.and(Err(e.into()));
    }
    commit.release().await;
    StreamOutcome {
        report: l.report,
        result,
    }
}

impl<P: Pacer> Loop<'_, P> {
    async fn pages(&mut self) -> Result<(), SyncError> {
        let job = self.stream.job;
        let mut cursor = self.commit.load_cursor().await?;
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
                self.stream.report.window_complete = true;
                return Ok(());
            }
        }
        let mut url = match self
            .window
            .start_url(&mut self.stream, &mut self.slots, &cursor)
            .await?
        {
            Some(url) => url,
            None => {
                self.stream.report.window_complete = true;
                return Ok(());
            }
        };
        let mut seen = visited::Visited::default();
        loop {
            if job.options.interrupt.requested() {
                return Err(SyncError::Interrupted {
                    stream: self.stream.name.clone(),
                });
            }
            if job
                .options
                .max_pages
                .is_some_and(|max| self.stream.report.pages >= max)
            {
                return Ok(());
            }
            if !seen.first_visit(&commit::url_key(&url)) {
                return Err(self.stream.rejected(format!(
                    "the next link {url} repeats a page already fetched in this window"
                )));
            }
            let limit = job.delta.max_pages_per_window;
            if seen.len() as u64 > limit {
                return Err(self.stream.rejected(format!(
                    "the window is still going after {limit} pages (delta.max_pages_per_window): a next link that never ends"
                )));
            }
            let (next, new_cursor) = self.page_with_retries(&url, cursor).await?;
            cursor = new_cursor;
            if self.after_commit().await? {
                seen = visited::Visited::default();
            }
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
                self.stream.report.window_complete = true;
                return Ok(());
            }
            match next {
                Some(next) => url = next,
                None => {
                    self.stream.report.window_complete = true;
                    return Ok(());
                }
            }
        }
    }

    /// What the page just committed left to audit: records a batch asked
    /// for and did not get (deleted since the id list named them; their ids
    /// masked as every identifier in the trail), and a collection pass that
    /// ended with another item count than it began with. `true` when the
    /// next pass starts (its first page is the cursor's next page); past
    /// `max_passes` the run stops (75, try later), its pages committed.
    async fn after_commit(&mut self) -> Result<bool, SyncError> {
        let job = self.stream.job;
        let Some(left) = self.window.take_left() else {
            return Ok(false);
        };
        if let Some((url, vanished)) = left.vanished {
            let event = RecordsVanished {
                stream: self.stream.name.clone(),
                url: url.to_string(),
                asked: vanished.asked,
                missing: vanished
                    .missing
                    .iter()
                    .map(|id| crate::mask::global_mask(id))
                    .collect(),
            };
            job.audit.record(event).await?;
        }
        let (Some(changed), Some(max_passes)) =
            (left.changed, job.delta.collection.as_ref().map(|c| c.max_passes))
        else {
            return Ok(false);
        };
        let event = CollectionChanged {
            stream: self.stream.name.clone(),
            pass: changed.pass,
            first_total_items: changed.first_total,
            last_total_items: changed.last_total,
            max_passes,
        };
        job.audit.record(event).await?;
        if changed.pass >= max_passes {
            return Err(SyncError::Unsettled {
                stream: self.stream.name.clone(),
                detail: format!(
                    "the collection changed while it was read in each of {max_passes} pass(es) (the last: \
                     {} items on its first page, {} on its last; delta.collection.max_passes); the pages read \
                     are landed and committed, and the next run reads the collection again from page 1",
                    changed.first_total, changed.last_total
                ),
            });
        }
        Ok(true)
    }

    /// One page, with up to `max_retry_attempts` attempts. A refused
    /// session is renewed once per page without spending an attempt; a
    /// second refusal of the same page is exit 77.
    async fn page_with_retries(
        &mut self,
        url: &Url,
        cursor: Cursor,
    ) -> Result<(Option<Url>, Cursor), SyncError> {
        let budget = self.stream.job.policy.max_retry_attempts;
        let mut last_reason = String::new();
        let mut renewed = false;
        let mut attempt = 1;
        while attempt <= budget {
            let request_id = self.stream.next_request_id();
            let req = Request {
                url,
                cursor: &cursor,
                id: &request_id,
                attempt,
                budget,
            };
            let outcome = match self.attempt(&req).await? {
                Attempt::Renew { refused, reason } if !renewed => {
                    renewed = true;
                    let throttled =
                        session::renew(&mut self.stream, &mut self.slots, refused, &req, reason).await?;
                    match throttled {
                        // The renewal was throttled or failed: waited like
                        // a data request, and the session may still be
                        // renewed after the wait.
                        Some(wait) => {
                            renewed = false;
                            self.login_wait(&req, wait).await?
                        }
                        None => continue,
                    }
                }
                other => other,
            };
            match outcome {
                Attempt::Committed { next, cursor } => return Ok((next, *cursor)),
                Attempt::Retry { wait, reason } => {
                    if attempt < budget {
                        self.stream.sleep(wait, &reason).await?;
                    }
                    last_reason = reason;
                    attempt += 1;
                }
                Attempt::Renew { reason, .. } => {
                    return Err(SyncError::Permission {
                        stream: self.stream.name.clone(),
                        detail: format!(
                            "{}: the renewed credential was refused too ({reason})",
                            self.stream.job.request_line(url)
                        ),
                        hint: self.stream.job.policy.auth.hint(),
                    });
                }
            }
        }
        let reason = format!("retry budget of {budget} attempt(s) spent on {url} (last: {last_reason})");
        self.stream
            .exhausted(url, budget, reason, &cursor, Spent::Quota)
            .await
    }

    /// One attempt at a page: a credential, a slot in the quota (booked
    /// already by the previous page's commit, or asked for now), then the
    /// exchange. A committed page hands its slot on; otherwise the permit
    /// goes back here, whatever the exchange's outcome.
    async fn attempt(&mut self, req: &Request<'_>) -> Result<Attempt, SyncError> {
        if let Some(wait) = session::ensure(&mut self.stream, &mut self.slots, req).await? {
            return self.login_wait(req, wait).await;
        }
        self.slots.hold(&mut self.stream, req).await?;
        let outcome = self.exchange(req).await;
        self.slots.release_held();
        outcome
    }

    /// A login to wait out, an attempt spent: a throttled one as a 429 of
    /// the login endpoint (its URL on the `rate_limited` line); a failed
    /// one as a data request's transport failure (a `retry_scheduled` line
    /// naming the login, then the backoff; 69 when the budget is spent).
    async fn login_wait(
        &mut self,
        req: &Request<'_>,
        wait: session::LoginWait,
    ) -> Result<Attempt, SyncError> {
        match wait {
            session::LoginWait::Throttled(meta, vendor) => {
                let login = Request {
                    url: &meta.url,
                    ..*req
                };
                self.stream.throttled(&login, &meta, Some(vendor)).await
            }
            session::LoginWait::Unavailable(reason) if req.attempt >= req.budget => {
                let reason = format!("{reason} (attempt {} of {})", req.attempt, req.budget);
                self.stream
                    .exhausted(req.url, req.attempt, reason, req.cursor, Spent::Unreachable)
                    .await
            }
            session::LoginWait::Unavailable(reason) => self.stream.retry_later(req, reason, None).await,
        }
    }

    /// Sends the request and acts on the answer: a 2xx is landed; anything
    /// else is judged by the pure classifier and handled by its step.
    async fn exchange(&mut self, req: &Request<'_>) -> Result<Attempt, SyncError> {
        let url = req.url;
        let job = self.stream.job;
        let sent = match job.kind.sends() {
            Sends::Export => job.client.export(url).await,
            Sends::Get => job.client.get(url).await,
            Sends::Query => job.client.query(url, self.window.query_for(url)).await,
        };
        let reply = match sent {
            Ok(reply) => reply,
            Err(e) => return self.stream.fetch_failed(req, e).await,
        };
        self.stream.note_clock(&reply.meta);
        self.stream
            .trust_clock(
                req,
                Some(&reply.meta),
                reply.meta.clock_skew_s(),
                reply.meta.server_date,
            )
            .await?;
        let Loop {
            stream,
            slots,
            window,
            commit,
        } = self;
        if reply.status.is_success() {
            return commit.land(stream, slots, window, req, reply).await;
        }
        let meta = reply.meta.clone();
        let dialect = job.policy.dialect;
        let (body, vendor) = match vendor::reads_error_bodies(dialect) {
            false => (Vec::new(), None),
            true => {
                let body = reply.error_body(ERROR_BODY_CAP).await;
                let error = vendor::error_in_body(dialect, meta.status.as_u16(), &body);
                (body, error)
            }
        };
        let verdict = classify(
            meta.status,
            vendor,
            job.client.renewable(),
            &job.request_line(url),
        );
        if let Verdict::Vendor(error) = &verdict {
            // The vendor's word that there are no items ends the window
            // only where it can be true (`vendor::believes_no_items`);
            // anywhere else the page is asked again. Read whole (a capped
            // read would not be the answer's hash).
            if error.kind == vendor::VendorErrorKind::NoItems && body.len() < ERROR_BODY_CAP {
                let can_be_empty = window.may_be_empty(&job.kind, url);
                return match vendor::believes_no_items(dialect, meta.status.as_u16(), can_be_empty) {
                    Ok(()) => {
                        let answer = commit.answer(stream, &body)?;
                        commit
                            .collection_empty(stream, slots, window, req, &meta, error.clone(), answer)
                            .await
                    }
                    Err(why) => {
                        let reason =
                            format!("{why} ({error}); nothing was committed and the page is asked again");
                        stream.retry_later(req, reason, meta.execution_id).await
                    }
                };
            }
        }
        match verdict {
            Verdict::Throttled => stream.throttled(req, &meta, None).await,
            Verdict::Vendor(error) => stream.vendor_error(req, &meta, error).await,
            Verdict::Retry(reason) => stream.retry_later(req, reason, meta.execution_id).await,
            Verdict::Renew(reason) => Ok(Attempt::Renew {
                refused: meta.credential_generation,
                reason,
            }),
            Verdict::Refused(detail) => stream.refused(req, &meta, None, detail).await,
            Verdict::Failed(reason) => {
                stream.failed(req, Some(&meta), None, reason.clone()).await?;
                Err(stream.rejected(reason))
            }
        }
    }
}

/// What an exhausted budget was spent on: it decides the exit code.
enum Spent {
    /// Throttling or the maximum wait: exit 75, try later.
    Quota,
    /// Transport failures: exit 69, the EDC is unavailable.
    Unreachable,
}

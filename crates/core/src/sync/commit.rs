//! The page commit: a received body is checked (payload validation, then
//! the vendor dialect's verdict), and a page is made durable in the order
//! invariant 2 requires: landing file (fsync, rename, directory fsync),
//! manifest line, `page_committed` audit line, and last the cursor.
//!
//! One concept: a received answer made a committed page (a 2xx page, or
//! the vendor's word that a page holds nothing), in invariant 2's order;
//! split, the steps of that order would sit apart from each other.

use reqwest::Url;

use super::events::{CollectionEmpty, PageCommitted, RequestFailed, StateJson};
use super::lookback;
use super::request::Request;
use super::slots::Slots;
use super::stream::Stream;
use super::window::{self, Window};
use super::{Attempt, Spent, SyncError};
use crate::audit::now_rfc3339;
use crate::config::PayloadFormat;
use crate::edc::payload::{self, InvalidPayload, PageSummary};
use crate::edc::vendor::{self, NotAPage, PageView, Refused, VendorError, VendorErrorKind};
use crate::edc::{Reply, ResponseMeta};
use crate::ledger::{Cursor, LandingStore, ManifestEntry, PageAdvance, Retention, StreamLedger};
use quota_pacer::Pacer;

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
    /// Records on the page landed before.
    repeated: u64,
    replayed: bool,
    /// The content identities of its records, for the window's count of
    /// twins (`identical_records: distinct`; empty otherwise).
    counted: Vec<crate::record::identity::RecordIdentity>,
}

/// A received page that will not be committed: its `request_failed` line
/// (audit first), and the error that stops the stream (65).
fn refuse<P: Pacer>(
    stream: &Stream<'_, P>,
    page: &Received,
    digest: &crate::edc::BodyDigest,
    reason: String,
) -> SyncError {
    let recorded = stream.job.audit.record_blocking(&RequestFailed {
        stream: stream.name.clone(),
        request_id: page.request_id.clone(),
        attempt: page.attempt,
        url: page.url.to_string(),
        status: Some(page.status),
        reason: reason.clone(),
        payload_sha256: Some(digest.sha256.clone()),
        vendor_execution_id: page.execution_id.clone(),
        ..RequestFailed::default()
    });
    match recorded {
        Ok(_) => stream.rejected(reason),
        Err(e) => e.into(),
    }
}

/// The manifest's page key of a request: its path and query.
pub(super) fn url_key(url: &Url) -> String {
    url[url::Position::BeforePath..].to_string()
}

/// The stream's ledger (cursor and manifest) and landing store, both held
/// through its run lock: the only way a page becomes data and a cursor moves.
pub(super) struct PageCommit {
    ledger: StreamLedger,
    landing: LandingStore,
}

impl PageCommit {
    pub(super) fn new(ledger: StreamLedger, landing: LandingStore) -> PageCommit {
        PageCommit { ledger, landing }
    }

    /// The stream's cursor now.
    pub(super) async fn load_cursor(&self) -> Result<Cursor, crate::ledger::StoreError> {
        self.ledger.load_cursor().await
    }

    /// The end of the stream's run (a database's run lock is released).
    pub(super) async fn release(&self) {
        self.ledger.release().await;
    }

    /// The stream's run ended cleanly: an object-store landing's manifest
    /// has every object, a database's landing gets its head.
    pub(super) async fn ended_cleanly(&self) -> Result<(), crate::ledger::StoreError> {
        self.ledger.ended_cleanly(&self.landing).await
    }

    /// The verdict on a body checked as it streamed in, under the policy's
    /// dialect: a page, or a vendor error or invalid payload that is never
    /// landed.
    fn check_page<P: Pacer>(
        stream: &Stream<'_, P>,
        check: payload::PageCheck,
    ) -> Result<PageSummary, NotAPage> {
        let delta = &stream.job.delta;
        check.finish().map_err(NotAPage::Invalid).and_then(|page| {
            let records = delta.records_pointer.as_deref().unwrap_or("/data");
            vendor::judge(stream.job.policy.dialect, delta.format, records, page)
        })
    }

    /// An invalid payload: moved to `quarantine/` for investigation,
    /// audited, and the stream stops (65). Returns the error to stop with.
    fn quarantine<P: Pacer>(
        &mut self,
        stream: &Stream<'_, P>,
        page: &Received,
        temp: crate::ledger::LandingTemp,
        digest: &crate::edc::BodyDigest,
        invalid: InvalidPayload,
    ) -> SyncError {
        let url = &page.url;
        let quarantine = self.landing.dir().join("quarantine");
        let name = format!("{}.{}.invalid", digest.sha256, stream.run_id);
        let moved = temp
            .quarantine(&quarantine, &name)
            .ok()
            .map(|_| self.landing.recorded(&format!("quarantine/{name}")));
        let recorded = stream.job.audit.record_blocking(&RequestFailed {
            stream: stream.name.clone(),
            request_id: page.request_id.clone(),
            attempt: page.attempt,
            url: url.to_string(),
            status: Some(page.status),
            reason: invalid.to_string(),
            payload_sha256: Some(digest.sha256.clone()),
            quarantined: moved,
            vendor_execution_id: page.execution_id.clone(),
            ..RequestFailed::default()
        });
        match recorded {
            Ok(_) => stream.rejected(format!(
                "{}: {invalid}; nothing was committed",
                stream.job.request_line(url)
            )),
            Err(e) => e.into(),
        }
    }

    /// Makes a checked page durable: landing file (fsync, rename,
    /// directory fsync), manifest line, `page_committed` audit line, and
    /// last the cursor. The file work blocks this task's thread (no
    /// hand-off); only the run-lock proof awaits the pacer.
    #[allow(clippy::too_many_arguments)]
    async fn commit_page<P: Pacer>(
        &mut self,
        stream: &mut Stream<'_, P>,
        window: &mut Window,
        slots: &mut Slots<P>,
        page: &Received,
        cursor: &Cursor,
        mut temp: crate::ledger::LandingTemp,
        digest: &crate::edc::BodyDigest,
        mut summary: PageSummary,
    ) -> Result<CommittedPage, SyncError> {
        let job = stream.job;
        let url = &page.url;
        if let Some(other_day) = summary.other_day.take() {
            let reason = format!("page {url}: {other_day}; nothing was committed");
            return Err(refuse(stream, page, digest, reason));
        }
        // What follows the page is the vendor's word: the next request,
        // a probe to ask before the page lands, a collection's snapshot.
        let body = match job.kind.reads_body() {
            true => Some(read_whole(&mut temp)?),
            false => None,
        };
        let view = PageView {
            url,
            page_url: &page.page_url,
            links: &page.links,
            summary: &summary,
            body: body.as_deref(),
            sha256: &digest.sha256,
        };
        let follow = job.kind.after(job.client.origin(), window.following_mut(), view);
        let mut follow = match follow {
            Ok(follow) => follow,
            Err(Refused::Restricted(what)) => return Err(restricted(stream, page, url, what).await),
            Err(Refused::Invalid(why) | Refused::Unsupported(why)) => {
                let reason = format!("page {url}: {why}; nothing was committed");
                return Err(refuse(stream, page, digest, reason));
            }
        };
        if let Some(probe) = follow.probe.take() {
            prove_scope(stream, window, page, cursor, &probe).await?;
        }
        let next = follow.next.take();
        let snapshot = follow
            .snapshot
            .take()
            .map(|(pages, total)| crate::ledger::Snapshot::of(pages, total));
        let unchanged = follow.unchanged;
        // A cursor value becomes a query parameter (a VQL literal, a date
        // bound) on every later run: one holding a control character is
        // data no cursor can carry, refused before anything moves.
        let marks = [&summary.high_water, &summary.low_water];
        if marks.iter().any(|m| {
            m.as_ref()
                .is_some_and(|v| v.as_param().chars().any(char::is_control))
        }) {
            let field = job.delta.cursor_field.as_deref().unwrap_or("(none)");
            let reason = format!(
                "page {url}: the cursor field {field:?} of a record holds a control character, which no cursor \
                 can carry; nothing was committed"
            );
            return Err(refuse(stream, page, digest, reason));
        }
        let next_start = match window.end() {
            Some(end) => Some(window::after(end).map_err(|e| stream.rejected(e))?),
            None => None,
        };
        // With a lookback, the page's records already landed (read again
        // in the re-read span) are told apart from the new ones.
        let lookback = job.delta.lookback.as_ref();
        let split = match lookback::split_page(
            &job.delta,
            cursor,
            &mut summary,
            &mut temp,
            stream.landed_before.as_ref(),
            window.occurrences(),
        )? {
            Ok(split) => split,
            Err(invalid) => return Err(self.quarantine(stream, page, temp, digest, invalid)),
        };
        // A collection's page whose bytes are landed already is unchanged:
        // nothing new to land or list.
        let new_records = match unchanged {
            true => 0,
            false => split.as_ref().map_or(summary.records, |s| s.new.len() as u64),
        };
        let reads_before_start = job
            .delta
            .window
            .as_ref()
            .is_some_and(|w| w.format.reads_before_start());
        let advance = PageAdvance {
            window_end: window.end().map(str::to_string),
            next_start,
            next_page: next.as_ref().map(url_key),
            high_water: summary.high_water.clone(),
            records: new_records,
            sha256: &digest.sha256,
            run_id: stream.run_id.as_str(),
            restart: job.kind.restart(),
            lookback: lookback.map(|lb| (lb, split.as_ref().map_or(&[][..], |s| &s.new[..]))),
            aligned: job.delta.window.as_ref().map(|w| &w.format),
            // On an ascending endpoint nothing older than the high-water
            // mark less the lookback can come again (a study dataset is one
            // page a window: nothing to forget early), unless the next
            // window reads its first day (or wall-clock unit) again.
            forget_early: job.delta.order == crate::config::RecordOrder::Ascending
                && !job.kind.one_document_a_window()
                && !reads_before_start,
            snapshot: snapshot.clone(),
        };
        let pending = crate::ledger::PendingCursor::advance(cursor, advance)
            .map_err(|e| stream.rejected(format!("page {url}: {e}")))?;
        let after_json = pending.cursor().to_json();
        let durable_started = std::time::Instant::now();
        // A page without new records holds no new data: its hash and size
        // go in the audit line, nothing is landed and the manifest is
        // unchanged (an empty poll every five minutes must not leave a file
        // each time, nor a re-read span land its records again).
        let repeated: Vec<u32> = split.as_ref().map_or_else(Vec::new, |s| s.repeated.clone());
        let (landed, listed, retention) = if job.options.dry_run || new_records == 0 {
            drop(temp);
            (None, None, None)
        } else {
            let (landed, listed, retention) = self
                .land_page(
                    stream,
                    url,
                    cursor,
                    &after_json,
                    temp,
                    digest,
                    &summary,
                    &repeated,
                )
                .await?;
            (Some(landed), listed, retention)
        };
        let replayed = landed.is_some() && listed.is_none();
        let cursor_state = pending
            .cursor()
            .to_state_raw()
            .map_err(|e| stream.rejected(format!("page {url}: its cursor does not serialise ({e})")))?;
        let record = PageCommitted {
            stream: stream.name.clone(),
            request_id: page.request_id.clone(),
            attempt: page.attempt,
            url: url.to_string(),
            status: page.status,
            payload_sha256: digest.sha256.clone(),
            bytes: digest.bytes,
            records: summary.records,
            repeated_records: repeated.len() as u64,
            repeated: if landed.is_some() {
                repeated.clone()
            } else {
                Vec::new()
            },
            landed: landed.is_some(),
            landing_file: landed.as_ref().map(|l| l.file().to_string()),
            landing_dir: self.landing.recorded_dir().to_string(),
            landing_root: job.options.landing_root.clone(),
            replayed,
            replaced_damaged_file: landed.as_ref().is_some_and(|l| l.replaced_damaged()),
            dry_run: job.options.dry_run,
            cursor_before: cursor.to_json(),
            cursor_after: after_json,
            cursor_state: StateJson(cursor_state),
            lookback_change: pending.memory_change().cloned(),
            quota_headers: page.quota_headers.clone(),
            older_than_cursor: match (&summary.low_water, cursor.window_start()) {
                (Some(low), Some(start)) => {
                    crate::record::order::compare_params(&low.as_param(), start) == std::cmp::Ordering::Less
                }
                _ => false,
            },
            vendor_warnings: summary.envelope.warnings.clone(),
            vendor_execution_id: page.execution_id.clone(),
            retention,
            unchanged,
            snapshot,
        };
        let book_next = next.is_some()
            && !job.options.interrupt.requested()
            && job
                .options
                .max_pages
                .is_none_or(|max| stream.report.pages + 1 < max);
        let listed = listed.map(|line| crate::ledger::ListedLine {
            line,
            page_key: url_key(url),
            sha256: digest.sha256.clone(),
        });
        let prove = slots.prove_lock(job, &stream.name, book_next);
        let page = crate::ledger::PageToCommit {
            record,
            pending,
            landed: landed.as_ref(),
            listed,
            dry_run: job.options.dry_run,
        };
        let after = self.ledger.commit(&self.landing, page, prove).await?;
        // What the vendor said the page left to audit, once it is committed.
        window.leave(follow);
        stream.report.durable_commit += durable_started.elapsed();
        Ok(CommittedPage {
            next,
            cursor: after,
            records: new_records,
            repeated: repeated.len() as u64,
            replayed,
            counted: split.map(|s| s.counted).unwrap_or_default(),
        })
    }

    /// Lands a page with records: to the object store under its content
    /// address (only the store's acknowledgement lets the commit go on), or
    /// into the landing directory. Returns the landed page and, unless the
    /// manifest lists it already (a replay), its manifest line: appended to
    /// the landing's manifest for a state directory, or handed back for the
    /// commit transaction of a state database.
    #[allow(clippy::too_many_arguments)]
    async fn land_page<P: Pacer>(
        &mut self,
        stream: &Stream<'_, P>,
        url: &Url,
        cursor: &Cursor,
        after_json: &serde_json::Value,
        temp: crate::ledger::LandingTemp,
        digest: &crate::edc::BodyDigest,
        summary: &PageSummary,
        repeated: &[u32],
    ) -> Result<(crate::ledger::LandedPage, Option<String>, Option<Retention>), SyncError> {
        let (landed, retention) = match self.landing.remote().cloned() {
            Some(remote) => {
                let (page, bytes) = self.landing.take(temp, &digest.sha256)?;
                let rel = self.landing.recorded(page.file());
                let put = remote.put_page(&rel, bytes::Bytes::from(bytes)).await;
                let put = put.map_err(crate::ledger::StoreError::Object)?;
                (page, put.retention)
            }
            None => (self.landing.commit(temp, &digest.sha256)?, None),
        };
        let entry = ManifestEntry {
            stream: stream.name.clone(),
            page_key: url_key(url),
            cursor_before: cursor.to_json(),
            cursor_after: after_json.clone(),
            sha256: digest.sha256.clone(),
            bytes: digest.bytes,
            records: summary.records,
            run_id: stream.run_id.to_string(),
            file: landed.file().to_string(),
            landed_at: now_rfc3339(),
            repeated: repeated.to_vec(),
        };
        let listed = self.ledger.list(&mut self.landing, &entry).await?;
        Ok((landed, listed, retention))
    }

    /// The vendor's word that a page holds nothing (Castor's 404 "There are
    /// no ..."), with the answer's temp file and hash. Audited as
    /// `collection_empty`, then committed as a page without records (the
    /// answer's hash in its `page_committed` line, nothing landed), which
    /// completes the window in the cursor. Without that commit a window
    /// whose last page was exactly full stays on the page after it: every
    /// run asks it again, and once the window's days have passed the stream
    /// never gets past it.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn collection_empty<P: Pacer>(
        &mut self,
        stream: &mut Stream<'_, P>,
        slots: &mut Slots<P>,
        window: &mut Window,
        req: &Request<'_>,
        meta: &ResponseMeta,
        error: VendorError,
        answer: (crate::ledger::LandingTemp, crate::edc::BodyDigest),
    ) -> Result<Attempt, SyncError> {
        let (temp, digest) = answer;
        let event = CollectionEmpty {
            stream: stream.name.clone(),
            request_id: req.id.to_string(),
            url: req.url.to_string(),
            status: meta.status.as_u16(),
            vendor_error: error,
            cursor: req.cursor.to_json(),
        };
        stream.job.audit.record(event).await?;
        let page = Received {
            url: req.url.clone(),
            page_url: meta.url.clone(),
            status: meta.status.as_u16(),
            links: Vec::new(),
            quota_headers: meta.quota_headers.clone(),
            execution_id: meta.execution_id.clone(),
            request_id: req.id.to_string(),
            attempt: req.attempt,
        };
        let committed = self
            .commit_page(
                stream,
                window,
                slots,
                &page,
                req.cursor,
                temp,
                &digest,
                PageSummary::empty(),
            )
            .await?;
        stream.report.pages += 1;
        stream.report.bytes += digest.bytes;
        Ok(Attempt::Committed {
            next: None,
            cursor: Box::new(committed.cursor),
        })
    }

    /// A non-2xx answer's body, read whole, as the temp file and hash a
    /// page without records is committed with (nothing is written to the
    /// file: such a page lands nothing).
    pub(super) fn answer<P: Pacer>(
        &self,
        stream: &Stream<'_, P>,
        body: &[u8],
    ) -> Result<(crate::ledger::LandingTemp, crate::edc::BodyDigest), SyncError> {
        let temp = self
            .landing
            .begin(&format!("{}-{}", stream.run_id, stream.requests()))?;
        let digest = crate::edc::BodyDigest {
            bytes: body.len() as u64,
            sha256: crate::digest::sha256_hex(body),
        };
        Ok((temp, digest))
    }

    /// 2xx: stream into SHA-256, the payload check and a temp file at once,
    /// then land, list, audit and commit the cursor, in that order.
    pub(super) async fn land<P: Pacer>(
        &mut self,
        stream: &mut Stream<'_, P>,
        slots: &mut Slots<P>,
        window: &mut Window,
        req: &Request<'_>,
        reply: Reply,
    ) -> Result<Attempt, SyncError> {
        let Request {
            url,
            cursor,
            id: request_id,
            attempt,
            budget,
        } = *req;
        let meta = reply.meta.clone();
        if let Some(encoding) = reply.content_encoding.as_deref() {
            let reason = format!(
                "{}: the body is Content-Encoding: {encoding}, which was not asked for (requests send \
                 Accept-Encoding: identity); nothing was committed",
                stream.job.request_line(url)
            );
            stream.failed(req, Some(&meta), None, reason.clone()).await?;
            return Err(stream.rejected(reason));
        }
        if let Some(ct) = reply.content_type.as_deref() {
            let expected = match stream.job.delta.format {
                PayloadFormat::Json => "json",
                PayloadFormat::Odm => "xml",
            };
            if !ct.to_ascii_lowercase().contains(expected) {
                let reason = format!(
                    "{}: Content-Type {ct:?} is not {expected} (delta.format); nothing was committed",
                    stream.job.request_line(url)
                );
                stream.failed(req, Some(&meta), None, reason.clone()).await?;
                return Err(stream.rejected(reason));
            }
        }
        let page = Received {
            url: url.clone(),
            page_url: reply.url.clone(),
            status: reply.status.as_u16(),
            links: reply.link.clone(),
            quota_headers: reply.quota_headers.clone(),
            execution_id: reply.execution_id.clone(),
            request_id: request_id.to_string(),
            attempt,
        };
        let identify = lookback::identifies(&stream.job.delta, stream.landed_before.as_ref());
        let mut check = payload::PageCheck::new(&stream.job.delta, identify).map_err(|e| {
            crate::ledger::StoreError::io(self.landing.dir(), "start the ODM validator's thread", e)
        })?;
        // Records that carry no time (REDCap's): the window's end stands
        // for them in the lookback's memory.
        if let (true, Some(end)) = (stream.job.kind.stamps_records(), window.end()) {
            check.stamp_all(end);
        }
        let mut temp = self
            .landing
            .begin(&format!("{}-{}", stream.run_id, stream.requests()))?;
        let digest = match reply
            .stream_into(&mut payload::Checked::new(&mut temp, &mut check))
            .await
        {
            Ok(d) => d,
            Err(e) => {
                // A body that stalls or breaks off is the same failure as
                // headers that never come: past the budget, 69 for both.
                if e.is_transient() && attempt >= budget {
                    let reason = format!("{e} (attempt {attempt} of {budget})");
                    return stream
                        .exhausted(url, attempt, reason, cursor, Spent::Unreachable)
                        .await;
                }
                if e.is_transient() {
                    return stream.retry_later(req, e.to_string(), meta.execution_id).await;
                }
                let reason = e.to_string();
                stream.failed(req, Some(&meta), None, reason.clone()).await?;
                return Err(stream.rejected(reason));
            }
        };
        // The page's file work is done here, on this task's thread between
        // two awaits: a few fsyncs that nothing else of this stream could
        // overlap, and no hand-off to another thread to pay for
        // (docs/benchmarks.md). ODM's verdict waits for its parser thread
        // to read the last chunks.
        let summary = match Self::check_page(stream, check) {
            Ok(summary) => summary,
            Err(NotAPage::Vendor(error)) if error.kind == VendorErrorKind::NoItems => {
                let dialect = stream.job.policy.dialect;
                let can_be_empty = window.may_be_empty(&stream.job.kind, url);
                return match vendor::believes_no_items(dialect, meta.status.as_u16(), can_be_empty) {
                    Ok(()) => {
                        self.collection_empty(stream, slots, window, req, &meta, error, (temp, digest))
                            .await
                    }
                    Err(why) => {
                        let reason =
                            format!("{why} ({error}); nothing was committed and the page is asked again");
                        stream.retry_later(req, reason, meta.execution_id).await
                    }
                };
            }
            Err(NotAPage::Vendor(error)) => {
                return stream.vendor_error(req, &meta, error).await;
            }
            Err(NotAPage::Invalid(invalid)) => {
                return Err(self.quarantine(stream, &page, temp, &digest, invalid));
            }
        };
        // A study dataset's cursor is the server's clock in the document
        // (`CreationDateTime`): evidence only within clock_skew_max_s, as
        // a Date header is (75, naming both clocks, nothing committed).
        if stream.job.kind.cursor_is_server_clock() {
            let made = summary
                .high_water
                .as_ref()
                .and_then(|v| crate::record::order::instant(&v.as_param()));
            if let Some(made) = made {
                let skew = (made - time::OffsetDateTime::now_utc()).as_seconds_f64();
                stream
                    .trust_clock(
                        req,
                        Some(&meta),
                        Some(skew),
                        Some(std::time::SystemTime::from(made)),
                    )
                    .await?;
            }
        }
        let committed = self
            .commit_page(stream, window, slots, &page, cursor, temp, &digest, summary)
            .await?;
        stream.report.pages += 1;
        stream.report.records += committed.records;
        stream.report.bytes += digest.bytes;
        stream.report.replayed_pages += u64::from(committed.replayed);
        stream.report.repeated_records += committed.repeated;
        window.count(&committed.counted);
        let bar = stream.job.options.progress.as_ref();
        super::progress::committed(bar, &stream.name, stream.report.records);
        stream.vendor_burst(request_id, &page.quota_headers).await?;
        // In a dry run nothing was committed: the cursor moves in memory only.
        Ok(Attempt::Committed {
            next: committed.next,
            cursor: Box::new(committed.cursor),
        })
    }
}

/// The whole body of a page held in its temp file (a REDCap id list or
/// batch: the rows are read once more, for their record ids).
fn read_whole(temp: &mut crate::ledger::LandingTemp) -> Result<Vec<u8>, crate::ledger::StoreError> {
    use std::io::Read;
    let mut body = Vec::new();
    temp.read_back()?
        .read_to_end(&mut body)
        .map_err(|e| crate::ledger::StoreError::io(std::path::Path::new("(landing temp)"), "read back", e))?;
    Ok(body)
}

/// Holds back a page (a run's first id list of a records stream) until
/// the vendor's probe (one record, exported as its batches will be) is
/// proven: a restricted token is refused before anything of the window
/// lands.
async fn prove_scope<P: Pacer>(
    stream: &mut Stream<'_, P>,
    window: &mut Window,
    page: &Received,
    cursor: &Cursor,
    probe: &Url,
) -> Result<(), SyncError> {
    let request_id = stream.next_request_id();
    let req = Request {
        url: probe,
        cursor,
        id: &request_id,
        attempt: 1,
        budget: 1,
    };
    let body = super::preflight::columns(stream, &req, probe).await?;
    match window.following_mut().prove(probe, &body) {
        Ok(()) => Ok(()),
        Err(Refused::Restricted(what)) => Err(restricted(stream, page, probe, what).await),
        Err(Refused::Invalid(why) | Refused::Unsupported(why)) => {
            let reason = format!(
                "{}: {why}; the id list of {} was not committed",
                stream.job.request_line(probe),
                page.url
            );
            match stream
                .job
                .audit
                .record(failed_line(stream, page, probe, reason.clone()))
                .await
            {
                Ok(_) => Err(stream.rejected(reason)),
                Err(e) => Err(e.into()),
            }
        }
    }
}

/// The `request_failed` line of `asked` (a page, or the record a run
/// checks its scope by) refused after its 2xx answer.
fn failed_line<P: Pacer>(
    stream: &Stream<'_, P>,
    page: &Received,
    asked: &Url,
    reason: String,
) -> RequestFailed {
    RequestFailed {
        stream: stream.name.clone(),
        request_id: page.request_id.clone(),
        attempt: page.attempt,
        url: asked.to_string(),
        status: Some(page.status),
        reason,
        ..RequestFailed::default()
    }
}

/// An export of a restricted token refused before it lands (`asked`: a
/// batch, or the record that proves a run's scope): audited, then 77
/// naming what is restricted and how to go on.
async fn restricted<P: Pacer>(
    stream: &mut Stream<'_, P>,
    page: &Received,
    asked: &Url,
    what: String,
) -> SyncError {
    let detail = format!(
        "{}: {what}; nothing of it was landed",
        stream.job.request_line(asked)
    );
    if let Err(e) = stream
        .job
        .audit
        .record(failed_line(stream, page, asked, detail.clone()))
        .await
    {
        return e.into();
    }
    SyncError::Permission {
        stream: stream.name.clone(),
        detail,
        hint: "give the token's user Full Data Set export rights and no data access group, or declare what it may \
               not export in the stream's delta.restricted_scope (fields, one_group)"
            .into(),
    }
}

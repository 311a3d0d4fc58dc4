//! Date windows (Vault's audit trail): what a run asks for, decided before
//! the first request and pure, so it is tested without a server.
//!
//! Each run fixes its window's end when it starts (the server's time minus
//! the settle lag, or `--until`), pages through the closed window `[start,
//! end]` in whatever order the endpoint returns it, and only when the whole
//! window is committed moves the start to the second after `end`. The
//! endpoint's dates have one-second resolution and both ends are
//! inclusive, so adjacent windows neither overlap (no record fetched
//! twice at the boundary) nor leave a gap.

use std::time::{Duration, SystemTime};

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use reqwest::Url;

use super::batches::{self, Batches, Vanished};
use super::events::RequestFailed;
use super::pass::Pass;
use super::request::Request;
use super::session;
use super::slots::{self, Slots};
use super::stream::Stream;
use super::SyncError;
use crate::config::{DateWindow, WindowFormat};
use crate::edc::paging;
use crate::edc::vendor::redcap::scope::Scope;
use crate::edc::VqlSelect;
use crate::store::Cursor;
use quota_pacer::Pacer;

/// A new stream starts this far inside the oldest instant the endpoint
/// serves, so the first request is not refused for a second's drift.
const FIRST_START_MARGIN: Duration = Duration::from_secs(60);

/// What the records of `paging: redcap_records` are read by: the record id
/// field, the batch size, and the window's two date-range parameters
/// (which the batches leave out).
pub(crate) struct RecordsPaging<'a> {
    pub id_field: &'a str,
    pub batch_size: u32,
    pub begin: &'a str,
    pub end: &'a str,
    /// What the policy declares the token may not export.
    pub declared: &'a crate::config::RestrictedScope,
    /// The export asks for the group column (`exportDataAccessGroups`).
    pub groups_asked: bool,
}

/// Why a page of REDCap's records is not committed.
pub(crate) enum RecordsRefusal {
    /// The page is not the rows it should be (65).
    Invalid(String),
    /// The batch is a restricted token's subset the policy does not
    /// declare (77).
    Restricted(String),
}

/// What a run does about its window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Fetch `[start, end]` (`start` absent: the endpoint's own default).
    Fetch { start: Option<String>, end: String },
    /// The next window would start after `end`: nothing to ask for yet.
    UpToDate { next_start: String, end: String },
    /// The endpoint no longer serves `[start, oldest)`.
    TooOld { start: String, oldest: String },
}

/// `YYYY-MM-DDTHH:MM:SSZ`: the form Vault documents for its dates.
pub(crate) fn format(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

fn parse(s: &str) -> Result<SystemTime, String> {
    let t = OffsetDateTime::parse(s.trim(), &Rfc3339)
        .map_err(|_| format!("window start {s:?} is not an RFC 3339 timestamp"))?;
    Ok(SystemTime::from(t))
}

/// The second after `end`, where the next window starts.
pub fn after(end: &str) -> Result<String, String> {
    Ok(format(parse(end)? + Duration::from_secs(1)))
}

/// Plans the window of a run that starts no window of its own yet:
/// `start` is the cursor's window start (or `--since`), `until` a
/// backfill's end, `server_now` the server's clock as last seen.
pub fn plan(
    window: &DateWindow,
    start: Option<&str>,
    until: Option<&str>,
    server_now: SystemTime,
) -> Result<Plan, String> {
    let end = match until {
        Some(u) => parse(u)?,
        None => server_now.checked_sub(window.settle_lag).unwrap_or(server_now),
    };
    let end = format(end);
    let oldest = window.max_age.and_then(|age| server_now.checked_sub(age));
    let start = match (start, oldest, &window.format) {
        (Some(s), _, _) => Some(parse(s)?),
        (None, Some(oldest), _) => Some(oldest + FIRST_START_MARGIN),
        // A window of whole days reads at least the current one.
        (None, None, WindowFormat::Date { zone }) => Some(parse(&zone.start_of_day(&end)?)?),
        // A wall-clock window without a start asks for the whole history
        // (REDCap's log and records serve it whole).
        (None, None, WindowFormat::Rfc3339 | WindowFormat::Local { .. }) => None,
    };
    if let (Some(s), Some(oldest)) = (start, oldest) {
        if s < oldest {
            return Ok(Plan::TooOld {
                start: format(s),
                oldest: format(oldest),
            });
        }
    }
    match start {
        Some(s) if parse(&end)? < s => Ok(Plan::UpToDate {
            next_start: format(s),
            end,
        }),
        s => Ok(Plan::Fetch {
            start: s.map(format),
            end,
        }),
    }
}

/// The window a stream is paging: where its first page is, its fixed end
/// (a date window), and the query of a VQL delta's first page.
#[derive(Default)]
pub(super) struct Window {
    /// The fixed end of the date window this run is paging, if any.
    end: Option<String>,
    /// With `identical_records: distinct`: how many records of each
    /// content identity the window's committed pages held (its twins are
    /// told apart by their order among them).
    occurrences: Option<crate::record::identity::Occurrences>,
    /// A VQL delta: the first page's URL and the query it is POSTed with
    /// (next pages are POSTs with no body).
    vql_first: Option<(Url, VqlSelect)>,
    /// A collection (`delta.collection`): its first page, which every
    /// pass starts from, and the pass in progress.
    collection: Option<(Url, Pass)>,
    /// REDCap's records (`paging: redcap_records`): the ids of the window
    /// still to ask for, and the last batch's records it did not get, to
    /// audit once it is committed.
    batches: Batches,
    vanished: Option<(Url, Vanished)>,
    /// What a full export of the REDCap project holds, each batch checked
    /// against it.
    scope: Option<Scope>,
    /// A record exported as the batches are has been checked against the
    /// scope this run (before its first id list landed).
    scope_proven: bool,
}

impl Window {
    /// The fixed end of the date window in progress, if any.
    pub(crate) fn end(&self) -> Option<&str> {
        self.end.as_deref()
    }

    /// The count of twins so far, when records of identical content are
    /// distinct events.
    pub(crate) fn occurrences(&self) -> Option<&crate::record::identity::Occurrences> {
        self.occurrences.as_ref()
    }

    /// Adds a committed page's records to the count of twins.
    pub(crate) fn count(&mut self, counted: &[crate::record::identity::RecordIdentity]) {
        if let Some(occurrences) = &mut self.occurrences {
            for content in counted {
                *occurrences.entry(*content).or_insert(0) += 1;
            }
        }
    }

    /// What follows a page of REDCap's records (`url`, its `body`): after
    /// the id list, the first batch of the ids it names; after a batch, the
    /// next, with the records the batch asked for and did not get kept
    /// for [`Window::take_vanished`]. `None` when the window is read.
    pub(crate) fn after_records(
        &mut self,
        url: &Url,
        body: &[u8],
        paging: &RecordsPaging<'_>,
    ) -> Result<Option<Url>, RecordsRefusal> {
        match batches::Kind::of(url) {
            batches::Kind::IdList => {
                self.batches = Batches::listed(body, paging.id_field).map_err(RecordsRefusal::Invalid)?
            }
            batches::Kind::Batch(asked) => {
                let rows = batches::Rows::of(body, paging.id_field).map_err(RecordsRefusal::Invalid)?;
                self.check_columns(&rows, paging)?;
                let vanished = rows.vanished(&asked);
                if !vanished.missing.is_empty() {
                    self.vanished = Some((url.clone(), vanished));
                }
            }
        }
        Ok(self
            .batches
            .next(url, paging.batch_size, paging.begin, paging.end))
    }

    /// The one record to export, as the batch `next` after the id list
    /// `url` will, before that list lands: once a run, so a restricted
    /// token is refused before anything of the window lands. `None` when
    /// proven already, or when the list names no record (an export of
    /// nothing has no columns to tell by).
    pub(crate) fn scope_probe(&self, url: &Url, next: Option<&Url>) -> Option<Url> {
        let unproven = self.scope.is_some() && !self.scope_proven;
        match (batches::Kind::of(url), next) {
            (batches::Kind::IdList, Some(batch)) if unproven => Some(batches::first_record(batch)),
            _ => None,
        }
    }

    /// Checks the answer to [`Window::scope_probe`]: its columns against
    /// the project's. A record deleted since the list leaves it unproven
    /// (every batch is still checked).
    pub(crate) fn prove_scope(
        &mut self,
        body: &[u8],
        paging: &RecordsPaging<'_>,
    ) -> Result<(), RecordsRefusal> {
        let rows = batches::Rows::of(body, paging.id_field).map_err(RecordsRefusal::Invalid)?;
        self.check_columns(&rows, paging)?;
        self.scope_proven = rows.columns().is_some();
        Ok(())
    }

    /// Refuses rows that lack what a full export of the project holds,
    /// less what the policy declared.
    fn check_columns(&self, rows: &batches::Rows, paging: &RecordsPaging<'_>) -> Result<(), RecordsRefusal> {
        let restricted = self
            .scope
            .as_ref()
            .zip(rows.columns())
            .and_then(|(scope, columns)| scope.restricted(columns, paging.groups_asked, paging.declared));
        match restricted {
            Some(what) => Err(RecordsRefusal::Restricted(what)),
            None => Ok(()),
        }
    }

    /// The records the last batch did not get, once.
    pub(crate) fn take_vanished(&mut self) -> Option<(Url, Vanished)> {
        self.vanished.take()
    }

    /// A collection's first page and the pass in progress.
    pub(crate) fn pass(&mut self) -> Option<(&Url, &mut Pass)> {
        self.collection.as_mut().map(|(first, pass)| (&*first, pass))
    }

    /// The query to POST to `url`: the VQL delta's, on its first page only.
    pub(crate) fn query_for(&self, url: &Url) -> Option<&VqlSelect> {
        self.vql_first.as_ref().filter(|(u, _)| u == url).map(|(_, q)| q)
    }

    /// The URL to fetch first: the page a previous run was on, or the first
    /// page of a new window from the cursor; `None` when a date window has
    /// nothing to ask for yet.
    pub(crate) async fn start_url<P: Pacer>(
        &mut self,
        stream: &mut Stream<'_, P>,
        slots: &mut Slots<P>,
        cursor: &Cursor,
    ) -> Result<Option<Url>, SyncError> {
        let job = stream.job;
        let distinct = job
            .delta
            .lookback
            .as_ref()
            .is_some_and(|l| l.identical == crate::config::IdenticalRecords::Distinct);
        if distinct {
            self.occurrences = Some(Default::default());
        }
        if job.delta.collection.is_some() {
            // A pass is consistent only as a whole: one cut short is read
            // again from page 1 (what it landed is recognised by its hash).
            let url = paging::first_page(
                job.client.origin(),
                job.client.base(),
                &job.delta,
                &job.spec,
                &job.identity,
                None,
                None,
            )
            .map_err(|e| stream.rejected(e.to_string()))?;
            self.collection = Some((url.clone(), Pass::new(cursor.snapshot())));
            return Ok(Some(url));
        }
        if let Some(next) = cursor.next_page() {
            self.end = cursor.window_end().map(str::to_string);
            // Twins are told apart by their count in the window, which
            // only a read from its first page has whole: an interrupted
            // window is read again from there (what it landed is
            // recognised by the lookback memory and not landed again); so
            // are REDCap's batches, whose ids only the id list holds.
            if !distinct && !batched(job) {
                let url = job.client.resolve(job.client.base(), next);
                return url.map(Some).map_err(|e| stream.rejected(e.to_string()));
            }
        }
        if let Some(vql) = &job.delta.vql {
            let start = cursor.window_start().unwrap_or(&vql.initial_cursor);
            let select =
                VqlSelect::new(&vql.select, start, job.delta.page_size).map_err(|e| stream.rejected(e))?;
            let path = job
                .delta
                .path
                .fill(&job.identity)
                .map_err(|e| stream.rejected(e.to_string()))?;
            let url = job
                .client
                .origin()
                .endpoint(job.client.base(), &path)
                .map_err(|e| stream.rejected(e.to_string()))?;
            self.vql_first = Some((url.clone(), select));
            return Ok(Some(url));
        }
        let (start, end) = match (&job.delta.window, &self.end) {
            // An interrupted date window keeps the end it was fixed with
            // (REDCap's records read it again with the project's scope).
            (Some(_), Some(end)) => {
                let end = end.clone();
                if batched(job) && self.scope.is_none() {
                    self.scope = Some(self.resumed_scope(stream, slots, cursor).await?);
                }
                (cursor.window_start().map(str::to_string), Some(end))
            }
            (Some(window), None) => match self.plan(stream, slots, window, cursor).await? {
                Some((start, end)) => (start, Some(end)),
                None => return Ok(None),
            },
            (None, _) => (cursor.window_start().map(str::to_string), None),
        };
        self.end = end;
        paging::first_page(
            job.client.origin(),
            job.client.base(),
            &job.delta,
            &job.spec,
            &job.identity,
            start.as_deref(),
            self.end.as_deref(),
        )
        .map(Some)
        .map_err(|e| stream.rejected(e.to_string()))
    }

    /// The REDCap project's scope, for a records window resumed without a
    /// plan (its end was fixed by an earlier run).
    async fn resumed_scope<P: Pacer>(
        &mut self,
        stream: &mut Stream<'_, P>,
        slots: &mut Slots<P>,
        cursor: &Cursor,
    ) -> Result<Scope, SyncError> {
        let endpoint = endpoint(stream)?;
        let request_id = stream.next_request_id();
        let req = Request {
            url: &endpoint,
            cursor,
            id: &request_id,
            attempt: 1,
            budget: 1,
        };
        session::ensure(stream, slots, &req).await?;
        super::project_facts::scope(stream, &req, &endpoint).await
    }

    /// Plans this run's window: `Some((start, end))` to fetch, `None` when
    /// there is nothing to ask for yet. The end is measured on the server's
    /// clock: a Vault login shows it; otherwise one paced HEAD of the
    /// endpoint does, before anything is fetched.
    async fn plan<P: Pacer>(
        &mut self,
        stream: &mut Stream<'_, P>,
        slots: &mut Slots<P>,
        window: &DateWindow,
        cursor: &Cursor,
    ) -> Result<Option<(Option<String>, String)>, SyncError> {
        let job = stream.job;
        let endpoint = endpoint(stream)?;
        let request_id = stream.next_request_id();
        let req = Request {
            url: &endpoint,
            cursor,
            id: &request_id,
            attempt: 1,
            budget: 1,
        };
        session::ensure(stream, slots, &req).await?;
        if job.client.exports_by_form() {
            super::project_facts::check(stream, &req, &endpoint).await?;
            if batched(job) {
                self.scope = Some(super::project_facts::scope(stream, &req, &endpoint).await?);
            }
        } else if !job.client.server_clock_known() {
            let permit = slots::permit(stream, &req).await?;
            let probe = job.client.head(&endpoint).await;
            permit.release();
            if let Err(e) = probe {
                tracing::warn!(stream = %stream.name, "reading the server's clock with HEAD {endpoint}: {e}");
            }
        }
        let server_clock = job.client.server_clock_known().then(|| job.client.server_now());
        stream
            .trust_clock(&req, None, job.client.server_skew_s(), server_clock)
            .await?;
        if !job.client.server_clock_known() {
            tracing::warn!(
                stream = %stream.name,
                "the EDC sent no Date header: the window's end is measured on this host's clock"
            );
        }
        let until = job.options.until.as_deref();
        let planned = plan(window, cursor.window_start(), until, job.client.server_now())
            .map_err(|e| stream.rejected(e))?;
        match planned {
            Plan::Fetch { start, end } => Ok(Some((start, end))),
            Plan::UpToDate { .. } => Ok(None),
            Plan::TooOld { start, oldest } => {
                let reason = format!(
                    "the window start {start} is older than {} serves (delta.window.max_age_days): records \
                     stamped in [{start}, {oldest}) can no longer be fetched from it and were not skipped; recover \
                     that interval from a full export (Vault: an all_dates audit export), then remove this \
                     stream's cursor file to continue from the oldest servable instant",
                    endpoint.path()
                );
                let failed = RequestFailed {
                    stream: stream.name.clone(),
                    request_id,
                    attempt: 1,
                    url: endpoint.to_string(),
                    reason: reason.clone(),
                    ..RequestFailed::default()
                };
                job.audit.record(failed).await?;
                Err(stream.rejected(reason))
            }
        }
    }
}

/// The stream's endpoint (its delta's path on the configured origin).
fn endpoint<P: Pacer>(stream: &Stream<'_, P>) -> Result<Url, SyncError> {
    let job = stream.job;
    let path = job
        .delta
        .path
        .fill(&job.identity)
        .map_err(|e| stream.rejected(e.to_string()))?;
    job.client
        .origin()
        .endpoint(job.client.base(), &path)
        .map_err(|e| stream.rejected(e.to_string()))
}

/// Whether the stream reads REDCap's records by batches.
fn batched<P: Pacer>(job: &super::StreamJob<P>) -> bool {
    matches!(job.delta.paging, crate::config::Paging::RedcapRecords { .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vault() -> DateWindow {
        DateWindow {
            end_param: "end_date".into(),
            max_age: Some(Duration::from_secs(30 * 86_400)),
            settle_lag: Duration::from_secs(60),
            format: Default::default(),
        }
    }

    fn at(s: &str) -> SystemTime {
        parse(s).unwrap()
    }

    #[test]
    fn a_window_ends_a_settle_lag_before_the_server_clock_and_the_next_starts_a_second_after() {
        let now = at("2026-12-03T10:00:00Z");
        let p = plan(&vault(), Some("2026-12-01T00:00:00Z"), None, now).unwrap();
        assert_eq!(
            p,
            Plan::Fetch {
                start: Some("2026-12-01T00:00:00Z".into()),
                end: "2026-12-03T09:59:00Z".into()
            }
        );
        assert_eq!(after("2026-12-03T09:59:00Z").unwrap(), "2026-12-03T09:59:01Z");
    }

    #[test]
    fn a_new_stream_starts_just_inside_the_oldest_servable_instant() {
        let now = at("2026-12-03T10:00:00Z");
        match plan(&vault(), None, None, now).unwrap() {
            Plan::Fetch { start, .. } => assert_eq!(start.as_deref(), Some("2026-11-03T10:01:00Z")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_start_older_than_the_endpoint_serves_is_named_never_skipped() {
        let now = at("2026-12-03T10:00:00Z");
        assert_eq!(
            plan(&vault(), Some("2026-10-01T00:00:00Z"), None, now).unwrap(),
            Plan::TooOld {
                start: "2026-10-01T00:00:00Z".into(),
                oldest: "2026-11-03T10:00:00Z".into()
            }
        );
    }

    #[test]
    fn nothing_is_asked_before_the_next_window_has_begun() {
        let now = at("2026-12-03T10:00:00Z");
        let p = plan(&vault(), Some("2026-12-03T09:59:30Z"), None, now).unwrap();
        assert!(matches!(p, Plan::UpToDate { .. }), "{p:?}");
        // Exactly at the end is still a (one-second) window.
        let p = plan(&vault(), Some("2026-12-03T09:59:00Z"), None, now).unwrap();
        assert!(matches!(p, Plan::Fetch { .. }), "{p:?}");
    }

    #[test]
    fn a_backfill_window_ends_at_until() {
        let now = at("2026-12-03T10:00:00Z");
        let p = plan(
            &vault(),
            Some("2026-11-10T00:00:00Z"),
            Some("2026-11-11T00:00:00+01:00"),
            now,
        )
        .unwrap();
        assert_eq!(
            p,
            Plan::Fetch {
                start: Some("2026-11-10T00:00:00Z".into()),
                end: "2026-11-10T23:00:00Z".into()
            }
        );
    }
}

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

use super::events::RequestFailed;
use super::request::Request;
use super::session;
use super::slots::{self, Slots};
use super::stream::Stream;
use super::SyncError;
use crate::config::{DateWindow, WindowFormat};
use crate::edc::vendor::{Endpoint, Follow, Following};
use crate::ledger::Cursor;
use quota_pacer::Pacer;

/// A new stream starts this far inside the oldest instant the endpoint
/// serves, so the first request is not refused for a second's drift.
const FIRST_START_MARGIN: Duration = Duration::from_secs(60);

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

/// The window a stream is paging: its fixed end, its twins so far, and
/// what its vendor holds of it between pages (`Following`: a VQL query, a
/// collection's pass, REDCap's batches), with what a committed page left
/// to audit.
#[derive(Default)]
pub(super) struct Window {
    /// The fixed end of the date window this run is paging, if any.
    end: Option<String>,
    /// With `identical_records: distinct`: how many records of each
    /// content identity the window's committed pages held (its twins are
    /// told apart by their order among them).
    occurrences: Option<crate::record::identity::Occurrences>,
    /// The vendor's reading of the window (made when it starts).
    following: Option<Following>,
    /// What the last committed page left to audit: a batch's records it
    /// did not get, a collection pass that changed.
    left: Option<Follow>,
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

    /// The vendor's reading of the window, made with its first request.
    pub(crate) fn following_mut(&mut self) -> &mut Following {
        self.following.get_or_insert_with(Following::plain)
    }

    /// Whether the page `url` asks can hold no items
    /// (`DeltaKind::may_be_empty`).
    pub(crate) fn may_be_empty(&self, kind: &crate::edc::vendor::DeltaKind, url: &Url) -> bool {
        self.following.as_ref().is_some_and(|f| kind.may_be_empty(f, url))
    }

    /// The query to POST to `url`: a VQL delta's, on its first page only.
    pub(crate) fn query_for(&self, url: &Url) -> Option<&crate::edc::VqlSelect> {
        self.following.as_ref().and_then(|f| f.query_for(url))
    }

    /// What the page just committed left to audit, once.
    pub(crate) fn take_left(&mut self) -> Option<Follow> {
        self.left.take()
    }

    /// Keeps what a committed page left to audit.
    pub(crate) fn leave(&mut self, follow: Follow) {
        self.left = Some(follow);
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
        let last_snapshot = cursor.snapshot().map_or(&[][..], |s| &s.pages[..]);
        self.following = Some(job.kind.following(last_snapshot));
        let resumes = job.kind.resumes_mid_window();
        if let Some(next) = cursor
            .next_page()
            .filter(|_| resumes || job.delta.window.is_some())
        {
            self.end = cursor.window_end().map(str::to_string);
            // Twins are told apart by their count in the window, which
            // only a read from its first page has whole: an interrupted
            // window is read again from there (what it landed is
            // recognised by the lookback memory and not landed again); so
            // are a vendor's windows it reads whole again (REDCap's
            // batches, whose ids only the id list holds).
            if !distinct && resumes {
                let url = job.client.resolve(job.client.base(), next);
                return url.map(Some).map_err(|e| stream.rejected(e.to_string()));
            }
        }
        let (start, end) = match (&job.delta.window, &self.end) {
            // An interrupted date window keeps the end it was fixed with
            // (asking the vendor's facts again, such as REDCap's scope).
            (Some(_), Some(end)) => {
                let end = end.clone();
                self.resumed(stream, slots, cursor).await?;
                (cursor.window_start().map(str::to_string), Some(end))
            }
            (Some(window), None) => match self.plan(stream, slots, window, cursor).await? {
                Some((start, end)) => (start, Some(end)),
                None => return Ok(None),
            },
            (None, _) => (cursor.window_start().map(str::to_string), None),
        };
        self.end = end;
        let at = Endpoint {
            origin: job.client.origin(),
            base: job.client.base(),
            spec: &job.spec,
            identity: &job.identity,
        };
        let end = self.end.clone();
        job.kind
            .first_page(at, start.as_deref(), end.as_deref(), self.following_mut())
            .map(Some)
            .map_err(|e| stream.rejected(e.to_string()))
    }

    /// The vendor's facts for a window resumed without a plan (its end was
    /// fixed by an earlier run).
    async fn resumed<P: Pacer>(
        &mut self,
        stream: &mut Stream<'_, P>,
        slots: &mut Slots<P>,
        cursor: &Cursor,
    ) -> Result<(), SyncError> {
        let endpoint = endpoint(stream)?;
        if stream.job.kind.preflight(&endpoint, false).is_empty() {
            return Ok(());
        }
        let request_id = stream.next_request_id();
        let req = Request {
            url: &endpoint,
            cursor,
            id: &request_id,
            attempt: 1,
            budget: 1,
        };
        session::ensure(stream, slots, &req).await?;
        super::preflight::ask(stream, &req, &endpoint, false, self.following_mut()).await
    }

    /// Plans this run's window: `Some((start, end))` to fetch, `None` when
    /// there is nothing to ask for yet. The end is measured on the server's
    /// clock: a Vault login shows it, or a vendor's preflight probe (REDCap's
    /// version); otherwise one paced HEAD of the endpoint does, before
    /// anything is fetched.
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
        if !job.kind.preflight(&endpoint, true).is_empty() {
            super::preflight::ask(stream, &req, &endpoint, true, self.following_mut()).await?;
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

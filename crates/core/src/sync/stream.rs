//! One stream as its audit lines and its report see it: who it is in
//! this run, what it has done so far, and every way an attempt ends
//! without a commit, each audited before it acts (invariant 3): a throttle
//! (429/503, or a vendor's limit reported in a body) with its shared pause
//! on the quota, the deterministic backoff after a 5xx or a transport
//! error, the vendor burst floor, a budget spent (`quota_exhausted`, 75 or
//! 69), a credential refused (77), or a request that ends the stream
//! (`request_failed`). Also where the server's clock is compared with ours.

use std::time::Duration;

use reqwest::Url;

use super::events::{
    QuotaExhausted, RateLimited, RequestFailed, RetryScheduled, VendorBurstLow, VendorLimitSpent,
};
use super::request::Request;
use super::{Attempt, Spent, StreamJob, StreamReport, SyncError, Wait, WaitKind, MAX_BACKOFF};
use crate::audit::{now_rfc3339, RunId};
use crate::edc::vendor::{VendorError, VendorErrorKind};
use crate::edc::{FetchError, ResponseMeta};
use crate::ledger::{Cursor, StoreError};
use quota_pacer::retry_after::{self, RetryAfter, RetryAfterSource};
use quota_pacer::Pacer;

/// A stream in this run: its job, its name and run, its report so far,
/// and the requests it has numbered.
pub(super) struct Stream<'a, P: Pacer> {
    pub job: &'a StreamJob<P>,
    pub name: String,
    pub run_id: RunId,
    pub report: StreamReport,
    /// Requests numbered so far (`<run_id>:<stream>:<n>`).
    requests: u64,
    /// A clock-skew warning was logged for this stream already.
    skew_warned: bool,
    /// `backfill --missing-only`: the identities of the records landed
    /// already (`completeness.rs`); a record among them is not landed.
    pub landed_before: Option<crate::record::identity::IdentitySet>,
    /// While Vault's burst allowance is at or below `vendor_burst_floor`:
    /// the vault-wide gate every request passes first (`vendor_burst`).
    pub vendor_gate: Option<quota_pacer::Quota>,
}

impl<'a, P: Pacer> Stream<'a, P> {
    pub(super) fn new(job: &'a StreamJob<P>, name: String, report: StreamReport) -> Stream<'a, P> {
        Stream {
            job,
            name,
            run_id: job.audit.run_id().clone(),
            report,
            requests: 0,
            skew_warned: false,
            landed_before: None,
            vendor_gate: None,
        }
    }

    /// Numbers the next request: `<run_id>:<stream>:<n>`, on every audit
    /// line about it.
    pub(super) fn next_request_id(&mut self) -> String {
        self.requests += 1;
        self.request_id()
    }

    /// The id of the last request numbered.
    pub(super) fn request_id(&self) -> String {
        format!("{}:{}:{}", self.run_id, self.name, self.requests)
    }

    /// How many requests have been numbered (temp file names use it).
    pub(super) fn requests(&self) -> u64 {
        self.requests
    }

    /// The stream stops on a request it must not retry (65).
    pub(super) fn rejected(&self, reason: String) -> SyncError {
        SyncError::Rejected {
            stream: self.name.clone(),
            reason,
        }
    }

    /// Sleeps `wait`, unless a stop is requested first; a person at a
    /// terminal sees why and the time left on the progress line.
    pub(super) async fn sleep(&self, wait: Duration, why: &str) -> Result<(), SyncError> {
        let until = tokio::time::Instant::now() + wait;
        let slept = async {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => Ok(()),
                _ = self.job.options.interrupt.wait() => Err(SyncError::Interrupted { stream: self.name.clone() }),
            }
        };
        self.showing_wait(why, until, slept).await
    }

    /// Runs `wait` (over by `until`) with the progress line showing it.
    pub(super) async fn showing_wait<F: std::future::Future>(
        &self,
        why: &str,
        until: tokio::time::Instant,
        wait: F,
    ) -> F::Output {
        let bar = self.job.options.progress.as_ref();
        super::progress::showing_wait(bar, &self.name, self.report.records, why, until, wait).await
    }

    /// Deterministic backoff: the rate's interval doubled per attempt.
    pub(super) fn backoff(&self, attempt: u32) -> Duration {
        let base = self.job.policy.rate.interval();
        let cap = MAX_BACKOFF.min(self.job.policy.max_wait);
        base.saturating_mul(1u32 << (attempt - 1).min(16)).min(cap)
    }

    /// 5xx, transport error, truncated body: audit, then back off.
    pub(super) async fn retry_later(
        &mut self,
        req: &Request<'_>,
        reason: String,
        vendor_execution_id: Option<String>,
    ) -> Result<Attempt, SyncError> {
        let Request {
            url,
            id: request_id,
            attempt,
            ..
        } = *req;
        let wait = self.backoff(attempt);
        let event = RetryScheduled {
            stream: self.name.clone(),
            request_id: request_id.to_string(),
            attempt,
            url: url.to_string(),
            reason: reason.clone(),
            backoff_s: wait.as_secs_f64(),
            vendor_execution_id,
            compliance_timestamp: now_rfc3339(),
        };
        self.job.audit.record(event).await?;
        self.report.waits.push(Wait {
            kind: WaitKind::Retry,
            reason: format!("retry after {reason}"),
            seconds: wait.as_secs_f64(),
        });
        Ok(Attempt::Retry { wait, reason })
    }

    /// 429 / 503, or the vendor's throttle in a body: audit (fsynced),
    /// pause the whole quota, then the caller sleeps.
    ///
    /// An HTTP-date `Retry-After` is measured against the response's own
    /// `Date` when it has one, so a host whose clock is minutes off still
    /// waits exactly the interval the server asked for.
    pub(super) async fn throttled(
        &mut self,
        req: &Request<'_>,
        meta: &ResponseMeta,
        vendor: Option<VendorError>,
    ) -> Result<Attempt, SyncError> {
        let Request {
            url,
            cursor,
            id: request_id,
            attempt,
            ..
        } = *req;
        let policy = &self.job.policy;
        let values: Vec<&[u8]> = meta.retry_after.iter().map(Vec::as_slice).collect();
        let server_now = meta.server_date.unwrap_or(meta.received_at);
        let RetryAfter {
            wait,
            mut source,
            raw,
        } = retry_after::parse(&values, server_now, policy.default_retry_after);
        if vendor.is_some() && source == RetryAfterSource::Absent {
            source = RetryAfterSource::VendorBody;
        }
        let received = humantime::format_rfc3339_millis(meta.received_at).to_string();
        // A 429 (or the vendor's throttle in a body) says the vendor's
        // window is used up; a 503 says only that the server is busy.
        let window_spent = !self.job.limiter.quota().windows().is_empty()
            && (vendor.is_some() || meta.status == reqwest::StatusCode::TOO_MANY_REQUESTS);
        let resume = meta
            .received_at
            .checked_add(wait)
            .map(|t| humantime::format_rfc3339_millis(t).to_string());
        let signal = if vendor.is_some() {
            "vendor_body"
        } else {
            "http_status"
        };
        let reason = match &vendor {
            Some(v) => format!("{} in the body, {}", v.code, source.describe()),
            None => format!("{}, {}", meta.status.as_u16(), source.describe()),
        };
        let event = RateLimited {
            stream: self.name.clone(),
            request_id: request_id.to_string(),
            attempt,
            status: meta.status.as_u16(),
            url: url.to_string(),
            signal,
            vendor_error: vendor,
            retry_after_s: wait.as_secs_f64(),
            retry_after_source: source,
            retry_after_raw: raw,
            server_date: meta
                .server_date
                .map(|d| humantime::format_rfc3339_seconds(d).to_string()),
            server_date_unreadable: meta.date_unreadable.clone(),
            clock_skew_s: meta.clock_skew_s(),
            vendor_execution_id: meta.execution_id.clone(),
            compliance_timestamp: received,
            resume_not_before: resume.unwrap_or_else(|| "never".into()),
            quota: self.job.limiter.quota().key().to_string(),
            quota_headers: meta.quota_headers.clone(),
            window_spent,
        };
        self.job.audit.record(event).await?;
        if window_spent {
            self.job.limiter.spend_windows().await?;
        }
        if wait > policy.max_wait {
            let why = format!(
                "Retry-After of {} s exceeds max_wait_s ({} s)",
                wait.as_secs_f64(),
                policy.max_wait.as_secs_f64()
            );
            return self.exhausted(url, attempt, why, cursor, Spent::Quota).await;
        }
        self.job.limiter.pause(wait).await?;
        self.report.waits.push(Wait {
            kind: WaitKind::Throttled,
            reason: reason.clone(),
            seconds: wait.as_secs_f64(),
        });
        Ok(Attempt::Retry { wait, reason })
    }

    /// Keeps the server-vs-local clock difference for metrics, and warns
    /// once per stream when it exceeds `clock_skew_warn_s`: a pacer on a
    /// drifting clock trips the remote limit while looking compliant.
    pub(super) fn note_clock(&mut self, meta: &ResponseMeta) {
        let Some(skew) = meta.clock_skew_s() else { return };
        self.report.clock_skew_s = Some(skew);
        let bound = self.job.policy.clock_skew_warn.as_secs_f64();
        if skew.abs() > bound && !self.skew_warned {
            self.skew_warned = true;
            tracing::warn!(
                stream = %self.name,
                clock_skew_s = skew,
                bound_s = bound,
                "the EDC's clock (Date header) differs from this host's by {skew:+.0} s, more than \
                 clock_skew_warn_s; Retry-After dates are measured against the server's clock, \
                 but check NTP on this host"
            );
        }
    }

    /// The server's clock is evidence only within `clock_skew_max_s`: a
    /// `Date` further from ours (a server at 9999, or two days ahead) would
    /// move a date window past all data. Beyond the bound the stream stops
    /// (75, audited, naming both clocks) before anything is derived from it.
    pub(super) async fn trust_clock(
        &mut self,
        req: &Request<'_>,
        meta: Option<&ResponseMeta>,
        skew_s: Option<f64>,
        server_clock: Option<std::time::SystemTime>,
    ) -> Result<(), SyncError> {
        let Some(skew) = skew_s else { return Ok(()) };
        let max = self.job.policy.clock_skew_max.as_secs_f64();
        if skew.abs() <= max {
            return Ok(());
        }
        let server = server_clock.map_or_else(|| "unreadable".into(), rfc3339_or_range);
        let reason = format!(
            "the EDC's clock ({server}) differs from this host's clock ({}) by {skew:+.0} s, more than \
             clock_skew_max_s ({max} s): it is not taken as evidence for a window or a cursor, and nothing \
             was committed; check NTP on this host and ask the vendor about the server's clock",
            now_rfc3339()
        );
        self.failed(req, meta, None, reason.clone()).await?;
        Err(SyncError::Exhausted {
            stream: self.name.clone(),
            reason,
        })
    }

    /// Vault delays responses instead of answering 429 once its burst is
    /// spent. Its burst allowance (`X-VaultAPI-BurstLimitRemaining` of the
    /// 5-minute window, Vault REST API reference "API Rate Limits") is the
    /// vault's, whatever bucket_key a policy gives its streams: at or below
    /// the floor, every request of every stream, study and process on this
    /// vault first takes a token from one gate keyed by the vault's host,
    /// one per `300 s / X-VaultAPI-BurstLimit` (a separate pacer call, so
    /// it needs no hash tag in common with any quota). Above the floor the
    /// gate is left.
    pub(super) async fn vendor_burst(
        &mut self,
        request_id: &str,
        headers: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), SyncError> {
        self.vendor_daily(request_id, headers).await?;
        let Some(floor) = self.job.policy.vendor_burst_floor else {
            return Ok(());
        };
        let Some(allowance) = self.job.kind.announced(headers).burst else {
            return Ok(());
        };
        let (remaining, limit) = (allowance.remaining, allowance.limit);
        if remaining > floor {
            self.vendor_gate = None;
            return Ok(());
        }
        let spacing = allowance.spacing;
        let host = self
            .job
            .client
            .base()
            .host_str()
            .unwrap_or("vault")
            .to_ascii_lowercase();
        let rate = quota_pacer::Rate::new(1.0 / spacing.as_secs_f64(), 1);
        let gate = rate.and_then(|r| quota_pacer::Quota::new(self.job.kind.burst_gate_key(&host), r).ok());
        let event = VendorBurstLow {
            stream: self.name.clone(),
            request_id: request_id.to_string(),
            burst_limit: limit,
            burst_remaining: remaining,
            floor,
            pause_s: spacing.as_secs_f64(),
            reason: format!(
                "{} at or below vendor_burst_floor: every request to {host}, from every stream and process, now \
                 passes one gate that lets one through every {:.3} s (the burst window over its limit)",
                allowance.header,
                spacing.as_secs_f64()
            ),
        };
        self.job.audit.record(event).await?;
        self.vendor_gate = gate.map(|g| g.with_horizon(self.job.policy.max_wait));
        Ok(())
    }

    /// Vault's daily allowance spent (`X-VaultAPI-DailyLimitRemaining: 0`,
    /// `vault/daily.rs`): the quota's `window_quota` is marked spent for
    /// every caller, so no request of any stream or process on the quota
    /// goes before the window ends (past `max_wait_s`, exit 75 with the
    /// cursor on the last page). Audited either way; without a declared
    /// window, the next request meets Vault's `API_LIMIT_EXCEEDED`.
    async fn vendor_daily(
        &mut self,
        request_id: &str,
        headers: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), SyncError> {
        let Some(allowance) = self.job.kind.announced(headers).daily.filter(|d| d.spent()) else {
            return Ok(());
        };
        let window_spent = !self.job.limiter.quota().windows().is_empty();
        let header = allowance.header;
        let reason = if window_spent {
            format!(
                "{header} is 0: the quota's window_quota is marked spent, and no request on it goes before the \
                 window ends"
            )
        } else {
            format!(
                "{header} is 0 and the policy declares no window_quota: the vendor will refuse the next request \
                 (Vault: API_LIMIT_EXCEEDED)"
            )
        };
        let event = VendorLimitSpent {
            stream: self.name.clone(),
            request_id: request_id.to_string(),
            header: allowance.header,
            limit: allowance.limit,
            remaining: allowance.remaining,
            window_spent,
            reason,
        };
        self.job.audit.record(event).await?;
        if window_spent {
            self.job.limiter.spend_windows().await?;
        }
        Ok(())
    }

    pub(super) async fn exhausted<T>(
        &mut self,
        url: &Url,
        attempts: u32,
        reason: String,
        cursor: &Cursor,
        spent: Spent,
    ) -> Result<T, SyncError> {
        let event = QuotaExhausted {
            stream: self.name.clone(),
            request_id: self.request_id(),
            attempts,
            url: url.to_string(),
            reason: reason.clone(),
            cursor: cursor.to_json(),
        };
        self.job.audit.record(event).await?;
        Err(match spent {
            Spent::Unreachable => SyncError::Unreachable {
                stream: self.name.clone(),
                attempts,
                detail: reason,
            },
            Spent::Quota => SyncError::Exhausted {
                stream: self.name.clone(),
                reason,
            },
        })
    }

    pub(super) async fn fetch_failed(
        &mut self,
        req: &Request<'_>,
        e: FetchError,
    ) -> Result<Attempt, SyncError> {
        let Request {
            url,
            cursor,
            attempt,
            budget,
            ..
        } = *req;
        if e.is_transient() {
            if attempt >= budget {
                let reason = format!("{e} (attempt {attempt} of {budget})");
                return self
                    .exhausted(url, attempt, reason, cursor, Spent::Unreachable)
                    .await;
            }
            return self.retry_later(req, e.to_string(), None).await;
        }
        if let FetchError::Sink { .. } = e {
            let error = std::io::Error::other(e.to_string());
            return Err(StoreError::Io {
                path: self.report.landing_dir.clone(),
                op: "write a page into",
                error,
            }
            .into());
        }
        self.failed(req, None, None, e.to_string()).await?;
        Err(self.rejected(e.to_string()))
    }

    /// A `request_failed` line for a request that ends the stream; `meta`
    /// when a response came back (its status and Vault execution id).
    pub(super) async fn failed(
        &mut self,
        req: &Request<'_>,
        meta: Option<&ResponseMeta>,
        vendor_error: Option<VendorError>,
        reason: String,
    ) -> Result<(), SyncError> {
        let Request {
            url,
            id: request_id,
            attempt,
            ..
        } = *req;
        let event = RequestFailed {
            stream: self.name.clone(),
            request_id: request_id.to_string(),
            attempt,
            url: url.to_string(),
            status: meta.map(|m| m.status.as_u16()),
            reason,
            vendor_error,
            vendor_execution_id: meta.and_then(|m| m.execution_id.clone()),
            ..RequestFailed::default()
        };
        self.job.audit.record(event).await?;
        Ok(())
    }

    /// Acts on `error`, which came with the response `meta`.
    pub(super) async fn vendor_error(
        &mut self,
        req: &Request<'_>,
        meta: &ResponseMeta,
        error: VendorError,
    ) -> Result<Attempt, SyncError> {
        let Request { url, .. } = *req;
        match error.kind {
            VendorErrorKind::InvalidSession if self.job.client.renewable() => Ok(Attempt::Renew {
                refused: meta.credential_generation,
                reason: format!("HTTP {} with {error}", meta.status.as_u16()),
            }),
            VendorErrorKind::Throttled => self.throttled(req, meta, Some(error)).await,
            VendorErrorKind::Permission | VendorErrorKind::InvalidSession => {
                let detail = format!(
                    "{} answered HTTP {} with {error}",
                    self.job.request_line(url),
                    meta.status.as_u16()
                );
                self.refused(req, meta, Some(error), detail).await
            }
            VendorErrorKind::Banned => {
                let detail = format!(
                    "{} answered HTTP {} with {error}: the EDC has banned this host's address; no request \
                     will succeed, for any user behind this address, until its administrator lifts the ban \
                     (REDCap: Control Center); stop the schedule and lower the policy's rate before resuming",
                    self.job.request_line(url),
                    meta.status.as_u16()
                );
                self.failed(req, Some(meta), Some(error), detail.clone()).await?;
                Err(SyncError::Banned {
                    stream: self.name.clone(),
                    detail,
                })
            }
            // An empty collection is committed as a page without records
            // before it gets here (`PageCommit::collection_empty`); one
            // that was not (its answer larger than the cap) stops too.
            VendorErrorKind::NoItems | VendorErrorKind::Other => {
                let reason = format!(
                    "{} answered HTTP {} with the vendor error {error}; nothing was committed",
                    self.job.request_line(url),
                    meta.status.as_u16()
                );
                self.failed(req, Some(meta), Some(error), reason.clone()).await?;
                Err(self.rejected(reason))
            }
        }
    }

    /// The EDC refused the credential or its privileges: audit, exit 77
    /// naming the variables of the scheme in use.
    pub(super) async fn refused(
        &mut self,
        req: &Request<'_>,
        meta: &ResponseMeta,
        vendor: Option<VendorError>,
        detail: String,
    ) -> Result<Attempt, SyncError> {
        self.failed(req, Some(meta), vendor, detail.clone()).await?;
        Err(SyncError::Permission {
            stream: self.name.clone(),
            detail,
            hint: self.job.policy.auth.hint(),
        })
    }
}

/// An instant as RFC 3339, or where it lies when no calendar date of the
/// `time` crate can hold it; never a panic, whatever a server's `Date` said.
fn rfc3339_or_range(t: std::time::SystemTime) -> String {
    let secs = match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    };
    time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|d| d.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| format!("{secs} s from the Unix epoch"))
}

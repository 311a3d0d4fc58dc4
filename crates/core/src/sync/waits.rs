//! The waits of the page loop, each audited before it starts (invariant 3):
//! a throttle (429/503, or a vendor's limit reported in the body) with its
//! shared pause on the quota, the deterministic backoff after a 5xx or a
//! transport error, and the vendor burst floor. Also where the server's
//! clock is compared with ours.

use std::time::Duration;

use super::events::{RateLimited, RetryScheduled, VendorBurstLow};
use super::request::Request;
use super::{Attempt, Loop, Spent, SyncError, Wait, WaitKind, MAX_BACKOFF};
use crate::audit::now_rfc3339;
use crate::edc::dialect::VendorError;
use crate::edc::ResponseMeta;
use quota_pacer::retry_after::{self, RetryAfter, RetryAfterSource};
use quota_pacer::Pacer;

impl<P: Pacer> Loop<'_, P> {
    /// Sleeps `wait`, unless a stop is requested first.
    pub(super) async fn sleep(&self, wait: Duration) -> Result<(), SyncError> {
        tokio::select! {
            _ = tokio::time::sleep(wait) => Ok(()),
            _ = self.job.options.interrupt.wait() => Err(SyncError::Interrupted { stream: self.name.clone() }),
        }
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
            Some(v) => format!("{} in the body, Retry-After {source}", v.code),
            None => format!("{} with Retry-After {source}", meta.status.as_u16()),
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
            clock_skew_s: meta.clock_skew_s(),
            vendor_execution_id: meta.execution_id.clone(),
            compliance_timestamp: received,
            resume_not_before: resume.unwrap_or_else(|| "never".into()),
            quota: self.job.limiter.quota().key().to_string(),
            quota_headers: meta.quota_headers.clone(),
        };
        self.job.audit.record(event).await?;
        if wait > policy.max_wait {
            let why = format!(
                "Retry-After of {wait:?} exceeds max_wait_s ({:?})",
                policy.max_wait
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

    /// Vault delays responses instead of answering 429 once its burst is
    /// spent: below the floor, slow the whole quota to the pace that spends
    /// no more than the burst limit per five-minute window.
    pub(super) async fn vendor_burst(
        &mut self,
        request_id: &str,
        headers: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), SyncError> {
        let Some(floor) = self.job.policy.vendor_burst_floor else {
            return Ok(());
        };
        let parse = |name: &str| headers.get(name).and_then(|v| v.trim().parse::<u64>().ok());
        let Some(remaining) = parse("x-vaultapi-burstlimitremaining") else {
            return Ok(());
        };
        if remaining > floor {
            return Ok(());
        }
        let limit = parse("x-vaultapi-burstlimit");
        let window = Duration::from_secs(300);
        let pause = window / u32::try_from(limit.unwrap_or(1).max(1)).unwrap_or(u32::MAX);
        let event = VendorBurstLow {
            stream: self.name.clone(),
            request_id: request_id.to_string(),
            burst_limit: limit,
            burst_remaining: remaining,
            floor,
            pause_s: pause.as_secs_f64(),
            reason: "X-VaultAPI-BurstLimitRemaining at or below vendor_burst_floor: the quota is paused so \
                     requests are spread over the vendor's 5-minute burst window"
                .into(),
        };
        self.job.audit.record(event).await?;
        self.job.limiter.pause(pause).await?;
        self.report.waits.push(Wait {
            kind: WaitKind::VendorBurst,
            reason: "vendor burst floor".into(),
            seconds: pause.as_secs_f64(),
        });
        Ok(())
    }
}

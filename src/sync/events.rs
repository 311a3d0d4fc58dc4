//! The audit events of a sync, field by field (docs/audit-trail.md lists
//! them for reviewers). Never the token; never record content.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::audit::AuditEvent;
use crate::edc::retry_after::RetryAfterSource;

/// A 429 or 503: written and fsynced before the shared pause and the sleep.
#[derive(Debug, Serialize)]
pub struct RateLimited {
    pub stream: String,
    pub request_id: String,
    pub attempt: u32,
    pub status: u16,
    pub url: String,
    pub retry_after_s: f64,
    pub retry_after_source: RetryAfterSource,
    pub retry_after_raw: Option<String>,
    /// When the throttling response was received (UTC).
    pub compliance_timestamp: String,
    /// No request on this quota, from any worker, before this instant.
    pub resume_not_before: String,
    pub quota: String,
    pub quota_headers: BTreeMap<String, String>,
}

impl AuditEvent for RateLimited {
    const NAME: &'static str = "rate_limited";
}

/// A 5xx, timeout, reset or truncated body: retried after a deterministic
/// backoff derived from the rate.
#[derive(Debug, Serialize)]
pub struct RetryScheduled {
    pub stream: String,
    pub request_id: String,
    pub attempt: u32,
    pub url: String,
    pub reason: String,
    pub backoff_s: f64,
    pub compliance_timestamp: String,
}

impl AuditEvent for RetryScheduled {
    const NAME: &'static str = "retry_scheduled";
}

/// A page is landed and listed; the cursor is committed right after.
#[derive(Debug, Serialize)]
pub struct PageCommitted {
    pub stream: String,
    pub request_id: String,
    pub attempt: u32,
    pub url: String,
    pub status: u16,
    pub payload_sha256: String,
    pub bytes: u64,
    pub records: u64,
    pub landing_file: Option<String>,
    /// The same bytes were already landed (a replay after a crash).
    pub replayed: bool,
    pub dry_run: bool,
    pub cursor_before: serde_json::Value,
    pub cursor_after: serde_json::Value,
    pub quota_headers: BTreeMap<String, String>,
}

impl AuditEvent for PageCommitted {
    const NAME: &'static str = "page_committed";
}

/// A response that ends the stream without a commit.
#[derive(Debug, Serialize)]
pub struct RequestFailed {
    pub stream: String,
    pub request_id: String,
    pub attempt: u32,
    pub url: String,
    pub status: Option<u16>,
    pub reason: String,
    pub payload_sha256: Option<String>,
    pub quarantined: Option<String>,
}

impl AuditEvent for RequestFailed {
    const NAME: &'static str = "request_failed";
}

/// The retry budget or the maximum wait is spent: exit 75, cursor unchanged.
#[derive(Debug, Serialize)]
pub struct QuotaExhausted {
    pub stream: String,
    pub request_id: String,
    pub attempts: u32,
    pub url: String,
    pub reason: String,
    pub cursor: serde_json::Value,
}

impl AuditEvent for QuotaExhausted {
    const NAME: &'static str = "quota_exhausted";
}

/// The vendor reported its burst allowance at or below the floor: the whole
/// quota is slowed (Vault delays responses instead of answering 429).
#[derive(Debug, Serialize)]
pub struct VendorBurstLow {
    pub stream: String,
    pub request_id: String,
    pub burst_limit: Option<u64>,
    pub burst_remaining: u64,
    pub floor: u64,
    pub pause_s: f64,
    pub reason: String,
}

impl AuditEvent for VendorBurstLow {
    const NAME: &'static str = "vendor_burst_low";
}

/// A stream's part of the run is over.
#[derive(Debug, Serialize)]
pub struct StreamFinished {
    pub stream: String,
    pub outcome: String,
    pub pages: u64,
    pub records: u64,
    pub bytes: u64,
    pub replayed_pages: u64,
    pub window_complete: bool,
    pub cursor: serde_json::Value,
}

impl AuditEvent for StreamFinished {
    const NAME: &'static str = "stream_finished";
}

/// The last line of a run.
#[derive(Debug, Serialize)]
pub struct RunFinished {
    pub exit_code: u8,
    pub outcome: String,
    pub streams: usize,
    pub pages: u64,
    pub records: u64,
    pub duration_s: f64,
}

impl AuditEvent for RunFinished {
    const NAME: &'static str = "run_finished";
}

/// SIGINT / SIGTERM stopped the run at a safe point.
#[derive(Debug, Serialize)]
pub struct RunInterrupted {
    pub reason: String,
    pub pages: u64,
}

impl AuditEvent for RunInterrupted {
    const NAME: &'static str = "run_interrupted";
}

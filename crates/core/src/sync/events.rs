//! The audit events of a sync, field by field (docs/audit-trail.md lists
//! them for reviewers). Never the token; never record content.

use std::collections::BTreeMap;

use serde::Serialize;

use serde_json::value::RawValue;

use crate::audit::{AuditEvent, CommitFields, CommitRecord};
use crate::edc::payload::VendorMessage;
use crate::edc::vendor::VendorError;
use quota_pacer::retry_after::RetryAfterSource;

/// A 429 or 503, or a vendor's throttle reported in the body (Vault
/// `API_LIMIT_EXCEEDED`): written and fsynced before the shared pause and
/// the sleep.
#[derive(Debug, Serialize)]
pub(crate) struct RateLimited {
    pub stream: String,
    pub request_id: String,
    pub attempt: u32,
    pub status: u16,
    pub url: String,
    /// `http_status` (429/503) or `vendor_body`.
    pub signal: &'static str,
    pub vendor_error: Option<VendorError>,
    pub retry_after_s: f64,
    pub retry_after_source: RetryAfterSource,
    pub retry_after_raw: Option<String>,
    /// The server's `Date` (UTC), against which an HTTP-date Retry-After
    /// is measured; `None` when it sent none (then the local clock is used).
    pub server_date: Option<String>,
    /// A `Date` header that did not parse, as sent (then the local clock
    /// was used); absent from the line when the header parsed or was not
    /// sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_date_unreadable: Option<String>,
    /// Server clock minus local clock at receipt, in seconds.
    pub clock_skew_s: Option<f64>,
    pub vendor_execution_id: Option<String>,
    /// When the throttling response was received (UTC, local clock).
    pub compliance_timestamp: String,
    /// No request on this quota, from any worker, before this instant.
    pub resume_not_before: String,
    pub quota: String,
    pub quota_headers: BTreeMap<String, String>,
    /// The quota's fixed window (`window_quota`) was marked spent: every
    /// caller, in every process, waits for its end as well. Absent when
    /// the quota has no window or the answer was not a throttle (503).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub window_spent: bool,
}

impl AuditEvent for RateLimited {
    const NAME: &'static str = "rate_limited";
}

/// The vendor answered that the collection is empty, as an error (Castor's
/// 404 "There are no ..."): nothing is landed, and a `page_committed` line
/// for the same request (no records, the answer's hash) follows it and
/// closes the window, so the cursor never stays on a page with no items.
#[derive(Debug, Serialize)]
pub(crate) struct CollectionEmpty {
    pub stream: String,
    pub request_id: String,
    pub url: String,
    pub status: u16,
    pub vendor_error: VendorError,
    pub cursor: serde_json::Value,
}

impl AuditEvent for CollectionEmpty {
    const NAME: &'static str = "collection_empty";
}

/// A 5xx, timeout, reset or truncated body: retried after a deterministic
/// backoff derived from the rate.
#[derive(Debug, Serialize)]
pub(crate) struct RetryScheduled {
    pub stream: String,
    pub request_id: String,
    pub attempt: u32,
    pub url: String,
    pub reason: String,
    pub backoff_s: f64,
    pub vendor_execution_id: Option<String>,
    pub compliance_timestamp: String,
}

impl AuditEvent for RetryScheduled {
    const NAME: &'static str = "retry_scheduled";
}

/// A page is landed and listed; the cursor is committed right after.
#[derive(Debug, Default, Serialize)]
pub(crate) struct PageCommitted {
    pub stream: String,
    pub request_id: String,
    pub attempt: u32,
    pub url: String,
    pub status: u16,
    pub payload_sha256: String,
    pub bytes: u64,
    /// Records on the page, repeated ones included.
    pub records: u64,
    /// With a lookback: records on the page that were landed before (read
    /// again in the span the window re-reads). A page of nothing else is
    /// not landed again.
    #[serde(skip_serializing_if = "is_zero")]
    pub repeated_records: u64,
    /// Positions (from 0) of those records on a landed page: the manifest
    /// entry lists them too, and a reader of the page skips them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repeated: Vec<u32>,
    /// False for a dry run and for a page without new records (nothing to
    /// land: the hash and size above are the record of what was received).
    pub landed: bool,
    pub landing_file: Option<String>,
    /// The stream's landing directory, relative to the landing root (the
    /// stream's directory name): with `landing_file`,
    /// where `edc-sync verify` finds the page.
    pub landing_dir: String,
    /// A backfill with a state directory: its landing root below --out
    /// (`backfill/SINCE..UNTIL`); `landing_dir` is relative to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub landing_root: Option<String>,
    /// The same bytes were already landed (a replay after a crash).
    pub replayed: bool,
    /// The landed file of that name no longer hashed to its name (modified
    /// after landing) and was replaced by the bytes just received.
    pub replaced_damaged_file: bool,
    pub dry_run: bool,
    pub cursor_before: serde_json::Value,
    pub cursor_after: serde_json::Value,
    /// The whole cursor after this page: this line is the commit record,
    /// and a run rolls its cursor file forward from it (docs/commit.md).
    pub cursor_state: StateJson,
    /// With a lookback: what the page changed in the memory, whose seal
    /// `cursor_state` holds (`store/cursor/seal.rs`): the identities it
    /// added and how many of the oldest cursor values it forgot. A run
    /// rolling its cursor forward replays it and must reach the seal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lookback_change: Option<crate::ledger::MemoryChange>,
    pub quota_headers: BTreeMap<String, String>,
    /// The page holds records older than the window's start (out of
    /// order, or a vendor clock set back): landed, never moving the cursor back.
    pub older_than_cursor: bool,
    /// Vault `WARNING` responses: the warnings, kept with the page.
    pub vendor_warnings: Vec<VendorMessage>,
    pub vendor_execution_id: Option<String>,
    /// The landed page's retention as S3 reported it after the write, when
    /// the policy asks for one (`object_lock`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<crate::ledger::Retention>,
    /// A collection's page whose bytes the last snapshot, or an earlier
    /// pass of this run, landed already: not landed or listed again.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unchanged: bool,
    /// The last page of a collection's consistent pass: the snapshot it
    /// completes (`delta.collection`): its hash (which the cursor keeps),
    /// the item count the pass's first and last page stated, and the
    /// SHA-256 of each of its pages with items, in order (each landed as
    /// `pages/<sha256>.json`), from which a reader rebuilds the collection
    /// and proves it by the hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<crate::ledger::Snapshot>,
}

/// A collection's item count moved while a pass read it: the pass is read
/// again from page 1 (its pages landed are recognised by their hash).
#[derive(Debug, Serialize)]
pub(crate) struct CollectionChanged {
    pub stream: String,
    /// The pass that changed, from 1.
    pub pass: u32,
    /// The item count its first page stated.
    pub first_total_items: u64,
    /// The item count its last page stated.
    pub last_total_items: u64,
    /// Passes a run makes at most (`delta.collection.max_passes`).
    pub max_passes: u32,
}

impl AuditEvent for CollectionChanged {
    const NAME: &'static str = "collection_changed";
}

/// Records a REDCap batch asked for and holds no row of: deleted between
/// the window's id list and the batch (their deletion reaches the landing
/// through the log stream). Written after the batch's `page_committed`.
#[derive(Debug, Serialize)]
pub(crate) struct RecordsVanished {
    pub stream: String,
    /// The batch (its record ids masked like every identifier parameter).
    pub url: String,
    /// How many records the batch asked for.
    pub asked: usize,
    /// The ids it did not get, masked (`masked-` and 12 hex digits).
    pub missing: Vec<String>,
}

impl AuditEvent for RecordsVanished {
    const NAME: &'static str = "records_vanished";
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Written only by `record_commit`, as the `page_committed` line whose
/// receipt lets the cursor move.
impl CommitRecord for PageCommitted {
    /// `cursor_state` (with a lookback, its memory: hundreds of values) is
    /// handed over as the JSON the cursor was written to, never made a
    /// value.
    fn into_fields(mut self) -> Result<CommitFields, serde_json::Error> {
        let state = std::mem::take(&mut self.cursor_state);
        Ok(CommitFields {
            values: serde_json::to_value(&self)?,
            written: Some(("cursor_state", state.0)),
        })
    }
}

/// A cursor's state as the JSON it was written to once
/// (`Cursor::to_state_raw`); `null` until then.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub(crate) struct StateJson(pub Box<RawValue>);

impl Default for StateJson {
    fn default() -> StateJson {
        StateJson(RawValue::NULL.to_owned())
    }
}

/// A response that ends the stream without a commit.
#[derive(Debug, Default, Serialize)]
pub(crate) struct RequestFailed {
    pub stream: String,
    pub request_id: String,
    pub attempt: u32,
    pub url: String,
    pub status: Option<u16>,
    pub reason: String,
    pub payload_sha256: Option<String>,
    pub quarantined: Option<String>,
    /// What the vendor said in the body (its type or reason code).
    pub vendor_error: Option<VendorError>,
    pub vendor_execution_id: Option<String>,
}

impl AuditEvent for RequestFailed {
    const NAME: &'static str = "request_failed";
}

/// A credential was obtained for the run: a Vault login or a credential
/// helper's token. Never the credential itself.
#[derive(Debug, Serialize)]
pub(crate) struct SessionStarted {
    pub stream: String,
    pub request_id: String,
    pub scheme: &'static str,
    /// Counts credentials within the run: 1 for the first.
    pub generation: u64,
    /// Where the login form went (path on the data origin), if one was sent.
    pub login_path: Option<String>,
    pub vendor_execution_id: Option<String>,
    /// How long the vendor said the credential lasts (OAuth2
    /// `expires_in`); absent when it said nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifetime_s: Option<u64>,
}

impl AuditEvent for SessionStarted {
    const NAME: &'static str = "session_started";
}

/// The EDC refused the credential in use (HTTP 401 or Vault
/// `INVALID_SESSION_ID`); a new one was obtained and the same request is
/// repeated once.
#[derive(Debug, Serialize)]
pub(crate) struct SessionRenewed {
    pub stream: String,
    pub request_id: String,
    pub scheme: &'static str,
    pub generation: u64,
    pub refused_generation: u64,
    pub reason: String,
    pub login_path: Option<String>,
    pub vendor_execution_id: Option<String>,
    /// How long the vendor said the credential lasts (OAuth2
    /// `expires_in`); absent when it said nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifetime_s: Option<u64>,
}

impl AuditEvent for SessionRenewed {
    const NAME: &'static str = "session_renewed";
}

/// The retry budget or the maximum wait is spent: exit 75, cursor unchanged.
#[derive(Debug, Serialize)]
pub(crate) struct QuotaExhausted {
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
pub(crate) struct VendorBurstLow {
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

/// The vendor said its allowance for the period is spent (Vault's
/// `X-VaultAPI-DailyLimitRemaining: 0`): the quota's fixed window is marked
/// spent for every caller, as a 429 marks it.
#[derive(Debug, Serialize)]
pub(crate) struct VendorLimitSpent {
    pub stream: String,
    pub request_id: String,
    pub header: &'static str,
    pub limit: Option<u64>,
    pub remaining: u64,
    pub window_spent: bool,
    pub reason: String,
}

impl AuditEvent for VendorLimitSpent {
    const NAME: &'static str = "vendor_limit_spent";
}

/// A stream's part of the run is over.
#[derive(Debug, Serialize)]
pub(crate) struct StreamFinished {
    pub stream: String,
    pub outcome: String,
    pub pages: u64,
    pub records: u64,
    pub bytes: u64,
    pub replayed_pages: u64,
    /// Records read that were landed before (a lookback's re-read span;
    /// with `backfill --missing-only`, every record not missing).
    #[serde(skip_serializing_if = "is_zero")]
    pub repeated_records: u64,
    pub window_complete: bool,
    pub cursor: serde_json::Value,
}

impl AuditEvent for StreamFinished {
    const NAME: &'static str = "stream_finished";
}

/// The last line of a run.
#[derive(Debug, Serialize)]
pub(crate) struct RunFinished {
    pub exit_code: u8,
    pub outcome: String,
    pub streams: usize,
    pub pages: u64,
    pub records: u64,
    pub duration_s: f64,
    /// The state directory's anchor was written just before this line: a
    /// later run that finds no anchor knows it was removed.
    pub anchored: bool,
}

impl AuditEvent for RunFinished {
    const NAME: &'static str = "run_finished";
    const CHECKPOINT: bool = true;
}

/// The landing's object store was reached and probed, before any request
/// to the EDC: where pages go, and how a page is kept from being written
/// over.
#[derive(Debug, Serialize)]
pub(crate) struct ObjectLandingReady {
    /// The `--out` URL (no credentials).
    pub landing: String,
    /// The store refused a second conditional write of one name
    /// (`If-None-Match: *`); otherwise a HEAD precedes each page's write.
    /// Null in a dry run, which writes nothing to find out.
    pub conditional_writes: Option<bool>,
    /// The policy's `object_lock` and the bucket's default retention that
    /// proves it, when the policy asks for one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_lock: Option<ObjectLockProven>,
}

/// The retention a policy asks for, and the bucket default that gives it.
#[derive(Debug, Serialize)]
pub(crate) struct ObjectLockProven {
    pub policy: crate::config::ObjectLock,
    pub bucket_default: crate::ledger::BucketDefault,
}

impl AuditEvent for ObjectLandingReady {
    const NAME: &'static str = "object_landing_ready";
}

/// SIGINT / SIGTERM stopped the run at a safe point.
#[derive(Debug, Serialize)]
pub(crate) struct RunInterrupted {
    pub reason: String,
    pub pages: u64,
}

impl AuditEvent for RunInterrupted {
    const NAME: &'static str = "run_interrupted";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(next_page: &str) -> PageCommitted {
        let state = serde_json::json!({
            "next_page": next_page,
            "lookback": {"seen": [["2026-01-01T00:00:00Z", ["00000000000000000000000000000001"]]]},
        });
        PageCommitted {
            stream: "s".into(),
            cursor_before: serde_json::json!({"window_start": null}),
            cursor_after: serde_json::json!({"window_start": "2026-01-01T00:00:00Z"}),
            cursor_state: StateJson(serde_json::value::to_raw_value(&state).unwrap()),
            quota_headers: [("x-ratelimit".to_string(), "1".to_string())].into(),
            ..PageCommitted::default()
        }
    }

    /// Handing the cursor state over as written JSON changes no byte of
    /// the line: it is the line of the record made a value whole.
    #[test]
    fn a_commit_records_line_is_its_serialisation() {
        use crate::audit::line::{compose, compose_with, Written};
        let record = record("https://h/p?page=2");
        let serde_json::Value::Object(whole) = serde_json::to_value(&record).unwrap() else {
            panic!("not an object")
        };
        let fields = record.into_fields().unwrap();
        let serde_json::Value::Object(values) = fields.values else {
            panic!("not an object")
        };
        let (key, json) = fields.written.as_ref().unwrap();
        let written = Some(Written { key, json });
        let zero = crate::digest::ZERO_SHA256;
        assert_eq!(
            compose_with(3, "t", "r", "page_committed", &values, written, zero).unwrap(),
            compose(3, "t", "r", "page_committed", whole, zero).unwrap()
        );
    }

    /// A written cursor state the masker would change is masked like any
    /// value; one it would not is written as it came.
    #[test]
    fn a_commit_records_written_state_is_masked_like_a_value() {
        use crate::audit::{AuditLog, RunId};
        use crate::mask::{Masker, DEFAULT_PARAMS};
        let dir = tempfile::tempdir().unwrap();
        let trail = dir.path().join("audit.jsonl");
        let masker = Masker::new(b"k", &DEFAULT_PARAMS.map(String::from));
        let mut log = AuditLog::open(&trail, RunId::new())
            .unwrap()
            .with_masker(masker.clone());
        for url in ["https://h/p?page=2", "https://h/p?page=2&subject=S-001"] {
            let mut expected = serde_json::to_value(record(url)).unwrap();
            masker.json(&mut expected);
            log.record_commit(record(url)).unwrap();
            let text = std::fs::read_to_string(&trail).unwrap();
            let line: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
            assert_eq!(line["cursor_state"], expected["cursor_state"], "{url}");
        }
        let text = std::fs::read_to_string(&trail).unwrap();
        assert!(!text.contains("S-001"), "the subject reached the trail: {text}");
    }
}

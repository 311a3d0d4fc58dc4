//! S3 Object Lock for an object-store landing: a vendor whose policy sets
//! `object_lock` lands only in a bucket that locks every page as S3 writes
//! it, and every page's retention is read back and recorded.
//!
//! Before the first request the bucket is proven to lock objects (Object
//! Lock enabled: GetObjectLockConfiguration); nothing is written to it
//! before that, not even the conditional-write probe (a locked probe could
//! never be removed). Each page is then written with its own retention in
//! the same request that stores it (PutObject's `x-amz-object-lock-mode`
//! and `x-amz-object-lock-retain-until-date`, the policy's days from the
//! write), so no landed page is ever unlocked, whatever the bucket's
//! default; and its retention is read back (HeadObject) and recorded.
//!
//! S3 takes a write to a bucket with Object Lock only with a checksum
//! algorithm named (`x-amz-sdk-checksum-algorithm`, or Content-MD5), which
//! the store client does not send: every write of such a landing (pages,
//! manifest lines, the owner file) is this module's PutObject, with the
//! page's SHA-256 (`x-amz-checksum-sha256`) that S3 checks. Every request
//! here is signed by the store client's own SigV4 signer (`object_store`'s
//! presigned URLs, with the query parameters and the headers folded into
//! the signature), never by hand.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::AmazonS3;
use object_store::path::Path as ObjPath;
use object_store::signer::{SignedUrlOptions, Signer};
use serde::Serialize;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::object_error::{Failure, ObjectError};
use crate::config::ObjectLock;

/// How long a signed URL of ours lives: it is used at once.
const SIGNED_FOR: Duration = Duration::from_secs(60);

/// How far S3's clock may be behind ours when a page's retain-until date
/// is compared with the policy's days from now.
const CLOCK_SLACK: Duration = Duration::from_secs(300);

/// One landed object's retention, as S3 reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Retention {
    pub mode: String,
    pub retain_until: String,
}

/// The bucket's Object Lock configuration, as S3 reports it: enabled, and
/// its default retention if it has one (each page carries its own).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct BucketDefault {
    pub(crate) mode: Option<String>,
    pub(crate) days: Option<u32>,
}

/// The S3 client of a landing, for its Object Lock requests.
#[derive(Debug, Clone)]
pub(crate) struct Locks {
    s3: Arc<AmazonS3>,
    /// The `--out` URL without credentials: what messages name.
    url: String,
    /// One client for every request of the landing (a page's write and
    /// its read-back reuse its connections).
    http: reqwest::Client,
}

impl Locks {
    pub(crate) fn new(s3: Arc<AmazonS3>, url: String) -> Locks {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_default();
        Locks { s3, url, http }
    }

    /// Sends `request` for `op` of `key`; no answer at all is 69.
    async fn send(
        &self,
        op: &'static str,
        key: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ObjectError> {
        request
            .send()
            .await
            .map_err(|e| self.error(op, key, Failure::Unavailable, e.without_url().to_string()))
    }

    fn error(&self, op: &'static str, key: &str, failure: Failure, detail: String) -> ObjectError {
        ObjectError {
            url: self.url.clone(),
            op,
            key: key.to_string(),
            failure,
            detail,
        }
    }

    /// Proves that the bucket locks every object written as `want` asks,
    /// or says why not (78: the landing cannot keep the policy's promise;
    /// 77, 69, 75 as for any request).
    pub(crate) async fn prove_bucket(&self, want: &ObjectLock) -> Result<BucketDefault, ObjectError> {
        let op = "read the Object Lock configuration of";
        let options = SignedUrlOptions::default().with_query([("object-lock", "")]);
        let url = self
            .s3
            .signed_url_opts(reqwest::Method::GET, &ObjPath::from(""), SIGNED_FOR, &options)
            .await
            .map_err(|e| self.error(op, "the bucket", Failure::Other, e.to_string()))?;
        let response = self.send(op, "the bucket", self.http.get(url)).await?;
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        if !status.is_success() {
            let code = element(&body, "Code").unwrap_or_default();
            let (failure, why) = match (status.as_u16(), code.as_str()) {
                (404, "ObjectLockConfigurationNotFoundError") | (404, "") => (
                    Failure::Config,
                    "the bucket has no Object Lock configuration (Object Lock is enabled when a bucket is created)"
                        .to_string(),
                ),
                (501, _) | (_, "NotImplemented") => {
                    (Failure::Config, "the server does not implement S3 Object Lock".to_string())
                }
                _ => (failure_of(status, &code), format!("{status} {code}")),
            };
            return Err(self.error(op, "the bucket", failure, cannot_lock(want, &why, failure)));
        }
        let enabled = element(&body, "ObjectLockEnabled");
        let mode = element(&body, "Mode");
        // S3 gives Days or Years (a year is 365 days to S3's retention).
        let days = element(&body, "Days")
            .and_then(|d| d.parse::<u32>().ok())
            .filter(|d| *d > 0)
            .or_else(|| {
                element(&body, "Years")
                    .and_then(|y| y.parse::<u32>().ok())
                    .map(|y| y * 365)
            });
        if enabled.as_deref() != Some("Enabled") {
            let why = "Object Lock is not enabled on the bucket";
            return Err(self.error(
                op,
                "the bucket",
                Failure::Config,
                cannot_lock(want, why, Failure::Config),
            ));
        }
        let found = BucketDefault { mode, days };
        Ok(found)
    }

    /// Writes `bytes` at `key` (PutObject), with its SHA-256 for S3 to
    /// check, the retention `lock` asks for counted from now, and with
    /// `create_only` never over an existing object (`If-None-Match: *`).
    pub(crate) async fn put(
        &self,
        key: &ObjPath,
        bytes: bytes::Bytes,
        lock: Option<&ObjectLock>,
        create_only: bool,
    ) -> Result<(), ObjectError> {
        use base64::Engine as _;
        use reqwest::header::{HeaderName, HeaderValue};
        use sha2::Digest as _;
        let op = "write";
        let bad = |e: String| self.error(op, key.as_ref(), Failure::Other, e);
        let mut headers: Vec<(&'static str, String)> = vec![
            ("x-amz-sdk-checksum-algorithm", "SHA256".into()),
            (
                "x-amz-checksum-sha256",
                base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(&bytes)),
            ),
        ];
        if let Some(lock) = lock {
            let until = OffsetDateTime::now_utc() + Duration::from_secs(u64::from(lock.days) * 86_400);
            let until = until
                .replace_nanosecond(0)
                .ok()
                .and_then(|t| t.format(&Rfc3339).ok())
                .ok_or_else(|| bad("the retain-until date does not format".into()))?;
            headers.push(("x-amz-object-lock-mode", lock.mode.s3().into()));
            headers.push(("x-amz-object-lock-retain-until-date", until));
        }
        if create_only {
            headers.push(("if-none-match", "*".into()));
        }
        let mut options = SignedUrlOptions::default();
        for (name, value) in &headers {
            let value = HeaderValue::from_str(value).map_err(|e| bad(e.to_string()))?;
            options = options.with_signed_header(HeaderName::from_static(name), value.clone());
        }
        let url = self
            .s3
            .signed_url_opts(reqwest::Method::PUT, key, SIGNED_FOR, &options)
            .await
            .map_err(|e| bad(e.to_string()))?;
        let mut request = self.http.put(url);
        for (name, value) in &headers {
            request = request.header(*name, value.as_str());
        }
        let response = self.send(op, key.as_ref(), request.body(bytes)).await?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = response.text().await.unwrap_or_default();
        let code = element(&body, "Code").unwrap_or_default();
        if status.as_u16() == 412 {
            return Err(self.error(op, key.as_ref(), Failure::Other, "it already exists".into()));
        }
        let failure = failure_of(status, &code);
        let message = element(&body, "Message").unwrap_or_default();
        Err(self.error(op, key.as_ref(), failure, format!("{status} {code}: {message}")))
    }

    /// The retention of the object at `key`, read back (HeadObject): `None`
    /// when S3 reports none.
    pub(crate) async fn retention(&self, key: &ObjPath) -> Result<Option<Retention>, ObjectError> {
        let op = "read the retention of";
        let url = self
            .s3
            .signed_url(reqwest::Method::HEAD, key, SIGNED_FOR)
            .await
            .map_err(|e| self.error(op, key.as_ref(), Failure::Other, e.to_string()))?;
        let response = self.send(op, key.as_ref(), self.http.head(url)).await?;
        let status = response.status();
        if !status.is_success() {
            // A HEAD's answer has no body, so no error code.
            return Err(self.error(op, key.as_ref(), failure_of(status, ""), status.to_string()));
        }
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        Ok(
            match (
                header("x-amz-object-lock-mode"),
                header("x-amz-object-lock-retain-until-date"),
            ) {
                (Some(mode), Some(retain_until)) => Some(Retention { mode, retain_until }),
                _ => None,
            },
        )
    }

    /// Reads back the retention of the page just written at `key` and
    /// holds it to `want`: its mode, and retained at least `want.days`
    /// from `written` (less the clock slack). A page S3 did not lock stops
    /// the commit (74): the cursor does not move past a page the policy
    /// says must be unchangeable and is not.
    pub(crate) async fn prove_page(
        &self,
        key: &ObjPath,
        want: &ObjectLock,
        written: OffsetDateTime,
    ) -> Result<Retention, ObjectError> {
        let op = "prove the retention of";
        let found = self.retention(key).await?;
        let Some(found) = found else {
            return Err(self.error(
                op,
                key.as_ref(),
                Failure::Other,
                "S3 reports no retention for it".into(),
            ));
        };
        let until = OffsetDateTime::parse(&found.retain_until, &Rfc3339).map_err(|e| {
            self.error(
                op,
                key.as_ref(),
                Failure::Other,
                format!(
                    "its retain-until date {:?} is not a date ({e})",
                    found.retain_until
                ),
            )
        })?;
        let needed = written + Duration::from_secs(u64::from(want.days) * 86_400) - CLOCK_SLACK;
        if found.mode != want.mode.s3() || until < needed {
            return Err(self.error(
                op,
                key.as_ref(),
                Failure::Other,
                format!(
                    "it is retained {} until {}, not {} for {} as the policy's object_lock asks",
                    found.mode,
                    found.retain_until,
                    want.mode.s3(),
                    days(want.days)
                ),
            ));
        }
        Ok(found)
    }
}

/// Why a bucket cannot keep `want`, and what to do.
fn cannot_lock(want: &ObjectLock, why: &str, failure: Failure) -> String {
    let fix = match failure {
        Failure::Config => format!(
            "; the policy's object_lock asks {} for {}, which each page carries: land in a bucket created \
             with Object Lock (aws s3api create-bucket --object-lock-enabled-for-bucket), or remove object_lock; \
             nothing was fetched",
            want.mode.s3(),
            days(want.days)
        ),
        _ => "; nothing was fetched".into(),
    };
    format!("{why}{fix}")
}

/// `n` days, as a sentence says it.
fn days(n: u32) -> String {
    match n {
        1 => "1 day".into(),
        n => format!("{n} days"),
    }
}

/// The text of the first `<name>` element of an S3 XML document.
fn element(xml: &str, name: &str) -> Option<String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut inside = false;
    loop {
        match reader.read_event().ok()? {
            quick_xml::events::Event::Start(e) => inside = e.local_name().as_ref() == name.as_bytes(),
            quick_xml::events::Event::Text(t) if inside => {
                return t.decode().ok().map(|s| s.trim().to_string());
            }
            quick_xml::events::Event::End(_) => inside = false,
            quick_xml::events::Event::Eof => return None,
            _ => {}
        }
    }
}

/// How a request S3 answered with `status` (and the error document's
/// `code`) failed, which decides the exit code.
fn failure_of(status: reqwest::StatusCode, code: &str) -> Failure {
    match (status.as_u16(), code) {
        (_, "BadDigest" | "XAmzContentChecksumMismatch" | "InvalidDigest") => Failure::Checksum,
        (401 | 403, _) => Failure::Refused,
        (429 | 503, _) | (_, "SlowDown") => Failure::Throttled,
        (500..=599, _) => Failure::Unavailable,
        _ => Failure::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::element;

    #[test]
    fn the_configuration_document_is_read_as_s3_writes_it() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<ObjectLockConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule><DefaultRetention><Mode>COMPLIANCE</Mode><Years>7</Years></DefaultRetention></Rule></ObjectLockConfiguration>"#;
        assert_eq!(element(xml, "ObjectLockEnabled").as_deref(), Some("Enabled"));
        assert_eq!(element(xml, "Mode").as_deref(), Some("COMPLIANCE"));
        assert_eq!(element(xml, "Years").as_deref(), Some("7"));
        assert_eq!(element(xml, "Days"), None);
        let error = "<Error><Code>ObjectLockConfigurationNotFoundError</Code><Message>x</Message></Error>";
        assert_eq!(
            element(error, "Code").as_deref(),
            Some("ObjectLockConfigurationNotFoundError")
        );
    }
}

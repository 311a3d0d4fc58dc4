//! Landing in object storage (`--out s3://bucket/prefix`, `gs://`, `az://`).
//!
//! One concept: the bucket a run lands in, its writes, reads and listing.
//!
//! The bucket holds what a local landing directory holds, under the same
//! relative names: `<stream dir>/pages/<sha256>.<ext>` and the manifest,
//! kept as one object a line (`<stream dir>/manifest/<byte offset>.json`,
//! zero padded so that listing gives file order), because an object cannot
//! be appended to. The state directory keeps the stream's manifest index and
//! the page being received (`STATE/.landing/<stream dir>/`), read back and
//! removed before it is written to the bucket: the store's acknowledgement,
//! not an fsync, is what makes a page durable.
//!
//! A page is written under its content address with its SHA-256 sent for
//! the server to check (`x-amz-checksum-sha256` on S3; a server that finds
//! other bytes refuses the write). It is never overwritten: the write is
//! conditional (`If-None-Match: *`) where the server honours that, which is
//! probed once a run; otherwise a HEAD first proves that an object of that
//! name and size is there and the write is skipped. Only after the server
//! acknowledged the page do the manifest line, the `page_committed` line
//! and the cursor follow, as for a local landing.
//!
//! Credentials come from the standard environment of each service
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//! `AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`,
//! `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`; `GOOGLE_*`; `AZURE_*`) and are never
//! written anywhere: messages name the bucket URL only.

use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

pub use super::object_error::{Failure, ObjectError};

/// The state directory's subdirectory that keeps, for an object-store
/// landing, each stream's manifest index and the page being received.
pub(crate) const INDEX_DIR: &str = ".landing";

/// Whether the server refuses a conditional write over an existing object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Creates {
    /// `If-None-Match: *` is honoured: one request a page.
    Conditional,
    /// It is ignored (the object would be overwritten): HEAD first.
    HeadFirst,
}

/// A page put in the bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutPage {
    /// False when an object of that name and size was already there (a
    /// replay): nothing was written.
    pub created: bool,
    /// Its retention as S3 reports it, read back, where the policy asks
    /// for one (`object_lock`).
    pub retention: Option<super::object_lock::Retention>,
}

/// A bucket (and prefix) pages land in.
#[derive(Debug, Clone)]
pub struct ObjectLanding {
    store: Arc<dyn ObjectStore>,
    prefix: ObjPath,
    /// The `--out` URL as given, without credentials: what messages name.
    url: String,
    creates: Creates,
    /// On S3, its Object Lock requests.
    locks: Option<super::object_lock::Locks>,
    /// The retention every page must have, proven for the bucket
    /// ([`Self::require_lock`]).
    lock: Option<crate::config::ObjectLock>,
}

impl ObjectLanding {
    /// The object store `url` names, configured from the environment, and
    /// probed: the bucket answers, and whether it honours conditional
    /// writes is found out with an object of the run's own
    /// (`<prefix>/.edc-sync/probe-<run id>`, removed again).
    pub async fn connect(url: &str, run_id: &str) -> Result<ObjectLanding, ObjectError> {
        ObjectLanding::open(url)?.probed(run_id).await
    }

    /// This landing, probed (see [`Self::connect`]). A landing whose pages
    /// are locked is not: a probe object written there could never be
    /// removed, and a locked bucket keeps every version anyway (a write
    /// over an object leaves the old one as it was), so it writes HEAD
    /// first.
    pub async fn probed(mut self, run_id: &str) -> Result<ObjectLanding, ObjectError> {
        if self.lock.is_none() {
            self.creates = self.probe(run_id).await?;
        }
        Ok(self)
    }

    /// The bucket answers and takes the credentials (one LIST, nothing
    /// written): what a dry run checks.
    pub async fn reachable(&self) -> Result<(), ObjectError> {
        self.list(".edc-sync/").await.map(|_| ())
    }

    /// The object store `url` names, configured from the environment, for
    /// reading only (`verify`): nothing is written, not even a probe.
    pub fn open(url: &str) -> Result<ObjectLanding, ObjectError> {
        let shown = crate::redact::redact_arg(url);
        let err = |failure, detail: String| ObjectError {
            url: shown.clone(),
            op: "configure",
            key: String::new(),
            failure,
            detail,
        };
        // The one TLS set-up of the process (ring), as for the EDC client.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let parsed = url::Url::parse(url).map_err(|e| err(Failure::Other, format!("not a URL: {e}")))?;
        let prefix = ObjPath::from(parsed.path().trim_matches('/'));
        // No retries inside the client: a failed write ends the run with
        // its exit code and nothing committed, and the next run resumes
        // exactly (a sleep here would be a backoff without an audit line).
        let retry = object_store::RetryConfig {
            max_retries: 0,
            ..Default::default()
        };
        let mut locks = None;
        let store: Arc<dyn ObjectStore> = match parsed.scheme() {
            "s3" => {
                let s3 = Arc::new(
                    s3_from_env()
                        .map_err(|e| err(Failure::Config, e))?
                        .with_url(url)
                        .with_checksum_algorithm(object_store::aws::Checksum::SHA256)
                        .with_retry(retry)
                        .build()
                        .map_err(|e| err(Failure::Other, e.to_string()))?,
                );
                locks = Some(super::object_lock::Locks::new(s3.clone(), shown.clone()));
                s3
            }
            "gs" => Arc::new(
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(url)
                    .with_retry(retry)
                    .build()
                    .map_err(|e| err(Failure::Other, e.to_string()))?,
            ),
            "az" => Arc::new(
                object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(url)
                    .with_retry(retry)
                    .build()
                    .map_err(|e| err(Failure::Other, e.to_string()))?,
            ),
            other => {
                return Err(err(
                    Failure::Other,
                    format!("{other}:// is not an object store edc-sync lands in"),
                ))
            }
        };
        Ok(ObjectLanding {
            store,
            prefix,
            url: shown,
            creates: Creates::HeadFirst,
            locks,
            lock: None,
        })
    }

    /// Requires every page to be retained as `want` says: the bucket's
    /// Object Lock configuration is proven now (before any request to the
    /// EDC), and each page's retention is read back after it is written.
    /// Only S3 locks objects: on another store this refuses (78).
    pub(crate) async fn require_lock(
        &mut self,
        want: crate::config::ObjectLock,
    ) -> Result<super::object_lock::BucketDefault, ObjectError> {
        let Some(locks) = &self.locks else {
            return Err(ObjectError {
                url: self.url.clone(),
                op: "lock pages in",
                key: String::new(),
                failure: Failure::Config,
                detail:
                    "the policy's object_lock needs an s3:// landing (S3 Object Lock); nothing was fetched"
                        .into(),
            });
        };
        let found = locks.prove_bucket(&want).await?;
        self.lock = Some(want);
        Ok(found)
    }

    /// The retention S3 reports for the object at `rel` (relative to the
    /// prefix): what `verify` reports of each page. `None` off S3 or when
    /// S3 reports none.
    pub async fn retention(&self, rel: &str) -> Result<Option<super::object_lock::Retention>, ObjectError> {
        match &self.locks {
            Some(locks) => locks.retention(&self.key(rel)).await,
            None => Ok(None),
        }
    }

    /// How this server answers a second conditional write of one name.
    async fn probe(&self, run_id: &str) -> Result<Creates, ObjectError> {
        let key = self.key(&format!(".edc-sync/probe-{run_id}"));
        self.put_create(&key, Bytes::from_static(b"1")).await?;
        let creates = match self.put_create(&key, Bytes::from_static(b"2")).await {
            Ok(()) => Creates::HeadFirst,
            Err(e) if e.failure == Failure::Other && e.detail.contains("already exists") => {
                Creates::Conditional
            }
            Err(e) => return Err(e),
        };
        // A bucket that keeps every object (retention) may refuse this:
        // the probe object is small and harmless where it stays.
        let _ = self.store.delete(&key).await;
        Ok(creates)
    }

    /// What the probe found.
    pub fn creates(&self) -> Creates {
        self.creates
    }

    /// The URL as messages name it.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn key(&self, rel: &str) -> ObjPath {
        let rel = rel.trim_matches('/');
        match self.prefix.as_ref() {
            "" => ObjPath::from(rel),
            prefix => ObjPath::from(format!("{prefix}/{rel}")),
        }
    }

    fn error(&self, op: &'static str, key: &ObjPath, e: object_store::Error) -> ObjectError {
        ObjectError {
            url: self.url.clone(),
            op,
            key: key.to_string(),
            failure: classify(&e),
            detail: e.to_string(),
        }
    }

    async fn put_create(&self, key: &ObjPath, bytes: Bytes) -> Result<(), ObjectError> {
        if let (Some(locks), Some(lock)) = (&self.locks, &self.lock) {
            return locks
                .put(key, bytes, Some(lock), self.creates == Creates::Conditional)
                .await;
        }
        let opts = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match self.store.put_opts(key, PutPayload::from(bytes), opts).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => Err(ObjectError {
                url: self.url.clone(),
                op: "write",
                key: key.to_string(),
                failure: Failure::Other,
                detail: "it already exists".into(),
            }),
            Err(e) => Err(self.error("write", key, e)),
        }
    }

    /// The size of the object at `rel` (relative to the prefix), `None`
    /// when there is none.
    pub async fn size(&self, rel: &str) -> Result<Option<u64>, ObjectError> {
        let key = self.key(rel);
        match self.store.head(&key).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.error("read the size of", &key, e)),
        }
    }

    /// The SHA-256 of the object at `rel`, hashed as it is read; `None`
    /// when there is none.
    pub async fn sha256(&self, rel: &str) -> Result<Option<(String, u64)>, ObjectError> {
        use futures_util::StreamExt;
        use sha2::Digest;
        let key = self.key(rel);
        let got = match self.store.get(&key).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.error("read", &key, e)),
        };
        let mut hasher = sha2::Sha256::new();
        let mut len = 0u64;
        let mut body = got.into_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| self.error("read", &key, e))?;
            len += chunk.len() as u64;
            hasher.update(&chunk);
        }
        Ok(Some((hex::encode(hasher.finalize()), len)))
    }

    /// Lands `bytes` (whose SHA-256 is the object's name) at `rel`: never
    /// over an existing object.
    pub async fn put_page(&self, rel: &str, bytes: Bytes) -> Result<PutPage, ObjectError> {
        let key = self.key(rel);
        let len = bytes.len() as u64;
        let written = time::OffsetDateTime::now_utc();
        let existing = match self.creates {
            Creates::HeadFirst => self.size(rel).await?,
            Creates::Conditional => None,
        };
        let mut put = match existing {
            Some(size) => self.existing(&key, size, len)?,
            None => match self.put_create(&key, bytes).await {
                Ok(()) => PutPage {
                    created: true,
                    retention: None,
                },
                Err(e) if e.detail == "it already exists" => {
                    let size = self.size(rel).await?.unwrap_or_default();
                    self.existing(&key, size, len)?
                }
                Err(e) => Err(e)?,
            },
        };
        if let (Some(locks), Some(want)) = (&self.locks, &self.lock) {
            // A replayed page was written earlier: its retention counts
            // from then, so only its mode is held to the policy's here.
            let from = if put.created {
                written
            } else {
                time::OffsetDateTime::UNIX_EPOCH
            };
            put.retention = Some(locks.prove_page(&key, want, from).await?);
        }
        Ok(put)
    }

    /// An object already at a page's content address: the same page when
    /// the size matches (its name is the SHA-256 of the bytes); otherwise
    /// damage that must not be hidden.
    fn existing(&self, key: &ObjPath, size: u64, len: u64) -> Result<PutPage, ObjectError> {
        if size == len {
            return Ok(PutPage {
                created: false,
                retention: None,
            });
        }
        Err(ObjectError {
            url: self.url.clone(),
            op: "write",
            key: key.to_string(),
            failure: Failure::Other,
            detail: format!(
                "an object of {size} bytes is already there under the page's SHA-256, which names {len} bytes: \
                 it was modified after landing and is left as it is (run `edc-sync verify`)"
            ),
        })
    }

    /// Writes (or rewrites) an object that is not a page: a manifest line
    /// or the owner file.
    pub async fn put(&self, rel: &str, bytes: Bytes) -> Result<(), ObjectError> {
        let key = self.key(rel);
        // A bucket with Object Lock takes a write only with a checksum
        // algorithm named: the lock module's PutObject sends one.
        if let (Some(locks), Some(_)) = (&self.locks, &self.lock) {
            return locks.put(&key, bytes, None, false).await;
        }
        self.store
            .put(&key, PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| self.error("write", &key, e))
    }

    /// Reads a small object whole; `None` when there is none.
    pub async fn read(&self, rel: &str) -> Result<Option<Bytes>, ObjectError> {
        let key = self.key(rel);
        match self.store.get(&key).await {
            Ok(got) => got
                .bytes()
                .await
                .map(Some)
                .map_err(|e| self.error("read", &key, e)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.error("read", &key, e)),
        }
    }

    /// The names (relative to the prefix) of every object below `rel`, in
    /// order.
    pub async fn list(&self, rel: &str) -> Result<Vec<String>, ObjectError> {
        self.list_after(rel, None).await
    }

    /// [`Self::list`], only the names after `after` (relative to the
    /// prefix): on S3 one request a thousand names from there on.
    pub async fn list_after(&self, rel: &str, after: Option<&str>) -> Result<Vec<String>, ObjectError> {
        use futures_util::TryStreamExt;
        let key = self.key(rel);
        let listing = match after {
            Some(after) => self.store.list_with_offset(Some(&key), &self.key(after)),
            None => self.store.list(Some(&key)),
        };
        let mut metas: Vec<_> = listing
            .try_collect()
            .await
            .map_err(|e| self.error("list", &key, e))?;
        metas.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(metas.into_iter().map(|m| self.relative(&m.location)).collect())
    }

    /// The names (relative to the prefix) of every object below `rel`, as
    /// the store lists them (S3, GCS and Azure: in key order), one page of
    /// the listing held at a time: for a walk over a bucket of any size.
    pub fn names<'a>(
        &'a self,
        rel: &str,
    ) -> impl futures_util::Stream<Item = Result<String, ObjectError>> + 'a {
        use futures_util::StreamExt;
        let key = self.key(rel);
        self.store.list(Some(&key)).map(move |meta| match meta {
            Ok(meta) => Ok(self.relative(&meta.location)),
            Err(e) => Err(self.error("list", &key, e)),
        })
    }

    /// `location` relative to the prefix.
    fn relative(&self, location: &ObjPath) -> String {
        let full = location.to_string();
        match self.prefix.as_ref() {
            "" => full,
            p => full.strip_prefix(&format!("{p}/")).unwrap_or(&full).to_string(),
        }
    }

    /// Removes the object at `rel` (a manifest line past a rebuilt end).
    pub async fn delete(&self, rel: &str) -> Result<(), ObjectError> {
        let key = self.key(rel);
        match self.store.delete(&key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error("delete", &key, e)),
        }
    }
}

/// An S3 client configured as the AWS CLI would be: the environment, then
/// the shared config and credentials files (`super::aws_profile`). An
/// endpoint given as `http://` is taken as the operator's choice of plain
/// HTTP (a loopback or in-cluster server).
fn s3_from_env() -> Result<object_store::aws::AmazonS3Builder, String> {
    let profile = super::aws_profile::load(&|k| std::env::var(k).ok())?;
    let mut builder = object_store::aws::AmazonS3Builder::from_env();
    if let Some(v) = profile.access_key_id {
        builder = builder.with_access_key_id(v);
    }
    if let Some(v) = profile.secret_access_key {
        builder = builder.with_secret_access_key(v);
    }
    if let Some(v) = profile.session_token {
        builder = builder.with_token(v);
    }
    if let Some(v) = profile.region {
        builder = builder.with_region(v);
    }
    // Credentials belong in the key variables or the credentials file: in
    // an endpoint's user-info they would reach every message and audit line
    // that names the endpoint. Refused, wherever the endpoint comes from.
    let sources = [
        ("the AWS config file's endpoint_url", profile.endpoint_url.clone()),
        ("AWS_ENDPOINT_URL", std::env::var("AWS_ENDPOINT_URL").ok()),
        ("AWS_ENDPOINT", std::env::var("AWS_ENDPOINT").ok()),
    ];
    for (source, value) in &sources {
        if value.as_deref().is_some_and(has_userinfo) {
            return Err(format!(
                "{source} ({}) carries credentials in the URL (user:password@), which are never taken from \
                 there; give them in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or the shared credentials file",
                crate::redact::without_userinfo(value.as_deref().unwrap_or_default())
            ));
        }
    }
    let endpoint = profile
        .endpoint_url
        .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
        .or_else(|| std::env::var("AWS_ENDPOINT").ok());
    if let Some(endpoint) = endpoint {
        if endpoint.starts_with("http://") {
            builder = builder.with_allow_http(true);
        }
        builder = builder.with_endpoint(endpoint);
    }
    Ok(builder)
}

/// `url` names a user (and perhaps a password) before its host.
fn has_userinfo(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| !u.username().is_empty() || u.password().is_some())
}

/// The object name of the manifest line that starts at byte `offset` of
/// the stream's manifest: zero padded, so that listing gives file order.
pub(crate) fn manifest_line_name(dir: &str, offset: u64) -> String {
    format!("{dir}/manifest/{offset:015}.json")
}

/// The failure class of an object-store error: from its kind, the S3
/// error code or HTTP status its message carries, and the transport error
/// underneath.
fn classify(e: &object_store::Error) -> Failure {
    use object_store::Error as E;
    match e {
        E::Unauthenticated { .. } | E::PermissionDenied { .. } => return Failure::Refused,
        E::NotFound { .. } | E::AlreadyExists { .. } | E::Precondition { .. } => return Failure::Other,
        _ => {}
    }
    let text = e.to_string();
    let has = |s: &str| text.contains(s);
    let status = |code: &str| has(&format!("status code: {code}"));
    if has("InvalidDigest") || has("BadDigest") || has("XAmzContentChecksumMismatch") {
        Failure::Checksum
    } else if status("401")
        || status("403")
        || has("InvalidAccessKeyId")
        || has("SignatureDoesNotMatch")
        || has("AccessDenied")
    {
        Failure::Refused
    } else if status("429") || has("SlowDown") || has("TooManyRequests") {
        Failure::Throttled
    } else if status("5") || transport(e) {
        Failure::Unavailable
    } else {
        Failure::Other
    }
}

/// The request never got an answer: no connection, cut off, timed out.
fn transport(e: &object_store::Error) -> bool {
    use object_store::client::{HttpError, HttpErrorKind};
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(http) = c.downcast_ref::<HttpError>() {
            return matches!(
                http.kind(),
                HttpErrorKind::Connect
                    | HttpErrorKind::Request
                    | HttpErrorKind::Timeout
                    | HttpErrorKind::Interrupted
            );
        }
        cause = c.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_lines_list_in_file_order() {
        let names: Vec<_> = [10, 9, 100]
            .iter()
            .map(|&i| manifest_line_name("v/-/S/-/s", i))
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(sorted, vec![names[1].clone(), names[0].clone(), names[2].clone()]);
    }
}

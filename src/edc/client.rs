//! The only way `edc-sync` talks to an EDC: [`ReadOnlyClient`].
//!
//! Invariant 1, read-only by construction: the type has `get` and `head`
//! and nothing else; there is no method that takes a body or a verb. Every
//! URL it is given must be on the configured origin, and so must every
//! redirect, so the bearer token never leaves that origin.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::SystemTime;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, USER_AGENT};
use reqwest::{redirect, StatusCode, Url};
use sha2::{Digest, Sha256};

use super::origin::{Origin, OriginError};
use super::secret::Secret;
use crate::config::HttpLimits;

/// Vendor quota headers recorded in the audit trail when present.
pub const QUOTA_HEADERS: [&str; 4] = [
    "x-ratelimit-remaining",
    "x-vaultapi-burstlimit",
    "x-vaultapi-burstlimitremaining",
    "x-vaultapi-responsedelay",
];

const MAX_REDIRECTS: usize = 5;

/// Why a request produced no usable response.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Origin(#[from] OriginError),
    /// Connect failure, timeout, reset: worth a bounded retry.
    #[error("GET {url}: {detail}")]
    Transport { url: String, detail: String },
    /// The body ended before its Content-Length: worth a bounded retry,
    /// never a commit.
    #[error("GET {url}: body truncated after {received} of {expected} bytes")]
    Truncated {
        url: String,
        expected: u64,
        received: u64,
    },
    /// The body is larger than `http.max_body_bytes`: refused unread.
    #[error("GET {url}: body of {size} bytes exceeds max_body_bytes ({limit})")]
    TooLarge { url: String, size: u64, limit: u64 },
    /// Writing the body where it lands failed (exit 74).
    #[error("writing the body of {url}: {error}")]
    Sink { url: String, error: std::io::Error },
    #[error("building the HTTP client: {0}")]
    Build(String),
}

impl FetchError {
    /// Transient: retrying the same request may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, FetchError::Transport { .. } | FetchError::Truncated { .. })
    }
}

/// Status and the headers the page loop needs, before the body is read.
#[derive(Debug)]
pub struct Reply {
    pub url: Url,
    pub status: StatusCode,
    /// When the headers arrived (for `Retry-After` dates).
    pub received_at: SystemTime,
    pub retry_after: Vec<Vec<u8>>,
    pub link: Vec<String>,
    pub content_type: Option<String>,
    pub content_length: Option<u64>,
    /// Vendor quota headers present on the response (lowercase names).
    pub quota_headers: BTreeMap<String, String>,
    response: reqwest::Response,
    max_body_bytes: u64,
}

/// What was read from a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyDigest {
    pub bytes: u64,
    /// Lowercase hex SHA-256 of exactly the bytes written to the sink.
    pub sha256: String,
}

impl Reply {
    /// Streams the body into `sink` and SHA-256 at once, chunk by chunk,
    /// never holding the whole body. Enforces the size cap and detects a
    /// body shorter than its Content-Length.
    pub async fn stream_into(mut self, sink: &mut impl Write) -> Result<BodyDigest, FetchError> {
        let url = self.url.to_string();
        let mut hasher = Sha256::new();
        let mut bytes: u64 = 0;
        loop {
            let chunk = match self.response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(e) => {
                    return Err(match self.content_length {
                        Some(expected) if bytes < expected && !timed_out(&e) => FetchError::Truncated {
                            url,
                            expected,
                            received: bytes,
                        },
                        _ => FetchError::Transport {
                            url,
                            detail: describe(&e),
                        },
                    })
                }
            };
            bytes += chunk.len() as u64;
            if bytes > self.max_body_bytes {
                return Err(FetchError::TooLarge {
                    url,
                    size: bytes,
                    limit: self.max_body_bytes,
                });
            }
            hasher.update(&chunk);
            sink.write_all(&chunk).map_err(|error| FetchError::Sink {
                url: url.clone(),
                error,
            })?;
        }
        if let Some(expected) = self.content_length {
            if bytes != expected {
                return Err(FetchError::Truncated {
                    url,
                    expected,
                    received: bytes,
                });
            }
        }
        Ok(BodyDigest {
            bytes,
            sha256: hex::encode(hasher.finalize()),
        })
    }
}

/// A client that can only read, and only from one origin.
#[derive(Clone)]
pub struct ReadOnlyClient {
    http: reqwest::Client,
    base: Url,
    origin: Arc<Origin>,
    limits: HttpLimits,
}

impl std::fmt::Debug for ReadOnlyClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadOnlyClient")
            .field("origin", &self.origin.to_string())
            .finish_non_exhaustive()
    }
}

impl ReadOnlyClient {
    /// Builds a client for `base_url` that sends `token` as a bearer token.
    pub fn new(base_url: &str, token: &Secret, limits: HttpLimits) -> Result<ReadOnlyClient, FetchError> {
        // rustls with the ring provider; no OpenSSL anywhere. Installing
        // twice is harmless (the first one stays).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (origin, base) = Origin::of_base(base_url)?;
        let origin = Arc::new(origin);
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
            .map_err(|_| FetchError::Build("the token contains characters not allowed in a header".into()))?;
        auth.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, auth);
        headers.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("edc-sync/", env!("CARGO_PKG_VERSION"))),
        );
        let redirect_origin = origin.clone();
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(limits.connect_timeout)
            .timeout(limits.request_timeout)
            .redirect(redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= MAX_REDIRECTS {
                    attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
                } else if redirect_origin.matches(attempt.url()) {
                    attempt.follow()
                } else {
                    let err = OriginError::CrossOrigin {
                        url: attempt.url().to_string(),
                        origin: redirect_origin.to_string(),
                    };
                    attempt.error(err)
                }
            }))
            .build()
            .map_err(|e| FetchError::Build(e.to_string()))?;
        Ok(ReadOnlyClient {
            http,
            base,
            origin,
            limits,
        })
    }

    pub fn base(&self) -> &Url {
        &self.base
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Resolves a link from a page against `against`, refusing other origins.
    pub fn resolve(&self, against: &Url, link: &str) -> Result<Url, OriginError> {
        self.origin.resolve(against, link)
    }

    /// `GET url`. Returns once the headers are in; read the body with
    /// [`Reply::stream_into`].
    pub async fn get(&self, url: &Url) -> Result<Reply, FetchError> {
        self.send(reqwest::Method::GET, url).await
    }

    /// `HEAD url`.
    pub async fn head(&self, url: &Url) -> Result<Reply, FetchError> {
        self.send(reqwest::Method::HEAD, url).await
    }

    /// The one place a request is built. Private, and only ever given GET
    /// or HEAD by the two methods above.
    async fn send(&self, method: reqwest::Method, url: &Url) -> Result<Reply, FetchError> {
        self.origin.check(url)?;
        let response = self.http.request(method, url.clone()).send().await.map_err(|e| {
            if let Some(origin_error) = find_origin_error(&e) {
                return FetchError::Origin(origin_error);
            }
            FetchError::Transport {
                url: url.to_string(),
                detail: describe(&e),
            }
        })?;
        let received_at = SystemTime::now();
        let headers = response.headers();
        let all = |name| {
            headers
                .get_all(name)
                .iter()
                .map(|v: &HeaderValue| v.as_bytes().to_vec())
                .collect::<Vec<_>>()
        };
        let retry_after = all(reqwest::header::RETRY_AFTER);
        let link = all(reqwest::header::LINK)
            .into_iter()
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .collect();
        let content_type = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let content_length = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let quota_headers = QUOTA_HEADERS
            .iter()
            .filter_map(|name| {
                let v = headers.get(*name)?.to_str().ok()?;
                Some((name.to_string(), v.chars().take(64).collect()))
            })
            .collect();
        let reply = Reply {
            url: response.url().clone(),
            status: response.status(),
            received_at,
            retry_after,
            link,
            content_type,
            content_length,
            quota_headers,
            response,
            max_body_bytes: self.limits.max_body_bytes,
        };
        // Refuse an oversized body before reading a byte of it.
        if let Some(size) = reply.content_length.filter(|n| *n > self.limits.max_body_bytes) {
            return Err(FetchError::TooLarge {
                url: url.to_string(),
                size,
                limit: self.limits.max_body_bytes,
            });
        }
        Ok(reply)
    }
}

/// Our own cross-origin refusal, when the redirect policy raised it.
fn find_origin_error(e: &reqwest::Error) -> Option<OriginError> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(o) = s.downcast_ref::<OriginError>() {
            return Some(o.clone());
        }
        source = s.source();
    }
    None
}

/// Whether the error is (or was caused by) a timeout. reqwest reports a
/// whole-request timeout that fires while the body is being read as a body
/// error; the timeout is further down the chain.
fn timed_out(e: &reqwest::Error) -> bool {
    if e.is_timeout() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let is_io_timeout = s
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut);
        if is_io_timeout || s.to_string().contains("timed out") {
            return true;
        }
        source = s.source();
    }
    false
}

/// A reqwest error with its causes, on one line (reqwest's own Display
/// stops at the outermost layer).
fn describe(e: &reqwest::Error) -> String {
    let mut parts = vec![if timed_out(e) {
        "timed out".to_string()
    } else {
        e.to_string()
    }];
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

//! A response as the page loop sees it: its status and the headers that
//! matter (read before the body), then the body streamed once into SHA-256
//! and a sink, bounded by the policy's size cap.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::SystemTime;

use reqwest::{StatusCode, Url};
use sha2::{Digest, Sha256};

use super::fetch_error::{describe, timed_out, FetchError};

/// Status and the headers the page loop needs, before the body is read.
/// Cloneable, so it outlives the body for the audit line and the verdict.
#[derive(Debug, Clone)]
pub struct ResponseMeta {
    pub url: Url,
    pub status: StatusCode,
    /// When the headers arrived, by the local clock.
    pub received_at: SystemTime,
    pub retry_after: Vec<Vec<u8>>,
    pub link: Vec<String>,
    pub content_type: Option<String>,
    /// `Content-Encoding`, when the server sent one other than identity:
    /// requests ask for identity, so a compressed body is refused by name.
    pub content_encoding: Option<String>,
    pub content_length: Option<u64>,
    /// Vendor quota headers present on the response (lowercase names).
    pub quota_headers: BTreeMap<String, String>,
    /// The server's own clock (`Date`), when it sent one that parses.
    pub server_date: Option<SystemTime>,
    /// A `Date` header that does not parse, as sent (at most 64
    /// characters): recorded as such, never taken for an absent one.
    pub date_unreadable: Option<String>,
    /// `X-VaultAPI-ExecutionId`, when present (at most 64 characters).
    pub execution_id: Option<String>,
    /// Which credential the request carried (see `auth.rs`).
    pub credential_generation: u64,
}

impl ResponseMeta {
    /// Server clock minus local clock at receipt, in seconds, when the
    /// server sent a `Date` (whole seconds: that is its resolution).
    pub fn clock_skew_s(&self) -> Option<f64> {
        let server = self.server_date?;
        Some(match server.duration_since(self.received_at) {
            Ok(ahead) => ahead.as_secs_f64(),
            Err(behind) => -behind.duration().as_secs_f64(),
        })
    }
}

/// A response whose headers are in and whose body is not read yet.
#[derive(Debug)]
pub struct Reply {
    pub meta: ResponseMeta,
    pub(super) response: reqwest::Response,
    pub(super) max_body_bytes: u64,
    /// The request's method and URL, for errors (`POST https://...`).
    pub(super) request: String,
}

impl std::ops::Deref for Reply {
    type Target = ResponseMeta;

    fn deref(&self) -> &ResponseMeta {
        &self.meta
    }
}

/// What was read from a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyDigest {
    pub bytes: u64,
    /// Lowercase hex SHA-256 of exactly the bytes written to the sink.
    pub sha256: String,
}

impl Reply {
    /// Reads at most `cap` bytes of the body, for a vendor error document.
    /// Errors while reading leave what was read: the status already says
    /// the request failed; the body only says why.
    pub async fn error_body(mut self, cap: usize) -> Vec<u8> {
        let mut body = Vec::new();
        while let Ok(Some(chunk)) = self.response.chunk().await {
            let room = cap.saturating_sub(body.len());
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if body.len() >= cap {
                break;
            }
        }
        body
    }

    /// Streams the body into `sink` and SHA-256 at once, chunk by chunk,
    /// never holding the whole body. Enforces the size cap and detects a
    /// body shorter than its Content-Length.
    pub async fn stream_into(mut self, sink: &mut impl Write) -> Result<BodyDigest, FetchError> {
        let url = self.meta.url.to_string();
        let request = self.request.clone();
        let mut hasher = Sha256::new();
        let mut bytes: u64 = 0;
        loop {
            let chunk = match self.response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(e) => {
                    return Err(match self.meta.content_length {
                        Some(expected) if bytes < expected && !timed_out(&e) => FetchError::Truncated {
                            request,
                            expected,
                            received: bytes,
                        },
                        _ => FetchError::Transport {
                            request,
                            detail: describe(&e),
                        },
                    })
                }
            };
            bytes += chunk.len() as u64;
            if bytes > self.max_body_bytes {
                return Err(FetchError::TooLarge {
                    request,
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
        if let Some(expected) = self.meta.content_length {
            if bytes != expected {
                return Err(FetchError::Truncated {
                    request,
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

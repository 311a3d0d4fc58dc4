//! Why a request produced no usable response, and how a transport error
//! is told: a timeout found anywhere in its chain, every cause on one line.

use super::origin::OriginError;

/// Why a request produced no usable response.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Origin(#[from] OriginError),
    /// Connect failure, timeout, reset: worth a bounded retry. `request`
    /// is the method and URL (`POST https://...`) of every variant here.
    #[error("{request}: {detail}")]
    Transport { request: String, detail: String },
    /// The body ended before its Content-Length: worth a bounded retry,
    /// never a commit.
    #[error("{request}: body truncated after {received} of {expected} bytes")]
    Truncated {
        request: String,
        expected: u64,
        received: u64,
    },
    /// The response is framed two ways (RFC 9112, section 6.3: chunked and
    /// a Content-Length): refused unread, as a possible response-splitting
    /// attempt, never retried as if truncated.
    #[error("{request}: the response has both Transfer-Encoding and Content-Length (RFC 9112, section 6.3); refused unread")]
    Framing { request: String },
    /// The body is larger than `http.max_body_bytes`: refused unread.
    #[error("{request}: body of {size} bytes exceeds max_body_bytes ({limit})")]
    TooLarge { request: String, size: u64, limit: u64 },
    /// Writing the body where it lands failed (exit 74).
    #[error("writing the body of {url}: {error}")]
    Sink { url: String, error: std::io::Error },
    #[error("building the HTTP client: {0}")]
    Build(String),
    /// A credential value cannot be sent (for example a newline in it).
    #[error("{0}")]
    Credential(String),
    /// A REDCap page key that is not a read export of the API URL:
    /// refused before anything is sent.
    #[error(transparent)]
    NotAnExport(#[from] super::vendor::NotAnExport),
    /// No credential is held (the page loop obtains one before a request).
    #[error("{request}: no credential has been obtained yet")]
    NoCredential { request: String },
}

impl FetchError {
    /// Transient: retrying the same request may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, FetchError::Transport { .. } | FetchError::Truncated { .. })
    }
}

/// Whether the error is (or was caused by) a timeout. reqwest reports a
/// whole-request timeout that fires while the body is being read as a body
/// error; the timeout is further down the chain.
pub(super) fn timed_out(e: &reqwest::Error) -> bool {
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
pub(super) fn describe(e: &reqwest::Error) -> String {
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

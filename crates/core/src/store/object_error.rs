//! How an object-store request failed, and the exit code that follows:
//! shared by the landing's requests (`object`) and its Object Lock requests
//! (`object_lock`).

/// How a failed object-store request ended, which decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Not reached, or it answered 5xx: 69.
    Unavailable,
    /// 429 or SlowDown: try again later, 75.
    Throttled,
    /// Credentials refused (401, 403, a bad key or signature): 77.
    Refused,
    /// The server found other bytes than the SHA-256 sent: 74.
    Checksum,
    /// The landing's configuration (a profile named that is not there): 78.
    Config,
    /// Anything else (a bad URL, a refused request): 74.
    Other,
}

/// An object-store request that failed: what, where, and why.
#[derive(Debug, thiserror::Error)]
#[error("landing {url}: cannot {op} {key}: {detail}")]
pub struct ObjectError {
    pub url: String,
    pub op: &'static str,
    pub key: String,
    pub failure: Failure,
    pub detail: String,
}

impl ObjectError {
    /// Its exit code: unreachable or failing 69, throttling 75,
    /// credentials refused 77, the landing's configuration 78, else 74.
    pub fn exit(&self) -> crate::exit::Exit {
        use crate::exit::Exit;
        match self.failure {
            Failure::Unavailable => Exit::Unavailable,
            Failure::Throttled => Exit::TempFail,
            Failure::Refused => Exit::NoPerm,
            Failure::Config => Exit::Config,
            Failure::Checksum | Failure::Other => Exit::IoErr,
        }
    }
}

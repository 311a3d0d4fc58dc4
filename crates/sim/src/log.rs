//! Every request the simulator saw: what tests and the OQ compare against.
//! The token is never logged, only whether it matched.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// One request, as JSON Lines in the request log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Arrival order, from 1 (the number fault schedules refer to).
    pub n: u64,
    /// Arrival time, RFC 3339 UTC with milliseconds.
    pub ts: String,
    /// Arrival time, microseconds since the epoch.
    pub t_us: i64,
    pub method: String,
    /// Path and query.
    pub path: String,
    pub status: u16,
    /// `ok`, `missing` or `invalid`: whether the bearer token matched.
    pub auth: String,
    pub fault: Option<String>,
    /// VQL: the window-start literal of the query as the server parsed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vql_since: Option<String>,
    /// The client ID the request named, as Vault reads it: the `client_id`
    /// query parameter, else the `X-VaultAPI-ClientID` header ("If a client
    /// ID is included as both a HTTP header and query parameter, Vault
    /// ignores the HTTP Header": Vault REST API reference, "Client ID").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// A Vault login: the `vaultDNS` its form asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vault_dns: Option<String>,
    /// A REDCap export: its form fields but the token, URL-encoded in the
    /// order sent, and whether a token field came in the form at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export: Option<String>,
}

/// The in-memory log, optionally mirrored to a file as it grows.
#[derive(Clone, Default)]
pub struct RequestLog {
    entries: Arc<Mutex<Vec<LogEntry>>>,
    file: Option<Arc<Mutex<File>>>,
}

impl RequestLog {
    pub fn with_file(path: &Path) -> std::io::Result<RequestLog> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        Ok(RequestLog {
            entries: Arc::default(),
            file: Some(Arc::new(Mutex::new(file))),
        })
    }

    pub fn push(&self, entry: LogEntry) {
        if let Some(file) = &self.file {
            let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
            if let Ok(line) = serde_json::to_string(&entry) {
                // The log is evidence for tests; a failed write is reported
                // on stderr rather than taking the simulator down.
                if let Err(e) = writeln!(f, "{line}") {
                    eprintln!("simulator: cannot write the request log: {e}");
                }
            }
        }
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).push(entry);
    }

    pub fn entries(&self) -> Vec<LogEntry> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

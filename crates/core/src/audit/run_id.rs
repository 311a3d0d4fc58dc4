//! Run identifiers: unique across hosts and processes, readable by people.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::digest::sha256_hex;

/// `20261202T170808.123Z-3f2a9c1b`: the start time (so runs sort), then
/// eight hex digits of a hash of host, pid and the nanosecond clock (so two
/// runs started in the same millisecond on two hosts still differ).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct RunId(String);

impl RunId {
    pub fn new() -> RunId {
        let now = SystemTime::now();
        let stamp = humantime::format_rfc3339_millis(now)
            .to_string()
            .replace(['-', ':'], "");
        let nanos = now
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let seed = format!("{}|{}|{nanos}", crate::host::name(), std::process::id());
        RunId(format!("{stamp}-{}", &sha256_hex(seed.as_bytes())[..8]))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for RunId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn run_ids_differ_and_sort_by_time() {
        let a = super::RunId::new();
        let b = super::RunId::new();
        assert_ne!(a, b);
        assert!(a.as_str().ends_with(&a.as_str()[a.as_str().len() - 8..]));
        assert!(a.as_str().starts_with("20"), "{a}");
    }
}

//! Vault's burst limit (Vault REST API reference, "API Rate Limits"): a
//! vault answers every request with the allowance left in its 5-minute
//! window (`X-VaultAPI-BurstLimitRemaining`) and the window's limit
//! (`X-VaultAPI-BurstLimit`); past it Vault delays responses rather than
//! answering 429. The allowance is the vault's, whatever quota a policy
//! gives its streams.

use std::collections::BTreeMap;
use std::time::Duration;

/// The header of the allowance left.
pub(crate) const REMAINING: &str = "x-vaultapi-burstlimitremaining";

/// The burst window the limit is counted over.
pub(crate) const WINDOW: Duration = Duration::from_secs(300);

/// What a response said of the vault's burst allowance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Allowance {
    /// Requests left in the window.
    pub remaining: u64,
    /// The window's limit, when the vault sent it.
    pub limit: Option<u64>,
}

impl Allowance {
    /// The allowance the quota headers of a response (lowercase names)
    /// report, if they report one.
    pub(crate) fn of(headers: &BTreeMap<String, String>) -> Option<Allowance> {
        let parse = |name: &str| headers.get(name).and_then(|v| v.trim().parse::<u64>().ok());
        Some(Allowance {
            remaining: parse(REMAINING)?,
            limit: parse("x-vaultapi-burstlimit"),
        })
    }

    /// The spacing that spends the window's limit evenly: one request every
    /// `WINDOW / limit`.
    pub(crate) fn spacing(&self) -> Duration {
        WINDOW / u32::try_from(self.limit.unwrap_or(1).max(1)).unwrap_or(u32::MAX)
    }
}

/// The key of the one gate every request to the vault at `host` passes
/// while its allowance is at the floor.
pub(crate) fn gate_key(host: &str) -> String {
    format!("vault-burst:{host}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowance_is_read_from_its_two_headers() {
        let mut h = BTreeMap::new();
        assert_eq!(Allowance::of(&h), None);
        h.insert("x-vaultapi-burstlimitremaining".to_string(), " 7 ".to_string());
        let a = Allowance::of(&h).unwrap();
        assert_eq!((a.remaining, a.limit), (7, None));
        assert_eq!(a.spacing(), WINDOW);
        h.insert("x-vaultapi-burstlimit".to_string(), "2000".to_string());
        assert_eq!(Allowance::of(&h).unwrap().spacing(), Duration::from_millis(150));
    }
}

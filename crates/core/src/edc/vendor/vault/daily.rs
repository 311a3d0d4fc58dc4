//! Vault's daily API limit: a vault that enforces one answers every
//! request with the calls left in the current 24-hour period
//! (`X-VaultAPI-DailyLimitRemaining`) and the period's limit
//! (`X-VaultAPI-DailyLimit`); once it is spent Vault answers
//! `API_LIMIT_EXCEEDED` and "no further calls will be processed until the
//! next 5 minute or 24 hour period begins" (Vault REST API v14.0 release
//! notes, "Vault Transactions API"; the headers are listed under the
//! reference's "Response headers"). Vault's current reference describes
//! only the burst limit: a vault that sends no daily headers has no daily
//! limit to keep, and none is assumed.
//!
//! A policy declares the daily limit as its `window_quota` (`calls`: the
//! limit, `window_s: 86400`); an answer saying none are left marks that
//! window spent for every caller, as a 429 does.

use std::collections::BTreeMap;

/// The header of the calls left.
pub(crate) const REMAINING: &str = "x-vaultapi-dailylimitremaining";

/// What a response said of the vault's daily allowance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DailyAllowance {
    /// Calls left in the current period.
    pub remaining: u64,
    /// The period's limit, when the vault sent it.
    pub limit: Option<u64>,
}

impl DailyAllowance {
    /// The allowance the quota headers of a response (lowercase names)
    /// report, if they report one.
    pub(crate) fn of(headers: &BTreeMap<String, String>) -> Option<DailyAllowance> {
        let parse = |name: &str| headers.get(name).and_then(|v| v.trim().parse::<u64>().ok());
        Some(DailyAllowance {
            remaining: parse(REMAINING)?,
            limit: parse("x-vaultapi-dailylimit"),
        })
    }

    /// Nothing is left: the next call would be refused.
    #[cfg(test)]
    fn spent(&self) -> bool {
        self.remaining == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowance_is_read_from_its_two_headers() {
        let mut h = BTreeMap::new();
        assert_eq!(DailyAllowance::of(&h), None);
        h.insert("x-vaultapi-dailylimitremaining".to_string(), "0".to_string());
        let a = DailyAllowance::of(&h).unwrap();
        assert!(a.spent());
        assert_eq!(a.limit, None);
        h.insert("x-vaultapi-dailylimit".to_string(), " 100000 ".to_string());
        h.insert("x-vaultapi-dailylimitremaining".to_string(), "17".to_string());
        let a = DailyAllowance::of(&h).unwrap();
        assert_eq!((a.remaining, a.limit, a.spent()), (17, Some(100_000), false));
    }
}

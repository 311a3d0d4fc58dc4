//! One quota as the pacer sees it: the gates a request passes, the
//! concurrency cap, and how long a caller is willing to wait.

use std::time::Duration;

use crate::config::{MissingValue, Policy, Rate};
use crate::stream::StreamIdentity;

/// Margin of the lease TTL over the HTTP timeout: a lease must outlive the
/// longest request it covers, or two holders could overlap.
const LEASE_MARGIN: Duration = Duration::from_secs(30);

/// One token bucket a request must pass.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// `account`, `study:<id>` or `stream:<name>`; part of the Redis key.
    pub name: String,
    pub rate: Rate,
}

/// Why a quota cannot be formed.
#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    #[error(transparent)]
    Missing(#[from] MissingValue),
    #[error(
        "bucket key {0:?} must not be empty or contain '{{' or '}}' (it becomes a Redis Cluster hash tag)"
    )]
    BadKey(String),
}

/// A quota: its identity (the filled `bucket_key`) and its gates.
#[derive(Debug, Clone, PartialEq)]
pub struct Quota {
    key: String,
    gates: Vec<Gate>,
    max_concurrency: u32,
    lease_ttl: Duration,
    horizon: Duration,
    /// Slack kept against the vendor's bucket for arrival jitter.
    margin: Duration,
}

impl Quota {
    /// A quota with one account-wide gate, a cap of one request in flight,
    /// and a one-minute horizon; adjust with the `with_*` methods.
    pub fn new(key: impl Into<String>, account: Rate) -> Result<Quota, QuotaError> {
        let key = key.into();
        if key.is_empty() || key.contains(['{', '}']) {
            return Err(QuotaError::BadKey(key));
        }
        Ok(Quota {
            key,
            gates: vec![Gate {
                name: "account".into(),
                rate: account,
            }],
            max_concurrency: 1,
            lease_ttl: Duration::from_secs(60),
            horizon: Duration::from_secs(60),
            margin: Duration::ZERO,
        })
    }

    /// The quota a stream of `policy` spends: the vendor bucket, then the
    /// study and stream sub-limits that apply.
    pub fn for_stream(policy: &Policy, id: &StreamIdentity) -> Result<Quota, QuotaError> {
        let mut quota = Quota::new(policy.bucket_key.fill(id)?, policy.rate)?
            .with_concurrency(policy.max_concurrency, policy.http.request_timeout + LEASE_MARGIN)
            .with_horizon(policy.max_wait)
            .with_margin(policy.pacing_margin);
        if let (Some(rate), Some(study)) = (policy.study_limit, id.study.as_deref()) {
            quota = quota.with_gate(format!("study:{study}"), rate);
        }
        let stream = id.stream.as_deref().and_then(|s| policy.stream(s));
        if let Some(rate) = stream.and_then(|s| s.sub_limit) {
            quota = quota.with_gate(
                format!("stream:{}", id.stream.as_deref().unwrap_or_default()),
                rate,
            );
        }
        Ok(quota)
    }

    /// Adds a sub-limit gate on top of the account gate.
    pub fn with_gate(mut self, name: impl Into<String>, rate: Rate) -> Quota {
        self.gates.push(Gate {
            name: name.into(),
            rate,
        });
        self
    }

    pub fn with_concurrency(mut self, max_concurrency: u32, lease_ttl: Duration) -> Quota {
        self.max_concurrency = max_concurrency.max(1);
        self.lease_ttl = lease_ttl;
        self
    }

    /// The longest single wait a caller accepts; a longer one is refused.
    pub fn with_horizon(mut self, horizon: Duration) -> Quota {
        self.horizon = horizon;
        self
    }

    /// Keeps `margin` of slack against the vendor's arrival-counting bucket.
    pub fn with_margin(mut self, margin: Duration) -> Quota {
        self.margin = margin;
        self
    }

    pub fn margin(&self) -> Duration {
        self.margin
    }

    /// The shape of each gate, margin included, as the pacers use it.
    pub fn shapes(&self) -> Vec<super::gcra::GateShape> {
        self.gates
            .iter()
            .map(|g| super::gcra::GateShape::new(g.rate, self.margin))
            .collect()
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn gates(&self) -> &[Gate] {
        &self.gates
    }

    pub fn max_concurrency(&self) -> u32 {
        self.max_concurrency
    }

    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    pub fn horizon(&self) -> Duration {
        self.horizon
    }
}

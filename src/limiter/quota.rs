//! One quota as the pacer sees it: the gates a request passes, the
//! concurrency cap, and how long a caller is willing to wait.

use std::time::Duration;

use crate::config::{MissingValue, Policy, Rate};
use crate::stream::StreamIdentity;

/// Margin of the lease TTL over the HTTP timeout: a lease must outlive the
/// longest request it covers, or two holders could overlap.
const LEASE_MARGIN: Duration = Duration::from_secs(30);

/// One token bucket a request must pass, and optionally a cap on the
/// requests in flight through it.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// `account`, `study:<id>`, `stream:<name>` or `key:<key>`; part of the
    /// Redis key.
    pub name: String,
    /// Sustained requests per second and the burst allowed at once.
    pub rate: Rate,
    /// At most this many requests through this gate in flight at once,
    /// across every process (the account gate's cap is the quota's
    /// `max_concurrency`, so this is `None` there).
    pub concurrency: Option<u32>,
}

/// One concurrency cap of a quota: the lease set's key part and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSet {
    /// `leases` for the account, `leases:<gate name>` for a capped gate.
    pub part: String,
    /// Slots in it.
    pub cap: u32,
}

/// Why a quota cannot be formed.
#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    /// The bucket key names a value the stream does not have.
    #[error(transparent)]
    Missing(#[from] MissingValue),
    #[error(
        "bucket key {0:?} must not be empty or contain '{{' or '}}' (it becomes a Redis Cluster hash tag)"
    )]
    /// A key that cannot sit inside a Redis Cluster hash tag.
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
                concurrency: None,
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
            concurrency: None,
        });
        self
    }

    /// Adds a sub-limit gate with its own cap on requests in flight; a
    /// request takes a slot under it and under the account's cap, or none.
    pub fn with_capped_gate(mut self, name: impl Into<String>, rate: Rate, cap: u32) -> Quota {
        self.gates.push(Gate {
            name: name.into(),
            rate,
            concurrency: Some(cap.max(1)),
        });
        self
    }

    /// Every concurrency cap a request takes a slot under: the account's
    /// first, then each capped gate's.
    pub fn lease_sets(&self) -> Vec<LeaseSet> {
        let account = LeaseSet {
            part: "leases".into(),
            cap: self.max_concurrency,
        };
        std::iter::once(account)
            .chain(self.gates.iter().filter_map(|g| {
                g.concurrency.map(|cap| LeaseSet {
                    part: format!("leases:{}", g.name),
                    cap,
                })
            }))
            .collect()
    }

    /// Caps requests in flight at `max_concurrency`, each slot's lease
    /// lasting `lease_ttl` unless renewed.
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

    /// The jitter margin.
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

    /// The filled bucket key: the quota's identity and hash tag.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The gates, account first.
    pub fn gates(&self) -> &[Gate] {
        &self.gates
    }

    /// The account's cap on requests in flight.
    pub fn max_concurrency(&self) -> u32 {
        self.max_concurrency
    }

    /// How long a slot outlives a holder that stopped renewing it.
    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    /// The longest wait a caller accepts.
    pub fn horizon(&self) -> Duration {
        self.horizon
    }
}

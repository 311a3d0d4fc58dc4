//! One quota as the pacer sees it: the gates a request passes, the
//! concurrency cap, and how long a caller is willing to wait.

use std::time::Duration;

use super::Rate;

/// One token bucket a request must pass, and optionally a cap on the
/// requests in flight through it.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// `account` for the account gate, else the caller's name for the
    /// sub-limit (`study:<id>`, `key:<key>`, ...); part of the Redis key.
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

/// A quota key that cannot sit inside a Redis Cluster hash tag.
#[derive(Debug, thiserror::Error)]
#[error("bucket key {0:?} must not be empty or contain '{{' or '}}' (it becomes a Redis Cluster hash tag)")]
pub struct QuotaError(pub String);

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
    /// Fixed-window quotas a request must also fit in.
    windows: Vec<super::Window>,
}

impl Quota {
    /// A quota with one account-wide gate, a cap of one request in flight,
    /// and a one-minute horizon; adjust with the `with_*` methods.
    pub fn new(key: impl Into<String>, account: Rate) -> Result<Quota, QuotaError> {
        let key = key.into();
        if key.is_empty() || key.contains(['{', '}']) {
            return Err(QuotaError(key));
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
            windows: Vec::new(),
        })
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

    /// Adds a fixed-window quota: at most `window.calls` requests booked
    /// in each of its windows, beside every gate's bucket.
    pub fn with_window(mut self, window: super::Window) -> Quota {
        self.windows.push(window);
        self
    }

    /// The fixed-window quotas.
    pub fn windows(&self) -> &[super::Window] {
        &self.windows
    }

    /// The shape of each window, margin included, as the pacers use it.
    pub fn window_shapes(&self) -> Vec<super::window::WindowShape> {
        self.windows
            .iter()
            .map(|w| super::window::WindowShape::new(w, self.margin))
            .collect()
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

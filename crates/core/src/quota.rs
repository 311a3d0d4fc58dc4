//! The quota a stream spends, as the pacer sees it: the policy's vendor
//! bucket (`bucket_key` filled from the stream's identity), then the study
//! and stream sub-limits that apply on top of it, and the fixed window the
//! vendor counts beside it.

use std::time::Duration;

use quota_pacer::{Quota, QuotaError};

use crate::config::{MissingValue, Policy};
use crate::stream::StreamIdentity;

/// Margin of the lease TTL over the HTTP timeout: a lease must outlive the
/// longest request it covers, or two holders could overlap.
const LEASE_MARGIN: Duration = Duration::from_secs(30);

/// Why a stream's quota cannot be formed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StreamQuotaError {
    /// The bucket key names a value the stream does not have.
    #[error(transparent)]
    Missing(#[from] MissingValue),
    /// The filled key cannot be a Redis Cluster hash tag.
    #[error(transparent)]
    Key(#[from] QuotaError),
}

/// The quota a stream of `policy` with identity `id` spends.
pub(crate) fn for_stream(policy: &Policy, id: &StreamIdentity) -> Result<Quota, StreamQuotaError> {
    let mut quota = Quota::new(policy.bucket_key.fill(id)?, policy.rate)?
        .with_concurrency(policy.max_concurrency, policy.http.request_timeout + LEASE_MARGIN)
        .with_horizon(policy.max_wait)
        .with_margin(policy.pacing_margin);
    if let Some(window) = &policy.window_quota {
        quota = quota.with_window(window.pacer_window());
    }
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

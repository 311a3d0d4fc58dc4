//! The quota a stream spends, as the pacer sees it: the policy's vendor
//! bucket (`bucket_key` filled from the stream's identity), then the study
//! and stream sub-limits that apply on top of it, and the fixed window the
//! vendor counts beside it.

use std::time::Duration;

use quota_pacer::{Quota, QuotaError};

use crate::config::{MissingValue, Placeholder, PlaceholderValues, Policy};
use crate::stream::StreamIdentity;

/// What a quota key is filled from: the stream's identity, and for
/// `{host}` the vendor's base URL.
struct KeyValues<'a> {
    id: &'a StreamIdentity,
    base_url: Option<&'a reqwest::Url>,
}

impl PlaceholderValues for KeyValues<'_> {
    fn value(&self, p: Placeholder) -> Option<&str> {
        match p {
            // `host_str` with the port only when it is not the scheme's
            // default (`Url` drops a default port): what identifies the
            // server a client address reaches.
            Placeholder::Host => self
                .base_url
                .filter(|u| u.host_str().is_some())
                .map(|u| &u[url::Position::BeforeHost..url::Position::AfterPort]),
            other => self.id.value(other),
        }
    }
}

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
pub(crate) fn for_stream(
    policy: &Policy,
    id: &StreamIdentity,
    base_url: Option<&reqwest::Url>,
) -> Result<Quota, StreamQuotaError> {
    let key = policy.bucket_key.fill(&KeyValues { id, base_url })?;
    let mut quota = Quota::new(key, policy.rate)?
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

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(bucket_key: &str) -> Policy {
        let text = format!(
            "redcap:\n  base_url_env: REDCAP_API_URL\n  token_env: REDCAP_API_TOKEN\n  sustained_rate_per_sec: 2\n  \
             burst_capacity: 10\n  bucket_key: \"{bucket_key}\"\n"
        );
        let config = crate::config::parse(std::path::Path::new("policy.yaml"), &text).unwrap();
        config.vendor("redcap").unwrap().clone()
    }

    fn id(study: &str) -> StreamIdentity {
        StreamIdentity {
            vendor: "redcap".into(),
            tenant: None,
            study: Some(study.into()),
            protocol_version: None,
            stream: Some("records".into()),
        }
    }

    /// `{host}` is the server's: two projects on one REDCap share one
    /// quota (its hit threshold counts the client's address), a port that
    /// is not the default tells servers apart, and credentials in the URL
    /// never reach the key.
    #[test]
    fn a_quota_keyed_by_host_is_the_servers_whatever_the_project() {
        let p = policy("rl:redcap:{host}");
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        let key = |study: &str, u: &str| {
            for_stream(&p, &id(study), Some(&url(u)))
                .unwrap()
                .key()
                .to_string()
        };
        let a = key("P-1", "https://redcap.example.edu/api/");
        assert_eq!(a, "rl:redcap:redcap.example.edu");
        assert_eq!(key("P-2", "https://redcap.example.edu:443/api/"), a);
        assert_eq!(
            key("P-1", "https://redcap.example.edu:8443/api/"),
            "rl:redcap:redcap.example.edu:8443"
        );
        assert_eq!(key("P-1", "https://u:pw@redcap.example.edu/api/"), a);
        assert!(matches!(
            for_stream(&p, &id("P-1"), None),
            Err(StreamQuotaError::Missing(_))
        ));
    }
}

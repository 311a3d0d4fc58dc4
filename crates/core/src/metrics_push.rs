//! `--metrics-push URL`: a run's figures pushed to a Prometheus
//! Pushgateway, for runs that live shorter than a scrape (a Kubernetes
//! pod, a scheduler's task).
//!
//! Each stream is a group of its own: job `edc_sync` and the stream's
//! identity (vendor, tenant, study, protocol version, stream) as the
//! grouping key, every value base64url-encoded (`label@base64/VALUE`, the
//! Pushgateway's form for values holding `/` or nothing), so that runs of
//! different streams never replace each other's figures. Pushed with POST,
//! which replaces only the metrics a push carries: a failed run replaces
//! the exit code and leaves the group's last success as it was.
//!
//! A Pushgateway that is down or refuses is a warning, never the run's
//! failure: the data was landed and audited; the staleness alert says that
//! monitoring missed a run. The URL's credentials (basic auth) are never
//! shown: messages print it without them.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE;
use base64::Engine as _;

use crate::redact::without_userinfo;
use crate::stream::StreamIdentity;

/// How long a push may take: a run's end is not held up by monitoring.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The job label of every group.
const JOB: &str = "edc_sync";

/// A Pushgateway's base URL, checked.
#[derive(Debug, Clone)]
pub(crate) struct Pushgateway {
    base: reqwest::Url,
    /// One client for every group a run pushes.
    http: reqwest::Client,
}

impl Pushgateway {
    /// `url` if it is an http(s) URL with a host and no query or fragment;
    /// else why not (named by the option).
    pub(crate) fn parse(url: &str) -> Result<Pushgateway, String> {
        // A query or fragment may carry a token (`?token=`, `#access_token=`):
        // a refusal names the URL up to them, never them.
        let shown = match without_userinfo(url) {
            u if u.contains(['?', '#']) => format!("{}?…", &u[..u.find(['?', '#']).unwrap_or(u.len())]),
            u => u,
        };
        let base =
            reqwest::Url::parse(url).map_err(|e| format!("--metrics-push {shown}: not a URL ({e})"))?;
        if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
            return Err(format!(
                "--metrics-push {shown}: a Pushgateway is reached over http:// or https:// with a host"
            ));
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(format!(
                "--metrics-push {shown}: give the Pushgateway's base URL, without a query or fragment"
            ));
        }
        Ok(Pushgateway { base, http: client() })
    }

    /// The group of `stream` of `base`:
    /// `/metrics/job/edc_sync/vendor@base64/…/stream@base64/…`.
    fn group(&self, base: &StreamIdentity, stream: &str) -> reqwest::Url {
        let mut path = self.base.path().trim_end_matches('/').to_string();
        path.push_str(&format!("/metrics/job/{JOB}"));
        for (name, value) in [
            ("vendor", base.vendor.as_str()),
            ("tenant", base.tenant.as_deref().unwrap_or("")),
            ("study", base.study.as_deref().unwrap_or("")),
            ("protocol_version", base.protocol_version.as_deref().unwrap_or("")),
            ("stream", stream),
        ] {
            // The Pushgateway's spelling of an empty value is a lone `=`.
            let encoded = match value.is_empty() {
                true => "=".to_string(),
                false => URL_SAFE.encode(value),
            };
            path.push_str(&format!("/{name}@base64/{encoded}"));
        }
        let mut url = self.base.clone();
        url.set_path(&path);
        url
    }

    fn shown(&self) -> String {
        without_userinfo(self.base.as_str())
    }

    /// POSTs `text` (the exposition format) to the group of `stream`.
    pub(crate) async fn push(&self, base: &StreamIdentity, stream: &str, text: &str) {
        let sent = self
            .http
            .post(self.group(base, stream))
            .header(reqwest::header::CONTENT_TYPE, "text/plain; version=0.0.4")
            .body(text.to_string())
            .send()
            .await;
        self.report("pushed to", sent).await;
    }

    /// Deletes the group of `stream` of `base`, if the Pushgateway has it.
    pub(crate) async fn forget(&self, base: &StreamIdentity, stream: &str) {
        let sent = self.http.delete(self.group(base, stream)).send().await;
        self.report("removed from", sent).await;
    }

    async fn report(&self, what: &str, sent: reqwest::Result<reqwest::Response>) {
        let why = match sent {
            Ok(r) if r.status().is_success() => return,
            Ok(r) => {
                let status = r.status();
                let body = r.text().await.unwrap_or_default();
                format!("{status}: {}", body.trim().chars().take(200).collect::<String>())
            }
            Err(e) => crate::redact::redact_arg(&e.without_url().to_string()),
        };
        tracing::warn!(
            "metrics were not {what} the Pushgateway {}: {why} (the run's result is unchanged)",
            self.shown()
        );
    }
}

fn client() -> reqwest::Client {
    // The TLS stack's provider, as the EDC client installs it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(TIMEOUT)
        .connect_timeout(TIMEOUT)
        .user_agent(concat!("edc-sync/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::Pushgateway;
    use crate::stream::StreamIdentity;

    #[test]
    fn a_groups_values_are_base64url_and_an_empty_one_is_a_lone_equals_sign() {
        let gateway = Pushgateway::parse("http://user:pw@pushgateway:9091/prefix/").unwrap();
        let base = StreamIdentity {
            vendor: "veeva_vault".into(),
            tenant: None,
            study: Some("S/001".into()),
            protocol_version: None,
            stream: None,
        };
        let url = gateway.group(&base, "audit_trail");
        assert_eq!(
            url.path(),
            "/prefix/metrics/job/edc_sync/vendor@base64/dmVldmFfdmF1bHQ=/tenant@base64/=/study@base64/Uy8wMDE=\
             /protocol_version@base64/=/stream@base64/YXVkaXRfdHJhaWw="
        );
        assert!(!gateway.shown().contains("pw"));
    }

    #[test]
    fn only_a_base_http_url_is_taken() {
        for bad in [
            "ftp://pushgateway:9091",
            "pushgateway:9091",
            "http://",
            "http://gw:9091/?x=1",
            "http://gw/#f",
        ] {
            let why = Pushgateway::parse(bad).unwrap_err();
            assert!(why.starts_with("--metrics-push"), "{bad}: {why}");
        }
        assert!(Pushgateway::parse("https://gw.example/").is_ok());
        assert!(!Pushgateway::parse("ftp://u:secret@gw")
            .unwrap_err()
            .contains("secret"));
    }
}

//! A vendor that exists only in the tests, to hold the claim that adding a
//! vendor is its folder: it is this folder, its variant of the delta kind
//! (`kind.rs`) and the one line that names it there, and it runs a sync
//! through the page loop unchanged.
//!
//! It reads a JSON endpoint by keyset: each next page is the page's own
//! request with `modified_since` moved to the page's largest cursor value,
//! whatever next link the server sends, until a page comes back short. The
//! loop sends, lands, commits and audits; the toy decides what follows.

use reqwest::Url;

/// The name a policy's vendor block takes to be read by the toy.
pub(super) const NAME: &str = "toy_keyset";

/// What follows a page of `records` records that asked `url` (asking for
/// `page_size`), whose largest cursor value was `high_water`: the same
/// request from after that value, or nothing after a short page.
pub(super) fn next(
    url: &Url,
    records: u64,
    page_size: u32,
    cursor_param: &str,
    high_water: Option<&str>,
) -> Option<Url> {
    let after = high_water.filter(|_| records >= u64::from(page_size))?;
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| k != cursor_param && k != "offset")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let mut next = url.clone();
    next.query_pairs_mut()
        .clear()
        .extend_pairs(kept)
        .append_pair(cursor_param, after);
    Some(next)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::ledger::StateLocation;
    use crate::run::{Endpoint, PacerChoice, RunSpec, Streams};

    const PAGE: u32 = 10;

    /// A policy naming the toy, against the simulator's JSON endpoint; its
    /// paging style is one the config knows, which the toy overrules.
    fn policy() -> String {
        format!(
            r#"{}:
  base_url_env: TOY_BASE_URL
  token_env: TOY_TOKEN
  sustained_rate_per_sec: 1000
  burst_capacity: 100
  bucket_key: "rl:toy:{{study}}"
  delta:
    path: /api/v24.1/query/audit_trail
    format: json
    paging: json_next
    records_pointer: /data
    cursor_param: modified_since
    cursor_field: modified_date__v
    page_size_param: limit
    page_size: {PAGE}
"#,
            super::NAME
        )
    }

    /// A vendor defined only in this folder syncs through the page loop:
    /// every record lands once, and every request after the first is the
    /// toy's keyset request, not the server's next link.
    #[test]
    fn a_vendor_that_is_only_its_folder_syncs_through_the_loop() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let sim = rt
            .block_on(edc_sim::Simulator::start(
                edc_sim::SimConfig {
                    dataset: edc_sim::Dataset {
                        subjects: 3,
                        records: 25,
                        seed: 1,
                        padding: 0,
                    },
                    latency: Duration::ZERO,
                    ..edc_sim::SimConfig::default()
                },
                "127.0.0.1:0".parse().unwrap(),
            ))
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("rate_limits.yaml");
        std::fs::write(&config, policy()).unwrap();
        let spec = RunSpec {
            config,
            allow_dirty: true,
            vendor: super::NAME.into(),
            tenant: None,
            study: "S1".into(),
            protocol_version: None,
            streams: Streams::One("default".into()),
            out: dir.path().join("landing").into(),
            state: StateLocation::Dir(dir.path().join("state")),
            audit_log: dir.path().join("audit.jsonl"),
            pacer: PacerChoice::Local,
            options: Default::default(),
            endpoint: Some(Endpoint::bearer(sim.base_url(), "sim-token")),
            metrics: Default::default(),
            audit: Default::default(),
        };
        let result = crate::run::execute_blocking(spec).unwrap();
        assert!(
            result.outcome.is_ok(),
            "{:?}",
            result.outcome.err().map(|e| e.to_string())
        );
        let mut urls = Vec::new();
        let mut records = 0;
        crate::audit::each_event(&dir.path().join("audit.jsonl"), "page_committed", |_, line| {
            urls.push(line["url"].as_str().unwrap().to_string());
            records += line["records"].as_u64().unwrap();
        })
        .unwrap();
        assert_eq!(records, 25, "{urls:#?}");
        assert_eq!(urls.len(), 3, "{urls:#?}");
        assert!(urls.iter().all(|u| !u.contains("offset=")), "{urls:#?}");
        assert!(
            urls[1..].iter().all(|u| u.contains("modified_since=")),
            "{urls:#?}"
        );
    }
}

//! Hostile inputs, each through the real page loop or the real binary: a
//! clear error, no state change, no crash.

use crate::support;

use std::path::PathBuf;

use edc_core::run::{self, Endpoint, PacerChoice, RunResult, RunSpec, Streams};
use edc_core::sync::SyncOptions;
use edc_sim::{Dataset, FaultSchedule, SimConfig, Simulator};

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("policies.yaml"), support::SIM_POLICIES).unwrap();
        Fixture { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    async fn run(&self, vendor: &str, faults: &[&str]) -> (RunResult, Simulator) {
        let mut schedule = FaultSchedule::default();
        for f in faults {
            let (n, fault) = FaultSchedule::parse_entry(f).unwrap();
            schedule.insert(n, fault);
        }
        let config = SimConfig {
            dataset: Dataset {
                subjects: 5,
                records: 100,
                seed: 3,
                padding: 0,
            },
            faults: schedule,
            ..SimConfig::default()
        };
        let sim = Simulator::start(config, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let spec = RunSpec {
            config: self.path("policies.yaml"),
            allow_dirty: true,
            vendor: vendor.into(),
            tenant: None,
            study: "S".into(),
            protocol_version: None,
            streams: Streams::One("default".into()),
            out: self.path("landing").into(),
            state: self.path("state").into(),
            audit_log: self.path("audit.jsonl"),
            pacer: PacerChoice::Local,
            options: SyncOptions::default(),
            metrics: Default::default(),
            audit: Default::default(),
            endpoint: Some(Endpoint::bearer(sim.base_url(), "sim-token")),
        };
        (run::execute(spec).await.unwrap(), sim)
    }

    fn events(&self, name: &str) -> Vec<serde_json::Value> {
        let path = self.path("audit.jsonl");
        assert!(path.exists(), "no audit trail at {}", path.display());
        support::audit_events(&path, name)
    }

    fn manifest_len(&self, vendor: &str) -> usize {
        std::fs::read_to_string(self.path(&format!("landing/{vendor}/-/S/-/default/manifest.jsonl")))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

fn code(r: &RunResult) -> u8 {
    r.outcome.as_ref().err().map_or(0, |e| e.exit().code())
}

fn message(r: &RunResult) -> String {
    r.outcome
        .as_ref()
        .err()
        .map(|e| format!("{e:#}"))
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_retry_after_values_fall_back_to_the_default() {
    let fx = Fixture::new();
    // Two throttles per page (max_retry_attempts: 3): requests 2-3 and 5-6.
    let faults = [
        "2=429:raw:-1",
        "3=429:raw:abc",
        "5=429:raw:1e12",
        "6=429:raw:Thu, 01 Jan 1970 00:00:00 GMT",
    ];
    let (r, _) = fx.run("vault_json", &faults).await;
    assert_eq!(code(&r), 0, "{}", message(&r));
    let lines = fx.events("rate_limited");
    let seen: Vec<(String, f64)> = lines
        .iter()
        .map(|l| {
            (
                l["retry_after_source"].as_str().unwrap().to_string(),
                l["retry_after_s"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("unparseable".into(), 1.0),
            ("unparseable".into(), 1.0),
            ("unparseable".into(), 1.0),
            ("date".into(), 0.0)
        ]
    );
    assert_eq!(
        lines[0]["retry_after_raw"], "-1",
        "the raw header is kept for the reviewer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_in_2999_ends_the_run_instead_of_sleeping() {
    let fx = Fixture::new();
    let (r, sim) = fx
        .run("vault_json", &["2=429:raw:Tue, 01 Jan 2999 00:00:00 GMT"])
        .await;
    assert_eq!(code(&r), 75);
    assert_eq!(sim.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_and_file_next_links_are_refused() {
    for link in ["javascript:alert(1)", "file:///etc/passwd"] {
        let fx = Fixture::new();
        let (r, _) = fx
            .run("vault_link", &[&format!("1=cross-origin-next:{link}")])
            .await;
        assert_eq!(code(&r), 65, "{link}: {}", message(&r));
        assert!(
            message(&r).contains("leaves the configured origin"),
            "{}",
            message(&r)
        );
        assert_eq!(fx.manifest_len("vault_link"), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_link_that_loops_back_is_refused() {
    let fx = Fixture::new();
    // Page 2 points back at page 1.
    let (r, _) = fx
        .run(
            "vault_json",
            &["2=cross-origin-next:/api/v24.1/query/audit_trail?limit=40"],
        )
        .await;
    assert_eq!(code(&r), 65, "{}", message(&r));
    assert!(
        message(&r).contains("repeats a page already fetched"),
        "{}",
        message(&r)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_link_that_never_ends_is_bounded() {
    let fx = Fixture::new();
    let policies = support::SIM_POLICIES.replacen(
        "    page_size: 40\n",
        "    page_size: 40\n    max_pages_per_window: 6\n",
        1,
    );
    std::fs::write(fx.path("policies.yaml"), policies).unwrap();
    let (r, sim) = fx.run("vault_json", &["1=endless"]).await;
    assert_eq!(code(&r), 65, "{}", message(&r));
    assert!(
        message(&r).contains("still going after 6 pages"),
        "{}",
        message(&r)
    );
    assert_eq!(sim.requests().len(), 6, "it stopped at the bound");
    // The pages it fetched are real and committed; past the dataset's
    // end they hold no records, so they are audited but land no file.
    assert_eq!(
        fx.manifest_len("vault_json"),
        3,
        "the pages with records (100 in pages of 40) are landed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_cap_is_refused_with_65() {
    let fx = Fixture::new();
    let (r, _) = fx.run("vault_json", &["1=oversize:5000000"]).await;
    assert_eq!(code(&r), 65);
    assert!(message(&r).contains("exceeds max_body_bytes"), "{}", message(&r));
    assert_eq!(fx.manifest_len("vault_json"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalling_server_times_out_and_the_page_is_retried() {
    let fx = Fixture::new();
    // request_timeout_s: 2 in the test policy; the server stalls 5 s mid-body.
    let (r, _) = fx.run("vault_json", &["2=stall:5000"]).await;
    assert_eq!(code(&r), 0, "{}", message(&r));
    let retries = fx.events("retry_scheduled");
    assert_eq!(retries.len(), 1);
    assert!(
        retries[0]["reason"].as_str().unwrap().contains("timed out"),
        "{}",
        retries[0]
    );
    assert_eq!(fx.manifest_len("vault_json"), 3);
}

/// Headers that never come and a body that stalls are one failure, "the
/// EDC did not deliver": past the retry budget both exit 69, as the README says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_and_a_slow_body_exit_alike() {
    // request_timeout_s: 2, max_retry_attempts: 3 in the test policy.
    for fault in ["latency:3000", "stall:3000"] {
        let fx = Fixture::new();
        let faults: Vec<String> = (1..=3).map(|n| format!("{n}={fault}")).collect();
        let faults: Vec<&str> = faults.iter().map(String::as_str).collect();
        let (r, _) = fx.run("vault_json", &faults).await;
        assert_eq!(code(&r), 69, "{fault}: {}", message(&r));
        assert_eq!(fx.manifest_len("vault_json"), 0, "{fault}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_content_type_is_refused() {
    for (vendor, ct) in [("vault_json", "text/html"), ("rave", "application/json")] {
        let fx = Fixture::new();
        let (r, _) = fx.run(vendor, &[&format!("1=content-type:{ct}")]).await;
        assert_eq!(code(&r), 65, "{vendor}");
        assert!(message(&r).contains("Content-Type"), "{}", message(&r));
        assert_eq!(fx.manifest_len(vendor), 0);
    }
}

/// A compressed body was never asked for (Accept-Encoding: identity): it
/// is refused by its Content-Encoding, not reported as a JSON syntax error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressed_body_is_refused_by_name() {
    let fx = Fixture::new();
    let (r, sim) = fx.run("vault_json", &["1=gzip"]).await;
    assert_eq!(code(&r), 65);
    assert!(message(&r).contains("Content-Encoding: gzip"), "{}", message(&r));
    assert!(!message(&r).contains("line 1 column 1"), "{}", message(&r));
    assert_eq!(fx.manifest_len("vault_json"), 0);
    let asked = sim.requests();
    assert!(!asked.is_empty());
}

fn validate(text: &str) -> support::Outcome {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.yaml");
    std::fs::write(&path, text).unwrap();
    support::run(&["config", "validate", "--config", path.to_str().unwrap()])
}

#[test]
fn yaml_alias_bombs_and_huge_numbers_are_refused() {
    let bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n\
                c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n\
                e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n\
                g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n\
                i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n";
    let out = validate(bomb);
    assert_eq!(out.code, 78, "{}", out.stderr);
    let example = support::example_config();
    for (from, to, needle) in [
        (
            "sustained_rate_per_sec: 5 ",
            "sustained_rate_per_sec: 1e400 ",
            "veeva_vault.sustained_rate_per_sec",
        ),
        (
            "burst_capacity: 20 ",
            "burst_capacity: 99999999999999999999999 ",
            "veeva_vault.burst_capacity",
        ),
        (
            "max_concurrency: 4",
            "max_concurrency: 4000000000000",
            "veeva_vault.max_concurrency",
        ),
    ] {
        let out = validate(&example.replacen(from, to, 1));
        assert_eq!(out.code, 78, "{to}: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{}", out.stderr);
    }
}

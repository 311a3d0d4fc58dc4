//! The delta sync end to end: the real page loop against the simulator
//! over loopback, real files, real fsyncs; Redis where processes share a
//! quota. Timing is asserted only as order (a wait happened, nothing went
//! out early), never as speed.

use crate::support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use edc_core::audit::verify;
use edc_core::exit::Exit;
use edc_core::run::{self, Endpoint, PacerChoice, RunResult, RunSpec, Streams};
use edc_core::sync::SyncOptions;
use edc_sim::{Dataset, FaultSchedule, LogEntry, SimConfig, Simulator};

const TOKEN: &str = "sim-token";

/// A working directory with the test policies committed in a git repo.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = support::git_init(dir.path());
        std::fs::write(dir.path().join("policies.yaml"), support::SIM_POLICIES).unwrap();
        support::git_commit_all(&repo, "test policies");
        Fixture { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// Where `vendor`'s cursor stands once everything up to `high_water`
    /// is landed: the high-water mark less the policy's lookback.
    fn settled(&self, vendor: &str, high_water: &str) -> String {
        edc_core::sync::settled_window_start(&self.path("policies.yaml"), vendor, high_water).unwrap()
    }

    fn spec(&self, vendor: &str, sim: &Simulator) -> RunSpec {
        RunSpec {
            config: self.path("policies.yaml"),
            allow_dirty: false,
            vendor: vendor.into(),
            tenant: None,
            study: "Mediflex(Prod)".into(),
            protocol_version: None,
            streams: Streams::One("default".into()),
            out: self.path("landing").into(),
            state: self.path("state").into(),
            audit_log: self.path("audit.jsonl"),
            pacer: PacerChoice::Local,
            options: SyncOptions::default(),
            metrics: Default::default(),
            audit: Default::default(),
            endpoint: Some(Endpoint::bearer(sim.base_url(), TOKEN)),
        }
    }

    fn audit(&self) -> Vec<serde_json::Value> {
        let path = self.path("audit.jsonl");
        assert!(path.exists(), "no audit trail at {}", path.display());
        support::audit_lines(&path)
    }

    fn events(&self, name: &str) -> Vec<serde_json::Value> {
        self.audit().into_iter().filter(|l| l["event"] == name).collect()
    }

    fn stream_dir(&self, vendor: &str, stream: &str) -> PathBuf {
        self.path(&format!("landing/{vendor}/-/Mediflex(Prod)/-/{stream}"))
    }

    fn manifest(&self, vendor: &str, stream: &str) -> Vec<serde_json::Value> {
        let path = self.stream_dir(vendor, stream).join("manifest.jsonl");
        match std::fs::read_to_string(path) {
            Ok(text) => text.lines().map(|l| serde_json::from_str(l).unwrap()).collect(),
            Err(_) => Vec::new(),
        }
    }

    fn cursor(&self, vendor: &str, stream: &str) -> serde_json::Value {
        let path = self.path(&format!("state/{vendor}/-/Mediflex(Prod)/-/{stream}.cursor.json"));
        std::fs::read_to_string(path)
            .map(|t| serde_json::from_str(&t).unwrap())
            .unwrap_or(serde_json::Value::Null)
    }
}

fn dataset(records: u32) -> Dataset {
    Dataset {
        subjects: 9,
        records,
        seed: 5,
        padding: 0,
    }
}

async fn start_sim(records: u32, faults: &[&str]) -> Simulator {
    start_sim_with(SimConfig {
        dataset: dataset(records),
        faults: schedule(faults),
        ..SimConfig::default()
    })
    .await
}

async fn start_sim_with(config: SimConfig) -> Simulator {
    Simulator::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

fn schedule(faults: &[&str]) -> FaultSchedule {
    let mut s = FaultSchedule::default();
    for f in faults {
        let (n, fault) = FaultSchedule::parse_entry(f).unwrap();
        s.insert(n, fault);
    }
    s
}

fn exit_of(result: &RunResult) -> u8 {
    match &result.outcome {
        Ok(()) => 0,
        Err(e) => e.exit().code(),
    }
}

fn ts_us(line: &serde_json::Value) -> i64 {
    let ts = line["ts"].as_str().unwrap();
    let t = humantime::parse_rfc3339(ts).unwrap();
    t.duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64
}

/// Record ids in the landed pages the manifest lists, each hash-checked.
fn landed_record_ids(fx: &Fixture, vendor: &str, stream: &str) -> Vec<String> {
    edc_qualify::landed::landed_json_record_ids(&fx.stream_dir(vendor, stream)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_multi_page_window() {
    let fx = Fixture::new();
    let sim = start_sim(130, &[]).await;
    let result = run::execute(fx.spec("vault_json", &sim)).await.unwrap();
    assert_eq!(exit_of(&result), 0, "{:?}", result.outcome);
    assert_eq!((result.reports[0].pages, result.reports[0].records), (4, 130));
    assert_eq!(fx.manifest("vault_json", "default").len(), 4);
    let ids = landed_record_ids(&fx, "vault_json", "default");
    assert_eq!(ids.len(), 130);
    let cursor = fx.cursor("vault_json", "default");
    assert_eq!(
        cursor["window_start"],
        fx.settled("vault_json", &dataset(130).record(130).modified)
    );
    assert_eq!(cursor["next_page"], serde_json::Value::Null);
    assert!(verify(&fx.path("audit.jsonl")).unwrap().intact());
    let header = &fx.audit()[0];
    assert_eq!(header["event"], "run_started");
    assert_eq!(
        header["config_dirty"], false,
        "the policy is committed in the fixture's repo"
    );
    assert!(header["config_git_commit"].as_str().unwrap().len() == 40);
    assert_eq!(fx.events("run_finished")[0]["exit_code"], 0);
    // A second run finds nothing new and lands nothing.
    let again = run::execute(fx.spec("vault_json", &sim)).await.unwrap();
    assert_eq!((exit_of(&again), again.reports[0].records), (0, 0));
    assert_eq!(landed_record_ids(&fx, "vault_json", "default").len(), 130);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_then_200_retries_the_same_page_after_the_wait() {
    let fx = Fixture::new();
    let sim = start_sim(100, &["2=429:seconds:1"]).await;
    let result = run::execute(fx.spec("vault_json", &sim)).await.unwrap();
    assert_eq!(exit_of(&result), 0);
    let reqs = sim.requests();
    assert_eq!(reqs[1].status, 429);
    assert_eq!(reqs[1].path, reqs[2].path, "the retry asks for the same page");
    assert!(
        reqs[2].t_us - reqs[1].t_us >= 1_000_000,
        "Retry-After: 1 was honoured"
    );
    let limited = &fx.events("rate_limited")[0];
    assert_eq!(
        (
            limited["retry_after_source"].as_str(),
            limited["retry_after_s"].as_f64()
        ),
        (Some("seconds"), Some(1.0))
    );
    let pages = fx.events("page_committed");
    assert_eq!(
        pages[1]["cursor_before"], pages[0]["cursor_after"],
        "the cursor did not move on the 429"
    );
    assert_eq!(pages[1]["attempt"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_as_an_http_date_and_absent() {
    let fx = Fixture::new();
    let sim = start_sim(100, &["2=429:date:2", "4=429:absent"]).await;
    let result = run::execute(fx.spec("vault_json", &sim)).await.unwrap();
    assert_eq!(exit_of(&result), 0);
    let limited = fx.events("rate_limited");
    assert_eq!(limited[0]["retry_after_source"], "date");
    let waited = limited[0]["retry_after_s"].as_f64().unwrap();
    assert!(waited > 0.5 && waited <= 2.0, "{waited}");
    let reqs = sim.requests();
    assert!(
        (reqs[2].t_us - reqs[1].t_us) as f64 >= waited * 1e6,
        "the date was honoured"
    );
    assert_eq!(limited[1]["retry_after_source"], "absent");
    assert_eq!(limited[1]["retry_after_s"], 1.0, "default_retry_after_s");
    assert!(reqs[4].t_us - reqs[3].t_us >= 1_000_000);
}

/// A `Date` header that does not parse is recorded as what it said, not
/// as absent: the reviewer sees the server sent garbage, and the local
/// clock was used instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_date_header_is_recorded_as_unreadable_not_absent() {
    let fx = Fixture::new();
    let sim = start_sim(100, &["2=429:bad-date:not a date at all"]).await;
    let result = run::execute(fx.spec("vault_json", &sim)).await.unwrap();
    assert_eq!(exit_of(&result), 0);
    let limited = fx.events("rate_limited");
    assert_eq!(limited[0]["server_date"], serde_json::Value::Null);
    assert_eq!(limited[0]["server_date_unreadable"], "not a date at all");
    assert_eq!(limited[1..].len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limited_line_is_on_disk_before_the_next_request_arrives() {
    let fx = Fixture::new();
    let sim = start_sim(100, &["2=429:seconds:1", "3=503:seconds:1"]).await;
    run::execute(fx.spec("vault_json", &sim)).await.unwrap();
    let reqs = sim.requests();
    let limited = fx.events("rate_limited");
    assert_eq!(limited.len(), 2);
    for (line, next) in limited.iter().zip([&reqs[2], &reqs[3]]) {
        assert!(
            ts_us(line) < next.t_us,
            "audit line at {} but the next request arrived at {}",
            line["ts"],
            next.ts
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhaustion_exits_75_with_the_cursor_unchanged() {
    let fx = Fixture::new();
    // max_retry_attempts: 3 -> requests 2, 3 and 4 are all throttled.
    let sim = start_sim(100, &["2=429:seconds:0", "3=429:seconds:0", "4=429:seconds:0"]).await;
    let result = run::execute(fx.spec("vault_json", &sim)).await.unwrap();
    assert_eq!(exit_of(&result), 75, "{:?}", result.outcome);
    let pages = fx.events("page_committed");
    assert_eq!(pages.len(), 1);
    let cursor = fx.cursor("vault_json", "default");
    assert_eq!(
        cursor["next_page"], pages[0]["cursor_after"]["next_page"],
        "cursor stays on the last committed page"
    );
    let exhausted = fx.events("quota_exhausted");
    assert_eq!(exhausted.len(), 1);
    assert!(exhausted[0]["reason"]
        .as_str()
        .unwrap()
        .contains("retry budget of 3"));
    assert_eq!(fx.events("run_finished")[0]["exit_code"], 75);
    // The next run resumes on that page and completes.
    let resumed = run::execute(fx.spec("vault_json", &sim)).await.unwrap();
    assert_eq!(exit_of(&resumed), 0);
    assert_eq!(landed_record_ids(&fx, "vault_json", "default").len(), 100);
}

/// A 429 on a quota with a fixed window (`window_quota`) marks the window
/// spent: the retry waits for the window that began at the first call to
/// end, although the answer asked for no wait at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_on_a_windowed_quota_waits_for_the_window_to_end() {
    let fx = Fixture::new();
    let sim = start_sim(100, &["2=429:absent"]).await;
    let mut spec = fx.spec("windowed", &sim);
    spec.study = "Mediflex(Prod)".into();
    let result = run::execute(spec).await.unwrap();
    assert_eq!(exit_of(&result), 0, "{:?}", result.outcome);
    let limited = fx.events("rate_limited");
    assert_eq!(limited.len(), 1);
    assert_eq!(limited[0]["window_spent"], true, "{}", limited[0]);
    assert_eq!(limited[0]["retry_after_s"], 0.0, "default_retry_after_s is 0");
    let reqs = sim.requests();
    assert_eq!(reqs[1].status, 429);
    assert!(
        reqs[2].t_us - reqs[0].t_us >= 900_000,
        "the retry went {} us after the window's first call",
        reqs[2].t_us - reqs[0].t_us
    );
    // No window of a second from any request holds more than 3 calls.
    for (i, r) in reqs.iter().enumerate() {
        let within = reqs[i..].iter().filter(|o| o.t_us - r.t_us < 1_000_000).count();
        assert!(within <= 3, "{within} calls within a second of request {i}");
    }
    assert_eq!(landed_record_ids(&fx, "windowed", "default").len(), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_beyond_max_wait_exits_75_without_sleeping() {
    let fx = Fixture::new();
    let sim = start_sim(100, &["2=429:seconds:86400"]).await;
    let result = run::execute(fx.spec("vault_json", &sim)).await.unwrap();
    assert_eq!(exit_of(&result), 75);
    assert!(fx.events("quota_exhausted")[0]["reason"]
        .as_str()
        .unwrap()
        .contains("exceeds max_wait_s"));
    assert_eq!(sim.requests().len(), 2, "no further request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5xx_then_success_and_a_truncated_body_is_never_committed() {
    let fx = Fixture::new();
    let sim = start_sim(100, &["2=500", "4=truncate"]).await;
    let result = run::execute(fx.spec("vault_json", &sim)).await.unwrap();
    assert_eq!(exit_of(&result), 0, "{:?}", result.outcome);
    let retries = fx.events("retry_scheduled");
    assert_eq!(retries.len(), 2);
    assert!(retries[0]["reason"].as_str().unwrap().contains("500"));
    assert!(
        retries[1]["reason"].as_str().unwrap().contains("truncated"),
        "{}",
        retries[1]
    );
    let ids = landed_record_ids(&fx, "vault_json", "default");
    assert_eq!(ids.len(), 100, "every record once, no partial page");
    let pages_dir = fx.stream_dir("vault_json", "default").join("pages");
    assert_eq!(std::fs::read_dir(pages_dir).unwrap().count(), 3);
    assert_eq!(
        std::fs::read_dir(fx.stream_dir("vault_json", "default").join(".tmp"))
            .unwrap()
            .count(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_json_and_invalid_odm_exit_65_with_nothing_committed() {
    for vendor in ["vault_json", "rave"] {
        let fx = Fixture::new();
        let sim = start_sim(100, &["2=garbage"]).await;
        let result = run::execute(fx.spec(vendor, &sim)).await.unwrap();
        assert_eq!(exit_of(&result), 65, "{vendor}: {:?}", result.outcome);
        assert_eq!(
            fx.manifest(vendor, "default").len(),
            1,
            "{vendor}: only the first page"
        );
        let failed = &fx.events("request_failed")[0];
        assert!(failed["reason"].as_str().unwrap().contains("invalid"), "{failed}");
        // Named relative to the landing root, like every recorded path.
        let quarantined = fx.path("landing").join(failed["quarantined"].as_str().unwrap());
        assert!(
            quarantined.exists(),
            "the bad page is kept aside for investigation"
        );
        let cursor = fx.cursor(vendor, "default");
        assert_eq!(
            cursor["next_page"],
            fx.events("page_committed")[0]["cursor_after"]["next_page"]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_origin_next_link_is_refused_and_the_token_not_sent() {
    let fx = Fixture::new();
    let other = start_sim(10, &[]).await;
    let evil = format!("{}/api/v24.1/query/audit_trail?offset=40", other.base_url());
    let sim = start_sim(100, &[&format!("1=cross-origin-next:{evil}")]).await;
    let result = run::execute(fx.spec("vault_json", &sim)).await.unwrap();
    assert_eq!(exit_of(&result), 65);
    assert!(other.requests().is_empty(), "the other origin was contacted");
    assert!(
        fx.manifest("vault_json", "default").is_empty(),
        "the page with the bad link is not committed"
    );
    assert!(sim
        .requests()
        .iter()
        .all(|r| r.method == "GET" || r.method == "HEAD"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_codes_map_to_exit_codes() {
    for (fault, code) in [("1=401", 77), ("1=403", 77), ("1=404", 65)] {
        let fx = Fixture::new();
        let sim = start_sim(10, &[fault]).await;
        let result = run::execute(fx.spec("vault_json", &sim)).await.unwrap();
        assert_eq!(exit_of(&result), code, "{fault}");
        assert!(
            fx.cursor("vault_json", "default").is_null(),
            "{fault}: no cursor written"
        );
        let text = format!("{:#}", result.outcome.unwrap_err());
        assert!(!text.contains(TOKEN), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dirty_policy_is_refused_before_anything_happens() {
    let fx = Fixture::new();
    std::fs::write(
        fx.path("policies.yaml"),
        support::SIM_POLICIES.replace("page_size: 40", "page_size: 41"),
    )
    .unwrap();
    let sim = start_sim(10, &[]).await;
    let err = run::execute(fx.spec("vault_json", &sim))
        .await
        .err()
        .expect("refused");
    assert_eq!(err.exit(), Exit::Config);
    assert!(
        err.to_string()
            .contains("differs from the version committed at HEAD"),
        "{err}"
    );
    assert!(sim.requests().is_empty() && !fx.path("audit.jsonl").exists());
    let mut spec = fx.spec("vault_json", &sim);
    spec.allow_dirty = true;
    let result = run::execute(spec).await.unwrap();
    assert_eq!(exit_of(&result), 0);
    let header = &fx.audit()[0];
    assert_eq!(
        (header["config_dirty"].as_bool(), header["allow_dirty"].as_bool()),
        (Some(true), Some(true))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rave_odm_resumes_from_the_next_start_id() {
    let fx = Fixture::new();
    let sim = start_sim(90, &[]).await;
    let result = run::execute(fx.spec("rave", &sim)).await.unwrap();
    assert_eq!((exit_of(&result), result.reports[0].records), (0, 90));
    let cursor = fx.cursor("rave", "default");
    assert_eq!(
        cursor["window_start"],
        (dataset(90).record(90).source_id + 1).to_string()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vault_burst_at_the_floor_slows_the_quota_and_says_why() {
    let fx = Fixture::new();
    // vault_json's block only: the fixture file holds every consumer's vendors.
    let at = support::SIM_POLICIES.find("\nvault_json:").unwrap();
    let (before, block) = support::SIM_POLICIES.split_at(at);
    let policies = format!(
        "{before}{}",
        block.replacen(
            "  max_retry_attempts: 3\n",
            "  max_retry_attempts: 3\n  vendor_burst_floor: 3\n",
            1
        )
    );
    std::fs::write(fx.path("policies.yaml"), policies).unwrap();
    let sim = start_sim_with(SimConfig {
        dataset: dataset(100),
        vault_burst: Some(6),
        ..SimConfig::default()
    })
    .await;
    let mut spec = fx.spec("vault_json", &sim);
    spec.allow_dirty = true;
    let result = run::execute(spec).await.unwrap();
    assert_eq!(exit_of(&result), 0, "{:?}", result.outcome);
    let pages = fx.events("page_committed");
    assert_eq!(
        pages[0]["quota_headers"]["x-vaultapi-burstlimitremaining"], "5",
        "vendor quota headers are recorded"
    );
    assert_eq!(pages[0]["quota_headers"]["x-vaultapi-burstlimit"], "6");
    let low = fx.events("vendor_burst_low");
    assert_eq!(low.len(), 1, "only the third page reaches the floor");
    assert_eq!(
        (low[0]["burst_remaining"].as_u64(), low[0]["floor"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(
        low[0]["pause_s"], 50.0,
        "300 s / a burst limit of 6: the pace that spends no more than the limit"
    );
    assert!(low[0]["reason"].as_str().unwrap().contains("vendor_burst_floor"));
}

/// The vault_json block at Vault's burst floor (floor 2996 of the
/// simulator's 3000 calls per 5 minutes: one call per 100 ms there) with
/// pages of 5 and `streams`, written uncommitted; and the simulator.
async fn at_the_burst_floor(fx: &Fixture, streams: &str) -> Simulator {
    let at = support::SIM_POLICIES.find("\nvault_json:").unwrap();
    let (before, block) = support::SIM_POLICIES.split_at(at);
    let block = block
        .replacen(
            "  max_retry_attempts: 3\n",
            "  max_retry_attempts: 3\n  vendor_burst_floor: 2996\n",
            1,
        )
        .replacen("    page_size: 40\n", &format!("    page_size: 5\n{streams}"), 1);
    std::fs::write(fx.path("policies.yaml"), format!("{before}{block}")).unwrap();
    start_sim_with(SimConfig {
        dataset: dataset(100),
        vault_burst: Some(3000),
        ..SimConfig::default()
    })
    .await
}

/// No more than one request per 100 ms once every answer is at the floor
/// (from the 4th request on), give or take the two in flight. Only a lower
/// bound on time: a slow machine cannot fail it.
#[track_caller]
fn assert_one_per_100_ms_at_the_floor(requests: &[LogEntry], who: &str) {
    assert_eq!(requests.len(), 2 * 20, "20 pages of 5 for each of two");
    let slow: Vec<i64> = requests[4..].iter().map(|r| r.t_us).collect();
    let span_s = (slow[slow.len() - 1] - slow[0]) as f64 / 1e6;
    assert!(
        (slow.len() - 1) as f64 <= span_s / 0.1 + 2.0,
        "{} requests in {span_s:.2} s at the floor: more than one per 100 ms across {who}",
        slow.len() - 1
    );
}

/// Two streams on one vault whose burst allowance is at the floor: together
/// they send no faster than the limit allows (a pause that let both go at
/// once sent twice that). Measured from the simulator's arrival times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_streams_at_the_vault_burst_floor_together_keep_to_the_announced_limit() {
    let fx = Fixture::new();
    let sim = at_the_burst_floor(&fx, "  streams:\n    first: {}\n    second: {}\n").await;
    let mut spec = fx.spec("vault_json", &sim);
    spec.allow_dirty = true;
    spec.streams = Streams::All;
    let result = run::execute(spec).await.unwrap();
    assert_eq!(exit_of(&result), 0, "{:?}", result.outcome);
    assert_one_per_100_ms_at_the_floor(&sim.requests(), "both streams");
    assert!(!fx.events("vendor_burst_low").is_empty());
}

/// Two studies of one vault, each with its own bucket_key, in two runs at
/// once over Redis: Vault's burst allowance is the vault's, so at the floor
/// the two together keep to it (each run pacing only its own quota sent
/// twice as much).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_studies_on_one_vault_at_the_burst_floor_together_keep_to_the_limit() {
    let redis = support::redis::start();
    let fx = Fixture::new();
    let sim = at_the_burst_floor(&fx, "").await;
    let run = |study: &str| {
        let mut spec = fx.spec("vault_json", &sim);
        spec.allow_dirty = true;
        spec.study = study.into();
        spec.pacer = PacerChoice::Redis(redis.url());
        run::execute(spec)
    };
    let (a, b) = tokio::join!(run("STUDY-A"), run("STUDY-B"));
    assert_eq!(exit_of(&a.unwrap()), 0);
    assert_eq!(exit_of(&b.unwrap()), 0);
    assert_one_per_100_ms_at_the_floor(&sim.requests(), "both studies");
}

/// A stream's own `lookback` replaces its delta's for that stream alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streams_own_lookback_overrides_the_deltas() {
    let fx = Fixture::new();
    let at = support::SIM_POLICIES.find("\nvault_json:").unwrap();
    let (before, block) = support::SIM_POLICIES.split_at(at);
    let block = block.replacen(
        "    page_size: 40\n",
        "    page_size: 40\n  streams:\n    exact:\n      lookback:\n        seconds: 0\n    wide:\n      lookback:\n        seconds: 600\n    inherited: {}\n",
        1,
    );
    std::fs::write(fx.path("policies.yaml"), format!("{before}{block}")).unwrap();
    let sim = start_sim(30, &[]).await;
    let mut spec = fx.spec("vault_json", &sim);
    spec.allow_dirty = true;
    spec.streams = Streams::All;
    assert_eq!(exit_of(&run::execute(spec).await.unwrap()), 0);
    let hw = dataset(30).record(30).modified;
    let start = |stream: &str| fx.cursor("vault_json", stream)["window_start"].clone();
    assert_eq!(start("exact"), hw.as_str());
    assert_eq!(
        start("wide"),
        edc_core::edc::payload::earlier(&hw, 600).unwrap().as_str()
    );
    assert_eq!(
        start("inherited"),
        edc_core::edc::payload::earlier(&hw, 300).unwrap().as_str()
    );
}

// ---- crash safety ---------------------------------------------------------

fn sync_cmd(fx: &Fixture, vendor: &str, sim_url: &str, extra: &[&str]) -> std::process::Command {
    cli_cmd(fx, "sync", vendor, sim_url, extra)
}

/// `edc-sync <subcommand>` on the fixture's policy, dirs and simulator.
fn cli_cmd(
    fx: &Fixture,
    subcommand: &str,
    vendor: &str,
    sim_url: &str,
    extra: &[&str],
) -> std::process::Command {
    let mut cmd = support::edc_sync();
    cmd.args([subcommand, "--config"])
        .arg(fx.path("policies.yaml"))
        .args(["--vendor", vendor, "--study", "Mediflex(Prod)", "--out"])
        .arg(fx.path("landing"))
        .arg("--state")
        .arg(fx.path("state"))
        .arg("--audit-log")
        .arg(fx.path("audit.jsonl"))
        .args(extra)
        .env("EDC_SYNC_TEST_BASE_URL", sim_url)
        .env("EDC_SYNC_TEST_TOKEN", TOKEN)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_moments_loses_and_duplicates_nothing() {
    let fx = Fixture::new();
    let records = 200;
    let config = SimConfig {
        dataset: dataset(records),
        latency: Duration::from_millis(15),
        faults: schedule(&["7=429:seconds:0", "15=500", "23=truncate"]),
        ..SimConfig::default()
    };
    let sim = start_sim_with(config).await;
    let policies = support::SIM_POLICIES.replace("page_size: 40", "page_size: 7");
    std::fs::write(fx.path("policies.yaml"), policies).unwrap();
    // A deterministic spread of kill instants (no unseeded randomness).
    let mut seed: u64 = 0x5EED;
    let mut torn_seen = 0;
    for _round in 0..30 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let delay = Duration::from_millis(20 + (seed >> 33) % 120);
        let mut child = sync_cmd(
            &fx,
            "vault_json",
            &sim.base_url(),
            &["--pacer", "local", "--allow-dirty"],
        )
        .spawn()
        .unwrap();
        tokio::time::sleep(delay).await;
        let _ = child.kill();
        let _ = child.wait();
        let report = verify(&fx.path("audit.jsonl")).unwrap();
        match report.finding {
            None => {}
            Some(f) if f.damage == edc_core::audit::Damage::TornTail => torn_seen += 1,
            Some(f) => panic!("the audit trail is damaged beyond a torn tail: {f:?}"),
        }
    }
    // Then run to the end.
    let status = sync_cmd(
        &fx,
        "vault_json",
        &sim.base_url(),
        &["--pacer", "local", "--allow-dirty"],
    )
    .status()
    .unwrap();
    assert_eq!(status.code(), Some(0));
    let ids = landed_record_ids(&fx, "vault_json", "default");
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for id in &ids {
        *counts.entry(id).or_default() += 1;
    }
    let duplicates: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(duplicates.is_empty(), "records landed twice: {duplicates:?}");
    assert_eq!(counts.len(), records as usize, "every record landed");
    let cursor = fx.cursor("vault_json", "default");
    assert_eq!(
        cursor["window_start"],
        fx.settled("vault_json", &dataset(records).record(records).modified),
        "cursor at the high-water mark (less the lookback)"
    );
    let report = verify(&fx.path("audit.jsonl")).unwrap();
    assert!(
        report.intact(),
        "{report} (torn tails seen along the way: {torn_seen})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_has_its_own_cursor_and_never_moves_the_incremental_one() {
    let fx = Fixture::new();
    let sim = start_sim(200, &[]).await;
    let result = run::execute(fx.spec("vault_json", &sim)).await.unwrap();
    assert_eq!(exit_of(&result), 0);
    let incremental =
        std::fs::read(fx.path("state/vault_json/-/Mediflex(Prod)/-/default.cursor.json")).unwrap();
    let ds = dataset(200);
    let (since, until) = (ds.record(50).modified, ds.record(100).modified);
    for round in 0..2 {
        let args = ["--pacer", "local", "--since", &since, "--until", &until];
        let out = support::run_cmd(
            cli_cmd(&fx, "backfill", "vault_json", &sim.base_url(), &args)
                .stdout(std::process::Stdio::piped()),
        );
        assert_eq!(out.code, 0, "round {round}: {}", out.stderr);
    }
    let label = format!(
        "{}..{}",
        edc_core::store::sanitize(&since),
        edc_core::store::sanitize(&until)
    );
    let dir = fx.path(&format!(
        "landing/backfill/{label}/vault_json/-/Mediflex(Prod)/-/default"
    ));
    let manifest: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("manifest.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        manifest.len(),
        2,
        "records 51-90, then 91-130 crosses --until; the second run adds nothing"
    );
    assert_eq!(
        manifest
            .iter()
            .map(|m| m["records"].as_u64().unwrap())
            .sum::<u64>(),
        80
    );
    assert_eq!(
        std::fs::read(fx.path("state/vault_json/-/Mediflex(Prod)/-/default.cursor.json")).unwrap(),
        incremental,
        "the incremental cursor is untouched"
    );
    assert!(fx
        .path(&format!(
            "state/backfill/{label}/vault_json/-/Mediflex(Prod)/-/default.cursor.json"
        ))
        .exists());
    // `verify` from the roots the runs were given proves the incremental
    // stream and the backfill together, from the one trail.
    let verified =
        support::runs::verify_roots(&fx.path("landing"), &fx.path("state"), &fx.path("audit.jsonl"));
    assert_eq!(verified.code, 0, "{}{}", verified.stdout, verified.stderr);
    assert!(
        verified.stdout.contains("2 landing directories"),
        "{}",
        verified.stdout
    );
}

// ---- several processes, one quota -----------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_on_one_bucket_never_trip_the_servers_quota() {
    let redis = support::redis::start();
    let fx = Fixture::new();
    // The server's own quota equals the policy's: 10/s, burst 3.
    let config = SimConfig {
        dataset: dataset(60),
        quota: Some((10.0, 3)),
        ..SimConfig::default()
    };
    let sim = start_sim_with(config).await;
    let children: Vec<_> = ["s1", "s2", "s3"]
        .iter()
        .map(|s| {
            sync_cmd(
                &fx,
                "vault_streams",
                &sim.base_url(),
                &["--redis", &redis.url(), "--stream", s],
            )
            .spawn()
            .unwrap()
        })
        .collect();
    for mut child in children {
        let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
            .await
            .unwrap();
        assert_eq!(status.code(), Some(0));
    }
    let reqs: Vec<LogEntry> = sim.requests();
    let quota_429 = reqs
        .iter()
        .filter(|r| r.fault.as_deref() == Some("server_quota"))
        .count();
    assert_eq!(
        quota_429,
        0,
        "the server's quota was tripped {quota_429} time(s) in {} requests",
        reqs.len()
    );
    assert_eq!(reqs.len(), 3 * 12, "three streams of 60 records in pages of 5");
    for s in ["s1", "s2", "s3"] {
        assert_eq!(landed_record_ids(&fx, "vault_streams", s).len(), 60, "{s}");
    }
    assert!(verify(&fx.path("audit.jsonl")).unwrap().intact());
}

/// In a real multi-process `sync --redis`, a request
/// costs one script call (reservation, concurrency lease, release of the
/// previous lease and the run-lock check in one), plus a fixed three per
/// stream (run lock taken, last page's check, run lock given back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_spend_about_one_script_call_per_request() {
    let redis = support::redis::start();
    let fx = Fixture::new();
    let sim = start_sim_with(SimConfig {
        dataset: dataset(300),
        ..SimConfig::default()
    })
    .await;
    let mut admin = script_counter(&redis.url()).await;
    let children: Vec<_> = ["f1", "f2", "f3", "f4"]
        .iter()
        .map(|s| {
            sync_cmd(
                &fx,
                "vault_fanout",
                &sim.base_url(),
                &["--redis", &redis.url(), "--stream", s],
            )
            .spawn()
            .unwrap()
        })
        .collect();
    for mut child in children {
        let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
            .await
            .unwrap();
        assert_eq!(status.code(), Some(0));
    }
    let (calls, info) = script_calls_since(&mut admin).await;
    let requests = sim.requests().len();
    assert_eq!(requests, 4 * 60, "four streams of 300 records in pages of 5");
    let per_request = calls as f64 / requests as f64;
    eprintln!("{calls} script calls for {requests} requests: {per_request:.3} a request");
    assert!(
        per_request <= 1.1,
        "{calls} script calls for {requests} requests: {per_request:.2} a request (target 1.1)\n{info}"
    );
    for s in ["f1", "f2", "f3", "f4"] {
        assert_eq!(landed_record_ids(&fx, "vault_fanout", s).len(), 300, "{s}");
    }
}

/// A connection to the Redis at `url` whose count of script calls starts
/// now. The scripts are loaded first, once in a Redis's life: what is
/// measured is the cost of requests, not processes racing to the first
/// NOSCRIPT of a fresh server (3 to 5 failed calls and as many loads).
async fn script_counter(url: &str) -> redis::aio::MultiplexedConnection {
    let pacer = quota_pacer::RedisPacer::connect(url, edc_core::REDIS_KEY_PREFIX)
        .await
        .unwrap();
    pacer.load_scripts().await.unwrap();
    edc_core::store::load_run_lock_script(&pacer).await.unwrap();
    edc_core::audit::load_anchor_script(&pacer).await.unwrap();
    let client = redis::Client::open(url).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut admin)
        .await
        .unwrap();
    admin
}

/// Script calls since [`script_counter`], and the `INFO` they were read from.
async fn script_calls_since(admin: &mut redis::aio::MultiplexedConnection) -> (u64, String) {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(admin)
        .await
        .unwrap();
    (edc_sync_bench::harness::script_calls(&info), info)
}

/// More streams of one quota than its concurrency cap, in one process,
/// at a rate that keeps the cap busy: they wait for the cap in one queue
/// and each yields its slot between pages to those waiting, so every
/// stream lands everything and none waits past `max_wait_s` (a stream
/// that kept its slot to its last page starved the others into exit 75).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_beyond_the_concurrency_cap_queue_and_all_progress() {
    let fx = Fixture::new();
    let sim = eight_streams_under_a_cap_of_two(&fx).await;
    let mut spec = fx.spec("vault_fanout", &sim);
    spec.allow_dirty = true;
    spec.streams = Streams::All;
    let result = run::execute(spec).await.unwrap();
    assert_eq!(exit_of(&result), 0, "{:?}", result.outcome);
    for n in 1..=8 {
        assert_eq!(
            landed_record_ids(&fx, "vault_fanout", &format!("s{n}")).len(),
            40,
            "s{n}"
        );
    }
}

/// The same over Redis, where a commit proves the run lock and books the
/// next page in one call: the booking goes to the first stream waiting,
/// and a request still costs about one script call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_redis_a_commit_books_the_next_page_of_the_first_stream_waiting() {
    let redis = support::redis::start();
    let fx = Fixture::new();
    let sim = eight_streams_under_a_cap_of_two(&fx).await;
    let mut admin = script_counter(&redis.url()).await;
    let mut spec = fx.spec("vault_fanout", &sim);
    spec.allow_dirty = true;
    spec.streams = Streams::All;
    spec.pacer = PacerChoice::Redis(redis.url());
    let result = run::execute(spec).await.unwrap();
    assert_eq!(exit_of(&result), 0, "{:?}", result.outcome);
    for n in 1..=8 {
        assert_eq!(
            landed_record_ids(&fx, "vault_fanout", &format!("s{n}")).len(),
            40,
            "s{n}"
        );
    }
    // Every script call: the pacer's, and a few a stream whatever its
    // pages (its run lock taken and let go, the trail's anchors), which
    // eight streams of eight pages cannot amortise.
    let (calls, info) = script_calls_since(&mut admin).await;
    let requests = sim.requests().len();
    assert_eq!(requests, 8 * 8, "eight streams of 40 records in pages of 5");
    let fixed = 3 * 8;
    eprintln!("{calls} script calls for {requests} requests");
    assert!(
        calls as f64 <= requests as f64 * 1.1 + f64::from(fixed),
        "{calls} script calls for {requests} requests\n{info}"
    );
}

/// The fan-out vendor with eight streams, a cap of two, 20 requests a
/// second and `max_wait_s: 1`; a simulator of 40 records.
async fn eight_streams_under_a_cap_of_two(fx: &Fixture) -> Simulator {
    let at = support::SIM_POLICIES.find("\nvault_fanout:").unwrap();
    let (before, block) = support::SIM_POLICIES.split_at(at);
    let streams: String = (1..=8)
        .map(|n| format!("    s{n}:\n      query:\n        object: o{n}__v\n"))
        .collect();
    let end = block[1..].find("\n\n").map_or(block.len(), |i| i + 1);
    let fanout = block[..end]
        .replace("sustained_rate_per_sec: 200", "sustained_rate_per_sec: 20")
        .replace("burst_capacity: 20", "burst_capacity: 2\n  max_wait_s: 1")
        .replace("max_concurrency: 4", "max_concurrency: 2");
    let fanout = format!(
        "{}  streams:\n{streams}",
        &fanout[..fanout.find("  streams:").unwrap()]
    );
    std::fs::write(
        fx.path("policies.yaml"),
        format!("{before}{fanout}{}", &block[end..]),
    )
    .unwrap();
    start_sim(40, &[]).await
}

/// A gateway that serves the EDC under a path prefix: every request keeps
/// the prefix, and a link that leaves it is refused like another origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_url_path_prefix_is_kept_by_every_request_and_every_origin_check() {
    let fx = Fixture::new();
    let sim = start_sim_with(SimConfig {
        dataset: dataset(90),
        json_path: "/edc/api/v24.1/query/audit_trail".into(),
        ..SimConfig::default()
    })
    .await;
    let mut spec = fx.spec("vault_json", &sim);
    spec.endpoint = Some(Endpoint::bearer(format!("{}/edc/", sim.base_url()), TOKEN));
    let result = run::execute(spec.clone()).await.unwrap();
    assert_eq!(exit_of(&result), 0, "{:?}", result.outcome);
    assert_eq!(landed_record_ids(&fx, "vault_json", "default").len(), 90);
    let requests = sim.requests();
    assert!(
        requests.iter().all(|r| r.path.starts_with("/edc/api/")),
        "{requests:?}"
    );

    // A next link to the same host but outside /edc is refused unsent.
    let fx = Fixture::new();
    let sim = start_sim_with(SimConfig {
        dataset: dataset(90),
        json_path: "/edc/api/v24.1/query/audit_trail".into(),
        faults: schedule(&["1=cross-origin-next:/elsewhere/api?offset=40"]),
        ..SimConfig::default()
    })
    .await;
    let mut spec = fx.spec("vault_json", &sim);
    spec.endpoint = Some(Endpoint::bearer(format!("{}/edc", sim.base_url()), TOKEN));
    let result = run::execute(spec).await.unwrap();
    assert_eq!(exit_of(&result), 65, "{:?}", result.outcome);
    let outcome = format!("{:?}", result.outcome);
    assert!(outcome.contains("leaves the configured origin"), "{outcome}");
    assert_eq!(
        sim.requests().len(),
        1,
        "the link outside the prefix was never requested"
    );
}

/// A page of records older than the cursor (a vendor clock set back) is
/// landed and audited as such, and the cursor does not move back to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_older_than_the_cursor_are_landed_and_audited_but_never_move_it_back() {
    let fx = Fixture::new();
    // The backdating fault restamps every record of the page it hits, ones
    // served before too: a lookback would re-read those as new versions.
    // Without one, the page holds only the 20 new records.
    let policies = std::fs::read_to_string(fx.path("policies.yaml")).unwrap().replacen(
        "    cursor_field: modified_date__v\n    page_size_param: limit\n    page_size: 40\n",
        "    cursor_field: modified_date__v\n    page_size_param: limit\n    page_size: 40\n    lookback:\n      seconds: 0\n",
        1,
    );
    assert!(policies.contains("seconds: 0"));
    std::fs::write(fx.path("policies.yaml"), policies).unwrap();
    let spec = |sim: &Simulator| RunSpec {
        allow_dirty: true,
        ..fx.spec("vault_json", sim)
    };
    let sim = start_sim(60, &[]).await;
    assert_eq!(exit_of(&run::execute(spec(&sim)).await.unwrap()), 0);
    let start = dataset(60).record(60).modified;
    assert_eq!(fx.cursor("vault_json", "default")["window_start"], start);
    // 20 new records arrive, dated 1999 by the vendor.
    let sim = start_sim(80, &["1=backdated"]).await;
    assert_eq!(exit_of(&run::execute(spec(&sim)).await.unwrap()), 0);
    let last = fx.events("page_committed").pop().unwrap();
    assert_eq!(
        (last["records"].as_u64(), last["older_than_cursor"].as_bool()),
        (Some(20), Some(true))
    );
    assert_eq!(
        landed_record_ids(&fx, "vault_json", "default").len(),
        80,
        "landed all the same"
    );
    assert_eq!(
        fx.cursor("vault_json", "default")["window_start"],
        start,
        "not moved back to 1999"
    );
}

/// Backfill on a newest-first endpoint: the first page holds only records
/// past --until, which used to end the window with none of those inside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_on_a_newest_first_endpoint_lands_every_record_inside_the_window() {
    let fx = Fixture::new();
    let sim = start_sim_with(SimConfig {
        dataset: dataset(423),
        newest_first: true,
        ..SimConfig::default()
    })
    .await;
    let ds = dataset(423);
    // modified_since is exclusive: the window holds records 11..=233.
    let (since, until) = (ds.record(10).modified, ds.record(233).modified);
    let args = ["--pacer", "local", "--since", &since, "--until", &until];
    let out = support::run_cmd(
        cli_cmd(&fx, "backfill", "vault_newest", &sim.base_url(), &args).stdout(std::process::Stdio::piped()),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let label = format!(
        "{}..{}",
        edc_core::store::sanitize(&since),
        edc_core::store::sanitize(&until)
    );
    let dir = fx.path(&format!(
        "landing/backfill/{label}/vault_newest/-/Mediflex(Prod)/-/default"
    ));
    let ids = edc_qualify::landed::landed_json_record_ids(&dir).unwrap();
    for n in 11..=233u32 {
        assert!(
            ids.contains(&format!("AT-{n:07}")),
            "record {n} of the window was not landed"
        );
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "a record landed twice");
    // A second run finds the window complete and fetches nothing.
    let before = sim.requests().len();
    let out = support::run_cmd(&mut cli_cmd(
        &fx,
        "backfill",
        "vault_newest",
        &sim.base_url(),
        &args,
    ));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(sim.requests().len(), before);
}

#[test]
fn a_backfill_whose_since_is_after_its_until_is_a_usage_error() {
    let fx = Fixture::new();
    let args = [
        "--pacer",
        "local",
        "--since",
        "2026-02-01T00:00:00Z",
        "--until",
        "2026-01-01T00:00:00+02:00",
    ];
    let out = support::run_cmd(
        cli_cmd(&fx, "backfill", "vault_json", "http://127.0.0.1:9", &args)
            .stderr(std::process::Stdio::piped()),
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("is later than --until"), "{}", out.stderr);
    assert!(!fx.path("audit.jsonl").exists(), "nothing happened");
}

/// Backfill bounds are cursor values (an RFC 3339 instant or a whole
/// number), checked before anything happens: anything else is a usage
/// error naming the flag, never sent to the server.
#[test]
fn a_backfill_bound_that_is_no_cursor_value_is_a_usage_error() {
    for (flag, args) in [
        (
            "--since",
            [
                "--since",
                "'; DROP TABLE x; --",
                "--until",
                "2026-01-01T00:00:00Z",
            ],
        ),
        (
            "--until",
            ["--since", "2026-01-01T00:00:00Z", "--until", "next tuesday"],
        ),
        (
            "--since",
            [
                "--since",
                "2026-13-01T00:00:00Z",
                "--until",
                "2027-01-01T00:00:00Z",
            ],
        ),
    ] {
        let fx = Fixture::new();
        let mut all = vec!["--pacer", "local"];
        all.extend(args);
        let out = support::run_cmd(
            cli_cmd(&fx, "backfill", "vault_json", "http://127.0.0.1:9", &all)
                .stderr(std::process::Stdio::piped()),
        );
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(flag), "{args:?}: {}", out.stderr);
        assert!(!fx.path("audit.jsonl").exists(), "nothing happened");
    }
}

/// The far end of the calendar is a bound like any other: no panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_until_the_end_of_the_calendar_runs() {
    let fx = Fixture::new();
    let sim = start_sim(60, &[]).await;
    let args = [
        "--pacer",
        "local",
        "--since",
        "2000-01-01T00:00:00Z",
        "--until",
        "9999-12-31T23:59:59Z",
    ];
    let out = support::run_cmd(
        cli_cmd(&fx, "backfill", "vault_json", &sim.base_url(), &args).stderr(std::process::Stdio::piped()),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
}

/// A next link that carries userinfo, or echoes the token back, is refused
/// before it is followed or written to the cursor or manifest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_link_with_credentials_in_it_is_refused_and_never_stored() {
    for (what, link) in [
        (
            "userinfo",
            "http://admin:link-secret-77@127.0.0.1:1/api/v24.1/query/audit_trail?offset=40".to_string(),
        ),
        (
            "the token",
            format!("/api/v24.1/query/audit_trail?offset=40&session={TOKEN}"),
        ),
    ] {
        let fx = Fixture::new();
        let sim = start_sim(100, &[&format!("1=cross-origin-next:{link}")]).await;
        let result = run::execute(fx.spec("vault_json", &sim)).await.unwrap();
        assert_eq!(exit_of(&result), 65, "{what}: {:?}", result.outcome);
        assert_eq!(sim.requests().len(), 1, "{what}: the link was not followed");
        assert!(fx.manifest("vault_json", "default").is_empty(), "{what}");
        for secret in ["link-secret-77", TOKEN] {
            let audit = std::fs::read_to_string(fx.path("audit.jsonl")).unwrap();
            assert!(!audit.contains(secret), "{what}: a secret in the audit trail");
            assert!(
                !format!("{:?}", result.outcome).contains(secret),
                "{what}: a secret in the error"
            );
        }
    }
}

/// The audit file is opened without following a symlink: as root a link
/// would otherwise let a run append to any file on the system.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_path_that_is_a_symlink_is_refused_and_its_target_untouched() {
    let fx = Fixture::new();
    let target = fx.path("precious.txt");
    std::fs::write(&target, "do not append here\n").unwrap();
    std::os::unix::fs::symlink(&target, fx.path("audit.jsonl")).unwrap();
    let sim = start_sim(10, &[]).await;
    let err = match run::execute(fx.spec("vault_json", &sim)).await {
        Ok(r) => panic!("the run went ahead: {:?}", r.outcome),
        Err(e) => e,
    };
    assert_eq!(err.exit().code(), 74, "{err:#}");
    assert!(format!("{err:#}").contains("audit.jsonl"), "{err:#}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "do not append here\n");
    assert!(sim.requests().is_empty());
}

/// A backfill appends to the same trail as the syncs, so it keeps the
/// trail's one anchor: cutting a backfill run off the trail is caught like
/// cutting any other run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_anchors_the_trail_where_every_run_does() {
    let fx = Fixture::new();
    let sim = start_sim(100, &[]).await;
    let result = run::execute(fx.spec("vault_json", &sim)).await.unwrap();
    assert_eq!(exit_of(&result), 0);
    let ds = dataset(100);
    let (since, until) = (ds.record(10).modified, ds.record(40).modified);
    let args = ["--pacer", "local", "--since", &since, "--until", &until];
    let out = support::run_cmd(
        cli_cmd(&fx, "backfill", "vault_json", &sim.base_url(), &args).stderr(std::process::Stdio::piped()),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let anchors: Vec<_> = std::fs::read_dir(fx.path("state/audit-anchors"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(anchors.len(), 1, "{anchors:?}");
    let head: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&anchors[0]).unwrap()).unwrap();
    let trail_len = std::fs::metadata(fx.path("audit.jsonl")).unwrap().len();
    assert_eq!(head["bytes"], trail_len, "the backfill's run is anchored");
    let nested = std::fs::read_dir(fx.path("state/backfill"))
        .unwrap()
        .flatten()
        .any(|e| e.path().join("audit-anchors").exists());
    assert!(!nested, "no anchor of its own under state/backfill");
    // Cutting the backfill's run off the trail is now seen by the next run.
    let text = std::fs::read_to_string(fx.path("audit.jsonl")).unwrap();
    let cut = text.find("\"event\":\"run_started\"").and_then(|first| {
        text[first + 1..]
            .find("\"event\":\"run_started\"")
            .map(|i| first + 1 + i)
    });
    let cut = text[..cut.unwrap()].rfind('\n').unwrap() + 1;
    std::fs::write(fx.path("audit.jsonl"), &text[..cut]).unwrap();
    let result = run::execute(fx.spec("vault_json", &sim)).await;
    let code = match result {
        Ok(r) => exit_of(&r),
        Err(e) => e.exit().code(),
    };
    assert_eq!(code, 65);
}

/// `-` is how state and landing paths write an absent tenant: `--tenant -`
/// would share the files of the stream without one. A usage error (2)
/// naming the flag, before anything happens.
#[test]
fn a_tenant_or_protocol_version_of_a_lone_dash_is_a_usage_error() {
    for flag in ["--tenant", "--protocol-version"] {
        let fx = Fixture::new();
        let out = support::run_cmd(
            cli_cmd(
                &fx,
                "sync",
                "vault_json",
                "http://127.0.0.1:9",
                &["--pacer", "local", flag, "-"],
            )
            .stderr(std::process::Stdio::piped()),
        );
        assert_eq!(out.code, 2, "{flag}: {}", out.stderr);
        assert!(out.stderr.contains(flag), "{flag}: {}", out.stderr);
        assert!(!fx.path("audit.jsonl").exists(), "nothing happened");
    }
}

/// `--out ftp://host/x` (or a `redis://` state) is a URL edc-sync does not take there:
/// refused as a configuration error (78) naming the flag, and no directory
/// named `s3:` appears in the working directory.
#[test]
fn a_url_where_a_local_path_is_expected_is_refused_not_made_a_directory() {
    for (command, flag, url) in [
        // --out lands in s3://, gs:// and az:// (tests/integration/object_landing.rs).
        ("sync", "--out", "ftp://edc:secret-pw@host/landing"),
        ("sync", "--state", "redis://edc:secret-pw@db/0"),
        ("backfill", "--audit-log", "gs://bucket/audit.jsonl"),
        ("verify", "--out", "ftp://edc:secret-pw@host/landing"),
    ] {
        let fx = Fixture::new();
        let work = fx.path("work");
        std::fs::create_dir_all(&work).unwrap();
        let mut cmd = support::edc_sync();
        cmd.current_dir(&work).arg(command);
        if command != "verify" {
            cmd.arg("--config").arg(fx.path("policies.yaml")).args([
                "--vendor",
                "vault_json",
                "--study",
                "S-1",
                "--pacer",
                "local",
            ]);
            if command == "backfill" {
                cmd.args(["--since", "2026-01-01T00:00:00Z"]);
            }
        }
        for (f, default) in [
            ("--out", "landing"),
            ("--state", "state"),
            ("--audit-log", "audit.jsonl"),
        ] {
            cmd.arg(f).arg(if f == flag {
                url.to_string()
            } else {
                default.to_string()
            });
        }
        let out = support::run_cmd(
            cmd.env("EDC_SYNC_TEST_BASE_URL", "http://127.0.0.1:9")
                .env("EDC_SYNC_TEST_TOKEN", TOKEN),
        );
        assert_eq!(out.code, 78, "{command} {flag}: {}", out.stderr);
        assert!(out.stderr.contains(flag), "{command} {flag}: {}", out.stderr);
        assert!(!out.stderr.contains("secret-pw"), "{}", out.stderr);
        let made: Vec<_> = std::fs::read_dir(&work)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(made.is_empty(), "{command} {flag}: made {made:?}");
    }
}

/// A backfill window kept under the name an earlier version gave its
/// directory (not injective: `:` as `_3a`) is not moved by the run, which
/// would do it before its trail is open and outside any lock: the run
/// refuses (78) naming both directories, writes no line and moves nothing,
/// and once the operator has moved it, it resumes from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_under_its_legacy_name_is_refused_until_moved_and_nothing_is_moved() {
    let fx = Fixture::new();
    let sim = start_sim(100, &[]).await;
    let ds = dataset(100);
    let (since, until) = (ds.record(10).modified, ds.record(40).modified);
    let args = ["--pacer", "local", "--since", &since, "--until", &until];
    let out = support::run_cmd(
        cli_cmd(&fx, "backfill", "vault_json", &sim.base_url(), &args).stderr(std::process::Stdio::piped()),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let label = format!(
        "{}..{}",
        edc_core::store::sanitize(&since),
        edc_core::store::sanitize(&until)
    );
    let legacy = format!(
        "{}..{}",
        edc_core::store::legacy_sanitize(&since),
        edc_core::store::legacy_sanitize(&until)
    );
    assert_ne!(label, legacy);
    for root in ["state", "landing"] {
        std::fs::rename(
            fx.path(&format!("{root}/backfill/{label}")),
            fx.path(&format!("{root}/backfill/{legacy}")),
        )
        .unwrap();
    }
    let trail = std::fs::read(fx.path("audit.jsonl")).unwrap();
    let out = support::run_cmd(
        cli_cmd(&fx, "backfill", "vault_json", &sim.base_url(), &args).stderr(std::process::Stdio::piped()),
    );
    assert_eq!(out.code, 78, "{}", out.stderr);
    for root in ["state", "landing"] {
        let old = fx.path(&format!("{root}/backfill/{legacy}"));
        assert!(old.is_dir(), "{} was moved", old.display());
        assert!(!fx.path(&format!("{root}/backfill/{label}")).exists());
    }
    assert!(
        out.stderr
            .contains(&fx.path(&format!("state/backfill/{legacy}")).display().to_string()),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains(&fx.path(&format!("state/backfill/{label}")).display().to_string()),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read(fx.path("audit.jsonl")).unwrap(),
        trail,
        "no line was written"
    );
    for root in ["state", "landing"] {
        std::fs::rename(
            fx.path(&format!("{root}/backfill/{legacy}")),
            fx.path(&format!("{root}/backfill/{label}")),
        )
        .unwrap();
    }
    let out = support::run_cmd(
        cli_cmd(&fx, "backfill", "vault_json", &sim.base_url(), &args).stderr(std::process::Stdio::piped()),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let verified =
        support::runs::verify_roots(&fx.path("landing"), &fx.path("state"), &fx.path("audit.jsonl"));
    assert_eq!(verified.code, 0, "{}{}", verified.stdout, verified.stderr);
}

/// Vault's daily allowance spent (`X-VaultAPI-DailyLimitRemaining: 0`) on a
/// quota that declares it as its window: the window is marked spent, so no
/// request goes before the window ends; Vault's refusals after it are
/// waited as throttles and the run stops with exit 75, the cursor on the
/// last landed page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vaults_daily_limit_spent_holds_every_request_until_the_window_ends() {
    let fx = Fixture::new();
    let sim = start_sim_with(SimConfig {
        dataset: dataset(100),
        vault_daily: Some(3),
        ..SimConfig::default()
    })
    .await;
    let result = run::execute(fx.spec("vault_daily", &sim)).await.unwrap();
    assert_eq!(exit_of(&result), 75, "{:?}", result.outcome);
    let spent = fx.events("vendor_limit_spent");
    assert_eq!(spent.len(), 1, "{spent:?}");
    assert_eq!(spent[0]["remaining"], 0);
    assert_eq!(spent[0]["limit"], 3);
    assert_eq!(spent[0]["window_spent"], true);
    let reqs = sim.requests();
    assert!(reqs[..3].iter().all(|r| r.status == 200));
    // The fourth request waited for the window the first began to end.
    assert!(
        reqs[3].t_us - reqs[0].t_us >= 1_900_000,
        "the request after the spent allowance went {} us after the first",
        reqs[3].t_us - reqs[0].t_us
    );
    assert_eq!(fx.manifest("vault_daily", "default").len(), 3);
    let page_lines = fx.events("page_committed");
    assert_eq!(
        page_lines[2]["quota_headers"]["x-vaultapi-dailylimitremaining"],
        "0"
    );
    assert_eq!(fx.events("quota_exhausted").len(), 1);
}

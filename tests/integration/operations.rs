//! Running unattended: one run per stream, signals, metrics, bad state,
//! Redis dying mid-run. Real processes, real signals, real files.

use crate::support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use edc_core::audit::verify;
use edc_sim::{Dataset, FaultSchedule, SimConfig, Simulator};

const TOKEN: &str = "ops-token";

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = support::small_page_policy_repo();
        Fixture { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn sync(&self, sim: &str, extra: &[&str]) -> Command {
        self.sync_with_state(&self.path("state"), sim, extra)
    }

    /// A sync with its own state directory (as on another host).
    fn sync_with_state(&self, state: &std::path::Path, sim: &str, extra: &[&str]) -> Command {
        let mut cmd = support::edc_sync();
        cmd.args(["sync", "--config"])
            .arg(self.path("policies.yaml"))
            .args(["--vendor", "vault_json", "--study", "S-1", "--out"])
            .arg(self.path("landing"))
            .arg("--state")
            .arg(state)
            .arg("--audit-log")
            .arg(self.path("audit.jsonl"))
            .args(extra)
            .env("EDC_SYNC_TEST_BASE_URL", sim)
            .env("EDC_SYNC_TEST_TOKEN", TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn events(&self, name: &str) -> Vec<serde_json::Value> {
        support::audit_events(&self.path("audit.jsonl"), name)
    }

    fn landed_records(&self) -> Vec<String> {
        edc_qualify::landed::landed_json_record_ids(&self.path("landing/vault_json/-/S-1/-/default")).unwrap()
    }

    /// Every one of the dataset's `n` records is landed, exactly once.
    fn assert_every_record_once(&self, n: usize) {
        let ids = self.landed_records();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!((ids.len(), unique.len()), (n, n), "landed / distinct records");
    }
}

async fn slow_sim(records: u32, latency_ms: u64) -> Simulator {
    let config = SimConfig {
        dataset: Dataset {
            subjects: 4,
            records,
            seed: 9,
            padding: 0,
        },
        token: TOKEN.into(),
        latency: Duration::from_millis(latency_ms),
        faults: FaultSchedule::default(),
        ..SimConfig::default()
    };
    Simulator::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// Waits until the simulator has seen `n` requests.
async fn until_requests(sim: &Simulator, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while sim.requests().len() < n {
        assert!(Instant::now() < deadline, "the run never made {n} requests");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The process exited with `code`; its stderr explains when it did not.
#[track_caller]
fn assert_exit(out: &std::process::Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on a child we spawned and have not reaped.
    let rc = unsafe { libc::kill(child.id() as i32, sig) };
    assert_eq!(rc, 0, "kill failed");
}

async fn finish(child: Child) -> std::process::Output {
    tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_on_a_locked_stream_exits_75_naming_the_holder() {
    let fx = Fixture::new();
    let sim = slow_sim(60, 100).await;
    let first = fx.sync(&sim.base_url(), &["--pacer", "local"]).spawn().unwrap();
    until_requests(&sim, 1).await;
    let seen = sim.requests().len();
    let second = fx.sync(&sim.base_url(), &["--pacer", "local"]).output().unwrap();
    assert_eq!(second.status.code(), Some(75));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("is locked by another run") && stderr.contains(&format!("pid {}", first.id())),
        "{stderr}"
    );
    // It fetched nothing: the only requests are the first run's, one at a time.
    let during = sim.requests().len() - seen;
    assert!(during <= 2, "{during} requests while the second run was refused");
    let finished = fx.events("run_finished");
    assert!(
        finished
            .iter()
            .any(|l| l["exit_code"] == 75 && l["outcome"].as_str().unwrap().contains("locked")),
        "{finished:?}"
    );
    let out = finish(first).await;
    assert_exit(&out, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_at_a_safe_point_with_exit_75_and_the_next_run_resumes() {
    let fx = Fixture::new();
    let sim = slow_sim(60, 80).await;
    let child = fx.sync(&sim.base_url(), &["--pacer", "local"]).spawn().unwrap();
    until_requests(&sim, 3).await;
    signal(&child, libc::SIGTERM);
    let out = finish(child).await;
    assert_exit(&out, 75);
    assert_eq!(fx.events("run_interrupted").len(), 1);
    assert!(verify(&fx.path("audit.jsonl")).unwrap().intact());
    let partial = fx.landed_records().len();
    assert!(partial < 60, "the run stopped early ({partial} records)");
    let resumed = fx.sync(&sim.base_url(), &["--pacer", "local"]).output().unwrap();
    assert_eq!(resumed.status.code(), Some(0));
    fx.assert_every_record_once(60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigint_aborts_at_once_without_corrupting_state() {
    let fx = Fixture::new();
    // Each response takes 3 s: both signals arrive while request 2 is in
    // flight, where the first one alone would wait for the page.
    let sim = slow_sim(60, 3000).await;
    let child = fx.sync(&sim.base_url(), &["--pacer", "local"]).spawn().unwrap();
    until_requests(&sim, 2).await;
    let sent = Instant::now();
    signal(&child, libc::SIGINT);
    tokio::time::sleep(Duration::from_millis(100)).await;
    signal(&child, libc::SIGINT);
    let out = finish(child).await;
    assert_exit(&out, 130);
    assert!(
        sent.elapsed() < Duration::from_millis(2500),
        "aborted before the page in flight was answered"
    );
    // The trail left by the abort is anchored like any other.
    let (trail, state) = (fx.path("audit.jsonl"), fx.path("state"));
    let checked = support::run(&[
        "audit",
        "verify",
        trail.to_str().unwrap(),
        "--anchors",
        state.to_str().unwrap(),
    ]);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
    // Resume against a fast simulator (same dataset) and check the whole.
    let fast = slow_sim(60, 0).await;
    let resumed = fx.sync(&fast.base_url(), &["--pacer", "local"]).output().unwrap();
    assert_exit(&resumed, 0);
    fx.assert_every_record_once(60);
    assert!(verify(&fx.path("audit.jsonl")).unwrap().intact());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_file_is_replaced_and_keeps_the_last_success() {
    let fx = Fixture::new();
    let sim = slow_sim(12, 0).await;
    let metrics = fx.path("edc_sync.prom");
    let ok = fx
        .sync(
            &sim.base_url(),
            &["--pacer", "local", "--metrics-file", metrics.to_str().unwrap()],
        )
        .output()
        .unwrap();
    assert_eq!(ok.status.code(), Some(0));
    let text = std::fs::read_to_string(&metrics).unwrap();
    let labels = "vendor=\"vault_json\",tenant=\"\",study=\"S-1\",protocol_version=\"\",stream=\"default\"";
    assert!(
        text.contains(&format!("edc_sync_records{{{labels}}} 12")),
        "{text}"
    );
    assert!(
        text.contains(&format!("edc_sync_last_exit_code{{{labels}}} 0")),
        "{text}"
    );
    let success_line = text
        .lines()
        .find(|l| l.starts_with("edc_sync_last_success_timestamp_seconds{"))
        .unwrap()
        .to_string();
    // A failing run (the EDC is gone) keeps the last success time.
    let gone = format!(
        "http://127.0.0.1:{}",
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    );
    let failed = fx
        .sync(
            &gone,
            &["--pacer", "local", "--metrics-file", metrics.to_str().unwrap()],
        )
        .output()
        .unwrap();
    assert_exit(&failed, 69);
    let after = std::fs::read_to_string(&metrics).unwrap();
    assert!(after.contains(&success_line), "{after}");
    assert!(after.contains(&format!("edc_sync_last_exit_code{{{labels}}} 69")));
    assert!(!after.contains(TOKEN));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_or_newer_state_file_stops_the_run_and_is_left_alone() {
    let fx = Fixture::new();
    let sim = slow_sim(12, 0).await;
    let cursor = fx.path("state/vault_json/-/S-1/-/default.cursor.json");
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    for (content, needle) in [
        ("{not json", "not valid JSON"),
        (
            r#"{"format": 99, "stream": {}}"#,
            "written by a newer edc-sync (state format 99",
        ),
    ] {
        std::fs::write(&cursor, content).unwrap();
        let out = fx.sync(&sim.base_url(), &["--pacer", "local"]).output().unwrap();
        assert_eq!(out.status.code(), Some(74));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(needle) && stderr.contains("default.cursor.json"),
            "{stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(&cursor).unwrap(),
            content,
            "the state file is untouched"
        );
    }
    assert!(sim.requests().is_empty(), "nothing was fetched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_run_fails_closed_with_69_and_the_next_run_resumes() {
    let fx = Fixture::new();
    let sim = slow_sim(60, 60).await;
    let mut redis = support::redis::start();
    let child = fx
        .sync(&sim.base_url(), &["--redis", &redis.url()])
        .spawn()
        .unwrap();
    until_requests(&sim, 3).await;
    redis.kill();
    let out = finish(child).await;
    assert_exit(&out, 69);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unavailable"));
    let redis = support::redis::start();
    let resumed = fx
        .sync(&sim.base_url(), &["--redis", &redis.url()])
        .output()
        .unwrap();
    assert_exit(&resumed, 0);
    fx.assert_every_record_once(60);
}

#[test]
fn completions_and_man_page_are_generated_from_the_cli() {
    let bash = support::run(&["completions", "bash"]);
    assert_eq!(bash.code, 0);
    assert!(bash.stdout.contains("backfill") && bash.stdout.contains("--audit-log"));
    let man = support::run(&["man"]);
    assert_eq!(man.code, 0);
    assert!(man.stdout.contains(".TH edc-sync 1"));
    // Each subcommand has its own page with every flag.
    let sync = support::run(&["man", "sync"]);
    assert_eq!(sync.code, 0, "{}", sync.stderr);
    assert!(
        sync.stdout.contains("audit\\-log") || sync.stdout.contains("audit-log"),
        "{}",
        sync.stdout
    );
    let validate = support::run(&["man", "config", "validate"]);
    assert!(validate.stdout.contains("check\\-env") || validate.stdout.contains("check-env"));
    assert_eq!(support::run(&["man", "nope"]).code, 2);
    let dir = tempfile::tempdir().unwrap();
    let all = support::run(&["man", "--out-dir", dir.path().to_str().unwrap()]);
    assert_eq!(all.code, 0, "{}", all.stderr);
    for page in [
        "edc-sync.1",
        "edc-sync-sync.1",
        "edc-sync-backfill.1",
        "edc-sync-config-validate.1",
    ] {
        assert!(dir.path().join(page).exists(), "{page} missing");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_a_run_on_another_host_is_refused_naming_the_holder() {
    let fx = Fixture::new();
    let sim = slow_sim(60, 100).await;
    let redis = support::redis::start();
    let first = fx
        .sync(&sim.base_url(), &["--redis", &redis.url()])
        .spawn()
        .unwrap();
    until_requests(&sim, 2).await;
    // "Another host": its own state directory, so the file lock cannot see
    // the first run; only the Redis run lock can.
    let out = fx
        .sync_with_state(
            &fx.path("other-host-state"),
            &sim.base_url(),
            &["--redis", &redis.url()],
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(75));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("locked by another run")
            && stderr.contains("via Redis")
            && stderr.contains(&format!("pid {}", first.id())),
        "{stderr}"
    );
    let done = finish(first).await;
    assert_exit(&done, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_lock_was_taken_over_never_commits_again() {
    let redis = support::redis::start();
    a_stale_holder_never_commits(&redis.url()).await;
}

/// The same with the run lock in a three-master Redis Cluster: the lock shares the quota's hash tag, so the call that proves
/// it books in the same slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_lock_was_taken_over_in_a_cluster_never_commits_again() {
    let cluster = support::redis::start_cluster();
    a_stale_holder_never_commits(&cluster.url()).await;
}

/// A lock that vanished from Redis (FLUSHALL, an eviction, a failover
/// without persistence) is not "another run holds the stream": the run
/// stops (75) saying the lock is gone, and moves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_lock_was_flushed_from_redis_says_so() {
    let redis = support::redis::start();
    let fx = Fixture::new();
    let sim = slow_sim(60, 150).await;
    let child = fx
        .sync(&sim.base_url(), &["--redis", &redis.url()])
        .spawn()
        .unwrap();
    until_requests(&sim, 3).await;
    let pacer = quota_pacer::RedisPacer::connect(&redis.url(), edc_core::REDIS_KEY_PREFIX)
        .await
        .unwrap();
    let _: () = redis::cmd("FLUSHALL")
        .query_async(&mut pacer.connection())
        .await
        .unwrap();
    let out = finish(child).await;
    assert_exit(&out, 75);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("lost the run lock"), "{stderr}");
    assert!(stderr.contains("no longer in Redis"), "{stderr}");
    assert!(!stderr.contains("another run holds"), "{stderr}");
}

async fn a_stale_holder_never_commits(redis_url: &str) {
    let fx = Fixture::new();
    let sim = slow_sim(60, 150).await;
    let child = fx.sync(&sim.base_url(), &["--redis", redis_url]).spawn().unwrap();
    until_requests(&sim, 3).await;
    // The lease "expires" (a long GC pause, a frozen VM) and another run
    // takes the stream over with a newer fence.
    let pacer = quota_pacer::RedisPacer::connect(redis_url, edc_core::REDIS_KEY_PREFIX)
        .await
        .unwrap();
    let stream = "vault_json/-/S-1/-/default";
    let lock = edc_core::store::RunLockName::new("rl:test:vault_json:S-1", stream);
    let _: () = redis::cmd("DEL")
        .arg(lock.lock_key())
        .query_async(&mut pacer.connection())
        .await
        .unwrap();
    let thief = lock
        .acquire(
            &pacer,
            "host elsewhere, pid 1, run thief",
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    assert!(thief.is_ok());
    let taken_at = std::time::SystemTime::now();
    let out = finish(child).await;
    assert_exit(&out, 75);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("lost the run lock"), "{stderr}");
    assert!(
        stderr.contains("held by host elsewhere, pid 1, run thief"),
        "{stderr}"
    );
    let cursor: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fx.path("state/vault_json/-/S-1/-/default.cursor.json")).unwrap(),
    )
    .unwrap();
    let updated = humantime::parse_rfc3339(cursor["updated_at"].as_str().unwrap()).unwrap();
    assert!(
        updated <= taken_at,
        "the stale holder moved the cursor after losing the lock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subject_identifiers_in_urls_are_masked_in_audit_lines_and_logs() {
    let fx = Fixture::new();
    let policy = support::SIM_POLICIES.replacen(
        "    page_size: 40\n",
        "    page_size: 40\n  streams:\n    by_subject:\n      query:\n        subject: SUBJ-0007\n",
        1,
    );
    std::fs::write(fx.path("policies.yaml"), policy).unwrap();
    let mut faults = FaultSchedule::default();
    for f in ["2=429:seconds:0", "3=500", "5=404"] {
        let (n, fault) = FaultSchedule::parse_entry(f).unwrap();
        faults.insert(n, fault);
    }
    let config = SimConfig {
        dataset: Dataset {
            subjects: 4,
            records: 200,
            seed: 9,
            padding: 0,
        },
        token: TOKEN.into(),
        faults,
        ..SimConfig::default()
    };
    let sim = Simulator::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let out = fx
        .sync(
            &sim.base_url(),
            &[
                "--pacer",
                "local",
                "--allow-dirty",
                "--stream",
                "by_subject",
                "-vv",
                "--log-format",
                "json",
            ],
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(65), "the 404 ends the run");
    assert!(
        sim.requests()
            .iter()
            .all(|r| r.path.contains("subject=SUBJ-0007")),
        "the EDC itself gets the real value"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let audit = std::fs::read_to_string(fx.path("audit.jsonl")).unwrap();
    for (name, text) in [("stderr", stderr.as_ref()), ("audit", audit.as_str())] {
        assert!(
            !text.contains("SUBJ-0007"),
            "the identifier reached {name}:\n{text}"
        );
    }
    // Masked consistently, so lines can still be correlated.
    let masked: std::collections::BTreeSet<&str> = audit
        .match_indices("subject=masked-")
        .map(|(i, _)| &audit[i + "subject=".len()..i + "subject=".len() + "masked-".len() + 12])
        .collect();
    assert_eq!(masked.len(), 1, "one subject, one mask: {masked:?}");
    let mask = masked.into_iter().next().unwrap();
    assert!(stderr.contains(mask), "the error names the same masked value");
    assert!(verify(&fx.path("audit.jsonl")).unwrap().intact());
}

/// A malformed --redis URL is a configuration mistake (78), found before
/// the run writes anything, not "Redis unavailable" (69) after the header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_redis_url_exits_78_before_any_audit_line() {
    let fx = Fixture::new();
    let out = fx
        .sync("http://127.0.0.1:9", &["--redis", "redis://[not-a-host"])
        .output()
        .unwrap();
    assert_exit(&out, 78);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--redis"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !fx.path("audit.jsonl").exists(),
        "no audit line for a usage mistake"
    );
}

/// The run is planned before anything happens: a base URL that is not one
/// (or carries credentials, or is plain http to another host) is a
/// configuration error with no audit line, like a bad Redis URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_base_url_exits_78_before_any_audit_line() {
    for url in ["ftp://127.0.0.1:9/", "http://edc.example.com/", "not a url"] {
        let fx = Fixture::new();
        let out = fx.sync(url, &["--pacer", "local"]).output().unwrap();
        assert_exit(&out, 78);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("base_url_env"),
            "{url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !fx.path("audit.jsonl").exists(),
            "{url}: no audit line for a configuration mistake"
        );
    }
}

/// A `--metrics-push` URL with a query or a fragment is refused (78) before
/// anything is fetched, and the refusal names the URL up to them: a query
/// is where a token is put (`?token=`), and stderr goes to the scheduler's
/// log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_push_url_with_a_query_is_refused_without_echoing_the_query() {
    let sim = slow_sim(12, 0).await;
    for url in [
        "http://127.0.0.1:9/?token=s3cr3t-push-token",
        "https://push.example.com/gw#access_token=s3cr3t-push-token",
    ] {
        let fx = Fixture::new();
        let out = fx
            .sync(&sim.base_url(), &["--pacer", "local", "--metrics-push", url])
            .output()
            .unwrap();
        assert_exit(&out, 78);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("--metrics-push") && stderr.contains("without a query"),
            "{stderr}"
        );
        assert!(!stderr.contains("s3cr3t-push-token"), "{url}: {stderr}");
        assert!(sim.requests().is_empty(), "nothing was fetched");
    }
}

/// A run that stops mid-window (here on a 404) reports what it did commit:
/// run_finished and the metrics file used to say 0 pages on every failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_reports_the_pages_it_committed() {
    let fx = Fixture::new();
    let config = SimConfig {
        dataset: Dataset {
            subjects: 4,
            records: 40,
            seed: 9,
            padding: 0,
        },
        token: TOKEN.into(),
        faults: {
            let mut f = FaultSchedule::default();
            let (n, fault) = FaultSchedule::parse_entry("3=404").unwrap();
            f.insert(n, fault);
            f
        },
        ..SimConfig::default()
    };
    let sim = Simulator::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let metrics = fx.path("edc_sync.prom");
    let out = fx
        .sync(
            &sim.base_url(),
            &["--pacer", "local", "--metrics-file", metrics.to_str().unwrap()],
        )
        .output()
        .unwrap();
    assert_exit(&out, 65);
    let finished = fx.events("run_finished");
    assert_eq!(
        (finished[0]["pages"].as_u64(), finished[0]["records"].as_u64()),
        (Some(2), Some(10))
    );
    let prom = std::fs::read_to_string(&metrics).unwrap();
    assert!(
        prom.lines()
            .any(|l| l.starts_with("edc_sync_pages{") && l.ends_with(" 2")),
        "{prom}"
    );
}

/// A run killed with SIGKILL leaves its Redis run lock behind for the TTL
/// (60 s). When the holder is a pid of this host that no longer runs, the
/// next run takes the lock over at once, and says so in the audit trail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_run_lock_held_by_a_dead_local_pid_is_taken_over_at_once() {
    let fx = Fixture::new();
    let sim = slow_sim(60, 100).await;
    let redis = support::redis::start();
    let first = fx
        .sync(&sim.base_url(), &["--redis", &redis.url()])
        .spawn()
        .unwrap();
    until_requests(&sim, 2).await;
    let dead = first.id();
    signal(&first, libc::SIGKILL);
    let _ = finish(first).await;
    let started = Instant::now();
    let out = fx
        .sync(&sim.base_url(), &["--redis", &redis.url()])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "it did not wait out the TTL"
    );
    let taken = fx.events("run_lock_taken_over");
    assert_eq!(taken.len(), 1, "{taken:?}");
    assert!(
        taken[0]["previous_holder"]
            .as_str()
            .unwrap()
            .contains(&format!("pid {dead}")),
        "{taken:?}"
    );
    fx.assert_every_record_once(60);
}

/// `bench startup` runs end to end and prints its figures as one JSON line
/// (the benchmark itself is run by hand; tests never time anything).
#[test]
fn bench_startup_prints_its_figures() {
    let out = support::bench(&["startup", "--entries", "300"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let last: serde_json::Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    for key in ["time_ratio", "rss_ratio", "manifest_entries", "audit_lines"] {
        assert!(last.get(key).is_some(), "{key} missing in {last}");
    }
    assert_eq!(last["manifest_entries"], 300);
    // Each child's peak RSS says whether it is its own: above the mark of
    // the process that started it, which wait4's figure cannot go below.
    for run in ["empty", "history"] {
        let (peak, floor) = (&last[run]["peak_rss_mib"], &last[run]["spawner_peak_rss_mib"]);
        let (peak, floor) = (peak.as_f64().unwrap(), floor.as_f64().unwrap());
        assert!(floor > 0.0, "{run}: no spawner peak in {last}");
        assert_eq!(last[run]["peak_rss_exact"], peak > floor, "{run}: {last}");
        assert!(
            peak >= floor,
            "{run}: wait4 reported below the spawner's mark: {last}"
        );
    }
}

/// On a terminal `verify` shows what it is doing and the pages hashed so
/// far (a spinner on stderr, a bar of the listed pages once they are
/// known, cleared before the report); through a pipe, as under cron,
/// nothing is drawn.
#[test]
fn verify_shows_its_progress_on_a_terminal_only() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let made = support::run(&["demo", "--dir", demo.to_str().unwrap(), "--records", "20"]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let path = |p: &str| demo.join(p).to_str().unwrap().to_string();
    let (landing, state, trail) = (path("landing"), path("state"), path("audit.jsonl"));
    let args = [
        "verify",
        "--out",
        &landing,
        "--state",
        &state,
        "--audit-log",
        &trail,
    ];
    let piped = support::run(&args);
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    assert!(!piped.stderr.contains("pages hashed"), "{}", piped.stderr);
    // `script` (util-linux) runs it on a pseudo-terminal and copies what
    // was drawn there to its own stdout.
    let exe = support::edc_sync().get_program().to_str().unwrap().to_string();
    let line = format!("{exe} {}", args.join(" "));
    let out = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("TERM", "xterm")
        .output()
        .expect("script(1) from util-linux runs");
    let drawn = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{drawn}");
    assert!(drawn.contains("verify: hashing the landed pages"), "{drawn}");
    assert!(drawn.contains("pages hashed"), "{drawn}");
    // Once the manifest is read the pages to hash are known: a bar.
    assert!(
        drawn
            .lines()
            .any(|l| l.contains("] ") && l.contains(" of ") && l.contains(" pages hashed")),
        "{drawn}"
    );
    assert!(drawn.contains("no discrepancy"), "{drawn}");
}

/// `bench verify` lands each size by a sync, runs verify over it beside
/// `sha256sum` of the same pages and `audit verify` of the trail, and
/// prints one line a size and the JSON line (timed only by hand).
#[test]
fn bench_verify_prints_its_figures() {
    let out = support::bench(&["verify", "--pages", "20,40"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout.lines().filter(|l| l.starts_with("verify at ")).count(),
        2,
        "{}",
        out.stdout
    );
    let last: serde_json::Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last[1]["pages"], 40, "{last}");
    for key in [
        "landed_bytes",
        "trail_bytes",
        "sha256sum_s",
        "ratio",
        "audit_verify_s",
    ] {
        assert!(last[0].get(key).is_some(), "{key} missing in {last}");
    }
    assert!(last[0]["verify"]["wall_s"].as_f64().unwrap() > 0.0);
}

/// `bench scale` prints the trail's bytes a page and of a run with nothing
/// new, and a quiet stream's start-up before and after another stream's
/// pages in the same trail, each against its target (timed only by hand).
#[test]
fn bench_scale_prints_its_figures() {
    let out = support::bench(&["scale", "--pages", "30"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("(target 2048,"), "{}", out.stdout);
    assert!(out.stdout.contains("(target 1.1x)"), "{}", out.stdout);
    let last: serde_json::Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    let f = &last["figures"];
    assert_eq!(f["pages"], 30, "{last}");
    assert!(f["trail_bytes_per_page"].as_f64().unwrap() > 0.0, "{last}");
    assert!(f["busy_lines"].as_u64().unwrap() >= 30, "{last}");
    assert!(f["quiet_after_busy"]["wall_s"].as_f64().unwrap() > 0.0, "{last}");
    // The full-memory sync: 30 pages of 100 records, all remembered.
    assert_eq!(f["full_memory"]["identities"], 3000, "{last}");
    assert!(f["full_memory"]["line_bytes"].as_u64().unwrap() > 0, "{last}");
    assert!(
        out.stdout
            .contains("a page of 100 records at a memory of 3000 identities"),
        "{}",
        out.stdout
    );
}

/// `bench streams` runs N streams of one quota in `sync --redis
/// --all-streams` processes (here two, sharing the cap), twice (one page a
/// stream, then the pages asked), and prints the Redis calls per request
/// against their floor and when each stream finished (measured only by
/// hand: here the shape of the output).
#[test]
fn bench_streams_prints_its_figures() {
    let redis = support::redis::start();
    let out = support::bench(&[
        "streams",
        "--redis",
        &redis.url(),
        "--streams",
        "1,6",
        "--pages",
        "2",
        "--rate",
        "200",
        "--procs",
        "2",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let last: serde_json::Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    let figures = last["figures"].as_array().unwrap();
    assert_eq!(figures.len(), 2, "{last}");
    assert_eq!(figures[0]["procs"], 1, "{last}: one stream, one process");
    assert_eq!(figures[1]["procs"], 2, "{last}");
    assert_eq!(figures[1]["streams"], 6, "{last}");
    assert_eq!(figures[1]["requests"], 12, "{last}");
    for key in [
        "script_calls",
        "wake_pops",
        "calls_per_request",
        "marginal_calls_per_request",
        "finish_first_s",
        "finish_last_s",
    ] {
        assert!(figures[1].get(key).is_some(), "{key} missing in {last}");
    }
}

/// `bench sync` measures the small pages beside their floor, round by
/// round (a sync, then the floor of the bytes its commits wrote, then the
/// same floor with each page received by a bare GET), and reports the
/// round with the median ratio: a floor measured minutes apart, on a file
/// system in another state, moved the printed ratio between 1.1x and 2.6x
/// from one run of one build to the next. Every round's ratios are in the
/// JSON line, and the printed ones are the median round's own.
#[test]
fn bench_sync_reports_its_small_pages_beside_their_floor_round_by_round() {
    let out = support::bench(&[
        "sync",
        "--pages",
        "6",
        "--page-kib",
        "16",
        "--large-pages",
        "1",
        "--large-page-mib",
        "1",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let last: serde_json::Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    let rounds = last["rounds"]
        .as_array()
        .unwrap_or_else(|| panic!("no rounds in {last}"));
    assert_eq!(rounds.len(), 3, "{last}");
    let ratio = |r: &serde_json::Value, key: &str| r[key].as_f64().unwrap_or_else(|| panic!("{key} in {r}"));
    for round in rounds {
        let (sync, floor) = (
            ratio(round, "cpu_ms_per_page"),
            ratio(round, "floor_cpu_ms_per_page"),
        );
        assert!(sync > 0.0 && floor > 0.0, "{round}");
        assert_eq!(round["pages"], 6, "every round syncs every page: {round}");
        assert!(ratio(round, "floor_received_cpu_ms_per_page") > 0.0, "{round}");
    }
    let mut ratios: Vec<f64> = rounds.iter().map(|r| ratio(r, "cpu_vs_floor")).collect();
    ratios.sort_by(f64::total_cmp);
    assert_eq!(
        last["cpu_vs_floor"].as_f64(),
        Some(ratios[1]),
        "the median round's: {last}"
    );
    let median = rounds
        .iter()
        .find(|r| r["cpu_vs_floor"] == last["cpu_vs_floor"])
        .unwrap();
    for key in [
        "cpu_ms_per_page",
        "floor_cpu_ms_per_page",
        "floor_received_cpu_ms_per_page",
    ] {
        assert_eq!(
            last[key], median[key],
            "{key}: the printed figure is the median round's"
        );
    }
    // What a page cannot do without, beside what the floor leaves for it:
    // SHA-256 and the check learning the records' identities (a JSON
    // timestamp cursor's lookback asks for them), by id and by content.
    for key in [
        "small_compute_ms_per_page",
        "padded_by_id_vs_sha256",
        "dense_by_id_vs_sha256",
        "padded_by_content_vs_sha256",
        "dense_by_content_vs_sha256",
    ] {
        assert!(last[key].as_f64().is_some_and(|v| v > 0.0), "{key} in {last}");
    }
    assert!(
        last["dense_by_content_vs_sha256"].as_f64() > last["dense_one_pass_vs_sha256"].as_f64(),
        "learning identities by content costs more than not: {last}"
    );
    // The least a page could cost, round by round: its received floor,
    // SHA-256 and the check by id, and SHA-256 over its commit line at
    // the small pages' rate; and that least over the floor, the figure
    // that says whether 1.3x can be reached on this machine at all.
    let compute = ratio(&last, "small_compute_ms_per_page");
    let sha_per_byte = ratio(&last, "small_sha256_ms_per_byte");
    assert!(sha_per_byte > 0.0, "{last}");
    for round in rounds {
        let line = ratio(round, "audit_line_bytes");
        let least = ratio(round, "floor_received_cpu_ms_per_page") + compute + sha_per_byte * line;
        assert!(
            (ratio(round, "least_ms_per_page") - least).abs() < 1e-9,
            "the received floor + the computing + the line's hash: {round}"
        );
        assert!(
            (ratio(round, "least_vs_floor") - least / ratio(round, "floor_cpu_ms_per_page")).abs() < 1e-9,
            "{round}"
        );
    }
    assert_eq!(last["least_vs_floor"], median["least_vs_floor"], "{last}");
}

/// The peak RSS `bench sync` prints for its large pages is the syncing
/// child's own: a child started by a process holding hundreds of MiB
/// used to report its parent's high-water mark (`ru_maxrss` survives the
/// exec), which is how the benchmark's small phase inflated the figure.
#[test]
fn a_bench_phase_reports_its_own_peak_rss_not_its_parents() {
    let mut held = vec![0u8; 300 * 1024 * 1024];
    for page in held.chunks_mut(4096) {
        page[0] = 1;
    }
    let work = tempfile::tempdir().unwrap();
    let out = support::edc_sync_bench()
        .args(["sync-phase", "--pages", "2", "--page-bytes", "262144", "--work"])
        .arg(work.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let figures: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let peak = figures["peak_rss_mib"].as_f64().unwrap();
    assert!(!std::hint::black_box(&held).is_empty());
    assert!(
        peak > 1.0 && peak < 150.0,
        "a sync of two 256 KiB pages reports {peak} MiB while its parent holds 300 MiB"
    );
}

/// A metrics file that cannot be written is found before the run, not
/// after a successful sync: 74 naming it, nothing fetched, no audit line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_metrics_file_stops_the_run_before_anything_is_fetched() {
    let fx = Fixture::new();
    let sim = slow_sim(12, 0).await;
    let metrics = fx.path("no-such-dir/edc_sync.prom");
    let out = fx
        .sync(
            &sim.base_url(),
            &["--pacer", "local", "--metrics-file", metrics.to_str().unwrap()],
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{stderr}");
    assert!(stderr.contains("edc_sync.prom"), "{stderr}");
    assert!(sim.requests().is_empty(), "nothing was fetched");
    assert!(!fx.path("audit.jsonl").exists());
}

/// `rediss://`: the shared pacer over TLS, the server verified against a
/// CA file (`ssl_ca_certs`), and with mutual TLS a client certificate
/// (`ssl_certfile`, `ssl_keyfile`). Without the CA (the system's trust
/// store does not know the test's CA) or without the client certificate
/// the handshake fails: 69 before any request, nothing landed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pacer_reaches_redis_over_tls_with_a_ca_file_and_a_client_certificate() {
    let certs_dir = tempfile::tempdir().unwrap();
    let certs = support::redis::certs(certs_dir.path());
    let (server, tls_port) = support::redis::start_tls(&certs, true);
    let ca = certs.ca.display().to_string();
    let client = format!(
        "ssl_certfile={}&ssl_keyfile={}",
        certs.client_cert.display(),
        certs.client_key.display()
    );
    let sim = slow_sim(40, 0).await;
    for (what, query, code) in [
        ("no CA file", client.clone(), 69),
        ("no client certificate", format!("ssl_ca_certs={ca}"), 69),
        (
            "CA file and client certificate",
            format!("ssl_ca_certs={ca}&{client}"),
            0,
        ),
    ] {
        let fx = Fixture::new();
        let url = format!("rediss://127.0.0.1:{tls_port}/0?{query}");
        let out = fx.sync(&sim.base_url(), &["--redis", &url]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{what}: {stderr}");
        if code == 0 {
            fx.assert_every_record_once(40);
        } else {
            assert!(
                !fx.path("landing").join("vault_json").exists(),
                "{what}: nothing landed"
            );
        }
    }
    // The pacer's keys were written through the TLS port.
    let mut plain = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("edc-sync:*").query(&mut plain).unwrap();
    assert!(!keys.is_empty(), "no pacer key in Redis");
}

/// `rediss+cluster://`: the shared pacer on a Redis Cluster over TLS (the
/// seeds' TLS ports, the CA file), every record landed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pacer_reaches_a_redis_cluster_over_tls() {
    let certs_dir = tempfile::tempdir().unwrap();
    let certs = support::redis::certs(certs_dir.path());
    let cluster = support::redis::start_tls_cluster(&certs);
    let sim = slow_sim(40, 0).await;
    let fx = Fixture::new();
    let out = fx
        .sync(&sim.base_url(), &["--redis", &cluster.tls_url(&certs.ca)])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    fx.assert_every_record_once(40);
}

/// The chain head goes to Redis under the trail's identity and under this
/// host and path, in one script: in a Redis Cluster too, where the two
/// keys share a hash tag (without it, one script over two slots is
/// refused, and the anchor would be lost with only a warning).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_over_a_redis_cluster_anchors_its_trail_there() {
    let cluster = support::redis::start_cluster();
    let fx = Fixture::new();
    let sim = slow_sim(20, 0).await;
    let out = finish(
        fx.sync(&sim.base_url(), &["--redis", &cluster.url()])
            .spawn()
            .unwrap(),
    )
    .await;
    assert_exit(&out, 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("anchor not written"), "{stderr}");
    let first = std::fs::read(fx.path("audit.jsonl")).unwrap();
    let first = &first[..first.iter().position(|b| *b == b'\n').unwrap()];
    let key = edc_core::audit::ChainHead::redis_key(&edc_core::digest::sha256_hex(first));
    let pacer = quota_pacer::RedisPacer::connect(&cluster.url(), edc_core::REDIS_KEY_PREFIX)
        .await
        .unwrap();
    let head: Option<String> = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut pacer.connection())
        .await
        .unwrap();
    let head: serde_json::Value = serde_json::from_str(&head.expect("the anchor is in the cluster")).unwrap();
    assert_eq!(head["audit_log"], "audit.jsonl");
    assert_eq!(
        head["bytes"],
        std::fs::metadata(fx.path("audit.jsonl")).unwrap().len()
    );
}

/// `cursor show` is read by a person at 3 a.m.: where the stream resumes,
/// its receipt, and the lookback's size, on one screen (the lookback's
/// every record id made it hundreds of lines for a 300-record stream);
/// `--full` prints the cursor whole, as the state holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursor_show_fits_a_screen_and_full_prints_it_whole() {
    let fx = support::runs::Fixture::new();
    let sim = support::runs::sim().await;
    let (code, message) = fx.run(&sim, edc_core::run::AuditOptions::default()).await;
    assert_eq!(code, 0, "{message}");
    let state = fx.path("state");
    let show = |extra: &[&str]| {
        let mut args = vec![
            "cursor",
            "show",
            "--vendor",
            "vault_json",
            "--study",
            "S1",
            "--state",
        ];
        args.push(state.to_str().unwrap());
        args.extend_from_slice(extra);
        support::run(&args)
    };
    let out = show(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.lines().count() <= 40,
        "{} lines:\n{}",
        out.stdout.lines().count(),
        out.stdout
    );
    let shown: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let file: serde_json::Value = serde_json::from_slice(
        &std::fs::read(fx.path("state/vault_json/-/S1/-/default.cursor.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(shown["window_start"], file["window_start"]);
    assert_eq!(shown["receipt"], file["receipt"]);
    // The file holds the lookback memory by its seal; the journal beside
    // it holds the memory, which `--full` shows whole.
    let ids = file["lookback"]["identities"].as_u64().unwrap();
    assert!(ids > 0);
    assert_eq!(shown["lookback"]["seen_records"], ids, "{}", out.stdout);
    let full = show(&["--full"]);
    assert_eq!(full.code, 0, "{}", full.stderr);
    let mut full: serde_json::Value = serde_json::from_str(&full.stdout).unwrap();
    let memory = full["lookback"].take();
    assert_eq!(
        file["lookback"]["sha256"].as_str().unwrap(),
        edc_core::digest::sha256_hex(memory.to_string().as_bytes())
    );
    full["lookback"] = file["lookback"].clone();
    assert_eq!(full, file);
}

/// `--summary json`: what a scheduler keeps (Airflow's last stdout line,
/// Dagster's metadata) is one JSON object: the outcome, the exit code, each
/// stream's pages and records, the waits and the trail; also when the run
/// is refused before it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summary_json_makes_the_last_stdout_line_one_json_object() {
    let fx = Fixture::new();
    let sim = slow_sim(50, 0).await;
    let last = |out: &std::process::Output| -> serde_json::Value {
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = stdout.lines().last().unwrap_or_default().to_string();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    };
    let out = fx
        .sync(&sim.base_url(), &["--pacer", "local", "--summary", "json"])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let summary = last(&out);
    assert_eq!(summary["outcome"], "ok");
    assert_eq!(summary["exit_code"], 0);
    assert_eq!(summary["records"], 50);
    assert_eq!(summary["streams"][0]["stream"], "default");
    assert_eq!(summary["streams"][0]["records"], 50);
    assert_eq!(
        summary["audit_trail"],
        fx.path("audit.jsonl").display().to_string()
    );
    // Refused before it starts: a stream the policy does not have.
    let out = fx
        .sync(
            &sim.base_url(),
            &["--pacer", "local", "--summary", "json", "--stream", "nope"],
        )
        .output()
        .unwrap();
    assert_exit(&out, 78);
    let summary = last(&out);
    assert_eq!(summary["outcome"], "refused");
    assert_eq!(summary["exit_code"], 78);
    assert!(summary["error"].as_str().unwrap().contains("nope"), "{summary}");
}

/// A scheduler's trace context (W3C `TRACEPARENT` / `TRACESTATE` in the
/// environment, as Airflow, Dagster and OpenTelemetry's environment
/// carrier set them) is stamped into the run header, so that the evidence
/// joins the scheduler's trace. A malformed one is named in a warning and
/// left out (the W3C rule: an invalid traceparent starts no trace), and
/// never stops the sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedulers_trace_context_is_stamped_into_the_run_header() {
    let fx = Fixture::new();
    let sim = slow_sim(10, 0).await;
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let out = fx
        .sync(&sim.base_url(), &["--pacer", "local"])
        .env("TRACEPARENT", parent)
        .env("TRACESTATE", "airflow=dag_run:nightly,rojo=00f067aa0ba902b7")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let header = fx.events("run_started").pop().unwrap();
    assert_eq!(header["trace"]["traceparent"], parent, "{header}");
    assert_eq!(header["trace"]["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(
        header["trace"]["tracestate"],
        "airflow=dag_run:nightly,rojo=00f067aa0ba902b7"
    );
    for malformed in [
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
    ] {
        let out = fx
            .sync(&sim.base_url(), &["--pacer", "local"])
            .env("TRACEPARENT", malformed)
            .env("TRACESTATE", "rojo=1")
            .output()
            .unwrap();
        assert_exit(&out, 0);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("TRACEPARENT"), "{malformed}: {stderr}");
        let header = fx.events("run_started").pop().unwrap();
        assert!(header.get("trace").is_none(), "{malformed}: {header}");
    }
}

/// A run refused before it starts (here a stream the policy does not have:
/// 78) still reports to the metrics file, so the documented staleness
/// alert fires: on a host that never succeeded the last success is 0, on
/// one that did it is kept, and the exit code is the refusal's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_run_reports_to_the_metrics_file_too() {
    let fx = Fixture::new();
    let sim = slow_sim(12, 0).await;
    let metrics = fx.path("edc_sync.prom");
    let file = ["--pacer", "local", "--metrics-file", metrics.to_str().unwrap()];
    let refused = fx
        .sync(&sim.base_url(), &[&file[..], &["--stream", "nope"]].concat())
        .output()
        .unwrap();
    assert_exit(&refused, 78);
    let text = std::fs::read_to_string(&metrics).unwrap();
    let labels = "vendor=\"vault_json\",tenant=\"\",study=\"S-1\",protocol_version=\"\",stream=\"nope\"";
    assert!(
        text.contains(&format!("edc_sync_last_success_timestamp_seconds{{{labels}}} 0")),
        "never succeeded: {text}"
    );
    assert!(
        text.contains(&format!("edc_sync_last_exit_code{{{labels}}} 78")),
        "{text}"
    );
    // After a success, a refusal keeps the success time of every stream
    // the file knew, with the refusal's exit code.
    assert_exit(&fx.sync(&sim.base_url(), &file).output().unwrap(), 0);
    let ok = std::fs::read_to_string(&metrics).unwrap();
    let default = "vendor=\"vault_json\",tenant=\"\",study=\"S-1\",protocol_version=\"\",stream=\"default\"";
    let success = ok
        .lines()
        .find(|l| l.starts_with(&format!("edc_sync_last_success_timestamp_seconds{{{default}}}")))
        .unwrap()
        .to_string();
    // The token's variable missing: 78 before anything is fetched.
    let refused = fx
        .sync(&sim.base_url(), &file)
        .env_remove("EDC_SYNC_TEST_TOKEN")
        .output()
        .unwrap();
    assert_exit(&refused, 78);
    let after = std::fs::read_to_string(&metrics).unwrap();
    assert!(after.contains(&success), "{after}");
    assert!(
        after.contains(&format!("edc_sync_last_exit_code{{{default}}} 78")),
        "{after}"
    );
}

/// `--metrics-push URL`: each stream's figures go to a real Prometheus
/// Pushgateway under a group of its own (job edc_sync, the stream's
/// identity as the grouping key), by POST, so that a failed run replaces
/// the exit code and keeps the last success; a refused run is pushed too;
/// a Pushgateway that is down is a warning, never the sync's failure; a
/// URL that is no http(s) URL is refused (78) before anything is fetched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_pushed_to_a_pushgateway() {
    let gateway = edc_testkit::pushgateway::PrivatePushgateway::start().unwrap_or_else(|e| panic!("{e}"));
    let fx = Fixture::new();
    let sim = slow_sim(12, 0).await;
    let push = ["--pacer", "local", "--metrics-push", &gateway.url()];
    let _ = rustls::crypto::ring::default_provider().install_default();
    let metrics_url = format!("{}/metrics", gateway.url());
    let scrape = async || -> String { reqwest::get(&metrics_url).await.unwrap().text().await.unwrap() };
    let series = |text: &str, name: &str, stream: &str| -> Option<String> {
        text.lines()
            .find(|l| {
                l.starts_with(&format!("{name}{{"))
                    && l.contains(&format!("stream=\"{stream}\""))
                    && l.contains("job=\"edc_sync\"")
                    && l.contains("study=\"S-1\"")
            })
            .map(|l| l.rsplit(' ').next().unwrap().to_string())
    };
    let ok = tokio::task::block_in_place(|| fx.sync(&sim.base_url(), &push).output().unwrap());
    assert_exit(&ok, 0);
    let text = scrape().await;
    assert_eq!(
        series(&text, "edc_sync_records", "default").as_deref(),
        Some("12"),
        "{text}"
    );
    assert_eq!(
        series(&text, "edc_sync_last_exit_code", "default").as_deref(),
        Some("0")
    );
    let success = series(&text, "edc_sync_last_success_timestamp_seconds", "default").unwrap();
    assert!(success.parse::<f64>().unwrap() > 1.0e9, "{success}");
    // A failed run of the same stream: its exit code, the success kept.
    let gone = format!(
        "http://127.0.0.1:{}",
        edc_testkit::redis_server::free_port().unwrap()
    );
    let failed = tokio::task::block_in_place(|| fx.sync(&gone, &push).output().unwrap());
    assert_exit(&failed, 69);
    let text = scrape().await;
    assert_eq!(
        series(&text, "edc_sync_last_exit_code", "default").as_deref(),
        Some("69")
    );
    assert_eq!(
        series(&text, "edc_sync_last_success_timestamp_seconds", "default"),
        Some(success)
    );
    // Refused before it starts: pushed too, under the stream it named.
    let refused = tokio::task::block_in_place(|| {
        fx.sync(&sim.base_url(), &[&push[..], &["--stream", "nope"]].concat())
            .output()
            .unwrap()
    });
    assert_exit(&refused, 78);
    let text = scrape().await;
    assert_eq!(
        series(&text, "edc_sync_last_exit_code", "nope").as_deref(),
        Some("78"),
        "{text}"
    );
    assert!(!text.contains(TOKEN));
    // A Pushgateway that is down: the sync's own result, and a warning.
    let down = ["--pacer", "local", "--metrics-push", &gone];
    let out = tokio::task::block_in_place(|| fx.sync(&sim.base_url(), &down).output().unwrap());
    assert_exit(&out, 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("metrics") && stderr.contains(&gone), "{stderr}");
    // Not an http(s) URL: refused before anything is fetched.
    let requests = sim.requests().len();
    let out = fx
        .sync(
            &sim.base_url(),
            &["--pacer", "local", "--metrics-push", "ftp://pushgateway:9091"],
        )
        .output()
        .unwrap();
    assert_exit(&out, 78);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--metrics-push"));
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");
}

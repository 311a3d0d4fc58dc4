//! The clearinghouse claim submitter (`crates/pacer/examples/claim_submitter`), the
//! source's own verification against a real Redis: the pacer as
//! a library for a write path, with an account quota, per-payer sub-limits,
//! caps on requests in flight, and slots that always come back.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The example binary `cargo test` built beside this test binary.
fn submitter() -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let path: PathBuf = dir.join("examples").join("claim_submitter");
    assert!(
        path.is_file(),
        "{} is missing: `cargo test` builds the examples; run `cargo build --examples`",
        path.display()
    );
    Command::new(path)
}

/// The clearinghouse simulator in its own process; killed on drop.
struct House {
    child: Child,
    url: String,
}

impl House {
    fn start(args: &[&str]) -> House {
        let mut child = submitter()
            .arg("clearinghouse")
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().strip_prefix("listening on ").unwrap().to_string();
        House { child, url }
    }

    fn stats(&self) -> serde_json::Value {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let body = rt.block_on(async {
            reqwest::get(format!("{}/stats", self.url))
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
        });
        serde_json::from_slice(&body).unwrap()
    }
}

impl Drop for House {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn submit(house: &House, redis: &str, retry: &std::path::Path, args: &[&str]) -> Command {
    let mut cmd = submitter();
    cmd.args([
        "submit",
        "--endpoint",
        &house.url,
        "--redis",
        redis,
        "--retry-file",
    ])
    .arg(retry)
    .args(args)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

fn summary(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

/// The lease sets of account `name` in Redis and how many slots each holds.
fn slots_held(redis_url: &str, name: &str) -> Vec<(String, u64)> {
    let client = redis::Client::open(redis_url).unwrap();
    let mut conn = client.get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("edc-sync:{{{name}}}:leases*"))
        .query(&mut conn)
        .unwrap();
    keys.into_iter()
        .map(|k| {
            let n: u64 = redis::cmd("ZCARD").arg(&k).query(&mut conn).unwrap();
            (k, n)
        })
        .collect()
}

/// 60 claims for one payer, account 10/s burst 20 and 8 in flight,
/// `_default` payer 4/s burst 8 and 4 in flight: at least (60 - 8) / 4 s,
/// and the clearinghouse never saw its quota exceeded nor more than 4 in
/// flight for the payer (8 for the account).
#[test]
fn sixty_claims_for_one_payer_keep_every_quota_and_cap() {
    let redis = support::redis::start();
    let house = House::start(&["--latency-ms", "400"]);
    let dir = tempfile::tempdir().unwrap();
    let retry = dir.path().join("retry.jsonl");
    let out = submit(
        &house,
        &redis.url(),
        &retry,
        &["--claims", "60", "--workers", "16"],
    )
    .output()
    .unwrap();
    let s = summary(&out);
    eprintln!("submitter: {s}\nclearinghouse: {}", house.stats());
    assert_eq!(s["done"], 60);
    let elapsed = s["elapsed_s"].as_f64().unwrap();
    assert!(elapsed >= (60.0 - 8.0) / 4.0, "{elapsed} s");
    let stats = house.stats();
    assert_eq!(stats["accepted"], 60);
    assert_eq!(stats["quota_exceeded"], 0, "{stats}");
    assert!(
        stats["max_in_flight_by_payer"]["PAYER-001"].as_u64().unwrap() <= 4,
        "{stats}"
    );
    assert!(stats["max_in_flight_account"].as_u64().unwrap() <= 8, "{stats}");
    assert!(
        stats["max_in_flight_by_payer"]["PAYER-001"].as_u64().unwrap() == 4,
        "with 400 ms answers and 16 workers the payer cap is reached: {stats}"
    );
    assert!(!retry.exists(), "no claim ran out of attempts");
}

/// Two processes, six payers between them, one Redis: the account quota
/// (10/s, burst 20, 8 in flight) holds across both, though their payers'
/// sub-limits together would allow 24/s.
#[test]
fn two_processes_share_the_account_quota() {
    let redis = support::redis::start();
    let house = House::start(&["--latency-ms", "300"]);
    let dir = tempfile::tempdir().unwrap();
    let children: Vec<_> = [("1", "P-A,P-B,P-C"), ("1001", "P-D,P-E,P-F")]
        .iter()
        .enumerate()
        .map(|(i, (first, payers))| {
            let retry = dir.path().join(format!("retry-{i}.jsonl"));
            submit(
                &house,
                &redis.url(),
                &retry,
                &["--claims", "40", "--first-claim", first, "--payers", payers],
            )
            .spawn()
            .unwrap()
        })
        .collect();
    let mut done = 0;
    for child in children {
        done += summary(&child.wait_with_output().unwrap())["done"]
            .as_u64()
            .unwrap();
    }
    let stats = house.stats();
    eprintln!("clearinghouse: {stats}");
    assert_eq!(done, 80);
    assert_eq!(stats["accepted"], 80);
    assert_eq!(stats["quota_exceeded"], 0, "{stats}");
    let account = stats["max_in_flight_account"].as_u64().unwrap();
    assert!(account <= 8, "{stats}");
    assert_eq!(
        account, 8,
        "six payers of 4 in flight each, 300 ms answers: the account cap binds: {stats}"
    );
    for payer in stats["max_in_flight_by_payer"].as_object().unwrap().values() {
        assert!(payer.as_u64().unwrap() <= 4, "{stats}");
    }
}

/// 1,000 claims, 10 % of which fail their first send (half by an error,
/// half by a panic inside the send): every claim is accepted in the end,
/// none is lost, the pool never deadlocks, and afterwards no slot is held
/// in any lease set, account or payer.
#[test]
fn failing_and_panicking_sends_give_every_slot_back() {
    let redis = support::redis::start();
    let house = House::start(&[
        "--latency-ms",
        "2",
        "--account-rate",
        "2000",
        "--account-burst",
        "100",
        "--payer-rate",
        "1000",
        "--payer-burst",
        "100",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let retry = dir.path().join("retry.jsonl");
    let out = submit(
        &house,
        &redis.url(),
        &retry,
        &[
            "--claims",
            "1000",
            "--payers",
            "P-1,P-2,P-3,P-4",
            "--account-rate",
            "1000",
            "--account-burst",
            "50",
            "--payer-rate",
            "400",
            "--payer-burst",
            "20",
            "--inject-failures",
            "10",
            "--backoff-ms",
            "5",
        ],
    )
    .output()
    .unwrap();
    let s = summary(&out);
    eprintln!("submitter: {s}");
    assert_eq!(s["done"], 1000, "{s}");
    assert_eq!(s["to_retry_file"], 0, "{s}");
    let (errors, panics) = (s["send_errors"].as_u64().unwrap(), s["panics"].as_u64().unwrap());
    assert!(errors + panics >= 80 && errors > 0 && panics > 0, "{s}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("CLM0") && !stderr.contains("P-1"),
        "claim and payer identifiers are masked in every log line"
    );
    assert!(stderr.contains("masked-"), "the failures were logged, masked");
    let held = slots_held(&redis.url(), "clearinghouse");
    let total: u64 = held.iter().map(|(_, n)| n).sum();
    assert_eq!(total, 0, "slots still held after the run: {held:?}");
    assert_eq!(house.stats()["in_flight_now"], 0);
}

/// With the clearinghouse down, every claim ends in the retry file: the
/// submitter says so, exits 75 (resubmit later; nothing is lost), names
/// the cause of the transport error, and writes no colour codes into a
/// stderr that is not a terminal.
#[test]
fn claims_sent_to_the_retry_file_exit_75_naming_the_cause() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let retry = dir.path().join("retry.jsonl");
    let out = submitter()
        .args([
            "submit",
            "--endpoint",
            &format!("http://127.0.0.1:{port}"),
            "--retry-file",
        ])
        .arg(&retry)
        .args(["--claims", "2", "--max-attempts", "2", "--backoff-ms", "5"])
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{stderr}");
    let s: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(s["to_retry_file"], 2, "{s}");
    assert_eq!(std::fs::read_to_string(&retry).unwrap().lines().count(), 2);
    assert!(stderr.contains("2 of 2 claims"), "{stderr}");
    assert!(
        stderr.contains(&retry.display().to_string()),
        "the retry file is named: {stderr}"
    );
    assert!(
        stderr.contains("Connection refused") || stderr.contains("connection refused"),
        "the cause: {stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "no colour into a pipe: {stderr}");
}

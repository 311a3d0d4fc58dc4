//! What a committed page costs in syncs, and what a failed sync leaves
//!: at most three fsync-class calls per page in the
//! steady state, and fsyncs that fail with EIO (injected by strace) never
//! lose, duplicate or run the cursor ahead of landed, audited data.

use crate::support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use edc_sim::{Dataset, SimConfig, Simulator};

const TOKEN: &str = "durability-token";

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new(page_size: u32) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = support::git_init(dir.path());
        let policies = support::SIM_POLICIES.replace("page_size: 40", &format!("page_size: {page_size}"));
        std::fs::write(dir.path().join("policies.yaml"), policies).unwrap();
        support::git_commit_all(&repo, "test policies");
        Fixture { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// `edc-sync sync ...` on this fixture, run by `runner` (e.g. strace).
    fn sync(&self, runner: &[&str], sim: &Simulator, extra: &[&str]) -> Command {
        self.sync_vendor("vault_json", runner, sim, extra)
    }

    /// The same for another vendor of the fixture's policies.
    fn sync_vendor(&self, vendor: &str, runner: &[&str], sim: &Simulator, extra: &[&str]) -> Command {
        let (program, prefix) = match runner.split_first() {
            Some((p, rest)) => (PathBuf::from(p), rest.to_vec()),
            None => (PathBuf::from(env!("CARGO_BIN_EXE_edc-sync")), Vec::new()),
        };
        let mut cmd = Command::new(program);
        cmd.args(prefix);
        if !runner.is_empty() {
            cmd.arg(env!("CARGO_BIN_EXE_edc-sync"));
        }
        cmd.args(["sync", "--config"])
            .arg(self.path("policies.yaml"))
            .args(["--vendor", vendor, "--study", "S-1", "--pacer", "local", "--out"])
            .arg(self.path("landing"))
            .arg("--state")
            .arg(self.path("state"))
            .arg("--audit-log")
            .arg(self.path("audit.jsonl"))
            .args(extra)
            .env("EDC_SYNC_TEST_BASE_URL", sim.base_url())
            .env("EDC_SYNC_TEST_TOKEN", TOKEN)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }

    /// `edc-sync verify` over this fixture's landing, state and trail.
    fn verify(&self) -> support::Outcome {
        support::run_cmd(
            support::edc_sync()
                .args(["verify", "--out"])
                .arg(self.path("landing"))
                .arg("--state")
                .arg(self.path("state"))
                .arg("--audit-log")
                .arg(self.path("audit.jsonl")),
        )
    }

    fn landed(&self) -> Vec<String> {
        edc_qualify::landed::landed_json_record_ids(&self.path("landing/vault_json/-/S-1/-/default")).unwrap()
    }

    fn cursor(&self) -> serde_json::Value {
        std::fs::read_to_string(self.path("state/vault_json/-/S-1/-/default.cursor.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    /// The lookback memory the cursor seals, whole: the base of its
    /// journal with every change after it (`cursor show --full` reads it
    /// so, proven by the seal).
    fn memory(&self) -> serde_json::Value {
        let out = support::run(&[
            "cursor",
            "show",
            "--full",
            "--vendor",
            "vault_json",
            "--study",
            "S-1",
            "--state",
            self.path("state").to_str().unwrap(),
        ]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap()["lookback"].take()
    }
}

fn strace() -> &'static str {
    for path in ["/usr/bin/strace", "/bin/strace"] {
        if std::path::Path::new(path).is_file() {
            return path;
        }
    }
    panic!(
        "strace is not installed; the durability tests count and fail syscalls with it.\n\
         Install it with: sudo apt-get install -y strace (scripts/test does this when run as root)"
    );
}

async fn sim(records: u32) -> Simulator {
    padded_sim(records, 0).await
}

/// A simulator whose every record carries `padding` filler bytes.
async fn padded_sim(records: u32, padding: usize) -> Simulator {
    Simulator::start(
        SimConfig {
            dataset: Dataset {
                subjects: 5,
                records,
                seed: 11,
                padding,
            },
            token: TOKEN.into(),
            ..SimConfig::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

/// fsync-class calls (`strace -c` summary) of one run of `pages` pages.
fn syncs_of_a_run(pages: u32) -> u64 {
    let fx = Fixture::new(5);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sim = rt.block_on(sim(500));
    let summary = fx.path("strace.txt");
    let out = fx
        .sync(
            &[
                strace(),
                "-f",
                "-c",
                "-e",
                "trace=fsync,fdatasync,syncfs,sync_file_range",
                "-o",
                summary.to_str().unwrap(),
            ],
            &sim,
            &["--max-pages", &pages.to_string()],
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    edc_sync_bench::peers::sync_calls(&std::fs::read_to_string(&summary).unwrap())
}

/// The marginal cost of a page: two runs of different length, so the
/// per-run syncs (header, run_started, run_finished, locks) cancel out.
#[test]
fn a_committed_page_costs_at_most_three_syncs() {
    let (short, long) = (syncs_of_a_run(5), syncs_of_a_run(25));
    let per_page = (long - short) as f64 / 20.0;
    eprintln!("fsync-class calls: {short} for 5 pages, {long} for 25: {per_page:.2} a page");
    assert!(
        per_page <= 3.0,
        "{per_page:.2} fsync-class calls a page (target 3)"
    );
}

/// 30 rounds: a sync whose Nth fsync-class call fails with EIO (N seeded,
/// so the failure falls on every kind of sync in turn), then a clean run.
/// The failed run stops; nothing it could not make durable counts as
/// committed; at the end every record is landed once and the cursor is at
/// the high-water mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_fsyncs_lose_and_duplicate_nothing() {
    fsync_fault_rounds(30).await;
}

pub async fn fsync_fault_rounds(rounds: u32) {
    let records = 300;
    let fx = Fixture::new(5);
    let sim = sim(records).await;
    let mut seed: u64 = 0xF5_1C;
    let mut failed_runs = 0;
    for round in 0..rounds {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // strace counts calls per thread: the Nth fsync of each thread fails.
        let nth = 1 + (seed >> 33) % 6;
        let inject = format!("inject=fsync,fdatasync:error=EIO:when={nth}");
        let out = fx
            .sync(
                &[
                    strace(),
                    "-f",
                    "-qq",
                    "-e",
                    "trace=fsync,fdatasync",
                    "-e",
                    &inject,
                    "-o",
                    "/dev/null",
                ],
                &sim,
                &["--max-pages", "3"],
            )
            .output()
            .unwrap();
        if !out.status.success() {
            failed_runs += 1;
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("fsync") || stderr.contains("Input/output error"),
                "round {round}: a failed sync names the failure: {stderr}"
            );
        }
        // Whatever the failed run left, the cursor is never ahead of the
        // data: everything before the cursor's window is landed.
        let cursor = fx.cursor();
        if let Some(start) = cursor["window_start"].as_str() {
            let ds = Dataset {
                subjects: 5,
                records,
                seed: 11,
                padding: 0,
            };
            let landed: std::collections::BTreeSet<String> = fx.landed().into_iter().collect();
            for n in 1..=records {
                let r = ds.record(n);
                if r.modified.as_str() < start {
                    assert!(
                        landed.contains(&format!("AT-{:07}", r.n)),
                        "round {round}: the cursor is past record {n}, which is not landed"
                    );
                }
            }
        }
    }
    assert!(
        failed_runs > rounds / 2,
        "the injection hit: {failed_runs} of {rounds} runs failed"
    );
    // Then clean runs to the end.
    let status = fx.sync(&[], &sim, &[]).status().unwrap();
    assert_eq!(status.code(), Some(0));
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for id in fx.landed() {
        *counts.entry(id).or_default() += 1;
    }
    let duplicated: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(duplicated.is_empty(), "records landed twice: {duplicated:?}");
    assert_eq!(counts.len(), records as usize, "every record landed");
    let report = edc_core::audit::verify(&fx.path("audit.jsonl")).unwrap();
    assert!(report.intact(), "{report}");
    let verify = fx.verify();
    assert_eq!(verify.code, 0, "{}\n{}", verify.stdout, verify.stderr);
}

/// A clean run of at most `max` pages, which must succeed.
fn pages(fx: &Fixture, sim: &Simulator, max: u32) {
    let out = fx
        .sync(&[], sim, &["--max-pages", &max.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A cursor caught up from the trail is the one the commits left: where
/// it stands, its last page and its lookback memory (rebuilt from the
/// lines' changes and held to their seals).
fn assert_same_cursor(now: &serde_json::Value, then: &serde_json::Value) {
    for key in [
        "window_start",
        "next_page",
        "high_water",
        "last_page_sha256",
        "lookback",
    ] {
        assert_eq!(now[key], then[key], "{key}");
    }
}

fn events(fx: &Fixture, name: &str) -> Vec<serde_json::Value> {
    support::audit_events(&fx.path("audit.jsonl"), name)
}

/// A cursor file that lost its last writes (it is not fsynced per page) is
/// caught up from the trail before anything is fetched: no page is asked
/// for again, and the catch-up is audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_behind_the_trail_is_rolled_forward_before_any_fetch() {
    let fx = Fixture::new(5);
    let sim = sim(100).await;
    let cursor_path = fx.path("state/vault_json/-/S-1/-/default.cursor.json");
    pages(&fx, &sim, 3);
    let behind = std::fs::read(&cursor_path).unwrap();
    pages(&fx, &sim, 3);
    let ahead = fx.cursor();
    let requests_before = sim.requests().len();
    // The last three commits' cursor writes never reached the disk.
    std::fs::write(&cursor_path, &behind).unwrap();
    // `edc-sync verify` says so without calling it damage: the cursor is
    // behind, which the next run catches up.
    let verify = fx.verify();
    assert_eq!(verify.code, 0, "{}\n{}", verify.stdout, verify.stderr);
    assert!(
        verify.stdout.contains("3 later commit(s)") && verify.stdout.contains("rolls it forward"),
        "{}",
        verify.stdout
    );
    pages(&fx, &sim, 0);
    assert_eq!(sim.requests().len(), requests_before, "nothing was fetched");
    let rolled = events(&fx, "cursor_rolled_forward");
    assert_eq!(rolled.len(), 1, "{rolled:?}");
    assert_eq!(rolled[0]["pages"], 3);
    assert_same_cursor(&fx.cursor(), &ahead);
    // And the next page fetched is the seventh, not the fourth again.
    pages(&fx, &sim, 1);
    let committed = events(&fx, "page_committed");
    assert_eq!(committed.last().unwrap()["replayed"], false);
    assert_eq!(committed.len(), 7);
}

/// A page's `page_committed` line carries what the page changed in the
/// lookback memory and a seal of the memory, never the memory itself: the
/// trail grows by the page, however many identities the memory holds. The
/// seal is the SHA-256 of the memory as the cursor file holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trail_grows_by_the_page_not_by_the_lookback_memory() {
    let fx = Fixture::new(5);
    let sim = sim(100).await;
    pages(&fx, &sim, 20);
    let committed = events(&fx, "page_committed");
    assert_eq!(committed.len(), 20);
    let text = std::fs::read_to_string(fx.path("audit.jsonl")).unwrap();
    let sizes: Vec<usize> = text
        .lines()
        .filter(|l| l.contains("\"event\":\"page_committed\""))
        .map(str::len)
        .collect();
    // Five records a page: the first page's line and the last's are the
    // same size, give or take the longer page numbers in their URLs.
    let (first, last) = (sizes[0], *sizes.last().unwrap());
    assert!(last < first + 200, "line sizes grow with the memory: {sizes:?}");
    assert!(sizes.iter().all(|&n| n < 3 * 1024), "{sizes:?}");
    let added: usize = committed
        .iter()
        .map(|l| {
            l["lookback_change"]["added"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g[1].as_array().unwrap().len())
                .sum::<usize>()
        })
        .sum();
    let memory = fx.memory();
    let held: usize = memory["seen"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g[1].as_array().unwrap().len())
        .sum();
    assert_eq!(added, 100, "every record landed is in a line's change");
    let seal = &committed.last().unwrap()["cursor_state"]["lookback"];
    assert_eq!(seal["identities"], held);
    assert!(seal.get("seen").is_none(), "{seal}");
    // The seal is of the memory's compact JSON, as its journal holds it;
    // the cursor file holds the seal.
    assert_eq!(
        seal["sha256"].as_str().unwrap(),
        edc_core::digest::sha256_hex(serde_json::to_string(&memory).unwrap().as_bytes())
    );
    assert_eq!(&fx.cursor()["lookback"], seal);
    assert_eq!(fx.verify().code, 0);
}

/// A commit whose landed file has gone stops the roll: the cursor stays
/// before that page, which is fetched and landed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_without_its_landed_file_is_not_rolled_over() {
    let fx = Fixture::new(5);
    let sim = sim(100).await;
    let cursor_path = fx.path("state/vault_json/-/S-1/-/default.cursor.json");
    pages(&fx, &sim, 1);
    let behind = std::fs::read(&cursor_path).unwrap();
    pages(&fx, &sim, 3);
    let committed = events(&fx, "page_committed");
    let third = committed[2]["landing_file"].as_str().unwrap();
    std::fs::remove_file(fx.path("landing/vault_json/-/S-1/-/default").join(third)).unwrap();
    std::fs::write(&cursor_path, &behind).unwrap();
    pages(&fx, &sim, 1);
    let rolled = events(&fx, "cursor_rolled_forward");
    assert_eq!(rolled[0]["pages"], 1, "rolled over page 2 only: {rolled:?}");
    let committed = events(&fx, "page_committed");
    assert_eq!(committed.len(), 5);
    assert_eq!(
        committed[4]["payload_sha256"], committed[2]["payload_sha256"],
        "page 3 was fetched again"
    );
    assert!(fx.path("landing/vault_json/-/S-1/-/default").join(third).exists());
}

/// A cursor file torn by a power loss (it is not fsynced per page) is
/// rebuilt from the stream's last commit record in the trail, audited,
/// instead of stopping every run with 74.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_cursor_file_is_rebuilt_from_the_trail() {
    let fx = Fixture::new(5);
    let sim = sim(100).await;
    let cursor_path = fx.path("state/vault_json/-/S-1/-/default.cursor.json");
    pages(&fx, &sim, 3);
    let before = fx.cursor();
    let requests = sim.requests().len();
    std::fs::write(&cursor_path, b"").unwrap();
    pages(&fx, &sim, 0);
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");
    let rebuilt = events(&fx, "cursor_rebuilt");
    assert_eq!(rebuilt.len(), 1, "{rebuilt:?}");
    assert_same_cursor(&fx.cursor(), &before);
    pages(&fx, &sim, 1);
    let committed = events(&fx, "page_committed");
    assert_eq!(committed.len(), 4);
    assert_eq!(
        committed[3]["replayed"], false,
        "the fourth page, not the third again"
    );
}

/// The journal of the lookback memory beside a cursor file is not fsynced
/// either: one that lost its last append (or was cut in a crash) is behind
/// the cursor, which `verify` says without calling it damage, and the next
/// run rebuilds the cursor from the trail, audited, fetching nothing
/// again. One changed afterwards is damage: refused (65) naming it, and
/// `--repair-state` rebuilds the cursor from the trail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookback_journal_behind_its_cursor_is_rebuilt_and_a_changed_one_refused() {
    let fx = Fixture::new(5);
    let sim = sim(100).await;
    let journal = fx.path("state/vault_json/-/S-1/-/default.memory.jsonl");
    pages(&fx, &sim, 3);
    let memory = fx.memory();
    let whole = std::fs::read(&journal).unwrap();
    let requests = sim.requests().len();
    let last_line = whole[..whole.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    std::fs::write(&journal, &whole[..last_line]).unwrap();
    let verify = fx.verify();
    assert_eq!(verify.code, 0, "{}\n{}", verify.stdout, verify.stderr);
    assert!(
        verify.stdout.contains("default.memory.jsonl") && verify.stdout.contains("rebuilds the cursor"),
        "{}",
        verify.stdout
    );
    pages(&fx, &sim, 0);
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");
    assert_eq!(events(&fx, "cursor_rebuilt").len(), 1);
    assert_eq!(fx.memory(), memory, "the memory replayed from the trail");
    assert_eq!(fx.verify().code, 0);

    // A cursor file edited to seal another memory is not a journal that
    // lost writes: it disagrees with the line it names, and is refused.
    let cursor_path = fx.path("state/vault_json/-/S-1/-/default.cursor.json");
    let kept = std::fs::read(&cursor_path).unwrap();
    let mut edited = fx.cursor();
    edited["lookback"]["identities"] = (edited["lookback"]["identities"].as_u64().unwrap() + 1).into();
    std::fs::write(&cursor_path, edited.to_string()).unwrap();
    let out = fx.sync(&[], &sim, &["--max-pages", "0"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{stderr}");
    assert!(
        stderr.contains("default.cursor.json") && stderr.contains("disagrees with the page_committed line"),
        "{stderr}"
    );
    assert_eq!(fx.verify().code, 65);
    std::fs::write(&cursor_path, kept).unwrap();

    let text = std::fs::read_to_string(&journal).unwrap();
    let id = memory["seen"][0][1][0].as_str().unwrap().to_string();
    let other = format!("{}{}", if id.starts_with('0') { "1" } else { "0" }, &id[1..]);
    std::fs::write(&journal, text.replacen(&id, &other, 1)).unwrap();
    let verify = fx.verify();
    assert_eq!(verify.code, 65, "{}\n{}", verify.stdout, verify.stderr);
    assert!(
        verify.stdout.contains("default.memory.jsonl"),
        "{}",
        verify.stdout
    );
    let out = fx.sync(&[], &sim, &["--max-pages", "0"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{stderr}");
    assert!(
        stderr.contains("default.memory.jsonl") && stderr.contains("--repair-state"),
        "{stderr}"
    );
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");
    let out = fx
        .sync(&[], &sim, &["--max-pages", "0", "--repair-state"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(events(&fx, "cursor_rebuilt").len(), 2);
    assert_eq!(fx.memory(), memory);
    assert_eq!(fx.verify().code, 0);
}

/// A cursor file written before cursors carried receipts names no commit
/// line: it is never trusted silently. Held to the trail's last commit of
/// its stream, it agrees, so it is given that line once (one
/// `cursor_receipted` line) and the stream goes on with nothing fetched
/// twice; `verify` proves the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_from_before_receipts_is_proven_by_the_trail_and_receipted_once() {
    let fx = Fixture::new(5);
    let sim = sim(100).await;
    let cursor_path = fx.path("state/vault_json/-/S-1/-/default.cursor.json");
    pages(&fx, &sim, 3);
    let mut old = fx.cursor();
    let receipt = old.as_object_mut().unwrap().remove("receipt").unwrap();
    old.as_object_mut().unwrap().remove("manifest_bytes");
    std::fs::write(&cursor_path, serde_json::to_string(&old).unwrap()).unwrap();
    let requests = sim.requests().len();
    pages(&fx, &sim, 0);
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");
    let receipted = events(&fx, "cursor_receipted");
    assert_eq!(receipted.len(), 1, "{receipted:?}");
    assert_eq!(receipted[0]["receipt_was"], serde_json::Value::Null);
    assert_eq!(receipted[0]["audit_offset"], receipt["offset"]);
    assert_eq!(fx.cursor()["receipt"], receipt, "it names its commit line again");
    pages(&fx, &sim, 0);
    assert_eq!(events(&fx, "cursor_receipted").len(), 1, "once");
    pages(&fx, &sim, 100);
    let committed = events(&fx, "page_committed");
    assert_eq!(
        committed[3]["replayed"], false,
        "the fourth page, not the third again"
    );
    let verify = fx.verify();
    assert_eq!(verify.code, 0, "{}\n{}", verify.stdout, verify.stderr);
}

/// A page is hashed and validated while it streams in,
/// so its temp file is written once and never read whole before it is
/// landed, whatever its size (these pages are 12 MiB, past any in-memory
/// copy) and format. A JSON delta with a lookback (vault_json has the
/// default one) learns its records' identities in the same pass
/// (`edc::payload::identity`): its temp file is not opened again either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_page_is_checked_as_it_streams_in_and_never_read_back() {
    let sim = padded_sim(12, 3 * 1024 * 1024).await;
    for vendor in ["vault_json", "rave"] {
        let fx = Fixture::new(4);
        let policies = std::fs::read_to_string(fx.path("policies.yaml"))
            .unwrap()
            .replace("max_body_bytes: 1048576", "max_body_bytes: 67108864")
            .replace("request_timeout_s: 2", "request_timeout_s: 60");
        std::fs::write(fx.path("policies.yaml"), policies).unwrap();
        support::git_commit_all(&git2::Repository::open(fx.dir.path()).unwrap(), "larger pages");
        let trace = fx.path("opens.txt");
        let runner = [
            strace(),
            "-f",
            "-e",
            "trace=open,openat,openat2",
            "-o",
            trace.to_str().unwrap(),
        ];
        let out = fx.sync_vendor(vendor, &runner, &sim, &[]).output().unwrap();
        assert!(
            out.status.success(),
            "{vendor}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let committed = events(&fx, "page_committed");
        assert!(committed.len() >= 3, "{vendor}: {} pages", committed.len());
        assert!(
            committed
                .iter()
                .all(|e| e["bytes"].as_u64().unwrap() > 9 * 1024 * 1024),
            "{vendor}: every page is larger than 9 MiB"
        );
        let opens = std::fs::read_to_string(&trace).unwrap();
        let temp_opens: Vec<&str> = opens.lines().filter(|l| l.contains(".part\"")).collect();
        let reads = temp_opens.iter().filter(|l| l.contains("O_RDONLY")).count();
        assert_eq!(
            (temp_opens.len() - reads, reads),
            (committed.len(), 0),
            "{vendor}: each page's temp file is opened once, to be written"
        );
    }
}

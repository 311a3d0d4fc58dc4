//! State and audit trail in PostgreSQL: a real server started by the test
//! (initdb + pg_ctl on a temporary directory), the schema made by `state
//! migrate`, runs through the library and the binary.

use crate::ledger::as_owner;
use crate::support::{self, postgres, runs};

use edc_core::run::AuditOptions;

/// Lines of trail `name`, in order, read with psql as the owner.
fn trail_rows(pg: &postgres::Postgres, name: &str) -> Vec<serde_json::Value> {
    let out = pg
        .psql(
            "edc",
            &format!("SELECT line FROM edc_sync_audit_line WHERE trail = '{name}' ORDER BY n"),
        )
        .unwrap();
    out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The record ids of the pages the database's manifest lists, read with
/// psql and the test kit's own reader (no code of the product's).
fn landed_ids(pg: &postgres::Postgres, stream_dir: &std::path::Path) -> Vec<String> {
    let lines = pg
        .psql("edc", "SELECT line FROM edc_sync_manifest ORDER BY stream, n")
        .unwrap();
    let mut ids = edc_qualify::landed::listed_json_record_ids(stream_dir, &lines).unwrap();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_keeps_cursor_manifest_and_trail_in_the_database_and_the_next_resumes() {
    let pg = postgres::start_migrated();
    let fx = runs::Fixture::new();
    let sim = runs::sim_with(100).await;
    let mut spec = fx.spec(&sim, AuditOptions::default());
    spec.state =
        edc_core::ledger::StateLocation::parse("--state", std::path::Path::new(&pg.run_url())).unwrap();
    spec.options.max_pages = Some(1);
    let (code, err) = fx.run_spec(spec.clone()).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        !fx.trail().exists(),
        "no audit file: the trail is in the database"
    );
    assert!(!fx.path("state").exists(), "no state directory");
    let rows = trail_rows(&pg, "audit.jsonl");
    assert_eq!(rows[0]["event"], "run_started");
    assert_eq!(rows[0]["state_schema_version"], 6);
    let commits: Vec<_> = rows.iter().filter(|l| l["event"] == "page_committed").collect();
    assert_eq!(commits.len(), 1);
    spec.options.max_pages = None;
    let (code, err) = fx.run_spec(spec.clone()).await;
    assert_eq!(code, 0, "{err}");
    let rows = trail_rows(&pg, "audit.jsonl");
    let commits: Vec<_> = rows.iter().filter(|l| l["event"] == "page_committed").collect();
    assert_eq!(commits.len(), 3, "two more pages, the first not fetched again");
    assert_eq!(
        commits[1]["cursor_before"], commits[0]["cursor_after"],
        "the second run started where the first committed"
    );
    let listed = pg.psql("edc", "SELECT count(*) FROM edc_sync_manifest").unwrap();
    assert_eq!(listed, "3", "one manifest row a landed page");
    let ids = landed_ids(&pg, &fx.path("landing/vault_json/-/S1/-/default"));
    assert_eq!(ids.len(), 100, "every record landed once");

    // The exported trail is the chain the rows hold, and verifies.
    let exported = fx.path("export.jsonl");
    let out = support::run(&[
        "audit",
        "export",
        "--state",
        &pg.run_url(),
        "--to",
        exported.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let text = std::fs::read_to_string(&exported).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines, rows);
    let out = support::run(&["audit", "verify", exported.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let out = support::run(&["audit", "verify", "--state", &pg.run_url()]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    // `verify` reconciles the landing with the database's manifests,
    // cursors and trail.
    let out = verify_db(&pg, &fx);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("3 landed files, 3 manifest entries"),
        "{}",
        out.stdout
    );
    let shown = cursor_shown(&pg, &[]);
    assert_eq!(shown["last_page_sha256"], commits[2]["payload_sha256"]);
    let again = support::run(&[
        "audit",
        "export",
        "--state",
        &pg.run_url(),
        "--to",
        exported.to_str().unwrap(),
    ]);
    assert_eq!(again.code, 78, "never over an existing file: {}", again.stderr);
}

/// `sync` through the binary with `--state URL`, on the fixture's policy
/// and the simulator; `extra` flags appended.
fn sync_bin(fx: &runs::Fixture, sim: &edc_sim::Simulator, state: &str, extra: &[&str]) -> support::Outcome {
    support::run_cmd(sync_cmd(fx, sim, state).args(extra))
}

/// `edc-sync sync` of the fixture's stream with `--state state`, in the
/// fixture's directory.
fn sync_cmd(fx: &runs::Fixture, sim: &edc_sim::Simulator, state: &str) -> std::process::Command {
    sync_to(fx, sim, state, fx.path("landing").as_os_str())
}

/// [`sync_cmd`] landing in `out` (a directory or an object store's URL).
fn sync_to(
    fx: &runs::Fixture,
    sim: &edc_sim::Simulator,
    state: &str,
    out: &std::ffi::OsStr,
) -> std::process::Command {
    let mut cmd = support::edc_sync();
    cmd.args(["sync", "--config"])
        .arg(fx.path("policies.yaml"))
        .args(["--vendor", "vault_json", "--study", "S1", "--out"])
        .arg(out)
        .args(["--state", state, "--audit-log", "audit.jsonl", "--pacer", "local"])
        .env("EDC_SYNC_TEST_BASE_URL", sim.base_url())
        .env("EDC_SYNC_TEST_TOKEN", "sim-token")
        .current_dir(fx.path(""));
    cmd
}

/// `edc-sync verify` of the fixture's landing against the database.
fn verify_db(pg: &postgres::Postgres, fx: &runs::Fixture) -> support::Outcome {
    support::run(&[
        "verify",
        "--out",
        fx.path("landing").to_str().unwrap(),
        "--state",
        &pg.run_url(),
        "--audit-log",
        "audit.jsonl",
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_without_the_schema_or_with_another_version_is_refused_78_before_any_line() {
    let pg = postgres::start();
    let fx = runs::Fixture::new();
    let sim = runs::sim().await;
    let out = sync_bin(&fx, &sim, &pg.owner_url(), &[]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stderr.contains("edc-sync state migrate"), "{}", out.stderr);
    assert!(
        !out.stderr.contains(postgres::PASSWORD_TEXT),
        "no password shown: {}",
        out.stderr
    );
    let migrate = ["state", "migrate", "--state", &pg.owner_url()];
    let first = support::run(&migrate);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        first.stdout.contains("applied schema version 1"),
        "{}",
        first.stdout
    );
    let second = support::run(&migrate);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(
        !second.stdout.contains("applied"),
        "nothing applied twice: {}",
        second.stdout
    );
    pg.psql(
        "edc",
        "INSERT INTO edc_sync_schema (version, description, tool_version) VALUES (99, 'from the future', '9.9.9')",
    )
    .unwrap();
    let out = sync_bin(&fx, &sim, &pg.owner_url(), &[]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr.contains("schema version 99 is newer"),
        "{}",
        out.stderr
    );
    assert_eq!(
        pg.psql("edc", "SELECT count(*) FROM edc_sync_audit_line")
            .unwrap(),
        "0"
    );
    let out = support::run(&migrate);
    assert_eq!(out.code, 78, "migrate refuses a newer schema too: {}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_refused_and_read_only_databases_stop_the_run_before_any_line() {
    let pg = postgres::start_migrated();
    let fx = runs::Fixture::new();
    let sim = runs::sim().await;
    let port = edc_testkit::redis_server::free_port().unwrap();
    let nobody = format!("postgres://edc_run:x@127.0.0.1:{port}/edc");
    let out = sync_bin(&fx, &sim, &nobody, &[]);
    assert_eq!(out.code, 69, "unreachable at start: {}", out.stderr);
    assert!(
        out.stderr.contains(&format!("127.0.0.1:{port}")),
        "{}",
        out.stderr
    );
    let wrong = pg.run_url().replace(postgres::PASSWORD_TEXT, "not-the-password");
    let out = sync_bin(&fx, &sim, &wrong, &[]);
    assert_eq!(out.code, 77, "credentials refused: {}", out.stderr);
    assert!(!out.stderr.contains("not-the-password"), "{}", out.stderr);
    let standby = pg.standby().unwrap();
    let replica = pg
        .run_url()
        .replace(&pg.port.to_string(), &standby.port.to_string());
    let out = sync_bin(&fx, &sim, &replica, &[]);
    assert_eq!(out.code, 78, "a replica given by mistake: {}", out.stderr);
    assert!(
        out.stderr.contains("read-only") && out.stderr.contains("standby"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&standby.port.to_string()),
        "names it: {}",
        out.stderr
    );
    assert_eq!(
        pg.psql("edc", "SELECT count(*) FROM edc_sync_audit_line")
            .unwrap(),
        "0"
    );
    let out = sync_bin(
        &fx,
        &sim,
        "postgres://edc_run@127.0.0.1:5432/edc?sslmode=verify-everything",
        &[],
    );
    assert_eq!(out.code, 78, "an sslmode libpq does not have: {}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trail_manifest_and_anchors_are_append_only_for_every_role() {
    let pg = postgres::start_migrated();
    let fx = runs::Fixture::new();
    let sim = runs::sim().await;
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for table in ["edc_sync_audit_line", "edc_sync_manifest", "edc_sync_anchor"] {
        for sql in [
            format!("UPDATE {table} SET n = n"),
            format!("DELETE FROM {table}"),
            format!("TRUNCATE {table} CASCADE"),
        ] {
            let as_run = pg.psql_as("edc_run", "edc", &sql).unwrap_err();
            assert!(as_run.contains("permission denied"), "edc_run {sql}: {as_run}");
            let as_owner = pg.psql("edc", &sql).unwrap_err();
            assert!(as_owner.contains("append-only"), "owner {sql}: {as_owner}");
        }
    }
    // A line that does not chain is refused even to the owner.
    let forged = pg
        .psql(
            "edc",
            "INSERT INTO edc_sync_audit_line (trail, n, byte_offset, line, sha256, event) \
             SELECT trail, n + 1, byte_offset + octet_length(line) + 1, '{\"prev_sha256\":\"00\"}', \
             encode(sha256('{\"prev_sha256\":\"00\"}'), 'hex'), 'forged' \
             FROM edc_sync_audit_line ORDER BY n DESC LIMIT 1",
        )
        .unwrap_err();
    assert!(forged.contains("does not chain"), "{forged}");
    let cursor = pg
        .psql_as("edc_run", "edc", "UPDATE edc_sync_cursor SET state = state")
        .unwrap();
    assert_eq!(cursor, "", "the cursor is the one row a run moves");
}

/// A simulator of `records` records that answers each request after
/// `latency`: time for a test to act while a run is mid-way.
async fn slow_sim(records: u32, latency_ms: u64) -> edc_sim::Simulator {
    let config = edc_sim::SimConfig {
        dataset: edc_sim::Dataset {
            subjects: 3,
            records,
            seed: 1,
            padding: 0,
        },
        latency: std::time::Duration::from_millis(latency_ms),
        ..edc_sim::SimConfig::default()
    };
    edc_sim::Simulator::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// The fixture's policy with pages of `size` records.
fn page_size(fx: &runs::Fixture, size: u32) {
    let policies = support::SIM_POLICIES.replace("page_size: 40", &format!("page_size: {size}"));
    std::fs::write(fx.path("policies.yaml"), policies).unwrap();
    let repo = git2::Repository::open(fx.path("")).unwrap();
    support::git_commit_all(&repo, "smaller pages");
}

/// `sync` in the background.
fn spawn_sync(fx: &runs::Fixture, sim: &edc_sim::Simulator, state: &str) -> std::process::Child {
    sync_cmd(fx, sim, state)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the database lists at least `pages` manifest rows.
fn wait_for_pages(pg: &postgres::Postgres, pages: u32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let n: u32 = pg
            .psql("edc", "SELECT count(*) FROM edc_sync_manifest")
            .map(|t| t.parse().unwrap_or(0))
            .unwrap_or(0);
        if n >= pages {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("no {pages} pages committed within a minute");
}

fn finish(child: std::process::Child) -> (i32, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every record exactly once, the trail intact, the landing reconciled.
fn assert_exact(pg: &postgres::Postgres, fx: &runs::Fixture, records: usize) {
    let ids = landed_ids(pg, &fx.path("landing/vault_json/-/S1/-/default"));
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "duplicates landed");
    assert_eq!(ids.len(), records, "records lost");
    let out = support::run(&["audit", "verify", "--state", &pg.run_url()]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let out = verify_db(pg, fx);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_lost_mid_run_commits_nothing_more_and_the_next_run_resumes_exactly() {
    let mut pg = postgres::start_migrated();
    let fx = runs::Fixture::new();
    page_size(&fx, 5);
    let sim = slow_sim(100, 40).await;
    let child = spawn_sync(&fx, &sim, &pg.run_url());
    wait_for_pages(&pg, 3);
    pg.stop();
    let (code, stderr) = finish(child);
    assert!(code == 69 || code == 75, "lost mid-run: {code} {stderr}");
    assert!(stderr.contains("state database"), "{stderr}");
    pg.restart().unwrap();
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_exact(&pg, &fx, 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_lock_was_taken_over_commits_nothing_75() {
    let pg = postgres::start_migrated();
    let fx = runs::Fixture::new();
    page_size(&fx, 5);
    let sim = slow_sim(100, 40).await;
    let child = spawn_sync(&fx, &sim, &pg.run_url());
    wait_for_pages(&pg, 2);
    // What a later run does when it takes the lock: the fence moves on.
    pg.psql("edc", "UPDATE edc_sync_run_lock SET fence = fence + 1")
        .unwrap();
    let (code, stderr) = finish(child);
    assert_eq!(code, 75, "{stderr}");
    assert!(stderr.contains("lost the run lock"), "{stderr}");
    let after: u32 = pg
        .psql("edc", "SELECT count(*) FROM edc_sync_manifest")
        .unwrap()
        .parse()
        .unwrap();
    assert!(after < 20, "stopped at the first commit after the take-over");
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_exact(&pg, &fx, 100);
    // Every run's lock is fenced, and the trail says with which token.
    let fences: Vec<i64> = trail_rows(&pg, "audit.jsonl")
        .iter()
        .filter(|l| l["event"] == "stream_lock_taken")
        .map(|l| l["fence"].as_i64().unwrap())
        .collect();
    assert_eq!(fences, vec![1, 3]);
}

/// Installs a trigger (as the owner) that makes the server raise SQLSTATE
/// `code` on the first `times` cursor writes: the server's own error, on
/// the commit transaction's last statement.
fn fail_cursor_writes(pg: &postgres::Postgres, code: &str, times: u32) {
    pg.psql(
        "edc",
        &format!(
            "CREATE SEQUENCE edc_test_failures; \
             CREATE FUNCTION edc_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
               IF nextval('edc_test_failures') <= {times} THEN \
                 RAISE EXCEPTION 'injected by the test' USING ERRCODE = '{code}'; END IF; \
               RETURN NEW; END $$; \
             CREATE TRIGGER edc_test_fail BEFORE INSERT OR UPDATE ON edc_sync_cursor \
               FOR EACH ROW EXECUTE FUNCTION edc_test_fail(); \
             GRANT USAGE ON SEQUENCE edc_test_failures TO edc_run"
        ),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serialization_failures_and_deadlocks_are_retried_within_the_budget() {
    let pg = postgres::start_migrated();
    let fx = runs::Fixture::new();
    let sim = runs::sim_with(100).await;
    fail_cursor_writes(&pg, "40001", 2);
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 0, "retried: {}", out.stderr);
    assert_exact(&pg, &fx, 100);

    let pg = postgres::start_migrated();
    let fx = runs::Fixture::new();
    fail_cursor_writes(&pg, "40P01", 1000);
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 75, "a deadlock that does not clear: {}", out.stderr);
    assert!(
        out.stderr.contains("attempts; nothing was committed"),
        "{}",
        out.stderr
    );
    assert_eq!(
        pg.psql("edc", "SELECT count(*) FROM edc_sync_manifest").unwrap(),
        "0"
    );
}

/// A 6 MiB tmpfs mounted for the test (root only: CI runs as root),
/// unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount() -> SmallDisk {
        let dir = std::env::temp_dir().join(format!("edc-sync-small-disk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=6m", "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            mounted,
            "the disk-full test mounts a small tmpfs for the server's tablespace, which needs root \
             (scripts/test runs as root in CI): run it as root"
        );
        let chown = std::process::Command::new("chown")
            .arg("postgres")
            .arg(&dir)
            .status();
        assert!(
            chown.is_ok_and(|s| s.success()),
            "chown postgres {}",
            dir.display()
        );
        SmallDisk(dir)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_out_of_disk_mid_run_commits_nothing_more_74_and_the_next_run_resumes() {
    let pg = postgres::start_migrated();
    let disk = SmallDisk::mount();
    pg.psql(
        "edc",
        &format!("CREATE TABLESPACE edc_small LOCATION '{}'", disk.0.display()),
    )
    .unwrap();
    pg.psql("edc", "ALTER TABLE edc_sync_audit_line SET TABLESPACE edc_small")
        .unwrap();
    let fx = runs::Fixture::new();
    page_size(&fx, 5);
    let sim = slow_sim(300, 60).await;
    let child = spawn_sync(&fx, &sim, &pg.run_url());
    wait_for_pages(&pg, 2);
    // Fills the tablespace: the INSERT fails when the disk is full, and
    // the pages it extended stay allocated (the table itself was committed
    // before) until the table is dropped.
    pg.psql(
        "edc",
        "CREATE TABLE edc_test_filler (x text) TABLESPACE edc_small; \
         ALTER TABLE edc_test_filler ALTER x SET STORAGE PLAIN",
    )
    .unwrap();
    let filled = pg
        .psql(
            "edc",
            "INSERT INTO edc_test_filler SELECT repeat(md5(i::text), 60) FROM generate_series(1, 100000) i",
        )
        .unwrap_err();
    assert!(filled.contains("No space left on device"), "{filled}");
    let (code, stderr) = finish(child);
    assert_eq!(code, 74, "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    pg.psql("edc", "DROP TABLE edc_test_filler").unwrap();
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_exact(&pg, &fx, 300);
    pg.psql("edc", "ALTER TABLE edc_sync_audit_line SET TABLESPACE pg_default")
        .unwrap();
    pg.psql("edc", "DROP TABLESPACE edc_small").unwrap();
}

#[test]
fn hosts_taking_turns_and_killing_each_other_lose_duplicate_and_unfence_nothing() {
    // Three processes in working directories of their own (as hosts), one
    // PostgreSQL state, one landing; 30 rounds of SIGKILLs at seeded
    // instants, then a clean run (`bench hosts-soak`, by hand with 200).
    let out = support::bench(&["hosts-soak", "--rounds", "30", "--records", "1000"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let people: Vec<&str> = out.stdout.lines().filter(|l| !l.starts_with('{')).collect();
    assert!(
        people
            .iter()
            .all(|l| !l.contains("Some(") && !l.contains("{\"exit")),
        "figures for people, not Rust's Debug text: {}",
        out.stdout
    );
    let figures: serde_json::Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(figures["lost"], 0, "{figures}");
    assert_eq!(figures["duplicates"], 0, "{figures}");
    assert_eq!(figures["rounds_with_cursor_ahead"], 0, "{figures}");
    assert_eq!(figures["fence_violations"], 0, "{figures}");
    assert_eq!(figures["records_landed"], 1000, "{figures}");
    assert_eq!(figures["audit_verify_exit"], 0, "{figures}");
    assert_eq!(figures["verify_exit"], 0, "{figures}");
    assert!(figures["killed"].as_u64().unwrap() >= 30, "{figures}");
    assert!(
        figures["locks_taken"].as_u64().unwrap() >= 10,
        "runs took turns: {figures}"
    );
    assert!(
        figures["rounds_landing"].as_u64().unwrap() >= 5,
        "kills fell mid-window: {figures}"
    );
}

#[test]
fn bench_state_prints_commit_cost_for_files_and_postgres_and_throughput_side_by_side() {
    let out = support::bench(&["state"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let lines: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5, "{}", out.stdout);
    let (files, pg) = (&lines[0], &lines[1]);
    assert_eq!(
        (files["state"].as_str(), pg["state"].as_str()),
        (Some("files"), Some("postgres"))
    );
    // Counts, not times: files fsync the page, its directory and the audit
    // line; PostgreSQL fsyncs the page and its directory, and the server
    // flushes its WAL once for the page's one transaction.
    assert_eq!(files["client_syncs_per_page"], 3.0, "{files}");
    assert_eq!(pg["client_syncs_per_page"], 2.0, "{pg}");
    assert!(pg["server_wal_syncs_per_page"].as_f64().unwrap() <= 1.1, "{pg}");
    for (line, processes) in lines[2..].iter().zip([1, 4, 16]) {
        assert_eq!(line["benchmark"], "state_throughput");
        assert_eq!(line["processes"], processes);
        assert_eq!(line["failed_processes"], 0, "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_keeps_its_cursor_and_manifest_apart_in_the_database() {
    let pg = postgres::start_migrated();
    let fx = runs::Fixture::new();
    let sim = runs::sim_with(100).await;
    let out = sync_bin(&fx, &sim, &pg.run_url(), &["--max-pages", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let incremental = pg.psql("edc", "SELECT state FROM edc_sync_cursor").unwrap();
    let config = fx.path("policies.yaml");
    let landing = fx.path("landing");
    let out = support::run_cmd(
        support::edc_sync()
            .args(["backfill", "--config", config.to_str().unwrap()])
            .args(["--vendor", "vault_json", "--study", "S1", "--pacer", "local"])
            .args(["--out", landing.to_str().unwrap(), "--state", &pg.run_url()])
            .args(["--audit-log", "audit.jsonl", "--since", "2000-01-01T00:00:00Z"])
            .env("EDC_SYNC_TEST_BASE_URL", sim.base_url())
            .env("EDC_SYNC_TEST_TOKEN", "sim-token")
            .current_dir(fx.path("")),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let keys = pg
        .psql("edc", "SELECT stream FROM edc_sync_cursor ORDER BY stream")
        .unwrap();
    let keys: Vec<&str> = keys.lines().collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(keys[0].starts_with("backfill/2000-01-01T00"), "{keys:?}");
    assert_eq!(keys[1], "vault_json/-/S1/-/default");
    let after = pg
        .psql(
            "edc",
            "SELECT state FROM edc_sync_cursor WHERE stream NOT LIKE 'backfill/%'",
        )
        .unwrap();
    assert_eq!(after, incremental, "the incremental cursor was not touched");
    let ids = edc_qualify::landed::listed_json_record_ids(
        &landing.join(keys[0]),
        &pg.psql(
            "edc",
            &format!(
                "SELECT line FROM edc_sync_manifest WHERE stream = '{}' ORDER BY n",
                keys[0]
            ),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(ids.len(), 100, "the backfill landed the window apart");
    let out = support::run(&[
        "verify",
        "--out",
        landing.to_str().unwrap(),
        "--state",
        &pg.run_url(),
        "--audit-log",
        "audit.jsonl",
    ]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

/// The section "Running on several hosts" of docs/operations.md.
fn several_hosts_section() -> &'static str {
    let doc = include_str!("../../docs/operations.md");
    let start = doc.find("## Running on several hosts").unwrap();
    let end = start + doc[start..].find("\n## ").unwrap();
    &doc[start..end]
}

/// The fenced blocks of `text` whose info string is `lang`.
fn blocks<'a>(text: &'a str, lang: &str) -> Vec<&'a str> {
    let fence = format!("```{lang}\n");
    text.split(&fence)
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .collect()
}

/// A host: a working directory with the policy committed where the
/// documented commands expect it (`config/rate_limits.yaml`), the
/// simulator's vendor standing in for Vault's.
fn doc_host(root: &std::path::Path, name: &str) -> std::path::PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("config")).unwrap();
    let repo = support::git_init(&dir);
    std::fs::write(dir.join("config/rate_limits.yaml"), support::SIM_POLICIES).unwrap();
    support::git_commit_all(&repo, "policy");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_of_running_on_several_hosts_run_as_written() {
    let section = several_hosts_section();
    let pg = postgres::Postgres::start_bare().unwrap_or_else(|e| panic!("{e}"));
    // The set-up SQL, as a superuser.
    for sql in blocks(section, "sql") {
        for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            pg.psql_as("db_admin", "postgres", statement).unwrap();
        }
    }
    let here = |text: &str| text.replace("db.example:5432", &format!("127.0.0.1:{}", pg.port));
    let sim = runs::sim_with(100).await;
    let root = tempfile::tempdir().unwrap();
    let landing = root.path().join("landing");
    let substitute = |arg: &str| -> String {
        match arg {
            "veeva_vault" => "vault_json".into(),
            "/landing" | "/mnt/edc-landing" => landing.to_str().unwrap().into(),
            other => here(other),
        }
    };
    let run = |args: &[String], dir: &std::path::Path, env: &[(&str, String)]| {
        let mut cmd = support::edc_sync();
        cmd.args(args)
            .current_dir(dir)
            .env("EDC_SYNC_TEST_BASE_URL", sim.base_url())
            .env("EDC_SYNC_TEST_TOKEN", "sim-token");
        for (k, v) in env {
            cmd.env(k, v);
        }
        support::run_cmd(&mut cmd)
    };
    // `state migrate`, with the owner's password in PGPASSWORD.
    let sh = blocks(section, "sh");
    let migrate = sh[0].trim();
    let (env, command) = migrate.split_once(' ').unwrap();
    let (_, owner_password) = env.split_once('=').unwrap();
    let args: Vec<String> = command.split_whitespace().skip(1).map(substitute).collect();
    let out = run(&args, root.path(), &[("PGPASSWORD", owner_password.to_string())]);
    assert_eq!(out.code, 0, "{migrate}: {}{}", out.stdout, out.stderr);
    let run_url = here("postgres://edc_run:run-password@db.example:5432/edc");
    assert!(section.contains("postgres://edc_run:run-password@db.example:5432/edc"));

    // The CronJob's container, in a fresh working directory (a pod).
    let yaml = blocks(section, "yaml")[0];
    let args_line = yaml
        .lines()
        .find(|l| l.trim_start().starts_with("args:"))
        .unwrap();
    let args: Vec<String> = serde_json::from_str::<Vec<String>>(args_line.split_once(':').unwrap().1.trim())
        .unwrap()
        .iter()
        .map(|a| substitute(a))
        .collect();
    // The ConfigMap as the docs build it: the policy and the stamp `config
    // stamp` wrote in its repository, side by side, no `.git`.
    let release = doc_host(root.path(), "release");
    let policy = release.join("config/rate_limits.yaml");
    let stamped = support::run(&["config", "stamp", "--config", policy.to_str().unwrap()]);
    assert_eq!(stamped.code, 0, "config stamp: {}", stamped.stderr);
    let pod = root.path().join("pod");
    std::fs::create_dir_all(pod.join("policy")).unwrap();
    for name in ["rate_limits.yaml", "rate_limits.yaml.stamp.json"] {
        std::fs::copy(release.join("config").join(name), pod.join("policy").join(name)).unwrap();
    }
    let args: Vec<String> = args
        .into_iter()
        .map(|a| match a.as_str() {
            "/policy/rate_limits.yaml" => pod.join("policy/rate_limits.yaml").to_str().unwrap().into(),
            _ => a,
        })
        .collect();
    // The Secret's variables: the state database and the shared Redis.
    let redis = support::redis::start();
    let secret = [
        ("EDC_SYNC_STATE", run_url.clone()),
        ("EDC_SYNC_REDIS_URL", redis.url()),
    ];
    let out = run(&args, &pod, &secret);
    assert_eq!(out.code, 0, "CronJob: {}", out.stderr);
    let summary: serde_json::Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        summary["exit_code"], 0,
        "the last line is the JSON summary: {}",
        out.stdout
    );

    // The systemd unit's ExecStart on another host, resuming there.
    let unit = blocks(section, "ini")[0];
    let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).unwrap();
    let unit_args: Vec<String> = exec.split_whitespace().skip(1).map(substitute).collect();
    let host = doc_host(root.path(), "host-b");
    let out = run(&unit_args, &host, &[("EDC_SYNC_STATE", run_url.clone())]);
    assert_eq!(out.code, 0, "systemd: {}", out.stderr);
    let rows = pg
        .psql_as(
            "db_admin",
            "edc",
            "SELECT line FROM edc_sync_audit_line ORDER BY n",
        )
        .unwrap();
    let lines: Vec<serde_json::Value> = rows.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let commits: Vec<_> = lines.iter().filter(|l| l["event"] == "page_committed").collect();
    let last = commits.last().unwrap();
    let first_of_b = commits.iter().find(|c| c["run_id"] == last["run_id"]).unwrap();
    let before_b = commits
        .iter()
        .rev()
        .find(|c| c["run_id"] != last["run_id"])
        .unwrap();
    assert_eq!(
        first_of_b["cursor_before"], before_b["cursor_after"],
        "the second host resumed where the first committed"
    );

    // The evidence commands, as the run role with PGPASSWORD.
    let evidence = root.path().join("reviewer");
    std::fs::create_dir_all(&evidence).unwrap();
    for line in sh[1].lines().filter(|l| !l.trim().is_empty()) {
        let args: Vec<String> = line.split_whitespace().skip(1).map(substitute).collect();
        let out = run(&args, &evidence, &[("PGPASSWORD", "run-password".into())]);
        assert_eq!(out.code, 0, "{line}: {}{}", out.stdout, out.stderr);
    }
    let exported = std::fs::read_to_string(evidence.join("audit-2026-12.jsonl")).unwrap();
    assert_eq!(exported.lines().count(), lines.len());

    // Only a holder of the audit key appends: the owner requires the key
    // the runs hold; the unit's run without it stops (78), with it goes on.
    let require = sh[2].trim();
    let (_, command) = require.split_once(' ').unwrap();
    let args: Vec<String> = command.split_whitespace().skip(1).map(substitute).collect();
    let owner = [
        ("PGPASSWORD", owner_password.to_string()),
        ("EDC_SYNC_AUDIT_KEY", runs::KEY.to_string()),
    ];
    let out = run(&args, root.path(), &owner);
    assert_eq!(out.code, 0, "{require}: {}{}", out.stdout, out.stderr);
    let out = run(&unit_args, &host, &[("EDC_SYNC_STATE", run_url.clone())]);
    assert_eq!(out.code, 78, "without the key: {}", out.stderr);
    assert!(out.stderr.contains("EDC_SYNC_AUDIT_KEY"), "{}", out.stderr);
    let keyed = [
        ("EDC_SYNC_STATE", run_url.clone()),
        ("EDC_SYNC_AUDIT_KEY", runs::KEY.to_string()),
    ];
    // The runs so far held no key: the first keyed run adopts the trail,
    // as the docs say, and the next needs no flag.
    let out = run(&unit_args, &host, &keyed);
    assert_eq!(out.code, 65, "with the key, not adopted: {}", out.stderr);
    assert!(out.stderr.contains("--adopt-unsealed-trail"), "{}", out.stderr);
    let mut adopting = unit_args.clone();
    adopting.push("--adopt-unsealed-trail".into());
    let out = run(&adopting, &host, &keyed);
    assert_eq!(out.code, 0, "with the key, adopted: {}", out.stderr);
    let out = run(&unit_args, &host, &keyed);
    assert_eq!(out.code, 0, "with the key: {}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_database_is_reached_over_verified_tls_when_the_url_asks() {
    let dir = tempfile::tempdir().unwrap();
    let certs = crate::support::redis::certs(dir.path());
    let pg = postgres::Postgres::start_tls(&certs).unwrap_or_else(|e| panic!("{e}"));
    let ca = certs.ca.to_str().unwrap();
    let owner = format!("{}?sslmode=verify-full&sslrootcert={ca}", pg.owner_url());
    let out = support::run(&["state", "migrate", "--state", &owner, "--grant-to", "edc_run"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let fx = runs::Fixture::new();
    let sim = runs::sim().await;
    let verified = format!("{}?sslmode=verify-full&sslrootcert={ca}", pg.run_url());
    let out = sync_bin(&fx, &sim, &verified, &[]);
    assert_eq!(out.code, 0, "over TLS, the server verified: {}", out.stderr);
    // The server refuses the run role in clear: the run above spoke TLS.
    let clear = format!("{}?sslmode=disable", pg.run_url());
    let out = sync_bin(&fx, &sim, &clear, &[]);
    assert_eq!(out.code, 77, "plain TCP refused by the server: {}", out.stderr);
    // A server whose certificate does not chain to the trust store given
    // (the system's, here) is not talked to.
    let unverified = format!("{}?sslmode=require", pg.run_url());
    let out = sync_bin(&fx, &sim, &unverified, &[]);
    assert_eq!(out.code, 69, "an unverified server: {}", out.stderr);
    assert!(
        out.stderr.to_lowercase().contains("certificate"),
        "{}",
        out.stderr
    );
    // A CA file that is not there is a configuration error, before anything.
    let missing = format!(
        "{}?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
        pg.run_url()
    );
    let out = sync_bin(&fx, &sim, &missing, &[]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr.contains("sslrootcert /nonexistent/ca.pem"),
        "{}",
        out.stderr
    );
    let rows: u32 = pg
        .psql(
            "edc",
            "SELECT count(*) FROM edc_sync_audit_line WHERE event = 'run_started'",
        )
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(rows, 1, "only the verified run wrote");
    let out = support::run(&["audit", "verify", "--state", &verified]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    // The server's copies of the certificate and key go with it: a test
    // leaves no key behind in the machine's temporary directory.
    let key = std::path::PathBuf::from(pg.psql_owner("SHOW ssl_key_file").unwrap());
    assert!(key.is_file(), "{}", key.display());
    drop(pg);
    let files = key.parent().unwrap();
    assert!(!files.exists(), "{} outlived its server", files.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_land_in_an_object_store_and_the_state_in_postgres_and_verify_reads_both() {
    let pg = postgres::start_migrated();
    let s3 = edc_testkit::s3_server::PrivateS3::s3s_fs().unwrap_or_else(|e| panic!("{e}"));
    let fx = runs::Fixture::new();
    page_size(&fx, 10);
    let sim = runs::sim_with(100).await;
    let url = s3.url("db");
    let sync = |extra: &[&str]| {
        support::run_cmd(
            sync_to(&fx, &sim, &pg.run_url(), url.as_ref())
                .args(extra)
                .envs(s3.env()),
        )
    };
    let out = sync(&["--max-pages", "4"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = sync(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let copy = fx.path("bucket");
    s3.download("db", &copy).await.unwrap();
    let mut ids = landed_ids(&pg, &copy.join("vault_json/-/S1/-/default"));
    ids.dedup();
    assert_eq!(ids.len(), 100, "every record in the bucket once");
    let verify = || {
        support::run_cmd(
            support::edc_sync()
                .args([
                    "verify",
                    "--out",
                    &url,
                    "--state",
                    &pg.run_url(),
                    "--audit-log",
                    "audit.jsonl",
                ])
                .envs(s3.env()),
        )
    };
    let out = verify();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("10 landed files, 10 manifest entries"),
        "{}",
        out.stdout
    );
    let page = std::fs::read_dir(copy.join("vault_json/-/S1/-/default/pages"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .min()
        .unwrap();
    s3.put(
        &format!("db/vault_json/-/S1/-/default/pages/{page}"),
        b"{\"data\":[]}".to_vec(),
    )
    .await
    .unwrap();
    let out = verify();
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(&page) && out.stdout.contains("modified after landing"),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_a_trail_cut_short_in_the_database_by_its_owner_is_refused() {
    let pg = postgres::start_migrated();
    let redis = crate::support::redis::start();
    let fx = runs::Fixture::new();
    let sim = runs::sim_with(100).await;
    let with_redis = || {
        let mut cmd = support::edc_sync();
        cmd.args(["sync", "--config"])
            .arg(fx.path("policies.yaml"))
            .args(["--vendor", "vault_json", "--study", "S1", "--out"])
            .arg(fx.path("landing"))
            .args([
                "--state",
                &pg.run_url(),
                "--audit-log",
                "audit.jsonl",
                "--redis",
                &redis.url(),
            ])
            .env("EDC_SYNC_TEST_BASE_URL", sim.base_url())
            .env("EDC_SYNC_TEST_TOKEN", "sim-token")
            .current_dir(fx.path(""));
        support::run_cmd(&mut cmd)
    };
    let out = with_redis();
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The database's owner, triggers off, cuts the trail back to the last
    // commit and removes the anchors there too: the database alone can no
    // longer tell.
    pg.psql(
        "edc",
        "ALTER TABLE edc_sync_anchor DISABLE TRIGGER USER; \
         ALTER TABLE edc_sync_audit_line DISABLE TRIGGER USER; \
         DELETE FROM edc_sync_anchor; \
         DELETE FROM edc_sync_audit_line WHERE n > (SELECT max(audit_n) FROM edc_sync_cursor); \
         ALTER TABLE edc_sync_anchor ENABLE TRIGGER USER; \
         ALTER TABLE edc_sync_audit_line ENABLE TRIGGER USER",
    )
    .unwrap();
    let out = with_redis();
    assert_eq!(out.code, 65, "{}", out.stderr);
    assert!(out.stderr.contains("anchor in Redis"), "{}", out.stderr);
    assert!(out.stderr.contains("cut short"), "{}", out.stderr);
}

/// A migrated database, and a stream of 100 records in pages of 10 synced
/// four pages into it.
async fn four_pages_in_a_database() -> (postgres::Postgres, runs::Fixture, edc_sim::Simulator) {
    let pg = postgres::start_migrated();
    let fx = runs::Fixture::new();
    page_size(&fx, 10);
    let sim = runs::sim_with(100).await;
    let out = sync_bin(&fx, &sim, &pg.run_url(), &["--max-pages", "4"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    (pg, fx, sim)
}

/// The whole database restored from an older backup (its trail, manifest
/// and cursor together, so it agrees with itself) while the landing kept
/// what was landed since: without Redis nothing in the database can tell,
/// so the landing's head (`ledger-head.json`, the stream's last commit as
/// a run left it) names a line the database does not hold. The run stops
/// (65) before any request, naming the head, the line and the way on;
/// `--accept-rollback` records the deviation and goes on, and nothing is
/// listed twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restored_from_an_older_backup_is_refused_until_accepted() {
    let (mut pg, fx, sim) = four_pages_in_a_database().await;
    let backup = fx.path("database-backup");
    pg.back_up_to(&backup).unwrap();
    let out = sync_bin(&fx, &sim, &pg.run_url(), &["--max-pages", "3"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    pg.restore_from(&backup).unwrap();

    let requests = sim.requests().len();
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 65, "{}", out.stderr);
    for needed in ["ledger-head.json", "older backup", "--accept-rollback"] {
        assert!(
            out.stderr.contains(needed),
            "{needed:?} missing from: {}",
            out.stderr
        );
    }
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");
    // The reviewer's proof sees it too: pages landed that no row lists.
    let out = verify_db(&pg, &fx);
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);

    let out = sync_bin(&fx, &sim, &pg.run_url(), &["--accept-rollback"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let accepted: Vec<_> = trail_rows(&pg, "audit.jsonl")
        .into_iter()
        .filter(|l| l["event"] == "rollback_accepted")
        .collect();
    assert_eq!(accepted.len(), 1, "{accepted:?}");
    assert_exact(&pg, &fx, 100);
}

/// The database remembers every landing head it published (a
/// `landing_head_published` line after the head is written). Restored from
/// an older backup, it still refuses (65, before any request) a landing
/// whose head was deleted, or put back from a copy older than the last head
/// it published: the two ways a restore was hidden when only the head
/// spoke. `--accept-rollback` records the deviation and goes on; and a run
/// with neither Redis nor Object Lock says once in its header that a
/// database and landing restored together would not be seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_landing_head_deleted_or_put_back_older_is_refused_by_what_the_database_published() {
    let (mut pg, fx, sim) = four_pages_in_a_database().await;
    let head = fx.path("landing/vault_json/-/S1/-/default/ledger-head.json");
    let first_head = std::fs::read(&head).unwrap();
    let out = sync_bin(&fx, &sim, &pg.run_url(), &["--max-pages", "2"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let published: Vec<_> = trail_rows(&pg, "audit.jsonl")
        .into_iter()
        .filter(|l| l["event"] == "landing_head_published")
        .collect();
    assert_eq!(published.len(), 2, "{published:?}");
    let header = trail_rows(&pg, "audit.jsonl").remove(0);
    assert!(
        header["rollback_witness"].as_str().unwrap().starts_with("none"),
        "{header}"
    );
    // `verify` holds the head to the same record.
    let current = std::fs::read(&head).unwrap();
    for (damage, said) in [("deleted", "missing"), ("older", "older than line")] {
        match damage {
            "deleted" => std::fs::remove_file(&head).unwrap(),
            _ => std::fs::write(&head, &first_head).unwrap(),
        }
        let out = verify_db(&pg, &fx);
        assert_eq!(out.code, 65, "{damage}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stdout.contains("ledger-head.json: ") && out.stdout.contains(said),
            "{damage}: {}",
            out.stdout
        );
    }
    std::fs::write(&head, &current).unwrap();
    let out = verify_db(&pg, &fx);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let backup = fx.path("database-backup");
    pg.back_up_to(&backup).unwrap();
    let out = sync_bin(&fx, &sim, &pg.run_url(), &["--max-pages", "2"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    pg.restore_from(&backup).unwrap();
    let requests = sim.requests().len();
    for (damage, said) in [("deleted", "is missing"), ("older", "older than line")] {
        match damage {
            "deleted" => std::fs::remove_file(&head).unwrap(),
            _ => std::fs::write(&head, &first_head).unwrap(),
        }
        let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
        assert_eq!(out.code, 65, "{damage}: {}", out.stderr);
        assert!(
            out.stderr.contains("ledger-head.json")
                && out.stderr.contains(said)
                && out.stderr.contains("--accept-rollback"),
            "{damage}: {}",
            out.stderr
        );
        assert_eq!(sim.requests().len(), requests, "{damage}: nothing was fetched");
    }
    let out = sync_bin(&fx, &sim, &pg.run_url(), &["--accept-rollback"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_exact(&pg, &fx, 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_row_changed_outside_edc_sync_stops_the_run_and_repair_state_takes_the_trails() {
    let (pg, fx, sim) = four_pages_in_a_database().await;
    // The database's owner, its triggers off: a role that leaves them on
    // cannot move the row without its line
    // (`a_cursor_row_moves_only_with_its_page_committed_line`).
    as_owner(
        &pg,
        "UPDATE edc_sync_cursor SET state = jsonb_set(state::jsonb, '{window_start}', '\"1999-01-01T00:00:00Z\"')::text;",
    );
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 65, "{}", out.stderr);
    assert!(out.stderr.contains("edc_sync_cursor row"), "{}", out.stderr);
    assert!(out.stderr.contains("changed outside edc-sync"), "{}", out.stderr);
    let out = sync_bin(&fx, &sim, &pg.run_url(), &["--repair-state"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let repaired: Vec<_> = trail_rows(&pg, "audit.jsonl")
        .into_iter()
        .filter(|l| l["event"] == "state_repaired")
        .collect();
    assert_eq!(repaired.len(), 1);
    assert_eq!(repaired[0]["file_said"]["window_start"], "1999-01-01T00:00:00Z");
    assert_ne!(repaired[0]["trail_says"]["window_start"], "1999-01-01T00:00:00Z");
    assert_exact(&pg, &fx, 100);
}

/// `cursor show` of the fixture's stream in the database, with `extra`
/// flags, which must succeed: what it printed.
fn cursor_shown(pg: &postgres::Postgres, extra: &[&str]) -> serde_json::Value {
    let url = pg.run_url();
    let mut args = vec![
        "cursor",
        "show",
        "--state",
        &url,
        "--vendor",
        "vault_json",
        "--study",
        "S1",
    ];
    args.extend_from_slice(extra);
    let out = support::run(&args);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// The numbers of the `edc_sync_memory` rows, in order (`0,1,2`).
fn memory_rows(pg: &postgres::Postgres) -> String {
    pg.psql(
        "edc",
        "SELECT string_agg(n::text, ',' ORDER BY n) FROM edc_sync_memory",
    )
    .unwrap()
}

/// The cursor row holds the lookback memory by its seal, and each commit
/// adds its change as one `edc_sync_memory` row in its own transaction:
/// the row no longer carries the memory whole at every page. The rows are
/// proven by the seal: one changed by the owner stops the run (65) naming
/// them, `verify` names them, and `--repair-state` rebuilds them from the
/// trail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_adds_its_change_to_the_memory_rows_and_a_changed_row_is_refused() {
    let (pg, fx, sim) = four_pages_in_a_database().await;
    let row_bytes: i64 = pg
        .psql("edc", "SELECT octet_length(state) FROM edc_sync_cursor")
        .unwrap()
        .parse()
        .unwrap();
    let seal = pg
        .psql("edc", "SELECT state::jsonb -> 'lookback' FROM edc_sync_cursor")
        .unwrap();
    let seal: serde_json::Value = serde_json::from_str(&seal).unwrap();
    assert!(seal["sha256"].is_string() && seal.get("seen").is_none(), "{seal}");
    assert!(row_bytes < 2048, "the cursor row is {row_bytes} bytes");
    let rows = memory_rows(&pg);
    assert_eq!(rows, "0,1,2,3", "the memory whole, then a change a page");
    assert_eq!(verify_db(&pg, &fx).code, 0);

    let first = pg
        .psql("edc", "SELECT line FROM edc_sync_memory WHERE n = 0")
        .unwrap();
    let first: serde_json::Value = serde_json::from_str(&first).unwrap();
    let id = first["memory"]["seen"][0][1][0].as_str().unwrap().to_string();
    let other = format!("{}{}", if id.starts_with('0') { "1" } else { "0" }, &id[1..]);
    as_owner(
        &pg,
        &format!("UPDATE edc_sync_memory SET line = replace(line, '{id}', '{other}') WHERE n = 0;"),
    );
    let out = verify_db(&pg, &fx);
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("edc_sync_memory rows"), "{}", out.stdout);
    let requests = sim.requests().len();
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 65, "{}", out.stderr);
    assert!(out.stderr.contains("edc_sync_memory rows"), "{}", out.stderr);
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");
    let out = sync_bin(&fx, &sim, &pg.run_url(), &["--repair-state"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_exact(&pg, &fx, 100);
    assert_eq!(verify_db(&pg, &fx).code, 0);
}

/// Memory rows that do not end at the memory the cursor seals (left by a
/// state emptied but for them, or ahead of a row moved back) are never
/// added to: the next commit writes them anew, and the runs after it read
/// their cursor back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_rows_that_do_not_end_at_the_cursors_seal_are_written_anew_not_added_to() {
    let (pg, fx, sim) = four_pages_in_a_database().await;
    as_owner(
        &pg,
        "TRUNCATE edc_sync_audit_line, edc_sync_anchor, edc_sync_manifest, edc_sync_cursor, edc_sync_run_lock;",
    );
    let fresh = runs::Fixture::new();
    page_size(&fresh, 10);
    for _ in 0..2 {
        let out = sync_bin(&fresh, &sim, &pg.run_url(), &["--max-pages", "2"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let rows = memory_rows(&pg);
    assert_eq!(rows, "0,1,2,3", "written anew by the first commit");
    drop(fx);
}

/// A run reads the stream's lookback memory rows once, at its start-up
/// proof, and knows what its commits wrote since: at 20,000 identities the
/// rows are over a megabyte, and the pages and the run's end read them
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reads_the_memory_rows_once() {
    let (pg, fx, sim) = four_pages_in_a_database().await;
    pg.psql_owner("ALTER ROLE edc_run SET log_statement = 'all'")
        .unwrap();
    let logged = pg.log().len();
    let out = sync_bin(&fx, &sim, &pg.run_url(), &["--max-pages", "3"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let log = pg.log();
    let reads = log[logged..].matches("SELECT line FROM edc_sync_memory").count();
    assert_eq!(reads, 1, "{}", &log[logged..]);
    assert_eq!(memory_rows(&pg), "0,1,2,3,4,5,6", "three pages added");
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_exact(&pg, &fx, 100);
    assert_eq!(verify_db(&pg, &fx).code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_the_state_urls_query_is_refused_and_never_shown() {
    let fx = runs::Fixture::new();
    let sim = runs::sim().await;
    let port = edc_testkit::redis_server::free_port().unwrap();
    let url = format!("postgres://edc_run@127.0.0.1:{port}/edc?password=sekrit-query-pw");
    let out = sync_bin(&fx, &sim, &url, &[]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stderr.contains("--state"), "{}", out.stderr);
    assert!(!out.stderr.contains("sekrit-query-pw"), "{}", out.stderr);
    assert!(!fx.path("audit.jsonl").exists());
}

/// A landing owned by a state directory, given to a run whose state is a
/// database: refused (65) in words that say which state this run's is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_landing_of_a_state_directory_is_refused_to_a_state_database_in_its_own_words() {
    let pg = postgres::start_migrated();
    let fx = runs::Fixture::new();
    let sim = runs::sim_with(20).await;
    let out = sync_bin(&fx, &sim, fx.path("state").to_str().unwrap(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 65, "{}", out.stderr);
    assert!(out.stderr.contains(".owner"), "{}", out.stderr);
    assert!(
        out.stderr.contains("this run's state database has id"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("state directory has id"), "{}", out.stderr);
}

/// The database itself holds a cursor row to its line: no role that
/// leaves the triggers on (the run role's own UPDATE included) moves a
/// cursor row except in the transaction that appends its `page_committed`
/// line, or back to what the stream's last commit records
/// (`--repair-state`). The runs' own commits still move it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_row_moves_only_with_its_page_committed_line() {
    let (pg, fx, sim) = four_pages_in_a_database().await;
    let row = "SELECT state, audit_n FROM edc_sync_cursor";
    let before = pg.psql("edc", row).unwrap();
    for sql in [
        "UPDATE edc_sync_cursor SET state = jsonb_set(state::jsonb, '{window_start}', '\"2099-01-01T00:00:00Z\"')::text",
        "UPDATE edc_sync_cursor SET audit_n = (SELECT min(n) FROM edc_sync_audit_line WHERE event = 'page_committed')",
        "UPDATE edc_sync_cursor SET audit_n = 1",
    ] {
        for refused in [pg.psql_as("edc_run", "edc", sql), pg.psql("edc", sql)] {
            let refused = refused.expect_err(sql);
            assert!(refused.contains("edc_sync_cursor"), "{sql}: {refused}");
        }
    }
    assert_eq!(pg.psql("edc", row).unwrap(), before, "the row did not move");
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_exact(&pg, &fx, 100);
}

/// The shadow attack: a role with TEMP makes a temporary
/// `edc_sync_audit_line` (a session searches its temporary tables first),
/// puts in it a `page_committed` line of its own transaction naming any
/// cursor it likes, and moves the cursor row. The run role has no TEMP on
/// the database; given it back by hand, the cursor trigger, whose search
/// path is pinned and whose tables are schema-qualified, still reads the
/// real trail and refuses the move itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_trail_cannot_move_a_cursor_row() {
    let (pg, fx, sim) = four_pages_in_a_database().await;
    let unpinned = pg
        .psql(
            "edc",
            "SELECT string_agg(proname, ' ') FROM pg_proc WHERE proname LIKE 'edc\\_sync\\_%' \
             AND NOT coalesce(array_to_string(proconfig, ' ') LIKE '%search_path=pg_catalog, public, pg_temp%', false)",
        )
        .unwrap();
    assert_eq!(unpinned.trim(), "", "functions whose search path is not pinned");
    let row = "SELECT state, audit_n FROM edc_sync_cursor";
    let before = pg.psql("edc", row).unwrap();
    let shadow = "BEGIN; \
        CREATE TEMP TABLE edc_sync_audit_line (trail text, n bigint, byte_offset bigint, line text, \
            sha256 text, event text, stream text); \
        INSERT INTO edc_sync_audit_line SELECT trail, audit_n, 0, \
            json_build_object('cursor_state', jsonb_set(state::jsonb - 'receipt', '{window_start}', \
                '\"2099-01-01T00:00:00Z\"'))::text, '', 'page_committed', stream FROM edc_sync_cursor; \
        UPDATE edc_sync_cursor SET state = jsonb_set(state::jsonb, '{window_start}', \
            '\"2099-01-01T00:00:00Z\"')::text; \
        COMMIT;";
    let no_temp = pg
        .psql_as("edc_run", "edc", shadow)
        .expect_err("the run role made a temporary trail");
    assert!(no_temp.contains("permission denied"), "{no_temp}");
    pg.psql("edc", "GRANT TEMPORARY ON DATABASE edc TO edc_run")
        .unwrap();
    let refused = pg
        .psql_as("edc_run", "edc", shadow)
        .expect_err("a temporary trail moved the cursor row");
    assert!(
        refused.contains("edc_sync_cursor row")
            && refused.contains("moves only with its page_committed line"),
        "refused by the trigger itself: {refused}"
    );
    assert_eq!(pg.psql("edc", row).unwrap(), before, "the row did not move");
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_exact(&pg, &fx, 100);
}

/// TEMP a run role holds through another role is not taken by revoking
/// it from the run role: `state migrate --grant-to` then refuses (78),
/// naming the right and the statement the database's owner runs.
#[test]
fn a_run_role_that_keeps_temp_through_another_role_is_refused_by_the_grant() {
    let pg = postgres::start_migrated();
    pg.psql(
        "edc",
        "CREATE ROLE edc_scratch NOLOGIN; GRANT TEMPORARY ON DATABASE edc TO edc_scratch; GRANT edc_scratch TO edc_run",
    )
    .unwrap();
    let out = support::run(&[
        "state",
        "migrate",
        "--state",
        &pg.owner_url(),
        "--grant-to",
        "edc_run",
    ]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr.contains("temporary tables")
            && out.stderr.contains("REVOKE TEMPORARY ON DATABASE \"edc\""),
        "{}",
        out.stderr
    );
    assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
    pg.psql("edc", "REVOKE edc_scratch FROM edc_run").unwrap();
    let out = support::run(&[
        "state",
        "migrate",
        "--state",
        &pg.owner_url(),
        "--grant-to",
        "edc_run",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// A database a run of the version before left at schema version 1 (its
/// rows kept): runs refuse it (78, naming `state migrate`) until the owner
/// migrates it, and then resume from its cursor with the new trigger on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_at_schema_version_1_is_migrated_in_place_and_resumed() {
    let (pg, fx, sim) = four_pages_in_a_database().await;
    // What version 1 was: no cursor trigger, no append functions (the run
    // role's INSERT instead), no memory rows (the cursor row held the
    // lookback memory whole), no row of a later version.
    let whole = cursor_shown(&pg, &["--full"]);
    assert!(whole["lookback"]["seen"].is_array(), "{whole}");
    as_owner(
        &pg,
        &format!(
            "UPDATE edc_sync_cursor SET state = '{}'; DROP TABLE edc_sync_memory;",
            whole.to_string().replace('\'', "''")
        ),
    );
    as_owner(
        &pg,
        "DROP TRIGGER edc_sync_cursor_with_its_line ON edc_sync_cursor; \
         DROP FUNCTION edc_sync_cursor_with_its_line(); \
         DROP FUNCTION edc_sync_grant_appends(text), edc_sync_append_line(text, bigint, bigint, text, text, text, text, text), \
             edc_sync_append_manifest(text, text, text, text, text, bigint), edc_sync_append_anchor(text, bigint, text), \
             edc_sync_gate_key_id(), edc_sync_hmac_sha256(bytea, bytea); \
         DROP TABLE edc_sync_append_gate; \
         GRANT INSERT ON edc_sync_audit_line, edc_sync_manifest, edc_sync_anchor TO edc_run; \
         DELETE FROM edc_sync_schema WHERE version >= 2;",
    );
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stderr.contains("state migrate"), "{}", out.stderr);
    let migrated = support::run(&["state", "migrate", "--state", &pg.owner_url()]);
    assert_eq!(migrated.code, 0, "{}", migrated.stderr);
    assert!(
        migrated.stdout.contains("applied schema version 2")
            && migrated.stdout.contains("applied schema version 3")
            && migrated.stdout.contains("applied schema version 4")
            && migrated.stdout.contains("applied schema version 5")
            && migrated.stdout.contains("applied schema version 6"),
        "{}",
        migrated.stdout
    );
    // The run role's INSERT, granted before, is taken back by version 4:
    // it appends through the schema's functions.
    let inserted = pg.psql_as(
        "edc_run",
        "edc",
        "INSERT INTO edc_sync_manifest SELECT * FROM edc_sync_manifest WHERE false",
    );
    assert!(
        inserted.is_err_and(|e| e.contains("permission denied")),
        "the run role can still INSERT"
    );
    let moved = pg.psql_as("edc_run", "edc", "UPDATE edc_sync_cursor SET audit_n = 1");
    assert!(
        moved.is_err_and(|e| e.contains("edc_sync_cursor")),
        "the trigger is on"
    );
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_exact(&pg, &fx, 100);
    // Version 5 gave the run role the memory rows: the row that held the
    // memory whole now holds its seal.
    let sealed = pg
        .psql(
            "edc",
            "SELECT (state::jsonb -> 'lookback') ? 'sha256' FROM edc_sync_cursor",
        )
        .unwrap();
    assert_eq!(sealed, "t");
    assert_eq!(verify_db(&pg, &fx).code, 0);
}

/// As the run role, without the audit key, under the trail's append lock:
/// an unsealed line chained to the end of trail `audit.jsonl`, through the
/// schema's append function (the run role has no INSERT). Returns its
/// number, or what the database said when it refused it.
fn chain_unsealed_line(pg: &postgres::Postgres) -> Result<i64, String> {
    let sql = "BEGIN; \
         SELECT pg_advisory_xact_lock(hashtextextended('edc-sync:trail:' || 'audit.jsonl', 0)); \
         WITH last AS (SELECT n, byte_offset, line, sha256 FROM edc_sync_audit_line \
                       WHERE trail = 'audit.jsonl' ORDER BY n DESC LIMIT 1), \
              forged AS (SELECT n + 1 AS n, byte_offset + octet_length(line) + 1 AS at, \
                         '{\"seq\":1,\"ts\":\"2026-12-06T00:00:00Z\",\"run_id\":\"forger\",\"event\":\"run_started\",\
\"prev_sha256\":\"' || sha256 || '\"}' AS line FROM last) \
         SELECT n, edc_sync_append_line('audit.jsonl', n, at, line, \
                encode(sha256(convert_to(line, 'UTF8')), 'hex'), 'run_started', NULL, repeat('0', 64)) \
         FROM forged; \
         COMMIT;";
    let out = pg.psql_as("edc_run", "edc", sql)?;
    Ok(out
        .lines()
        .find_map(|l| l.split('|').next()?.trim().parse().ok())
        .unwrap())
}

/// A line chained to the database's trail by someone without the key while
/// a keyed run goes on is not signed over by that run's `run_finished`
/// checkpoint: the run proves the rows since the last checkpoint first,
/// signs nothing and says why, and the next keyed run refuses the trail
/// naming the line (65), as on a file trail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_chained_during_a_keyed_run_is_not_signed_over_in_the_database() {
    let pg = postgres::start_migrated();
    let fx = runs::Fixture::new();
    page_size(&fx, 5);
    let sim = slow_sim(100, 40).await;
    let child = sync_cmd(&fx, &sim, &pg.run_url())
        .env("EDC_SYNC_AUDIT_KEY", runs::KEY)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_pages(&pg, 3);
    let forged = chain_unsealed_line(&pg).unwrap();
    let (code, stderr) = finish(child);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("not sealed with the audit key"), "{stderr}");
    let finished = trail_rows(&pg, "audit.jsonl")
        .into_iter()
        .rfind(|l| l["event"] == "run_finished")
        .unwrap();
    assert!(finished["checkpoint"].is_null(), "signed over: {finished}");
    let before = trail_rows(&pg, "audit.jsonl").len();
    let out = support::run_cmd(sync_cmd(&fx, &sim, &pg.run_url()).env("EDC_SYNC_AUDIT_KEY", runs::KEY));
    assert_eq!(out.code, 65, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("line {forged}")) && out.stderr.contains("MAC"),
        "line {forged}: {}",
        out.stderr
    );
    assert_eq!(trail_rows(&pg, "audit.jsonl").len(), before, "nothing appended");
}

/// The run role adds to the trail, the manifest and the anchors only
/// through the schema's append functions, never by INSERT: a manifest row
/// only with its `page_committed` line, in one transaction (so a page
/// cannot be listed again under another page key), an anchor only as the
/// line it names is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_role_appends_only_through_the_schemas_functions() {
    let (pg, fx, sim) = four_pages_in_a_database().await;
    for table in ["edc_sync_audit_line", "edc_sync_manifest", "edc_sync_anchor"] {
        let sql = format!("INSERT INTO {table} SELECT * FROM {table} WHERE false");
        let refused = pg.psql_as("edc_run", "edc", &sql).unwrap_err();
        assert!(refused.contains("permission denied"), "{sql}: {refused}");
    }
    let listed = "SELECT count(*) FROM edc_sync_manifest";
    let before = pg.psql("edc", listed).unwrap();
    let relisted = pg
        .psql_as(
            "edc_run",
            "edc",
            "SELECT edc_sync_append_manifest(stream, line, page_key || '&again=1', sha256, trail, audit_n) \
             FROM edc_sync_manifest WHERE n = 1",
        )
        .unwrap_err();
    assert!(
        relisted.contains("only with its page_committed line"),
        "{relisted}"
    );
    assert_eq!(pg.psql("edc", listed).unwrap(), before, "nothing listed");
    let anchored = pg
        .psql_as(
            "edc_run",
            "edc",
            "SELECT edc_sync_append_anchor(trail, n, repeat('0', 64)) FROM edc_sync_audit_line WHERE n = 2",
        )
        .unwrap_err();
    assert!(anchored.contains("names line 2"), "{anchored}");
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_exact(&pg, &fx, 100);
}

/// `state migrate --require-audit-key`: from then on the database takes a
/// trail line only from a holder of the audit key (the append function
/// checks a MAC under a key derived from it; the key itself is never
/// stored, and the run role cannot read what is). A line chained by the
/// run role without the key is refused by the database itself; a run
/// without the key, or with another, stops (78) naming the variable and
/// both key ids before it sends anything or appends a line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_audit_key_required_the_database_takes_lines_only_from_its_holders() {
    let pg = postgres::start_migrated();
    let fx = runs::Fixture::new();
    page_size(&fx, 10);
    let sim = runs::sim_with(100).await;
    let key_id = &edc_core::digest::sha256_hex(runs::KEY.as_bytes())[..16];
    let out = support::run_cmd(
        support::edc_sync()
            .args([
                "state",
                "migrate",
                "--state",
                &pg.owner_url(),
                "--require-audit-key",
            ])
            .env("EDC_SYNC_AUDIT_KEY", runs::KEY),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains(key_id), "{}", out.stdout);
    let stored = pg
        .psql(
            "edc",
            "SELECT encode(gate_key, 'escape') FROM edc_sync_append_gate",
        )
        .unwrap();
    assert!(!stored.contains(runs::KEY), "the key itself is stored");
    let read = pg
        .psql_as("edc_run", "edc", "SELECT * FROM edc_sync_append_gate")
        .unwrap_err();
    assert!(read.contains("permission denied"), "{read}");
    let keyed = |key: &str, extra: &[&str]| {
        support::run_cmd(
            sync_cmd(&fx, &sim, &pg.run_url())
                .env("EDC_SYNC_AUDIT_KEY", key)
                .args(extra),
        )
    };
    let out = keyed(runs::KEY, &["--max-pages", "2"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = trail_rows(&pg, "audit.jsonl").len();
    let requests = sim.requests().len();
    let refused = chain_unsealed_line(&pg).unwrap_err();
    assert!(
        refused.contains("not from a holder of audit key") && refused.contains(key_id),
        "{refused}"
    );
    let out = sync_bin(&fx, &sim, &pg.run_url(), &[]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr.contains("EDC_SYNC_AUDIT_KEY") && out.stderr.contains(key_id),
        "{}",
        out.stderr
    );
    let other = "another audit key of at least thirty-two bytes, for tests";
    let out = keyed(other, &[]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    let other_id = &edc_core::digest::sha256_hex(other.as_bytes())[..16];
    assert!(
        out.stderr.contains(key_id) && out.stderr.contains(other_id),
        "{}",
        out.stderr
    );
    assert_eq!(trail_rows(&pg, "audit.jsonl").len(), lines, "nothing appended");
    assert_eq!(sim.requests().len(), requests, "no request was sent");
    let out = keyed(runs::KEY, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_exact(&pg, &fx, 100);
}

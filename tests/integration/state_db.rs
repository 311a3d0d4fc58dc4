//! State and audit trail in PostgreSQL: a real server started by the test
//! (initdb + pg_ctl on a temporary directory), the schema made by `state
//! migrate`, runs through the library and the binary.

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
    let mut ids = edc_testkit::landed::listed_json_record_ids(stream_dir, &lines).unwrap();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_keeps_cursor_manifest_and_trail_in_the_database_and_the_next_resumes() {
    let pg = postgres::start_migrated();
    let fx = runs::Fixture::new();
    let sim = runs::sim_with(100).await;
    let mut spec = fx.spec(&sim, AuditOptions::default());
    spec.state = pg.run_url().into();
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
    assert_eq!(rows[0]["state_schema_version"], 1);
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
    let out = support::run(&[
        "verify",
        "--out",
        fx.path("landing").to_str().unwrap(),
        "--state",
        &pg.run_url(),
        "--audit-log",
        "audit.jsonl",
    ]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("3 landed files, 3 manifest entries"),
        "{}",
        out.stdout
    );
    let out = support::run(&[
        "cursor",
        "show",
        "--state",
        &pg.run_url(),
        "--vendor",
        "vault_json",
        "--study",
        "S1",
    ]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let shown: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
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
    let config = fx.path("policies.yaml");
    let out = fx.path("landing");
    let mut args = vec![
        "sync",
        "--config",
        config.to_str().unwrap(),
        "--vendor",
        "vault_json",
        "--study",
        "S1",
        "--out",
        out.to_str().unwrap(),
        "--state",
        state,
        "--audit-log",
        "audit.jsonl",
        "--pacer",
        "local",
    ];
    args.extend_from_slice(extra);
    support::run_cmd(
        support::edc_sync()
            .args(&args)
            .env("EDC_SYNC_TEST_BASE_URL", sim.base_url())
            .env("EDC_SYNC_TEST_TOKEN", "sim-token")
            .current_dir(fx.path("")),
    )
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
        "INSERT INTO edc_sync_schema (version, description, tool_version) VALUES (2, 'from the future', '9.9.9')",
    )
    .unwrap();
    let out = sync_bin(&fx, &sim, &pg.owner_url(), &[]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stderr.contains("schema version 2 is newer"), "{}", out.stderr);
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
        "postgres://edc_run@127.0.0.1:5432/edc?sslmode=require",
        &[],
    );
    assert_eq!(out.code, 78, "TLS asked for, not spoken: {}", out.stderr);
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

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

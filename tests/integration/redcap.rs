//! REDCap end to end: the real binary against the simulator's redcap
//! profile over loopback (which imitates REDCap's API help and its clients
//! PyCap, REDCapR and redcapAPI; see `crates/sim/src/vendor/redcap.rs`):
//! the one POST endpoint with the token in the form, Export Logging in the
//! server's wall-clock minutes across a DST fall-back, the version check,
//! the error dialect and the ban.

use std::collections::BTreeMap;
use std::process::Output;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use edc_core::audit::verify;
use edc_sim::audit_trail::Arrivals;
use edc_sim::{Profile, RedcapRights, Simulator};

use crate::vendors::{assert_exit, sim, Fixture, PASSWORD};

const VENDOR: &str = "redcap_log";

/// The simulator's token (`SimConfig::token`).
const TOKEN: &str = "sim-token";

/// 2026-11-01 07:00:00Z: America/Chicago's clocks go back from 02:00 CDT
/// to 01:00 CST.
const FALL_BACK_S: u64 = 1_793_516_400;

async fn run(fx: &Fixture, server: &Simulator) -> Output {
    run_at(fx, server, 0).await
}

/// Where Debian's libfaketime puts its preload library.
const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// A sync whose wall clock is `skew_s` seconds off the real one (as the
/// simulator's is, `clock_skew_s`), by libfaketime: the host and the
/// server agree on a time at a DST fall-back. Monotonic time is real.
async fn run_at(fx: &Fixture, server: &Simulator, skew_s: i64) -> Output {
    run_with(fx, server, VENDOR, skew_s, &[]).await
}

/// A sync with `extra` arguments.
async fn run_with(fx: &Fixture, server: &Simulator, vendor: &str, skew_s: i64, extra: &[&str]) -> Output {
    let mut cmd = fx.sync(vendor, server, PASSWORD);
    cmd.args(extra);
    cmd.env("EDC_SYNC_TEST_TOKEN", TOKEN)
        .env("EDC_SYNC_TEST_BASE_URL", format!("{}/api/", server.base_url()));
    if skew_s != 0 {
        assert!(
            std::path::Path::new(FAKETIME_LIB).exists(),
            "{FAKETIME_LIB} is missing: install libfaketime with `apt-get install -y faketime`"
        );
        cmd.env("LD_PRELOAD", FAKETIME_LIB)
            .env("FAKETIME", format!("{skew_s:+}"))
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .env("FAKETIME_DONT_RESET", "1");
    }
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// A redcap simulator with `records` log changes arriving from `origin`,
/// and `faults`.
async fn redcap(records: u32, faults: &[&str], tune: impl FnOnce(&mut edc_sim::SimConfig)) -> Simulator {
    sim(Profile::Redcap, records, faults, |c| {
        c.audit_trail = Some(Arrivals::every(
            SystemTime::now() - Duration::from_secs(30),
            Duration::from_millis(100),
        ));
        tune(c)
    })
    .await
}

/// Every row the runs landed as new, as (timestamp, action, details) with
/// its count: a page lands whole, as the server sent it, and its manifest
/// line lists the positions of the rows landed before (`repeated`), which
/// are not counted again.
fn landed_rows(fx: &Fixture) -> BTreeMap<(String, String, String), usize> {
    let mut rows = BTreeMap::new();
    for row in edc_qualify::landed::landed_json_records(&fx.stream_dir(VENDOR), "").unwrap() {
        let key = |k: &str| row[k].as_str().unwrap().to_string();
        *rows
            .entry((key("timestamp"), key("action"), key("details")))
            .or_insert(0) += 1;
    }
    rows
}

/// Three growing syncs of the log and of the records across America/
/// Chicago's DST fall-back, where the wall clock shows 01:59 and then 01:00
/// again: every change is landed exactly once (two identical log rows of
/// one minute as two, every visit of a record once), whether the server
/// reads its bounds inclusively or strictly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_syncs_across_a_dst_fall_back_land_every_change_once() {
    for strict in [false, true] {
        three_syncs_across_a_fall_back(strict).await;
    }
}

async fn three_syncs_across_a_fall_back(strict: bool) {
    let fx = Fixture::new();
    // The server's clock starts 4 s before the fall-back; a change arrives
    // every 250 ms from 6 s before it to 3 s after it, every 4th an exact
    // twin of the one before (the same minute, user, action and details).
    let real_now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let skew = FALL_BACK_S as i64 - 4 - real_now as i64;
    let server = sim(Profile::Redcap, 36, &[], |c| {
        c.clock_skew_s = skew;
        c.redcap_exclusive_bounds = strict;
        c.audit_trail = Some(Arrivals {
            twins: Some(4),
            ..Arrivals::every(
                UNIX_EPOCH + Duration::from_secs(FALL_BACK_S - 6),
                Duration::from_millis(250),
            )
        });
    })
    .await;
    for pause in [0, 5, 6] {
        tokio::time::sleep(Duration::from_secs(pause)).await;
        assert_exit(&run_at(&fx, &server, skew).await, 0);
        assert_exit(&run_with(&fx, &server, RECORDS, skew, &[]).await, 0);
    }
    // The records: every change (a visit row) once, on both sides of the
    // fall-back (windows of wall seconds, `dateRangeBegin`/`dateRangeEnd`).
    let mut changes: Vec<u64> = landed_record_rows(&fx)
        .iter()
        .map(|r| r["visit_change"].as_str().unwrap().parse().unwrap())
        .collect();
    changes.sort_unstable();
    assert_eq!(changes, (1..=36).collect::<Vec<u64>>(), "strict: {strict}");
    let rows = landed_rows(&fx);
    let total: usize = rows.values().sum();
    assert_eq!(total, 36, "strict: {strict}; {rows:#?}");
    let twins = rows.values().filter(|n| **n == 2).count();
    assert_eq!(twins, 9, "every 4th change is its predecessor's twin: {rows:#?}");
    let minutes: std::collections::BTreeSet<&str> = rows.keys().map(|k| k.0.as_str()).collect();
    assert_eq!(
        minutes.into_iter().collect::<Vec<_>>(),
        ["2026-11-01 01:00", "2026-11-01 01:59"],
        "the changes are stamped on both sides of the fall-back"
    );
    // Every request was an export POSTed to the API URL, the token in its
    // form; a window across the fall-back asked for its widest wall times.
    let requests = server.requests();
    assert!(
        requests.iter().all(|r| r.method == "POST" && r.path == "/api/"),
        "{requests:?}"
    );
    let exports: Vec<&str> = requests.iter().filter_map(|r| r.export.as_deref()).collect();
    assert!(
        exports.iter().all(|e| e.starts_with("token=***&content=")),
        "{exports:?}"
    );
    assert_eq!(
        exports.iter().filter(|e| e.contains("content=version")).count(),
        6,
        "once a run, for the log and for the records"
    );
    assert!(
        exports
            .iter()
            .any(|e| e.contains("beginTime=2026-11-01+00%3A59") && e.contains("endTime=2026-11-01+02%3A00")),
        "{exports:?}"
    );
    assert!(verify(&fx.path("audit.jsonl")).unwrap().intact());
    let trail = std::fs::read_to_string(fx.path("audit.jsonl")).unwrap();
    assert!(!trail.contains(TOKEN), "the token reached the audit trail");
}

/// The product's own exports are logged by REDCap too (`logtype=export`):
/// the shipped log stream asks for record changes only, so polling does
/// not grow what it reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_the_log_does_not_read_the_products_own_exports() {
    let fx = Fixture::new();
    let server = redcap(20, &[], |_| {}).await;
    for _ in 0..3 {
        assert_exit(&run(&fx, &server).await, 0);
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let rows = landed_rows(&fx);
    assert_eq!(rows.values().sum::<usize>(), 20);
    assert!(
        rows.keys()
            .all(|(_, action, _)| action.starts_with("Update record")),
        "{rows:#?}"
    );
    assert_eq!(fx.events("page_committed").len(), 3);
    let pages = std::fs::read_dir(fx.stream_dir(VENDOR).join("pages"))
        .unwrap()
        .count();
    assert_eq!(pages, 1, "a poll with nothing new lands nothing");
}

/// The version is asked once a run, whatever the number of streams: the
/// second stream on the server reads it from the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_version_is_asked_once_a_run() {
    let fx = Fixture::new();
    // The fixture's own block ends where redcap_records begins (edit_policies
    // changes the first match, and oq_redcap comes first in the file).
    let ours = "      logtype: record\n    window:\n      end_param: endTime\n      format: local_minute\n      \
                settle_lag_s: 1\n    lookback:\n      seconds: 120\n      identical_records: distinct\nredcap_records:";
    fx.edit_policies(
        ours,
        "    window:\n      end_param: endTime\n      format: local_minute\n      settle_lag_s: 1\n    lookback:\n      \
         seconds: 120\n      identical_records: distinct\n  streams:\n    changes:\n      query:\n        logtype: \
         record\n    exports:\n      query:\n        logtype: export\nredcap_records:",
    );
    let server = redcap(10, &[], |_| {}).await;
    let out = run_with(&fx, &server, VENDOR, 0, &["--all-streams", "--allow-dirty"]).await;
    assert_exit(&out, 0);
    let exports: Vec<String> = server.requests().into_iter().filter_map(|r| r.export).collect();
    assert_eq!(
        exports.iter().filter(|e| e.contains("content=version")).count(),
        1,
        "{exports:?}"
    );
    assert_eq!(
        exports.iter().filter(|e| e.contains("content=log")).count(),
        2,
        "{exports:?}"
    );
}

/// A throttled version request pauses the quota for every worker, as a
/// throttled page does, and ends the run with 75 (try later), never 65.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_version_request_is_a_temporary_failure() {
    let fx = Fixture::new();
    let server = redcap(5, &["1=429:seconds:1"], |_| {}).await;
    let out = run(&fx, &server).await;
    assert_exit(&out, 75);
    let limited = fx.events("rate_limited");
    assert_eq!(limited.len(), 1, "{limited:?}");
    assert!(limited[0]["url"]
        .as_str()
        .unwrap()
        .ends_with("/api/?content=version"));
    assert!(fx.events("page_committed").is_empty());
    // The next run asks again and lands the log.
    assert_exit(&run(&fx, &server).await, 0);
    assert_eq!(landed_rows(&fx).values().sum::<usize>(), 5);
}

/// A server older than Export Logging (REDCap 10.8.0) stops a log stream
/// before anything is asked of it, with 78 naming the version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_export_logging_is_a_configuration_error() {
    let fx = Fixture::new();
    let server = redcap(5, &[], |c| c.redcap_version = "10.7.9".into()).await;
    let out = run(&fx, &server).await;
    assert_exit(&out, 78);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("REDCap 10.7.9 has no Export Logging (content=log needs REDCap 10.8.0 or later)"),
        "{stderr}"
    );
    assert_eq!(server.requests().len(), 1, "only the version was asked");
    assert!(fx.events("page_committed").is_empty());
}

/// A 429 whose body says the address is banned is not a throttle: the run
/// stops at once with 76, asks nothing more (asking keeps the ban), says
/// that only an administrator can lift it, and records it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_banned_address_stops_the_run_at_once_with_76() {
    let fx = Fixture::new();
    let server = redcap(
        40,
        &["2=redcap-error:429:Your IP address (127.0.0.1) has been banned due to suspected abuse. Please contact your REDCap administrator."],
        |_| {},
    )
    .await;
    let out = run(&fx, &server).await;
    assert_exit(&out, 76);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("banned due to suspected abuse") && stderr.contains("administrator"),
        "{stderr}"
    );
    assert_eq!(server.requests().len(), 2, "the ban is never asked again");
    let failed = fx.events("request_failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["vendor_error"]["kind"], "banned");
    assert_eq!(failed[0]["status"], 429);
    assert!(fx.events("rate_limited").is_empty(), "a ban is not waited out");
    assert!(
        fx.events("page_committed").is_empty(),
        "the cursor stays where it was"
    );
}

/// REDCap's errors in its formats decide the step and name REDCap's text:
/// a token it refuses (403) is 77, a bad request 65, a 5xx is retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redcaps_error_bodies_decide_the_step() {
    let fx = Fixture::new();
    let server = redcap(40, &[], |c| c.token = "another-token".into()).await;
    let out = run(&fx, &server).await;
    assert_exit(&out, 77);
    assert!(String::from_utf8_lossy(&out.stderr).contains("You do not have permissions to use the API"));

    let fx = Fixture::new();
    let server = redcap(
        40,
        &["2=redcap-error:400:The value of the parameter \"content\" is not valid"],
        |_| {},
    )
    .await;
    let out = run(&fx, &server).await;
    assert_exit(&out, 65);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not valid"), "{stderr}");
    // The message names the request as it was sent: a POST of the export.
    assert!(
        stderr.contains(&format!("POST {}/api/?content=log&", server.base_url())) && !stderr.contains("GET "),
        "{stderr}"
    );
    assert!(fx.events("page_committed").is_empty());

    let fx = Fixture::new();
    let server = redcap(40, &["2=redcap-error:500:Internal error"], |_| {}).await;
    let out = run(&fx, &server).await;
    assert_exit(&out, 0);
    assert_eq!(fx.events("retry_scheduled").len(), 1);
    assert_eq!(landed_rows(&fx).values().sum::<usize>(), 40);
}

const RECORDS: &str = "redcap_records";

/// A sync of `redcap_records` against `server`'s API URL.
async fn run_records(fx: &Fixture, server: &Simulator) -> Output {
    run_with(fx, server, RECORDS, 0, &[]).await
}

/// The visit rows (one a change) of whole records the records stream
/// landed as new (the id lists, landed too, hold the record id and row
/// keys only; a record's baseline row holds no change).
fn landed_record_rows(fx: &Fixture) -> Vec<serde_json::Value> {
    let dir = fx.path(&format!("landing/{RECORDS}/-/Mediflex(Prod)/-/default"));
    edc_qualify::landed::landed_json_records(std::path::Path::new(&dir), "")
        .unwrap()
        .into_iter()
        .filter(|row| row["visit_change"].as_str().is_some_and(|v| !v.is_empty()))
        .collect()
}

/// Growing syncs of REDCap's records: each window lists the ids changed in
/// it, then reads them whole in batches; every change to a record (a visit
/// row of its repeating instrument) is landed exactly once across runs,
/// and no request is anything but a read export.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_are_read_by_id_list_then_batches_and_every_change_lands_once() {
    let fx = Fixture::new();
    // 40 changes to 7 records, every 250 ms from 5 s ago: they keep
    // arriving through the first syncs.
    let server = sim(Profile::Redcap, 40, &[], |c| {
        c.audit_trail = Some(Arrivals::every(
            SystemTime::now() - Duration::from_secs(5),
            Duration::from_millis(250),
        ));
    })
    .await;
    for pause in [0, 2, 2, 4] {
        tokio::time::sleep(Duration::from_secs(pause)).await;
        assert_exit(&run_records(&fx, &server).await, 0);
    }
    let rows = landed_record_rows(&fx);
    let mut changes: Vec<u64> = rows
        .iter()
        .filter(|r| r["redcap_repeat_instrument"] == "visit")
        .map(|r| r["visit_change"].as_str().unwrap().parse().unwrap())
        .collect();
    changes.sort_unstable();
    // A batch brings a record whole, its earlier visits too; within the
    // lookback's memory (all of this test) they are recognised, so every
    // change lands exactly once.
    assert_eq!(changes, (1..=40).collect::<Vec<u64>>(), "every change once");
    // The id lists asked for the record id only, with the window's range;
    // the batches for at most 3 records each, with no range.
    let exports: Vec<String> = server.requests().into_iter().filter_map(|r| r.export).collect();
    let lists: Vec<&String> = exports
        .iter()
        .filter(|e| e.contains("fields%5B0%5D=record_id"))
        .collect();
    assert_eq!(lists.len(), 4, "{exports:?}");
    assert!(lists
        .iter()
        .all(|e| e.contains("dateRangeEnd=") && e.contains("content=record")));
    let batches: Vec<&String> = exports.iter().filter(|e| e.contains("records%5B0%5D=")).collect();
    assert!(!batches.is_empty());
    assert!(batches
        .iter()
        .all(|e| !e.contains("records%5B3%5D") && !e.contains("dateRange") && !e.contains("fields")));
    // The record ids in the audit trail are masked.
    let committed = fx.events("page_committed");
    let batch_lines: Vec<&serde_json::Value> = committed
        .iter()
        .filter(|l| l["url"].as_str().unwrap().contains("records%5B0%5D="))
        .collect();
    assert!(!batch_lines.is_empty());
    assert!(batch_lines
        .iter()
        .all(|l| l["url"].as_str().unwrap().contains("records%5B0%5D=masked-")));
    assert!(verify(&fx.path("audit.jsonl")).unwrap().intact());
}

/// A record deleted between the id list and its batch is audited as
/// vanished (its id masked), never skipped silently; the run goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_deleted_between_its_id_list_and_its_batch_is_audited() {
    let fx = Fixture::new();
    let server = redcap(20, &[], |c| c.redcap_delete_after_list = Some(3)).await;
    let out = run_records(&fx, &server).await;
    assert_exit(&out, 0);
    let vanished = fx.events("records_vanished");
    assert_eq!(vanished.len(), 1, "{vanished:?}");
    assert_eq!(vanished[0]["asked"], 3);
    let missing = vanished[0]["missing"].as_array().unwrap();
    assert_eq!(missing.len(), 1);
    assert!(missing[0].as_str().unwrap().starts_with("masked-"), "{missing:?}");
    let rows = landed_record_rows(&fx);
    assert!(rows.iter().all(|r| r["record_id"] != "3"));
    assert!(rows.iter().any(|r| r["record_id"] == "4"));
}

/// A token whose export rights are de-identified, or whose user is in a
/// data access group, exports a subset without saying so: the run is
/// refused before anything lands (77), naming what is missing; declared in
/// the policy's `restricted_scope`, the same subset is landed and the audit
/// header records the declaration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restricted_token_is_refused_unless_its_scope_is_declared() {
    for (rights, said) in [
        (
            RedcapRights::DeIdentified,
            "lacks 1 of the project's fields (aeterm)",
        ),
        (RedcapRights::OneGroup, "no redcap_data_access_group column"),
    ] {
        let fx = Fixture::new();
        let server = redcap(20, &[], |c| c.redcap_rights = rights).await;
        let out = run_records(&fx, &server).await;
        assert_exit(&out, 77);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(said) && stderr.contains("restricted_scope"),
            "{stderr}"
        );
        // Refused before anything lands: not even the window's id list.
        assert!(fx.events("page_committed").is_empty(), "nothing landed");
        let failed = fx.events("request_failed");
        assert_eq!(failed.len(), 1);
        assert!(failed[0]["reason"].as_str().unwrap().contains(said));
        // Both facts were asked once, with the version.
        let exports: Vec<String> = server.requests().into_iter().filter_map(|r| r.export).collect();
        assert_eq!(
            exports
                .iter()
                .filter(|e| e.contains("content=exportFieldNames") || e.contains("content=dag"))
                .count(),
            2,
            "{exports:?}"
        );
    }
    let fx = Fixture::new();
    // The fixture's own block ends where vault_newest begins (edit_policies
    // changes the first match; the OQ's records block comes earlier).
    fx.edit_policies(
        "    lookback:\n      seconds: 120\nvault_newest:",
        "    lookback:\n      seconds: 120\n    restricted_scope:\n      fields: [aeterm]\n      one_group: true\nvault_newest:",
    );
    let server = redcap(20, &[], |c| c.redcap_rights = RedcapRights::OneGroup).await;
    let mut cmd = fx.sync(RECORDS, &server, PASSWORD);
    cmd.env("EDC_SYNC_TEST_TOKEN", TOKEN)
        .env("EDC_SYNC_TEST_BASE_URL", format!("{}/api/", server.base_url()))
        .arg("--allow-dirty");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_exit(&out, 0);
    // The audit header records the subset the policy declared.
    let started = fx.events("run_started");
    let declared = started[0]["restricted_scope"]
        .as_object()
        .expect("restricted_scope in the header");
    let (_, scope) = declared.iter().next().unwrap();
    assert_eq!(scope["fields"], serde_json::json!(["aeterm"]));
    assert_eq!(scope["one_group"], true);
    let rows = landed_record_rows(&fx);
    assert!(!rows.is_empty());
    assert!(rows
        .iter()
        .all(|r| r["record_id"].as_str().unwrap().parse::<u32>().unwrap() % 2 == 1));
}

/// Read-only by allow-list: a committed policy can give an export only the
/// fields REDCap's API help documents for its content. A field that would
/// make the POST an import (`data`, `overwriteBehavior`), a name PHP would
/// rewrite into a checked one (a leading space: `" action"`), an index on
/// a field that takes one value, or a field of another content is refused
/// by `config validate` and by `sync` (78, naming the key), and nothing is
/// sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_cannot_give_an_export_a_field_its_content_does_not_document() {
    let cases = [
        ("      logtype: record\n", "      logtype: record\n      data: \"record_id,age\"\n", "redcap_log.delta.query.data"),
        (
            "      logtype: record\n",
            "      logtype: record\n      overwriteBehavior: overwrite\n",
            "redcap_log.delta.query.overwriteBehavior",
        ),
        ("      logtype: record\n", "      logtype: record\n      \" action\": import\n", "redcap_log.delta.query. action"),
        ("      logtype: record\n", "      logtype: record\n      \" content\": record\n", "redcap_log.delta.query. content"),
        ("      format: json\n      logtype", "      format[0]: json\n      logtype", "redcap_log.delta.query.format[0]"),
        ("      logtype: record\n", "      logtype: record\n      \"fields[0]\": dob\n", "redcap_log.delta.query.fields[0]"),
        ("    cursor_param: beginTime\n    cursor_field: timestamp\n    cursor_kind: server_local\n    order: newest_first\n    query:\n      content: log",
         "    cursor_param: data\n    cursor_field: timestamp\n    cursor_kind: server_local\n    order: newest_first\n    query:\n      content: log",
         "redcap_log.delta.cursor_param"),
        ("      end_param: endTime\n      format: local_minute", "      end_param: returnContent\n      format: local_minute", "redcap_log.delta.window.end_param"),
    ];
    for (from, to, key) in cases {
        let fx = Fixture::new();
        // The edit goes into the redcap_log block (other blocks read alike).
        let policies = std::fs::read_to_string(fx.path("policies.yaml")).unwrap();
        let at = policies.find("\nredcap_log:\n").unwrap();
        let (head, block) = policies.split_at(at);
        assert!(block.contains(from), "{from:?}");
        std::fs::write(
            fx.path("policies.yaml"),
            format!("{head}{}", block.replacen(from, to, 1)),
        )
        .unwrap();
        let repo = git2::Repository::open(fx.dir.path()).unwrap();
        crate::support::git_commit_all(&repo, "a policy with a write-shaped export");
        let validated = crate::support::run(&[
            "config",
            "validate",
            "--config",
            fx.path("policies.yaml").to_str().unwrap(),
        ]);
        assert_eq!(validated.code, 78, "{key}: {}", validated.stderr);
        assert!(validated.stderr.contains(key), "{key}: {}", validated.stderr);
        let server = redcap(5, &[], |_| {}).await;
        let out = run(&fx, &server).await;
        assert_exit(&out, 78);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(key), "{key}: {stderr}");
        assert!(server.requests().is_empty(), "{key}: {:?}", server.requests());
    }
}

/// A page of any size commits and reads back: a REDCap log window of
/// 130,000 changes (its lookback change alone about 4.6 MB, which one trail
/// line once carried, leaving a trail no run could append to) commits,
/// carried by part lines no longer than a trail line may be; a second and
/// third run append to the trail and land nothing twice; and `audit
/// verify` and `verify` agree with the runs. With the state in files and
/// in PostgreSQL, the runs holding the audit key (part lines are sealed
/// like every line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_window_too_large_for_one_trail_line_commits_and_reads_back() {
    for db in [false, true] {
        a_log_window_too_large_for_one_line(db).await;
    }
}

async fn a_log_window_too_large_for_one_line(db: bool) {
    const CHANGES: u32 = 130_000;
    const KEY: &str = "0123456789abcdef0123456789abcdef";
    let fx = Fixture::new();
    let pg = db.then(crate::support::postgres::start_migrated);
    let state = match &pg {
        Some(pg) => pg.run_url(),
        None => fx.path("state").display().to_string(),
    };
    let server = redcap(CHANGES, &[], |c| {
        // Every change in the past, 10 ms apart: the last two minutes of
        // them (the policy's lookback) are read again by every next run.
        let every = Duration::from_millis(10);
        c.audit_trail = Some(Arrivals::every(
            SystemTime::now() - every * CHANGES - Duration::from_secs(90),
            every,
        ));
    })
    .await;
    for _ in 0..3 {
        let mut cmd = fx.command_with_state("sync", VENDOR, &server, PASSWORD, &state);
        cmd.env("EDC_SYNC_TEST_TOKEN", TOKEN)
            .env("EDC_SYNC_TEST_BASE_URL", format!("{}/api/", server.base_url()))
            .env("EDC_SYNC_AUDIT_KEY", KEY);
        let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap();
        assert_exit(&out, 0);
    }
    let keyed = |args: &[&str]| {
        let mut cmd = crate::support::edc_sync();
        cmd.args(args).env("EDC_SYNC_AUDIT_KEY", KEY);
        crate::support::run_cmd(&mut cmd)
    };
    let trail = match &pg {
        None => fx.path("audit.jsonl"),
        Some(_) => {
            let exported = fx.path("exported.jsonl");
            let out = keyed(&[
                "audit",
                "export",
                "--state",
                &state,
                "--to",
                exported.to_str().unwrap(),
            ]);
            assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
            exported
        }
    };
    let text = std::fs::read_to_string(&trail).unwrap();
    let longest = text.lines().map(str::len).max().unwrap();
    assert!(longest <= 4 << 20, "db: {db}: a line of {longest} bytes");
    let parts = text
        .lines()
        .filter(|l| l.contains(r#""event":"page_committed_part""#))
        .count();
    assert!(parts >= 10, "db: {db}: {parts} part lines");
    let audit_verify = match &pg {
        None => keyed(&["audit", "verify", "--key", trail.to_str().unwrap()]),
        Some(_) => keyed(&["audit", "verify", "--key", "--state", &state]),
    };
    assert_eq!(
        audit_verify.code, 0,
        "db: {db}: {}{}",
        audit_verify.stdout, audit_verify.stderr
    );
    let (land, audit) = (fx.path("landing"), fx.path("audit.jsonl"));
    let verified = keyed(&[
        "verify",
        "--out",
        land.to_str().unwrap(),
        "--state",
        &state,
        "--audit-log",
        audit.to_str().unwrap(),
    ]);
    assert_eq!(
        verified.code, 0,
        "db: {db}: {}{}",
        verified.stdout, verified.stderr
    );
}

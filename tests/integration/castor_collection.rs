//! Castor's study data end to end: a live HAL collection with no
//! since-filter (`GET /api/study/{study}/data-points/study`), read whole by
//! every run up to the `page_count` its pages state, its `total_items`
//! compared on the first and last page, and landed only where it changed,
//! as the simulator's castor profile serves it
//! (`crates/sim/src/vendor/castor.rs`).

use edc_core::audit::verify;
use edc_sim::{LogEntry, Profile};

use crate::vendors::{assert_exit, sim, Fixture, PASSWORD as SECRET};

const VENDOR: &str = "castor_data";

/// The snapshot the last consistent pass recorded: its `page_committed`
/// line's `snapshot`, and the items of its pages read back from the
/// landing by their content address, in order.
fn snapshot(fx: &Fixture) -> (serde_json::Value, Vec<serde_json::Value>) {
    let line = fx
        .events("page_committed")
        .into_iter()
        .rev()
        .find(|l| l.get("snapshot").is_some())
        .expect("a page_committed line with a snapshot");
    let made = line["snapshot"].clone();
    let mut items = Vec::new();
    for sha in made["pages"].as_array().unwrap() {
        let path = fx
            .stream_dir(VENDOR)
            .join(format!("pages/{}.json", sha.as_str().unwrap()));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(edc_core::digest::sha256_hex(&bytes), sha.as_str().unwrap());
        let page: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        items.extend(page["_embedded"]["items"].as_array().unwrap().iter().cloned());
    }
    (made, items)
}

/// What identifies a data point: its participant and field.
fn keys(items: &[serde_json::Value]) -> Vec<String> {
    let mut keys: Vec<String> = items
        .iter()
        .map(|i| format!("{} {}", i["participant_id"], i["field_id"]))
        .collect();
    keys.sort();
    keys
}

fn data_requests(server: &edc_sim::Simulator) -> Vec<LogEntry> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/data-points/study"))
        .collect()
}

/// A run reads pages 1..page_count as one pass and records the snapshot
/// (its hash, item count and pages) in the cursor and in the last page's
/// `page_committed` line; the pages rebuild the collection, every data
/// point once. A second run over an unchanged collection reads it whole
/// again, lands no new file and records the same snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collection_is_read_whole_and_landed_only_where_it_changed() {
    let fx = Fixture::new();
    let server = sim(Profile::Castor, 30, &[], |_| {}).await;
    assert_exit(&fx.run(VENDOR, &server, SECRET).await, 0);
    let requests = data_requests(&server);
    assert_eq!(requests.len(), 5, "30 items in pages of 7: {requests:?}");
    assert!(
        requests
            .iter()
            .all(|r| !r.path.contains("since") && !r.path.contains("date")),
        "no since-filter: {requests:?}"
    );
    let (made, items) = snapshot(&fx);
    assert_eq!(made["items"], 30);
    assert_eq!(made["pages"].as_array().unwrap().len(), 5);
    let all = keys(&items);
    let mut distinct = all.clone();
    distinct.dedup();
    assert_eq!((all.len(), distinct.len()), (30, 30));
    let cursor = fx.cursor(VENDOR);
    assert_eq!(cursor["snapshot"]["sha256"], made["sha256"]);
    assert_eq!(cursor["snapshot"]["items"], 30);
    assert!(
        cursor["next_page"].is_null() && cursor["window_start"].is_null(),
        "{cursor}"
    );
    let files = |fx: &Fixture| {
        std::fs::read_dir(fx.stream_dir(VENDOR).join("pages"))
            .unwrap()
            .count()
    };
    assert_eq!(files(&fx), 5);

    // Unchanged: read whole again, nothing new landed, the same snapshot.
    assert_exit(&fx.run(VENDOR, &server, SECRET).await, 0);
    assert_eq!(
        data_requests(&server).len(),
        10,
        "every run reads the whole collection"
    );
    assert_eq!(files(&fx), 5, "no page changed, no file landed");
    let second: Vec<serde_json::Value> = fx.events("page_committed")[5..].to_vec();
    assert!(
        second
            .iter()
            .all(|l| l["unchanged"] == true && l["landed"] == false),
        "{second:?}"
    );
    let manifest = std::fs::read_to_string(fx.stream_dir(VENDOR).join("manifest.jsonl")).unwrap();
    assert_eq!(
        manifest.lines().count(),
        5,
        "an unchanged page is not listed again"
    );
    assert_eq!(fx.cursor(VENDOR)["snapshot"], cursor["snapshot"]);
    assert!(verify(&fx.path("audit.jsonl")).unwrap().intact());
}

/// A data point added while a pass reads pages 2..n shifts every later
/// page: the last page states another `total_items` than the first, so
/// the pass is audited as `collection_changed` and read again from page 1.
/// The snapshot is the consistent second pass: every data point once,
/// the new one included; pages of the first pass the second read again
/// are recognised by their hash and not landed twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collection_that_changes_while_read_is_read_again() {
    let fx = Fixture::new();
    // 1 = token, 2 = page 1, 3 = page 2 (a data point joins first), ...
    let server = sim(Profile::Castor, 30, &["3=grow"], |c| c.study_data_held = 1).await;
    assert_exit(&fx.run(VENDOR, &server, SECRET).await, 0);
    let changed = fx.events("collection_changed");
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(
        (
            &changed[0]["pass"],
            &changed[0]["first_total_items"],
            &changed[0]["last_total_items"]
        ),
        (
            &serde_json::json!(1),
            &serde_json::json!(29),
            &serde_json::json!(30)
        )
    );
    let requests = data_requests(&server);
    assert_eq!(requests.len(), 5 + 5, "two passes of five pages: {requests:?}");
    assert!(requests[5].path.contains("page=1"), "{requests:?}");
    let (made, items) = snapshot(&fx);
    assert_eq!(made["items"], 30);
    let all = keys(&items);
    let mut distinct = all.clone();
    distinct.dedup();
    assert_eq!((all.len(), distinct.len()), (30, 30), "every data point once");
    // Only one line carries a snapshot: the first pass made none.
    let snapshots = fx
        .events("page_committed")
        .iter()
        .filter(|l| l.get("snapshot").is_some())
        .count();
    assert_eq!(snapshots, 1);
    let verified = crate::support::run_cmd(
        crate::support::edc_sync()
            .args(["verify", "--out"])
            .arg(fx.path("landing"))
            .arg("--state")
            .arg(fx.path("state"))
            .arg("--audit-log")
            .arg(fx.path("audit.jsonl")),
    );
    assert_eq!(verified.code, 0, "{}{}", verified.stdout, verified.stderr);
}

/// A collection that changes under every pass a run may make
/// (`max_passes: 2`): exit 75 saying so, the pages read committed, and
/// the next run reads it again from page 1 and makes its snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collection_that_never_settles_is_75_and_read_again_next_run() {
    let fx = Fixture::new();
    // Page 2 of each of the two passes sees another data point join.
    let server = sim(Profile::Castor, 30, &["3=grow", "8=grow"], |c| {
        c.study_data_held = 2
    })
    .await;
    let out = fx.run(VENDOR, &server, SECRET).await;
    assert_exit(&out, 75);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("changed while it was read in each of 2 pass(es)"),
        "{stderr}"
    );
    assert_eq!(fx.events("collection_changed").len(), 2);
    assert!(fx.cursor(VENDOR)["next_page"]
        .as_str()
        .unwrap()
        .contains("page=1"));
    assert_exit(&fx.run(VENDOR, &server, SECRET).await, 0);
    let (made, items) = snapshot(&fx);
    assert_eq!(made["items"], 30);
    assert_eq!(keys(&items).len(), 30);
}

/// A server that serves fewer items a page than asked (Castor's maximum,
/// or less): the pass follows the `page_count` the pages state, not the
/// page size, and misses nothing. An empty collection (Castor's 404
/// "There are no data points.") is a snapshot of no items.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_are_the_servers_count_and_an_empty_collection_is_a_snapshot() {
    let fx = Fixture::new();
    let server = sim(Profile::Castor, 30, &[], |c| c.max_page_size = 4).await;
    assert_exit(&fx.run(VENDOR, &server, SECRET).await, 0);
    assert_eq!(data_requests(&server).len(), 8, "30 items, 4 a page");
    let (made, items) = snapshot(&fx);
    assert_eq!((made["items"].as_u64(), keys(&items).len()), (Some(30), 30));

    let fx = Fixture::new();
    let server = sim(Profile::Castor, 30, &[], |c| c.study_data_held = 30).await;
    assert_exit(&fx.run(VENDOR, &server, SECRET).await, 0);
    assert_eq!(fx.events("collection_empty").len(), 1);
    let (made, items) = snapshot(&fx);
    assert_eq!((made["items"].as_u64(), items.len()), (Some(0), 0));
    assert_eq!(made["pages"], serde_json::json!([]));
}

/// The vendor's word that there are no items is believed only where it
/// can be true: Castor's 404 "There are no data points." on page 2 of a
/// pass (items gone while it was read, or a server that says so wrongly),
/// and an HTTP 500 whose body claims the 404, are not a completed window
/// with the rest of the collection missing: the page is asked again
/// (audited), and the pass lands every data point. Said on every attempt,
/// the budget is spent: 75, the pages read committed, the window not
/// complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_items_on_a_later_page_or_at_another_status_is_asked_again_never_a_completed_window() {
    // 1 = token, 2 = page 1, 3 = page 2, ...
    for fault in [
        "3=castor-error:404:There are no data points.",
        "3=castor-error:500/404:There are no data points.",
    ] {
        let fx = Fixture::new();
        let server = sim(Profile::Castor, 30, &[fault], |_| {}).await;
        assert_exit(&fx.run(VENDOR, &server, SECRET).await, 0);
        assert!(fx.events("collection_empty").is_empty(), "{fault}");
        let retried = fx.events("retry_scheduled");
        assert_eq!(retried.len(), 1, "{fault}");
        assert!(
            retried[0]["reason"].as_str().unwrap().contains("no items"),
            "{fault}: {}",
            retried[0]
        );
        let (made, items) = snapshot(&fx);
        assert_eq!(
            (made["items"].as_u64(), keys(&items).len()),
            (Some(30), 30),
            "{fault}"
        );
        assert!(verify(&fx.path("audit.jsonl")).unwrap().intact());
    }
    let fx = Fixture::new();
    let faults = [
        "3=castor-error:404:There are no data points.",
        "4=castor-error:404:There are no data points.",
        "5=castor-error:404:There are no data points.",
    ];
    let server = sim(Profile::Castor, 30, &faults, |_| {}).await;
    assert_exit(&fx.run(VENDOR, &server, SECRET).await, 75);
    assert!(fx.events("collection_empty").is_empty());
    assert!(fx
        .events("page_committed")
        .iter()
        .all(|l| l.get("snapshot").is_none()));
    assert!(fx.cursor(VENDOR)["snapshot"].is_null());
}

/// The shipped `castor` vendor, as an operator runs it: `--all-streams`
/// reads the audit trail by day and the study data whole, each into its
/// own stream directory; the study data's snapshot holds every data point
/// once and the cursor keeps its hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_castor_vendor_reads_its_study_data_beside_its_audit_trail() {
    let dir = crate::vendors::shipped_policy_repo();
    let origin = std::time::SystemTime::now() - std::time::Duration::from_secs(20);
    let arrivals = edc_sim::audit_trail::Arrivals::every(origin, std::time::Duration::from_millis(200));
    let server = sim(Profile::Castor, 40, &[], |c| {
        c.audit_trail = Some(arrivals.clone())
    })
    .await;
    let env = [
        ("CASTOR_BASE_URL", server.base_url()),
        ("CASTOR_CLIENT_ID", crate::vendors::USER.to_string()),
        ("CASTOR_CLIENT_SECRET", SECRET.to_string()),
    ];
    let args = ["--all-streams", "--tenant", "client-1"];
    let out = crate::vendors::shipped_sync(dir.path(), "castor", &args, &env).await;
    assert_exit(&out, 0);
    let root = dir.path().join("landing/castor/client-1/Mediflex(Prod)/-");
    let trail = edc_qualify::landed::landed_json_records(&root.join("audit_trail"), "/items").unwrap();
    assert_eq!(trail.len(), 40);
    let points =
        edc_qualify::landed::landed_json_records(&root.join("study_data"), "/_embedded/items").unwrap();
    assert_eq!(keys(&points).len(), 40);
    let data = data_requests(&server);
    assert!(
        data.iter()
            .all(|r| r.path.contains("page_size=1000") && r.path.contains("page=1")),
        "{data:?}"
    );
    let cursor: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            dir.path()
                .join("state/castor/client-1/Mediflex(Prod)/-/study_data.cursor.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(cursor["snapshot"]["items"], 40, "{cursor}");
}

/// Both Castor streams on one client's fixed-window quota (scaled down to 6
/// calls per 2 s, the simulator keeping the same window as Castor's
/// gateway would) with tokens that last three seconds: a sync of several
/// seconds renews its token before each expires, is never refused or
/// throttled, never sends more than the window's calls in any window the
/// server counted, and lands every audit event and every data point once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_outliving_its_tokens_lands_every_event_and_data_point_once_within_the_window() {
    let fx = Fixture::new();
    let origin = std::time::SystemTime::now() - std::time::Duration::from_secs(20);
    let arrivals = edc_sim::audit_trail::Arrivals::every(origin, std::time::Duration::from_millis(100));
    let server = sim(Profile::Castor, 20, &[], |c| {
        c.audit_trail = Some(arrivals.clone());
        c.token_lifetime = std::time::Duration::from_secs(3);
        c.window_quota = Some((6, std::time::Duration::from_secs(2)));
    })
    .await;
    let out = fx
        .run_with("castor_paced", &server, SECRET, &["--all-streams"])
        .await;
    if out.status.code() != Some(0) {
        for r in server.requests() {
            eprintln!("{} {} {} {}", r.ts, r.method, r.status, r.path);
        }
        eprintln!("{}", std::fs::read_to_string(fx.path("audit.jsonl")).unwrap());
    }
    assert_exit(&out, 0);
    let requests = server.requests();
    assert!(
        requests.iter().all(|r| r.status != 429 && r.status != 401),
        "{requests:?}"
    );
    // Every window the server counted, from its first call, held at most 6.
    let mut start = None;
    let mut in_window = 0;
    for r in &requests {
        match start {
            Some(s) if r.t_us - s < 2_000_000 => in_window += 1,
            _ => {
                start = Some(r.t_us);
                in_window = 1;
            }
        }
        assert!(in_window <= 6, "more than 6 calls in a window: {requests:?}");
    }
    assert!(
        fx.events("session_renewed").len() >= 2,
        "the sync outlived several tokens"
    );
    let root = fx.path("landing/castor_paced/-/Mediflex(Prod)/-");
    let trail = edc_qualify::landed::landed_json_records(&root.join("audit_trail"), "/items").unwrap();
    let visits = edc_qualify::landed::event_visits(&trail);
    assert_eq!(visits, (1..=20).collect::<Vec<u32>>(), "every event once");
    let points =
        edc_qualify::landed::landed_json_records(&root.join("study_data"), "/_embedded/items").unwrap();
    let all = keys(&points);
    let mut distinct = all.clone();
    distinct.dedup();
    assert_eq!((all.len(), distinct.len()), (20, 20), "every data point once");
}

/// A page that does not state the collection's item count where the
/// policy says (`total_items_pointer`) cannot be judged consistent: it is
/// refused (65) naming the pointer and the key, before anything lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_without_the_item_count_is_refused_naming_the_pointer() {
    let fx = Fixture::new();
    fx.edit_policies(
        "    collection:\n      max_passes: 2\n",
        "    collection:\n      total_items_pointer: /count\n      max_passes: 2\n",
    );
    let server = sim(Profile::Castor, 30, &[], |_| {}).await;
    let out = fx.run_with(VENDOR, &server, SECRET, &["--allow-dirty"]).await;
    assert_exit(&out, 65);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("/count") && stderr.contains("delta.collection.total_items_pointer"),
        "{stderr}"
    );
    assert!(fx.events("page_committed").is_empty());
    assert!(!fx.stream_dir(VENDOR).join("manifest.jsonl").exists());
}

/// Castor's study data carries every record's data points, archived
/// records' included: its endpoint has no archived filter, so its own
/// clients drop them on their side (castoRedc by the participant list,
/// castoredc_api by `GET /record?archived=0`). The shipped `records`
/// stream lands that list (each record with its `archived` flag), and
/// its policy option `query: {archived: "0"}` (or `"1"`) has Castor
/// filter it, on every page: here 7 records, the last 2 archived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_castor_vendor_lands_its_record_list_and_filters_archived_records_by_policy() {
    let server = sim(Profile::Castor, 21, &[], |c| {
        c.max_page_size = 3;
        c.archived_records = 2;
    })
    .await;
    let env = [
        ("CASTOR_BASE_URL", server.base_url()),
        ("CASTOR_CLIENT_ID", crate::vendors::USER.to_string()),
        ("CASTOR_CLIENT_SECRET", SECRET.to_string()),
    ];
    let root = |dir: &tempfile::TempDir, stream: &str| {
        dir.path()
            .join("landing/castor/client-1/Mediflex(Prod)/-")
            .join(stream)
    };
    let archived = |records: &[serde_json::Value]| {
        let mut flags: Vec<(String, bool)> = records
            .iter()
            .map(|r| {
                (
                    r["record_id"].as_str().unwrap().to_string(),
                    r["archived"].as_bool().unwrap(),
                )
            })
            .collect();
        flags.sort();
        flags
    };

    // As shipped: the whole list, every record once with its flag; the
    // study data holds the archived records' points too.
    let shipped = crate::vendors::shipped_policy_repo();
    let args = ["--stream", "records", "--tenant", "client-1"];
    assert_exit(
        &crate::vendors::shipped_sync(shipped.path(), "castor", &args, &env).await,
        0,
    );
    let all =
        edc_qualify::landed::landed_json_records(&root(&shipped, "records"), "/_embedded/records").unwrap();
    let flags = archived(&all);
    assert_eq!(flags.len(), 7, "{flags:?}");
    assert_eq!(
        flags
            .iter()
            .filter(|(_, a)| *a)
            .map(|(id, _)| id.as_str())
            .collect::<Vec<_>>(),
        ["110006", "110007"]
    );
    let args = ["--stream", "study_data", "--tenant", "client-1"];
    assert_exit(
        &crate::vendors::shipped_sync(shipped.path(), "castor", &args, &env).await,
        0,
    );
    let points =
        edc_qualify::landed::landed_json_records(&root(&shipped, "study_data"), "/_embedded/items").unwrap();
    assert!(
        points.iter().any(|p| p["participant_id"] == "110007"),
        "archived records' data points are served"
    );

    // The policy option: archived records left out by Castor, on every page.
    let filtered = crate::vendors::shipped_policy_repo();
    let policy = filtered.path().join("rate_limits.yaml");
    let text = std::fs::read_to_string(&policy).unwrap();
    let shipped_block = "    records:\n      # query: {archived: \"0\"}";
    assert!(
        text.contains(shipped_block),
        "the shipped policy shows the option"
    );
    std::fs::write(
        &policy,
        text.replacen(shipped_block, "    records:\n      query: {archived: \"0\"}", 1),
    )
    .unwrap();
    let repo = git2::Repository::open(filtered.path()).unwrap();
    crate::support::git_commit_all(&repo, "records: unarchived only");
    let before = server.requests().len();
    let args = ["--stream", "records", "--tenant", "client-1"];
    assert_exit(
        &crate::vendors::shipped_sync(filtered.path(), "castor", &args, &env).await,
        0,
    );
    let kept =
        edc_qualify::landed::landed_json_records(&root(&filtered, "records"), "/_embedded/records").unwrap();
    let flags = archived(&kept);
    assert_eq!(flags.len(), 5, "{flags:?}");
    assert!(flags.iter().all(|(_, a)| !a), "{flags:?}");
    let asked: Vec<_> = server.requests()[before..]
        .iter()
        .filter(|r| r.path.contains("/record"))
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(asked.len(), 2, "5 records in pages of 3: {asked:?}");
    assert!(asked.iter().all(|p| p.contains("archived=0")), "{asked:?}");
}

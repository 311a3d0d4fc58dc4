//! Castor EDC end to end: the real binary against the simulator's castor
//! profile over loopback (which imitates Castor's helpdesk pages and its
//! clients castoRedc and castoredc_api; see `crates/sim/src/vendor/castor.rs`).

use std::process::Output;
use std::time::Duration;

use edc_core::audit::verify;
use edc_sim::{Dataset, LogEntry, Profile, SimConfig, Simulator};

use crate::vendors::{assert_exit, sim, Fixture, PASSWORD as SECRET, USER as CLIENT_ID};

/// A backfill of the `castor_audit` stream over 24-26 October 2026, the
/// days around Amsterdam's autumn DST change.
fn dst_backfill(fx: &Fixture, server: &Simulator) -> std::process::Command {
    let mut cmd = fx.command("backfill", "castor_audit", server, SECRET);
    cmd.args([
        "--since",
        "2026-10-24T00:00:00Z",
        "--until",
        "2026-10-26T00:00:00Z",
    ]);
    cmd
}

/// Every byte the run wrote (files under the fixture, stdout, stderr).
fn everything(fx: &Fixture, out: &Output) -> String {
    let mut all = String::from_utf8_lossy(&out.stdout).into_owned();
    all.push_str(&String::from_utf8_lossy(&out.stderr));
    for path in walk(fx.dir.path()) {
        if !path.components().any(|c| c.as_os_str() == ".git") {
            all.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
        }
    }
    all
}

/// The tokens the simulator issued (it issues them from its seed and a
/// counter: a fresh registry with the same seed issues the same ones).
fn issued_tokens(sim: &Simulator, n: u64) -> Vec<String> {
    let requests: Vec<LogEntry> = sim.requests();
    assert!(requests.iter().filter(|r| r.method == "POST").count() as u64 >= n);
    let config = SimConfig {
        dataset: Dataset {
            subjects: 7,
            records: 1,
            seed: 11,
            padding: 0,
        },
        username: CLIENT_ID.into(),
        password: SECRET.into(),
        ..SimConfig::default()
    };
    let tokens = edc_sim::vendor::castor::Tokens::default();
    let form = format!("grant_type=client_credentials&client_id={CLIENT_ID}&client_secret={SECRET}");
    (0..n)
        .map(|_| {
            let (_, body) = edc_sim::vendor::castor::token(&config, &tokens, form.as_bytes());
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            v["access_token"].as_str().unwrap().to_string()
        })
        .collect()
}

/// A sync that outlives several token lifetimes renews each token before it
/// expires: no request is ever refused, every record lands once, and
/// neither the secret nor any token appears in anything the run wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oauth2_token_is_renewed_before_it_expires_and_never_written() {
    let fx = Fixture::new();
    // 100 records in pages of 5 at 8 requests a second: about 2.5 s, with
    // tokens that last one second.
    let sim = sim(Profile::Castor, 100, &[], |c| {
        c.token_lifetime = Duration::from_secs(1)
    })
    .await;
    let out = fx.run("castor_oauth", &sim, SECRET).await;
    assert_exit(&out, 0);
    let requests = sim.requests();
    assert!(
        requests.iter().all(|r| r.status != 401),
        "a request went out with an expired token: {requests:?}"
    );
    let posts: Vec<&LogEntry> = requests.iter().filter(|r| r.method == "POST").collect();
    assert!(posts.iter().all(|r| r.path == "/oauth/token"), "{posts:?}");
    assert!(requests
        .iter()
        .all(|r| matches!(r.method.as_str(), "GET" | "POST")));
    let started = fx.events("session_started");
    assert_eq!(started.len(), 1);
    assert_eq!(started[0]["scheme"], "oauth2_client_credentials");
    assert_eq!(started[0]["lifetime_s"], 1);
    assert_eq!(started[0]["login_path"], "/oauth/token");
    let renewed = fx.events("session_renewed");
    assert!(renewed.len() >= 2, "{renewed:?}");
    assert_eq!(renewed.len() + 1, posts.len());
    for line in &renewed {
        assert!(
            line["reason"].as_str().unwrap().contains("lifetime ends"),
            "{line}"
        );
    }
    let mut ids = edc_qualify::landed::landed_json_record_ids(&fx.stream_dir("castor_oauth")).unwrap();
    assert_eq!(ids.len(), 100);
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 100, "a record landed twice");
    assert!(verify(&fx.path("audit.jsonl")).unwrap().intact());
    let written = everything(&fx, &out);
    assert!(
        !written.contains(SECRET),
        "the client secret was written somewhere"
    );
    for token in issued_tokens(&sim, posts.len() as u64) {
        assert!(!written.contains(&token), "a token was written somewhere");
    }
}

/// A 401 on a data request renews the token once and repeats the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_renews_the_token_once_and_the_page_is_fetched_again() {
    let fx = Fixture::new();
    // 1 = token, 2 = page 1, 3 = page 2 refused, 4 = token, 5 = page 2.
    let sim = sim(Profile::Castor, 20, &["3=401"], |_| {}).await;
    let out = fx.run("castor_oauth", &sim, SECRET).await;
    assert_exit(&out, 0);
    let renewed = fx.events("session_renewed");
    assert_eq!(renewed.len(), 1, "{renewed:?}");
    assert_eq!(renewed[0]["refused_generation"], 1);
    assert!(
        renewed[0]["reason"].as_str().unwrap().contains("401"),
        "{}",
        renewed[0]
    );
    let requests = sim.requests();
    assert_eq!(requests[3].method, "POST");
    assert_eq!(
        requests[4].path, requests[2].path,
        "the refused page is asked again"
    );
    assert_eq!(
        edc_qualify::landed::landed_json_record_ids(&fx.stream_dir("castor_oauth"))
            .unwrap()
            .len(),
        20
    );
}

/// A wrong secret: the token endpoint's `invalid_client`, exit 77 naming
/// the variables, no data request, and the secret nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_client_secret_exits_77_naming_the_variables_not_the_secret() {
    let fx = Fixture::new();
    let sim = sim(Profile::Castor, 20, &[], |_| {}).await;
    let wrong = "castor-Wrong-99aa17";
    let out = fx.run("castor_oauth", &sim, wrong).await;
    assert_exit(&out, 77);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("invalid_client"), "{stderr}");
    assert!(
        stderr.contains("EDC_SYNC_TEST_USER / EDC_SYNC_TEST_PASSWORD"),
        "{stderr}"
    );
    let requests = sim.requests();
    assert_eq!(requests.len(), 1, "only the token request: {requests:?}");
    let written = everything(&fx, &out);
    assert!(!written.contains(wrong) && !written.contains(SECRET));
}

/// Castor answers an empty collection as an error whose detail says there
/// are none: the window ends with nothing landed, audited as
/// `collection_empty` and closed by a page without records; any other 404
/// naming the study is
/// this credential not reaching it (77), and a 5xx with Castor's body is
/// retried like a bare one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn castors_error_bodies_decide_the_step() {
    // The first data request says the collection is empty.
    let fx = Fixture::new();
    let server = sim(
        Profile::Castor,
        20,
        &["2=castor-error:404:There are no data points."],
        |_| {},
    )
    .await;
    let out = fx.run("castor_oauth", &server, SECRET).await;
    assert_exit(&out, 0);
    let empty = fx.events("collection_empty");
    assert_eq!(empty.len(), 1);
    assert_eq!(empty[0]["status"], 404);
    assert_eq!(empty[0]["vendor_error"]["kind"], "no_items");
    assert_eq!(empty[0]["vendor_error"]["message"], "There are no data points.");
    let committed = fx.events("page_committed");
    assert_eq!(committed.len(), 1, "the answer closes the window");
    assert_eq!(
        (
            &committed[0]["status"],
            &committed[0]["records"],
            &committed[0]["landed"]
        ),
        (
            &serde_json::json!(404),
            &serde_json::json!(0),
            &serde_json::json!(false)
        )
    );
    assert!(!fx.stream_dir("castor_oauth").join("manifest.jsonl").exists());
    // The next run finds the records and lands each once.
    let again = fx.run("castor_oauth", &server, SECRET).await;
    assert_exit(&again, 0);
    assert_eq!(
        edc_qualify::landed::landed_json_record_ids(&fx.stream_dir("castor_oauth"))
            .unwrap()
            .len(),
        20
    );

    // A study Castor does not know (or this client may not see).
    let fx = Fixture::new();
    let server = sim(
        Profile::Castor,
        20,
        &["2=castor-error:404:Study not found"],
        |_| {},
    )
    .await;
    let out = fx.run("castor_oauth", &server, SECRET).await;
    assert_exit(&out, 77);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Study not found"), "{stderr}");
    assert_eq!(fx.events("request_failed").len(), 1);

    // A server error with Castor's body: retried, then the page lands.
    let fx = Fixture::new();
    let server = sim(
        Profile::Castor,
        20,
        &["2=castor-error:500:Something went wrong"],
        |_| {},
    )
    .await;
    let out = fx.run("castor_oauth", &server, SECRET).await;
    assert_exit(&out, 0);
    assert_eq!(fx.events("retry_scheduled").len(), 1);

    // A 422 with Castor's body: exit 65 naming Castor's detail, nothing committed.
    let fx = Fixture::new();
    let server = sim(
        Profile::Castor,
        20,
        &["3=castor-error:422:The page size is too large"],
        |_| {},
    )
    .await;
    let out = fx.run("castor_oauth", &server, SECRET).await;
    assert_exit(&out, 65);
    assert!(String::from_utf8_lossy(&out.stderr).contains("The page size is too large"));
    assert_eq!(fx.events("page_committed").len(), 1);
}

/// `edc-sync simulate --profile castor` from the command line: the token
/// endpoint, a token's lifetime, and the server's own fixed window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_serves_the_castor_profile_from_the_command_line() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let castor = crate::vendors::SimProcess::start(&[
        "--profile",
        "castor",
        "--username",
        CLIENT_ID,
        "--password",
        SECRET,
        "--token-lifetime-s",
        "1",
        "--window-calls",
        "3",
        "--window-s",
        "30",
    ]);
    let token = |secret: &str| {
        http.post(format!("{}/oauth/token", castor.1))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!(
                "grant_type=client_credentials&client_id={CLIENT_ID}&client_secret={secret}"
            ))
            .send()
    };
    let refused = token("nope").await.unwrap();
    assert_eq!(refused.status(), 401);
    assert!(refused.text().await.unwrap().contains("invalid_client"));
    let granted: serde_json::Value =
        serde_json::from_slice(&token(SECRET).await.unwrap().bytes().await.unwrap()).unwrap();
    assert_eq!(granted["token_type"], "Bearer");
    assert_eq!(granted["expires_in"], 1);
    let bearer = format!("Bearer {}", granted["access_token"].as_str().unwrap());
    let page = || {
        http.get(format!("{}/api/v24.1/query/audit_trail?limit=5", castor.1))
            .header("authorization", &bearer)
            .send()
    };
    for _ in 0..3 {
        assert_eq!(page().await.unwrap().status(), 200);
    }
    // The fourth call in the window opened by the first: 429.
    assert_eq!(page().await.unwrap().status(), 429);
    // A token older than its lifetime: 401 with Castor's error body.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let expired = page().await.unwrap();
    assert_eq!(expired.status(), 401);
    let body: serde_json::Value = serde_json::from_slice(&expired.bytes().await.unwrap()).unwrap();
    assert_eq!(
        (body["status"].as_u64(), body["title"].as_str()),
        (Some(401), Some("Unauthorized"))
    );
}

/// `simulate --profile castor --archived-records N`: the study's record
/// list says the last N participants are archived, and Castor's `archived`
/// filter lists them alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_archives_the_last_participants_from_the_command_line() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let castor = crate::vendors::SimProcess::start(&[
        "--profile",
        "castor",
        "--subjects",
        "5",
        "--archived-records",
        "2",
        "--username",
        CLIENT_ID,
        "--password",
        SECRET,
    ]);
    let granted: serde_json::Value = serde_json::from_slice(
        &http
            .post(format!("{}/oauth/token", castor.1))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!(
                "grant_type=client_credentials&client_id={CLIENT_ID}&client_secret={SECRET}"
            ))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    )
    .unwrap();
    let bearer = format!("Bearer {}", granted["access_token"].as_str().unwrap());
    let list = |archived: &str| {
        http.get(format!("{}/api/study/S/record?archived={archived}", castor.1))
            .header("authorization", &bearer)
            .send()
    };
    let ids = |page: serde_json::Value| -> Vec<String> {
        page["_embedded"]["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["record_id"].as_str().unwrap().to_string())
            .collect()
    };
    let archived: serde_json::Value =
        serde_json::from_slice(&list("1").await.unwrap().bytes().await.unwrap()).unwrap();
    assert_eq!(ids(archived), ["110004", "110005"]);
    let kept: serde_json::Value =
        serde_json::from_slice(&list("0").await.unwrap().bytes().await.unwrap()).unwrap();
    assert_eq!(ids(kept), ["110001", "110002", "110003"]);
}

/// What identifies an event the simulator's audit trail listed, as a
/// reader of the landing sees it: its time, record and change (its reason
/// names the simulated change; a twin repeats its original's).
fn event_key(event: &serde_json::Value) -> String {
    format!(
        "{} {} {}",
        event["datetime"]["date"].as_str().unwrap_or_default(),
        event["record_id"].as_str().unwrap_or_default(),
        event["event_details"]["change_reason"]
            .as_str()
            .unwrap_or_default()
    )
}

/// Castor's audit trail read in day windows of the study's zone (both ends
/// inclusive), pages numbered from 1 until a short one, events stamped with
/// a PHP DateTime and carrying no id, every 4th the twin of the one before:
/// three growing syncs land every event once, twins included, although
/// each run reads the whole current day again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn castors_audit_trail_lands_every_event_once_across_runs_in_day_windows() {
    const EVENTS: u32 = 90;
    let fx = Fixture::new();
    let origin = std::time::SystemTime::now() - Duration::from_secs(12);
    let arrivals = edc_sim::audit_trail::Arrivals {
        twins: Some(4),
        ..edc_sim::audit_trail::Arrivals::every(origin, Duration::from_millis(250))
    };
    let server = sim(Profile::Castor, EVENTS, &[], |c| {
        c.audit_trail = Some(arrivals.clone())
    })
    .await;
    for run in 0..3 {
        if run > 0 {
            tokio::time::sleep(Duration::from_millis(2600)).await;
        }
        assert_exit(&fx.run("castor_audit", &server, SECRET).await, 0);
    }
    let events = edc_qualify::landed::landed_json_records(&fx.stream_dir("castor_audit"), "/items").unwrap();
    let mut got: Vec<String> = events.iter().map(event_key).collect();
    got.sort();
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.status == 200), "{requests:?}");
    let data: Vec<&LogEntry> = requests
        .iter()
        .filter(|r| r.path.contains("/audit-trail"))
        .collect();
    assert!(
        data.iter().all(|r| r.path.contains("date_from=")
            && r.path.contains("date_to=")
            && r.path.contains("page=")),
        "every request names its days and its page: {data:?}"
    );
    let twins = got.windows(2).filter(|w| w[0] == w[1]).count();
    assert!(
        got.len() > 50,
        "events that arrived between runs landed too ({})",
        got.len()
    );
    assert!(
        twins >= 10,
        "twins land beside their originals: {twins} of {got:?}"
    );
    let mut distinct = got.clone();
    distinct.dedup();
    assert_eq!(got.len() - distinct.len(), twins);
    // Every event up to the last one landed is there, none missing: their
    // reasons are visits 1..=N, twins counted as their original.
    let visits = edc_qualify::landed::event_visits(&events);
    let expected = edc_qualify::landed::listed_visits(&arrivals, got.len() as u32);
    assert_eq!(visits, expected, "every event once, twins included");
    let repeats: u64 = fx
        .events("page_committed")
        .iter()
        .map(|l| l["repeated_records"].as_u64().unwrap_or(0))
        .sum();
    assert!(
        repeats > 0,
        "each run read the day again and recognised what it had landed"
    );
    assert!(verify(&fx.path("audit.jsonl")).unwrap().intact());
}

/// The study's days are the zone its events name: a policy whose
/// `delta.window.zone` puts an event on another day than its own zone does
/// would ask for the wrong days. The first page that shows it is refused
/// (65) naming both zones and the event's day in each, before anything
/// lands, so the operator fixes the key instead of reading days that are
/// not the study's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stamped_in_another_zone_than_the_policys_stop_the_run_naming_both() {
    let fx = Fixture::new();
    fx.edit_policies(
        "      zone: Europe/Amsterdam\n      settle_lag_s: 1\n    # Whole days are read again anyway",
        "      zone: America/New_York\n      settle_lag_s: 1\n    # Whole days are read again anyway",
    );
    // 23:59:59 CEST on 24 October, then every 10 minutes: the second is
    // 00:09:59 on the 25th in Amsterdam, still the 24th in New York.
    let origin = humantime::parse_rfc3339("2026-10-24T21:49:59Z").unwrap();
    let arrivals = edc_sim::audit_trail::Arrivals::every(origin, Duration::from_secs(600));
    let server = sim(Profile::Castor, 6, &[], |c| {
        c.audit_trail = Some(arrivals.clone())
    })
    .await;
    let mut cmd = dst_backfill(&fx, &server);
    cmd.arg("--allow-dirty");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_exit(&out, 65);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "Europe/Amsterdam",
        "America/New_York",
        "2026-10-25",
        "2026-10-24",
        "delta.window.zone",
    ] {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    assert!(fx.events("page_committed").is_empty(), "nothing committed");
    assert_eq!(fx.events("request_failed").len(), 1);
}

/// Castor fills an event's details in about an hour after the event
/// (helpdesk, "Application Programming Interface (API)"): an event read
/// while its `event_details` were still empty is landed again once they
/// are filled in, because the next run reads its day again and the filled
/// event is content it has not landed. Every event ends up landed with its
/// details exactly once, and only the late ones also have an empty version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_whose_details_fill_in_later_is_landed_again_with_them() {
    const EVENTS: u32 = 20;
    let fx = Fixture::new();
    let origin = std::time::SystemTime::now() - Duration::from_secs(6);
    let arrivals = edc_sim::audit_trail::Arrivals {
        details_late: Some((5, Duration::from_secs(4))),
        ..edc_sim::audit_trail::Arrivals::every(origin, Duration::from_millis(200))
    };
    let server = sim(Profile::Castor, EVENTS, &[], |c| {
        c.audit_trail = Some(arrivals.clone())
    })
    .await;
    assert_exit(&fx.run("castor_audit", &server, SECRET).await, 0);
    let first = edc_qualify::landed::landed_json_records(&fx.stream_dir("castor_audit"), "/items").unwrap();
    let empty = |events: &[serde_json::Value]| {
        events
            .iter()
            .filter(|e| e["event_details"].as_array().is_some_and(|d| d.is_empty()))
            .count()
    };
    assert!(empty(&first) >= 1, "some details were still to come: {first:?}");
    tokio::time::sleep(Duration::from_millis(4200)).await;
    assert_exit(&fx.run("castor_audit", &server, SECRET).await, 0);
    let events = edc_qualify::landed::landed_json_records(&fx.stream_dir("castor_audit"), "/items").unwrap();
    let filled: Vec<serde_json::Value> = events
        .iter()
        .filter(|e| e["event_details"].is_object())
        .cloned()
        .collect();
    assert_eq!(
        edc_qualify::landed::event_visits(&filled),
        (1..=EVENTS).collect::<Vec<u32>>(),
        "every event with its details, once"
    );
    assert_eq!(
        empty(&events),
        empty(&first),
        "the empty versions stay as landed, none twice"
    );
    assert_eq!(events.len() - filled.len(), empty(&first));
}

/// A window whose last page is exactly full: Castor answers the page after
/// it with its 404 "There are no ..." error. The window is complete, and
/// the cursor says so: a `page_committed` line for that answer (its hash,
/// no records, nothing landed) closes the window, so the next run starts
/// the next window instead of asking that page again, and a window whose
/// days have passed can never hold the stream on one page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_page_after_a_full_last_page_closes_the_window() {
    let fx = Fixture::new();
    let origin = std::time::SystemTime::now() - Duration::from_secs(30);
    let arrivals = edc_sim::audit_trail::Arrivals::every(origin, Duration::from_millis(100));
    // 1 = token, 2 and 3 = two full pages of 7, 4 = page 3: no items.
    let server = sim(
        Profile::Castor,
        14,
        &["4=castor-error:404:There are no audit trail items."],
        |c| c.audit_trail = Some(arrivals.clone()),
    )
    .await;
    assert_exit(&fx.run("castor_audit", &server, SECRET).await, 0);
    let requests = server.requests();
    assert!(requests[3].path.contains("page=3"), "{requests:?}");
    let cursor = fx.cursor("castor_audit");
    assert!(
        cursor["next_page"].is_null(),
        "the window is complete, not left on the page that had no items: {cursor}"
    );
    let committed = fx.events("page_committed");
    assert_eq!(committed.len(), 3, "{committed:?}");
    let closing = &committed[2];
    assert_eq!(closing["status"], 404);
    assert_eq!(closing["records"], 0);
    assert_eq!(closing["landed"], false);
    assert_eq!(closing["payload_sha256"].as_str().unwrap().len(), 64);
    assert!(closing["cursor_after"]["next_page"].is_null(), "{closing}");
    let empty = fx.events("collection_empty");
    assert_eq!(empty.len(), 1);
    assert_eq!(empty[0]["request_id"], closing["request_id"]);
    // The next run reads the (current) day again from its first page and
    // lands nothing twice; the trail, manifest and landing agree.
    assert_exit(&fx.run("castor_audit", &server, SECRET).await, 0);
    let again: Vec<LogEntry> = server.requests()[4..]
        .iter()
        .filter(|r| r.path.contains("/audit-trail"))
        .cloned()
        .collect();
    assert!(again[0].path.contains("page=1"), "{again:?}");
    let events = edc_qualify::landed::landed_json_records(&fx.stream_dir("castor_audit"), "/items").unwrap();
    assert_eq!(events.len(), 14);
    assert!(verify(&fx.path("audit.jsonl")).unwrap().intact());
    let verified = crate::support::run_cmd(
        crate::support::edc_sync()
            .args(["verify", "--out"])
            .arg(fx.path("landing"))
            .arg("--state")
            .arg(fx.path("state"))
            .arg("--audit-log")
            .arg(fx.path("audit.jsonl")),
    );
    assert_eq!(verified.code, 0, "{}", verified.stderr);
}

/// The shipped `castor` vendor, as an operator runs it against a server
/// that follows Castor's documents: three growing syncs of the
/// `audit_trail` stream land every event once, twins included, with the
/// token from the client credentials and within the 600-a-window quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_castor_vendor_lands_its_audit_trail_once_across_runs() {
    let dir = crate::vendors::shipped_policy_repo();
    let origin = std::time::SystemTime::now() - Duration::from_secs(20);
    let arrivals = edc_sim::audit_trail::Arrivals {
        twins: Some(6),
        ..edc_sim::audit_trail::Arrivals::every(origin, Duration::from_millis(200))
    };
    let server = sim(Profile::Castor, 150, &[], |c| {
        c.audit_trail = Some(arrivals.clone())
    })
    .await;
    let env = [
        ("CASTOR_BASE_URL", server.base_url()),
        ("CASTOR_CLIENT_ID", CLIENT_ID.to_string()),
        ("CASTOR_CLIENT_SECRET", SECRET.to_string()),
    ];
    let args = ["--stream", "audit_trail", "--tenant", "client-1"];
    for run in 0..3 {
        if run > 0 {
            tokio::time::sleep(Duration::from_millis(2500)).await;
        }
        let out = crate::vendors::shipped_sync(dir.path(), "castor", &args, &env).await;
        assert_exit(&out, 0);
    }
    let stream_dir = dir
        .path()
        .join("landing/castor/client-1/Mediflex(Prod)/-/audit_trail");
    let events = edc_qualify::landed::landed_json_records(&stream_dir, "/items").unwrap();
    let visits = edc_qualify::landed::event_visits(&events);
    let expected = edc_qualify::landed::listed_visits(&arrivals, visits.len() as u32);
    assert!(visits.len() > 100, "{}", visits.len());
    assert_eq!(visits, expected, "every event once, twins included");
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.status == 200), "{requests:?}");
    assert_eq!(
        requests.iter().filter(|r| r.method == "POST").count(),
        3,
        "one token a run"
    );
}

/// Castor's days around Amsterdam's autumn DST change, read by a backfill
/// of whole days: an event in the last second of 24 October, and the hour
/// that happens twice on the 25th (02:00-03:00, first CEST then CET): every
/// event lands once, twins included, each with the instant its local time
/// and zone make it; the same backfill again lands nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_across_a_dst_change_lands_every_event_once() {
    const EVENTS: u32 = 48;
    let fx = Fixture::new();
    // Every 10 minutes from 23:59:59 CEST on 24 October (event 1, with its
    // milliseconds) to past 05:00 CET on the 25th.
    let origin = humantime::parse_rfc3339("2026-10-24T21:49:59Z").unwrap();
    let arrivals = edc_sim::audit_trail::Arrivals {
        twins: Some(5),
        subsecond: true,
        ..edc_sim::audit_trail::Arrivals::every(origin, Duration::from_secs(600))
    };
    let server = sim(Profile::Castor, EVENTS, &[], |c| {
        c.audit_trail = Some(arrivals.clone())
    })
    .await;
    let out = tokio::task::spawn_blocking({
        let mut cmd = dst_backfill(&fx, &server);
        move || cmd.output().unwrap()
    })
    .await
    .unwrap();
    assert_exit(&out, 0);
    let data: Vec<LogEntry> = server
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/audit-trail"))
        .collect();
    assert!(
        data.iter()
            .all(|r| r.path.contains("date_from=2026-10-24") && r.path.contains("date_to=2026-10-26")),
        "{data:?}"
    );
    let landed = |fx: &Fixture| {
        let root = fx.path("landing");
        let dir = walk(&root)
            .into_iter()
            .find(|p| p.ends_with("manifest.jsonl"))
            .and_then(|p| p.parent().map(std::path::Path::to_path_buf))
            .expect("a manifest");
        edc_qualify::landed::landed_json_records(&dir, "/items").unwrap()
    };
    let events = landed(&fx);
    let visits = edc_qualify::landed::event_visits(&events);
    let expected = edc_qualify::landed::listed_visits(&arrivals, EVENTS);
    assert_eq!(visits, expected, "every event once, twins included");
    let dates: Vec<&str> = events
        .iter()
        .filter_map(|e| e["datetime"]["date"].as_str())
        .collect();
    assert!(
        dates.iter().any(|d| d.starts_with("2026-10-24 23:59:59.")),
        "{dates:?}"
    );
    let twice: Vec<&&str> = dates.iter().filter(|d| d.starts_with("2026-10-25 02:")).collect();
    assert!(
        twice.len() >= 10,
        "the repeated hour, once in CEST and once in CET: {twice:?}"
    );
    // The same backfill again: everything is recognised, nothing lands.
    let before = events.len();
    let again = tokio::task::spawn_blocking({
        let mut cmd = dst_backfill(&fx, &server);
        move || cmd.output().unwrap()
    })
    .await
    .unwrap();
    assert_exit(&again, 0);
    assert_eq!(landed(&fx).len(), before);
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

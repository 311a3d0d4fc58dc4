//! REDCap's error dialect end to end: the real binary against the
//! simulator's JSON endpoint answering in REDCap's shapes (its API help,
//! "Error handling"; the ban as PyCap's and REDCapR's users report it).

use std::process::Output;

use edc_sim::{Profile, Simulator};

use crate::vendors::{assert_exit, sim, Fixture, PASSWORD};

const VENDOR: &str = "redcap_dialect";

async fn run(fx: &Fixture, server: &Simulator) -> Output {
    let mut cmd = fx.sync(VENDOR, server, PASSWORD);
    cmd.env("EDC_SYNC_TEST_TOKEN", "sim-token");
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// A 429 whose body says the address is banned is not a throttle: the run
/// stops at once with 76, asks nothing more (asking keeps the ban), says
/// that only an administrator can lift it, and records it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_banned_address_stops_the_run_at_once_with_76() {
    let fx = Fixture::new();
    let server = sim(
        Profile::Generic,
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
    assert_eq!(fx.events("page_committed").len(), 1, "the cursor stays on page 1");
}

/// REDCap's errors in its formats decide the step and name REDCap's text:
/// a token it refuses (403) is 77, a bad request 65, a 5xx is retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redcaps_error_bodies_decide_the_step() {
    let fx = Fixture::new();
    let server = sim(
        Profile::Generic,
        40,
        &["1=redcap-error:403:You do not have permissions to use the API"],
        |_| {},
    )
    .await;
    let out = run(&fx, &server).await;
    assert_exit(&out, 77);
    assert!(String::from_utf8_lossy(&out.stderr).contains("You do not have permissions to use the API"));

    let fx = Fixture::new();
    let server = sim(
        Profile::Generic,
        40,
        &["2=redcap-error:400:The value of the parameter \"content\" is not valid"],
        |_| {},
    )
    .await;
    let out = run(&fx, &server).await;
    assert_exit(&out, 65);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not valid"));
    assert_eq!(fx.events("page_committed").len(), 1);

    let fx = Fixture::new();
    let server = sim(
        Profile::Generic,
        40,
        &["2=redcap-error:500:Internal error"],
        |_| {},
    )
    .await;
    let out = run(&fx, &server).await;
    assert_exit(&out, 0);
    assert_eq!(fx.events("retry_scheduled").len(), 1);
}

//! The read-only client, Retry-After, paging and validation, over real
//! loopback HTTP against the simulator.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use edc_core::config::Policy;
use edc_core::edc::payload::{self, CursorValue};
use edc_core::edc::{first_page, next_page, next_window_start};
use edc_core::edc::{Credentials, FetchError, OriginError, ReadOnlyClient};
use edc_core::stream::StreamIdentity;
use edc_sim::{Dataset, FaultSchedule, SimConfig, Simulator};
use quota_pacer::retry_after::{self, RetryAfterSource};

const TOKEN: &str = "sim-token";

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn sim_config(records: u32, faults: &[&str]) -> SimConfig {
    let mut schedule = FaultSchedule::default();
    for f in faults {
        let (n, fault) = FaultSchedule::parse_entry(f).unwrap();
        schedule.insert(n, fault);
    }
    SimConfig {
        dataset: Dataset {
            subjects: 7,
            records,
            seed: 11,
            padding: 0,
        },
        faults: schedule,
        ..SimConfig::default()
    }
}

async fn sim(records: u32, faults: &[&str]) -> Simulator {
    Simulator::start(sim_config(records, faults), loopback())
        .await
        .unwrap()
}

fn policy(vendor: &str) -> Policy {
    support::sim_policies().vendor(vendor).unwrap().clone()
}

fn client(sim: &Simulator, policy: &Policy) -> ReadOnlyClient {
    ReadOnlyClient::new(&sim.base_url(), Credentials::bearer(TOKEN), policy.http).unwrap()
}

fn identity(vendor: &str) -> StreamIdentity {
    StreamIdentity {
        vendor: vendor.into(),
        study: Some("Mediflex(Prod)".into()),
        ..Default::default()
    }
}

#[derive(Debug)]
struct Walk {
    pages: usize,
    records: u64,
    next_window: Option<String>,
}

/// Walks one window page by page, as the sync's page loop will.
async fn walk(sim: &Simulator, vendor: &str, window_start: Option<&str>) -> Result<Walk, String> {
    let policy = policy(vendor);
    let client = client(sim, &policy);
    let delta = policy.delta.clone().unwrap();
    let mut url = first_page(
        client.origin(),
        client.base(),
        &delta,
        &policy.streams[0],
        &identity(vendor),
        window_start,
        None,
    )
    .map_err(|e| e.to_string())?;
    let (mut pages, mut records, mut high_water): (usize, u64, Option<CursorValue>) = (0, 0, None);
    loop {
        let reply = client.get(&url).await.map_err(|e| e.to_string())?;
        assert_eq!(reply.status, 200, "{url}");
        let (links, page_url) = (reply.link.clone(), reply.url.clone());
        let mut body = Vec::new();
        let digest = reply.stream_into(&mut body).await.map_err(|e| e.to_string())?;
        assert_eq!(digest.bytes as usize, body.len());
        assert_eq!(digest.sha256, edc_core::digest::sha256_hex(&body));
        let summary = payload::validate(&delta, &body[..]).map_err(|e| e.to_string())?;
        pages += 1;
        records += summary.records;
        if let Some(v) = summary.high_water.clone() {
            high_water = Some(match high_water {
                None => v,
                Some(h) => h.max(v).unwrap(),
            });
        }
        match next_page(client.origin(), &delta, &page_url, &links, &summary).map_err(|e| e.to_string())? {
            Some(next) => url = next,
            None => break,
        }
    }
    Ok(Walk {
        pages,
        records,
        next_window: next_window_start(&delta.paging, high_water.as_ref()),
    })
}

#[tokio::test]
async fn each_paging_style_walks_a_multi_page_window_to_its_end() {
    let sim = sim(130, &[]).await;
    let ds = Dataset {
        subjects: 7,
        records: 130,
        seed: 11,
        padding: 0,
    };
    let last = ds.record(130);
    for vendor in ["vault_json", "vault_link"] {
        let w = walk(&sim, vendor, None).await.unwrap();
        assert_eq!((w.pages, w.records), (4, 130), "{vendor}");
        assert_eq!(
            w.next_window.as_deref(),
            Some(last.modified.as_str()),
            "{vendor}: high-water mark"
        );
        // The next window starts after the high-water mark: nothing new.
        let again = walk(&sim, vendor, w.next_window.as_deref()).await.unwrap();
        assert_eq!((again.pages, again.records), (1, 0), "{vendor}");
        // A window from the middle gets exactly the rest.
        let middle = walk(&sim, vendor, Some(&ds.record(100).modified)).await.unwrap();
        assert_eq!(middle.records, 30, "{vendor}");
    }
    let w = walk(&sim, "rave", None).await.unwrap();
    assert_eq!((w.pages, w.records), (4, 130));
    let next_start = (last.source_id + 1).to_string();
    assert_eq!(
        w.next_window.as_deref(),
        Some(next_start.as_str()),
        "rave: largest SourceID + 1"
    );
    let again = walk(&sim, "rave", Some(&next_start)).await.unwrap();
    assert_eq!((again.pages, again.records), (1, 0));
    let middle = walk(&sim, "rave", Some(&ds.record(91).source_id.to_string()))
        .await
        .unwrap();
    assert_eq!(middle.records, 40);
}

#[tokio::test]
async fn retry_after_in_each_form_end_to_end() {
    let sim = sim(
        10,
        &[
            "1=429:seconds:2",
            "2=429:date:3",
            "3=429:absent",
            "4=503:raw:soon",
            "5=429:date:0",
        ],
    )
    .await;
    let policy = policy("vault_json");
    let client = client(&sim, &policy);
    let url = client
        .base()
        .join(&policy.delta.as_ref().unwrap().path.to_string())
        .unwrap();
    let default = Duration::from_secs(60);
    let mut seen = Vec::new();
    for _ in 0..5 {
        let reply = client.get(&url).await.unwrap();
        let values: Vec<&[u8]> = reply.retry_after.iter().map(Vec::as_slice).collect();
        let ra = retry_after::parse(&values, reply.received_at, default);
        seen.push((reply.status.as_u16(), ra.source, ra.wait));
    }
    assert_eq!(seen[0], (429, RetryAfterSource::Seconds, Duration::from_secs(2)));
    assert_eq!((seen[1].0, seen[1].1), (429, RetryAfterSource::Date));
    assert!(
        seen[1].2 > Duration::from_secs(1) && seen[1].2 <= Duration::from_secs(3),
        "{:?}",
        seen[1].2
    );
    assert_eq!(seen[2], (429, RetryAfterSource::Absent, default));
    assert_eq!(seen[3], (503, RetryAfterSource::Unparseable, default));
    assert_eq!(
        (seen[4].1, seen[4].2 <= Duration::from_secs(1)),
        (RetryAfterSource::Date, true)
    );
}

#[tokio::test]
async fn a_cross_origin_next_link_is_refused_and_the_other_origin_sees_nothing() {
    let other = sim(10, &[]).await;
    let evil_next = format!("{}/api/v24.1/query/audit_trail?offset=40", other.base_url());
    let faults = [
        format!("1=cross-origin-next:{evil_next}"),
        format!("2=cross-origin-next:{evil_next}"),
    ];
    let sim = sim(130, &[&faults[0], &faults[1]]).await;
    for vendor in ["vault_json", "vault_link"] {
        let err = walk(&sim, vendor, None).await.unwrap_err();
        assert!(
            err.contains("leaves the configured origin") && err.contains(&other.base_url()),
            "{err}"
        );
    }
    assert!(
        other.requests().is_empty(),
        "the other origin saw {:?}",
        other.requests()
    );
}

#[tokio::test]
async fn a_cross_origin_redirect_is_refused_and_a_same_origin_one_followed() {
    let other = sim(10, &[]).await;
    let target = format!("{}/api/v24.1/query/audit_trail", other.base_url());
    let sim = sim(
        10,
        &[
            &format!("1=redirect:{target}"),
            "2=redirect:/api/v24.1/query/audit_trail?limit=3",
        ],
    )
    .await;
    let policy = policy("vault_json");
    let client = client(&sim, &policy);
    let url = client.base().join("/api/v24.1/query/audit_trail").unwrap();
    let err = client.get(&url).await.unwrap_err();
    assert!(
        matches!(err, FetchError::Origin(OriginError::CrossOrigin { .. })),
        "{err}"
    );
    assert!(
        other.requests().is_empty(),
        "the token went to {:?}",
        other.requests()
    );
    let followed = client.get(&url).await.unwrap();
    assert_eq!(followed.status, 200);
    assert!(followed.url.as_str().ends_with("limit=3"), "{}", followed.url);
}

#[tokio::test]
async fn a_body_over_the_cap_is_refused_unread() {
    let sim = sim(10, &["1=oversize:50000000"]).await;
    let policy = policy("vault_json"); // max_body_bytes: 1 MiB
    let client = client(&sim, &policy);
    let url = client.base().join("/api/v24.1/query/audit_trail").unwrap();
    match client.get(&url).await {
        Err(FetchError::TooLarge { size, limit, .. }) => assert_eq!((size, limit), (50_000_000, 1_048_576)),
        other => panic!("expected TooLarge before any body was read, got {other:?}"),
    }
}

#[tokio::test]
async fn a_truncated_body_is_detected() {
    let sim = sim(100, &["1=truncate"]).await;
    let policy = policy("vault_json");
    let client = client(&sim, &policy);
    let url = client
        .base()
        .join("/api/v24.1/query/audit_trail?limit=50")
        .unwrap();
    let reply = client.get(&url).await.unwrap();
    let expected = reply.content_length.unwrap();
    let mut sink = Vec::new();
    match reply.stream_into(&mut sink).await {
        Err(e @ FetchError::Truncated { .. }) => {
            assert!(e.is_transient());
            let FetchError::Truncated {
                expected: e2,
                received,
                ..
            } = e
            else {
                unreachable!()
            };
            assert_eq!(e2, expected);
            assert!(received < expected);
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
}

#[tokio::test]
async fn the_simulators_own_quota_answers_429_when_exceeded() {
    let config = SimConfig {
        quota: Some((2.0, 2)),
        ..sim_config(10, &[])
    };
    let sim = Simulator::start(config, loopback()).await.unwrap();
    let policy = policy("vault_json");
    let client = client(&sim, &policy);
    let url = client.base().join("/api/v24.1/query/audit_trail").unwrap();
    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(client.get(&url).await.unwrap().status.as_u16());
    }
    assert_eq!(&statuses[..2], &[200, 200], "the burst is admitted");
    assert!(statuses[2..].contains(&429), "{statuses:?}");
    let throttled: Vec<_> = sim.requests().into_iter().filter(|r| r.status == 429).collect();
    assert!(throttled
        .iter()
        .all(|r| r.fault.as_deref() == Some("server_quota")));
}

#[tokio::test]
async fn the_simulator_sees_only_get_and_head_and_checks_the_token() {
    let sim = sim(50, &[]).await;
    walk(&sim, "vault_json", None).await.unwrap();
    walk(&sim, "rave", None).await.unwrap();
    let policy = policy("vault_json");
    let client = client(&sim, &policy);
    let url = client.base().join("/api/v24.1/query/audit_trail").unwrap();
    assert_eq!(client.head(&url).await.unwrap().status, 200);
    let from_client = sim.requests();
    assert!(
        from_client
            .iter()
            .all(|r| r.method == "GET" || r.method == "HEAD"),
        "{from_client:?}"
    );
    assert!(from_client.iter().any(|r| r.method == "HEAD"));
    assert!(from_client.iter().all(|r| r.auth == "ok"));

    // Anything else is refused (sent with a plain client: ours cannot).
    let raw = reqwest::Client::new();
    let post = raw
        .post(url.clone())
        .bearer_auth(TOKEN)
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 405);
    let wrong =
        ReadOnlyClient::new(&sim.base_url(), Credentials::bearer("wrong-token"), policy.http).unwrap();
    assert_eq!(wrong.get(&url).await.unwrap().status, 401);
    let log = serde_json::to_string(&sim.requests()).unwrap();
    assert!(
        !log.contains(TOKEN) && !log.contains("wrong-token"),
        "the request log never holds a token"
    );
}

#[tokio::test]
async fn an_unreachable_edc_is_a_transient_transport_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let policy = policy("vault_json");
    let client = ReadOnlyClient::new(
        &format!("http://127.0.0.1:{port}"),
        Credentials::bearer(TOKEN),
        policy.http,
    )
    .unwrap();
    let err = client.get(&client.base().join("/x").unwrap()).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(!err.to_string().contains(TOKEN));
}

#[tokio::test]
async fn invalid_payloads_are_refused() {
    let sim = sim(10, &["1=garbage", "2=garbage"]).await;
    for vendor in ["vault_json", "rave"] {
        let err = walk(&sim, vendor, None).await.unwrap_err();
        assert!(err.contains("invalid"), "{vendor}: {err}");
    }
}

/// A response framed twice (chunked and a Content-Length) is refused, not
/// read by one framing and judged by the other ("truncated after 211 of 3
/// bytes"): RFC 9112, section 6.3, calls it a possible response-splitting
/// attempt to be handled as an error.
#[tokio::test]
async fn a_response_with_both_chunked_and_content_length_is_refused() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        let _ = conn.read(&mut buf);
        let body = r#"{"data":[],"responseDetails":{}}"#;
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\
             Content-Length: 3\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
            body.len()
        );
        conn.write_all(answer.as_bytes()).unwrap();
    });
    let policy = policy("vault_json");
    let client = ReadOnlyClient::new(
        &format!("http://127.0.0.1:{port}"),
        Credentials::bearer(TOKEN),
        policy.http,
    )
    .unwrap();
    let err = match client.get(&client.base().join("/x").unwrap()).await {
        Ok(reply) => reply.stream_into(&mut Vec::new()).await.unwrap_err(),
        Err(e) => e,
    };
    let text = err.to_string();
    assert!(!err.is_transient(), "{text}");
    assert!(
        text.contains("Transfer-Encoding") && text.contains("Content-Length"),
        "{text}"
    );
}

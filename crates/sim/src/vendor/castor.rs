//! The castor profile: Castor EDC, as its helpdesk pages ("Application
//! Programming Interface (API)", "Castor EDC/CDMS API rate limiting") and
//! its clients (castoredc/castoRedc, reiniervlinschoten/castoredc_api)
//! describe it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hyper::StatusCode;
use sha2::{Digest, Sha256};

use super::Authn;

/// Where the token request goes: castoredc_api `CastorClient.__init__`
/// (`self.auth_url = f"https://{url}/oauth/token"`).
pub const TOKEN_PATH: &str = "/oauth/token";

/// How long a token lasts when the simulator is not told otherwise: five
/// hours, Castor's (helpdesk, "Application Programming Interface (API)").
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(5 * 3600);

/// Access tokens the simulator issued: token -> when.
#[derive(Default)]
pub struct Tokens {
    issued: Mutex<(u64, HashMap<String, Instant>)>,
}

impl Tokens {
    /// A new token: 40 hex digits derived from the seed and a counter, so
    /// runs are reproducible.
    fn issue(&self, seed: u64) -> String {
        let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        issued.0 += 1;
        let mut h = Sha256::new();
        h.update(b"castor");
        h.update(seed.to_le_bytes());
        h.update(issued.0.to_le_bytes());
        let token = hex::encode(&h.finalize()[..20]);
        issued.1.insert(token.clone(), Instant::now());
        token
    }

    /// How many tokens were issued so far.
    pub fn count(&self) -> u64 {
        self.issued.lock().unwrap_or_else(|p| p.into_inner()).0
    }

    fn check(&self, token: &str, lifetime: Duration) -> Authn {
        let issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        match issued.1.get(token) {
            None => Authn::Invalid,
            Some(at) if at.elapsed() >= lifetime => Authn::Expired,
            Some(_) => Authn::Ok,
        }
    }
}

/// `Authorization: Bearer {access_token}` (castoredc_api sets
/// `headers["authorization"] = "Bearer " + token`); a token past its
/// lifetime is refused as an unknown one is.
pub(super) fn authenticate(value: &[u8], config: &crate::SimConfig, tokens: &Tokens) -> Authn {
    let text = String::from_utf8_lossy(value);
    match text.strip_prefix("Bearer ") {
        Some(token) => tokens.check(token, config.token_lifetime),
        None => Authn::Invalid,
    }
}

/// A refused token: HTTP 401 with Castor's error body (`type`, `title`,
/// `status`, `detail`, the shape of every Castor API error).
pub(super) fn refused_credential() -> (StatusCode, Option<(&'static str, String)>) {
    (
        StatusCode::UNAUTHORIZED,
        Some((
            "application/problem+json",
            problem(
                401,
                "Unauthorized",
                "You are not authorized to view this resource.",
            ),
        )),
    )
}

/// Castor's error body.
pub fn problem(status: u16, title: &str, detail: &str) -> String {
    serde_json::json!({
        "type": "http://www.w3.org/Protocols/rfc2616/rfc2616-sec10.html",
        "title": title,
        "status": status,
        "detail": detail,
    })
    .to_string()
}

/// The token endpoint: a form with `grant_type=client_credentials`,
/// `client_id` and `client_secret` (castoredc_api
/// `CastorClient.request_auth_token`) answers `access_token`, `token_type`
/// and `expires_in` (RFC 6749, section 5.1); wrong credentials answer 401
/// `invalid_client` and another grant 400 `unsupported_grant_type` (RFC
/// 6749, section 5.2). The client id and secret are the simulator's user
/// name and password.
pub fn token(config: &crate::SimConfig, tokens: &Tokens, form: &[u8]) -> (StatusCode, String) {
    let field = |name: &str| super::vault::form_field(form, name);
    if field("grant_type").as_deref() != Some("client_credentials") {
        return (
            StatusCode::BAD_REQUEST,
            serde_json::json!({
                "error": "unsupported_grant_type",
                "error_description": "The authorization grant type is not supported by the authorization server.",
            })
            .to_string(),
        );
    }
    let good = field("client_id").as_deref() == Some(config.username.as_str())
        && field("client_secret").as_deref() == Some(config.password.as_str());
    if !good {
        return (
            StatusCode::UNAUTHORIZED,
            serde_json::json!({
                "error": "invalid_client",
                "error_description": "Client authentication failed",
                "message": "Client authentication failed",
            })
            .to_string(),
        );
    }
    let body = serde_json::json!({
        "token_type": "Bearer",
        "expires_in": config.token_lifetime.as_secs(),
        "access_token": tokens.issue(config.dataset.seed),
    });
    (StatusCode::OK, body.to_string())
}

/// The zone Castor's examples state their times in (helpdesk, castoredc_api
/// tests): the simulator's study lives there.
pub const STUDY_ZONE: &str = "Europe/Amsterdam";

/// An audit-trail page (`GET /api/study/{study}/audit-trail`): the events
/// whose day in the study's zone lies in `date_from..=date_to` (both
/// inclusive, `YYYY-MM-DD`; Airbyte's source-castor-edc sends them so),
/// visible by `now`, oldest first, `page_size` a page from `page` 1
/// (castoredc_api's and Airbyte's paging), in a top-level `items` array
/// with no paging fields (castoredc_api's audit-trail tests). Each event
/// carries its time as a PHP `DateTime` object in the study's zone and no
/// id; a twin is an identical event. A missing or malformed date is 422
/// with Castor's error body.
pub fn audit_trail(
    ds: &crate::Dataset,
    arrivals: &crate::audit_trail::Arrivals,
    query: &std::collections::BTreeMap<String, String>,
    now: std::time::SystemTime,
) -> Result<crate::dataset::Page, (StatusCode, String)> {
    let tz = jiff::tz::TimeZone::get(STUDY_ZONE)
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let date = |name: &str| -> Result<jiff::civil::Date, (StatusCode, String)> {
        let text = query.get(name).ok_or_else(|| {
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                problem(422, "Unprocessable Entity", &format!("{name} is required")),
            )
        })?;
        text.parse().map_err(|_| {
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                problem(422, "Unprocessable Entity", &format!("{name} must be YYYY-MM-DD")),
            )
        })
    };
    let (from, to) = (date("date_from")?, date("date_to")?);
    let number = |name: &str, default: usize| query.get(name).and_then(|v| v.parse().ok()).unwrap_or(default);
    let (page, size) = (number("page", 1).max(1), number("page_size", 1000).clamp(1, 5000));
    let now_ms = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let local = |n: u32| {
        let ts =
            jiff::Timestamp::from_millisecond(arrivals.stamp_ms(n)).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        ts.to_zoned(tz.clone())
    };
    let events: Vec<String> = (1..=ds.records)
        .filter(|n| arrivals.visible_ms(*n) <= now_ms)
        .filter(|n| {
            let day = local(*n).date();
            from <= day && day <= to
        })
        .skip((page - 1) * size)
        .take(size)
        .map(|n| {
            let shown = arrivals.original(n);
            let rec = ds.record(shown);
            serde_json::json!({
                "datetime": {
                    "date": local(n).strftime("%Y-%m-%d %H:%M:%S%.6f").to_string(),
                    "timezone_type": 3,
                    "timezone": STUDY_ZONE,
                },
                "event_type": "Data point updated",
                "user_name": "Sim User",
                "record_id": participant_id(rec.subject),
                // Filled in about an hour late (Castor's helpdesk): until
                // then an empty list, as PHP encodes an empty array.
                "event_details": if arrivals.details_pending(n, now_ms) {
                    serde_json::json!([])
                } else {
                    serde_json::json!({
                        "field": rec.field,
                        "form": rec.form,
                        "new_value": rec.value.to_string(),
                        "change_reason": format!("visit {shown}"),
                    })
                },
            })
            .to_string()
        })
        .collect();
    Ok(crate::dataset::Page::whole(format!(
        r#"{{"items":[{}]}}"#,
        events.join(",")
    )))
}

/// The most items a page of a Castor collection holds: `page_size` "max
/// 5000" (Castor's API reference; Airbyte's source-castor-edc and
/// castoredc_api ask for 1000).
pub const MAX_PAGE_SIZE: usize = 5000;

/// A page of the study's data points (`GET /api/study/{study}/data-points/
/// study`): a Castor collection ([`collection_page`]) of `_embedded.items`
/// with no since-filter and no archived filter: archived participants'
/// points are listed too (castoRedc `getStudyDataBulk` drops them itself by
/// joining with its participant list). Items are listed by participant, so
/// a data point added for an earlier participant shifts every later page
/// (the live collection the helpdesk's paging warns of); the simulator
/// holds back `study_data_held` data points and adds one at each `grow`
/// fault. An empty collection is Castor's 404 "There are no data points.".
pub fn study_data(
    cfg: &crate::SimConfig,
    grown: u32,
    path: &str,
    query: &std::collections::BTreeMap<String, String>,
) -> Result<String, (StatusCode, String)> {
    let ds = &cfg.dataset;
    let visible = ds.records - cfg.study_data_held.saturating_sub(grown).min(ds.records);
    let mut points: Vec<crate::dataset::Record> = (1..=visible).map(|n| ds.record(n)).collect();
    points.sort_by_key(|r| (r.subject, r.n));
    let items = points.iter().map(|r| {
        serde_json::json!({
            "field_id": format!("{:08X}-{}-{}", r.n.wrapping_mul(2_654_435_761), r.form, r.field),
            "field_value": r.value.to_string(),
            "participant_id": participant_id(r.subject),
            "updated_on": r.modified.replace('T', " ").trim_end_matches('Z'),
        })
    });
    collection_page(cfg, path, query, "items", items, "There are no data points.")
}

/// A participant's id as the simulator's study numbers them.
fn participant_id(subject: u32) -> String {
    format!("{:06}", 110_000 + subject)
}

/// A page of the study's record list (`GET /api/study/{study}/record`,
/// castoredc_api `all_records`: endpoint `/record`, `_embedded.records`),
/// paged as every Castor collection is. Each record carries `archived`
/// (and `archived_reason`); `archived=1` lists the archived records only
/// and `archived=0` the others, on every page (castoredc_api
/// `all_records(archived=...)`: "None (all records), 0 (unarchived
/// records) or 1 (archived records)", checked against a real study by its
/// `test_all_records_archived` and `test_all_records_not_archived`). The
/// fields are those its `record_model` lists. The last `archived_records`
/// participants of the dataset are archived; their data points stay in
/// the study data.
pub fn records(
    cfg: &crate::SimConfig,
    path: &str,
    query: &std::collections::BTreeMap<String, String>,
) -> Result<String, (StatusCode, String)> {
    let subjects = cfg.dataset.subjects;
    let first_archived = subjects.saturating_sub(cfg.archived_records) + 1;
    let wanted = query.get("archived").map(String::as_str);
    let listed: Vec<(u32, bool)> = (1..=subjects)
        .map(|s| (s, s >= first_archived))
        .filter(|(_, archived)| match wanted {
            Some("1") => *archived,
            Some("0") => !*archived,
            _ => true,
        })
        .collect();
    let items = listed.iter().map(|&(s, archived)| {
        let id = participant_id(s);
        let created = serde_json::json!({
            "date": format!("2026-01-{:02} 09:00:00.000000", s % 28 + 1),
            "timezone_type": 3,
            "timezone": STUDY_ZONE,
        });
        serde_json::json!({
            "id": id,
            "record_id": id,
            "ccr_patient_id": "",
            "record_status": null,
            "randomized_id": null,
            "randomization_group": null,
            "randomization_group_name": null,
            "randomized_on": null,
            "last_opened_step": null,
            "progress": 0,
            "status": "open",
            "locked": false,
            "archived": archived,
            "archived_reason": if archived { serde_json::json!("Withdrawn") } else { serde_json::Value::Null },
            "created_by": "SIM-USER",
            "created_on": created,
            "updated_by": "SIM-USER",
            "updated_on": created,
            "_embedded": {"institute": {
                "id": format!("SITE-{:02}", s % 10 + 1),
                "institute_id": format!("SITE-{:02}", s % 10 + 1),
                "name": format!("Site {:02}", s % 10 + 1),
                "abbreviation": format!("S{:02}", s % 10 + 1),
            }},
        })
    });
    collection_page(cfg, path, query, "records", items, "There are no records.")
}

/// One page of a Castor HAL collection: `_embedded.{name}`, with `page`,
/// `page_size`, `page_count` and `total_items` on every page and `_links`
/// (self, first, last, next, prev) as Castor's API reference shows them
/// and as castoredc_api `retrieve_multiple_pages` reads them (it takes
/// `page_count` from page 1 and asks pages 2..page_count). An empty
/// collection, or a page past the last, is Castor's 404 saying there are
/// none (castoredc_api `all_report_instances` shows the same shape).
/// `all` is lazy and knows its length: only the page's items are made.
fn collection_page(
    cfg: &crate::SimConfig,
    path: &str,
    query: &std::collections::BTreeMap<String, String>,
    name: &str,
    all: impl ExactSizeIterator<Item = serde_json::Value>,
    none: &str,
) -> Result<String, (StatusCode, String)> {
    let number = |name: &str, default: usize| query.get(name).and_then(|v| v.parse().ok()).unwrap_or(default);
    let asked = number("page_size", 25).max(1);
    let size = asked.min(cfg.max_page_size).min(MAX_PAGE_SIZE);
    let page = number("page", 1).max(1);
    let total = all.len();
    let page_count = total.div_ceil(size);
    if total == 0 || page > page_count {
        return Err((StatusCode::NOT_FOUND, problem(404, "Not Found", none)));
    }
    let items: Vec<serde_json::Value> = all.skip((page - 1) * size).take(size).collect();
    let link = |p: usize| serde_json::json!({"href": format!("{path}?page={p}&page_size={asked}")});
    let mut links = serde_json::json!({"self": link(page), "first": link(1), "last": link(page_count)});
    if page < page_count {
        links["next"] = link(page + 1);
    }
    if page > 1 {
        links["prev"] = link(page - 1);
    }
    Ok(serde_json::json!({
        "_links": links,
        "_embedded": {name: items},
        "page_count": page_count,
        "page_size": size,
        "total_items": total,
        "page": page,
    })
    .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_issued_for_the_right_client_and_expire() {
        let config = crate::SimConfig {
            token_lifetime: Duration::from_millis(50),
            ..crate::SimConfig::default()
        };
        let tokens = Tokens::default();
        let form = format!(
            "grant_type=client_credentials&client_id={}&client_secret={}",
            config.username, config.password
        );
        let (status, body) = token(&config, &tokens, form.as_bytes());
        assert_eq!(status, StatusCode::OK);
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        let t = answer["access_token"].as_str().unwrap();
        assert_eq!(tokens.check(t, config.token_lifetime), Authn::Ok);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(tokens.check(t, config.token_lifetime), Authn::Expired);
        assert_eq!(tokens.check("nope", config.token_lifetime), Authn::Invalid);
        let (status, body) = token(
            &config,
            &tokens,
            b"grant_type=client_credentials&client_id=x&client_secret=y",
        );
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(body.contains("invalid_client"));
        let (status, _) = token(&config, &tokens, b"grant_type=password");
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn the_record_list_is_filtered_by_archived_on_every_page() {
        let mut config = crate::SimConfig {
            archived_records: 2,
            max_page_size: 4,
            ..crate::SimConfig::default()
        };
        config.dataset.subjects = 7;
        let list = |archived: Option<&str>, page: usize| {
            let mut query = std::collections::BTreeMap::from([("page".to_string(), page.to_string())]);
            if let Some(a) = archived {
                query.insert("archived".into(), a.into());
            }
            records(&config, "/api/study/S/record", &query)
                .map(|body| serde_json::from_str::<serde_json::Value>(&body).unwrap())
        };
        let ids = |page: &serde_json::Value| -> Vec<(String, bool)> {
            page["_embedded"]["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r["id"].as_str().unwrap().to_string(),
                        r["archived"].as_bool().unwrap(),
                    )
                })
                .collect()
        };
        let all = list(None, 2).unwrap();
        assert_eq!(
            (all["total_items"].as_u64(), all["page_count"].as_u64()),
            (Some(7), Some(2))
        );
        assert_eq!(
            ids(&all),
            [
                ("110005".into(), false),
                ("110006".into(), true),
                ("110007".into(), true)
            ]
        );
        let kept = list(Some("0"), 1).unwrap();
        assert_eq!(
            (kept["total_items"].as_u64(), kept["page_count"].as_u64()),
            (Some(5), Some(2))
        );
        assert!(ids(&kept).iter().all(|(_, archived)| !archived));
        let gone = list(Some("1"), 1).unwrap();
        assert_eq!(ids(&gone), [("110006".into(), true), ("110007".into(), true)]);
        let (status, body) = list(Some("1"), 2).unwrap_err();
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body.contains("There are no records."), "{body}");
    }
}

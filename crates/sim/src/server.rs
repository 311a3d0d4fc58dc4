//! The simulator's HTTP side: routing, auth, quota, faults, the log.
//!
//! One concept: one request's way through the simulator, from arrival to
//! answer; what each vendor answers lives in `vendor/`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::{
    HeaderName, HeaderValue, ALLOW, CONTENT_LENGTH, CONTENT_TYPE, DATE, HOST, LINK, LOCATION, RETRY_AFTER,
};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, StatusCode};

use super::body::SimBody;
use super::dataset::Page;
use super::fault::{Fault, RetryAfterForm};
use super::log::{LogEntry, RequestLog};
use super::quota::{ServerBucket, ServerWindow};
use super::vendor::{self, rave, vault, Authn, Profile, Sessions};
use super::SimConfig;

/// Vault's request id header (Vault REST API reference, "Response headers").
const EXECUTION_ID: HeaderName = HeaderName::from_static("x-vaultapi-executionid");

/// A login form is a few hundred bytes, a REDCap export of a batch of
/// records names each (`records[N]`: about 30 bytes a record, a thousand
/// in the largest batch a policy takes); more is refused unread (PHP's
/// `post_max_size` is 8 MiB by default).
const MAX_FORM_BYTES: usize = 1024 * 1024;

/// Shared state of one running simulator.
pub struct State {
    pub config: SimConfig,
    pub counter: AtomicU64,
    pub bucket: Mutex<Option<ServerBucket>>,
    /// A fixed-window quota counted on arrivals (Castor's).
    pub window: Mutex<Option<ServerWindow>>,
    /// Vault burst window: (start, requests in it).
    pub burst_window: Mutex<(Instant, u64)>,
    /// Vault daily limit: pages served so far today.
    pub daily_served: AtomicU64,
    /// Set by an `endless` fault: every later page has a next link.
    pub endless: std::sync::atomic::AtomicBool,
    /// Counted by `grow` faults: held-back study data points that joined.
    pub grown: std::sync::atomic::AtomicU32,
    /// Vault profile: the sessions issued by the login endpoint.
    pub sessions: Sessions,
    /// Castor profile: the access tokens issued by the token endpoint.
    pub tokens: vendor::castor::Tokens,
    /// Vault profile: the VQL queries answered so far.
    pub queries: super::vql::Queries,
    /// Redcap profile: when each export was answered (ms since the
    /// epoch), logged as REDCap logs an API export.
    pub redcap_exports: Mutex<Vec<i64>>,
    /// Redcap profile: the records deleted so far
    /// (`SimConfig::redcap_delete_after_list`).
    pub redcap_deleted: Mutex<std::collections::BTreeSet<u32>>,
    pub log: RequestLog,
}

impl State {
    /// The simulator's clock: the real one, shifted by `clock_skew_s`.
    fn now(&self) -> SystemTime {
        let skew = self.config.clock_skew_s;
        let shift = Duration::from_secs(skew.unsigned_abs());
        if skew >= 0 {
            SystemTime::now() + shift
        } else {
            SystemTime::now() - shift
        }
    }
}

/// What the handler decided, before it becomes a response.
struct Answer {
    status: StatusCode,
    headers: Vec<(hyper::header::HeaderName, String)>,
    page: Option<Page>,
    cut_after: Option<u64>,
    stall: Option<Duration>,
    fault: Option<String>,
    /// VQL: the query's window start as parsed, for the request log.
    vql_since: Option<String>,
}

impl Answer {
    fn status(status: StatusCode) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            page: None,
            cut_after: None,
            stall: None,
            fault: None,
            vql_since: None,
        }
    }

    /// A whole small body of `content_type`.
    fn body(status: StatusCode, content_type: &str, body: String) -> Answer {
        let mut a = Answer::status(status);
        a.headers.push((CONTENT_TYPE, content_type.into()));
        a.page = Some(Page::whole(body));
        a
    }
}

fn unix_us(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or_default()
}

/// Handles one request. Never fails: every problem is an HTTP status.
pub async fn handle(
    state: Arc<State>,
    req: Request<hyper::body::Incoming>,
) -> Result<Response<SimBody>, std::convert::Infallible> {
    let arrived = SystemTime::now();
    let n = state.counter.fetch_add(1, Ordering::SeqCst) + 1;
    let (parts, body) = req.into_parts();
    let method = parts.method.clone();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let form = match method {
        Method::POST => Some(read_form(body).await),
        _ => None,
    };
    let login = state.config.profile.logs_in_with_a_form()
        && method == Method::POST
        && parts.uri.path() == state.config.profile.form_login_path(&state.config);
    let auth = if login {
        None
    } else {
        Some(vendor::authenticate(
            state.config.profile,
            &parts.headers,
            &state.config,
            &state.sessions,
            &state.tokens,
        ))
    };
    let form = form.flatten();
    // REDCap reads its token from the form.
    let auth = match state.config.profile.exports_by_form() {
        true => Some(form.as_deref().map_or(Authn::Missing, |f| {
            vendor::redcap::authenticate(&vendor::redcap::form_fields(f), &state.config)
        })),
        false => auth,
    };
    // Client ID Filtering (Vault REST API reference, "Client ID": "Once
    // Client ID Filtering is enabled, Vault will reject API requests
    // originating with a client ID that does not match an active
    // Connection"). The reference names no error type for it; the vault
    // profile answers as for any refused privilege, 200 FAILURE
    // INSUFFICIENT_ACCESS, on the login and on every other request.
    let filtered = state.config.profile.filters_client_ids()
        && state
            .config
            .client_id_filter
            .as_ref()
            .is_some_and(|allowed| !client_id(&parts).is_some_and(|id| allowed.contains(&id)));
    let mut answer = match (login, &form) {
        _ if filtered => Answer::body(
            StatusCode::OK,
            "application/json",
            vault::failure("INSUFFICIENT_ACCESS"),
        ),
        // A redirect fault applies to the login too: Vault documents none,
        // but a gateway in front of it may answer one, and the client must
        // never follow it off the origin with the password.
        (true, Some(form)) => match state.config.faults.get(n) {
            Some(Fault::Redirect { status, url }) => redirect(*status, url),
            // Vault limits logins per minute per user and domain, and
            // answers API_LIMIT_EXCEEDED at 200 when the limit is reached
            // (Vault Help, "About Authentication API Transaction Limits";
            // the error body as for any request, Vault REST API reference,
            // "Errors").
            Some(Fault::VaultFailure(kind)) => {
                Answer::body(StatusCode::OK, "application/json", vault::failure(kind))
            }
            // A server or gateway failure answers the login as it answers
            // any request (the HTTP status alone, as a load balancer in
            // front of Vault does; Vault REST API reference, "HTTP Status
            // Codes"): the client waits it out like a data request's.
            Some(Fault::Status(code)) if *code >= 500 => {
                Answer::status(StatusCode::from_u16(*code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
            }
            _ if state.config.profile == Profile::Castor => {
                let (status, body) = vendor::castor::token(&state.config, &state.tokens, form);
                Answer::body(status, "application/json", body)
            }
            _ => vault_login(&state, form, &parts),
        },
        // RFC 6749, section 5.2: a request missing a parameter is 400
        // invalid_request.
        (true, None) if state.config.profile == Profile::Castor => Answer::body(
            StatusCode::BAD_REQUEST,
            "application/json",
            r#"{"error":"invalid_request","error_description":"The request is missing a required parameter."}"#.into(),
        ),
        (true, None) => Answer::body(
            StatusCode::OK,
            "application/json",
            vault::failure("PARAMETER_REQUIRED"),
        ),
        (false, _) => {
            let auth = auth.unwrap_or(Authn::Missing);
            decide(&state, n, &method, &parts, auth, form.as_deref()).await
        }
    };
    let delay = match state.config.faults.get(n) {
        Some(Fault::Latency(d)) => {
            answer.fault = Some(format!("latency:{}", d.as_millis()));
            *d
        }
        _ => state.config.latency,
    };
    // Logged on arrival, before any latency: a test can see a request that
    // is still in flight.
    state.log.push(LogEntry {
        n,
        ts: humantime::format_rfc3339_millis(arrived).to_string(),
        t_us: unix_us(arrived),
        method: method.to_string(),
        path,
        status: answer.status.as_u16(),
        auth: auth.map_or("login", Authn::label).to_string(),
        fault: answer.fault.clone(),
        vql_since: answer.vql_since.clone(),
        client_id: client_id(&parts),
        vault_dns: login
            .then(|| form.as_deref().and_then(|f| vault::form_field(f, "vaultDNS")))
            .flatten(),
        export: state
            .config
            .profile
            .exports_by_form()
            .then(|| form.as_deref().map(export_shown))
            .flatten(),
    });
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    // The server's clock, shifted when the simulator plays a skewed server.
    if !answer.headers.iter().any(|(name, _)| *name == DATE) {
        answer.headers.push((DATE, httpdate::fmt_http_date(state.now())));
    }
    if state.config.profile.stamps_execution_ids() {
        answer.headers.push((EXECUTION_ID, format!("sim-exec-{n:08}")));
    }
    let mut response = Response::builder().status(answer.status);
    for (name, value) in &answer.headers {
        if let Ok(v) = HeaderValue::from_str(value) {
            response = response.header(name, v);
        }
    }
    let body = match answer.page {
        Some(page) => {
            response = response.header(CONTENT_LENGTH, page.len);
            match answer.stall {
                Some(pause) => SimBody::stalling(page, pause),
                None => SimBody::new(page, answer.cut_after),
            }
        }
        None => SimBody::empty(),
    };
    Ok(response
        .body(body)
        .unwrap_or_else(|_| Response::new(SimBody::empty())))
}

/// A REDCap export's form as the request log shows it: every field but
/// the token, whose presence is `token=***`.
fn export_shown(form: &[u8]) -> String {
    let mut shown = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in url::form_urlencoded::parse(form) {
        match k.as_ref() {
            "token" => shown.append_pair("token", "***"),
            _ => shown.append_pair(&k, &v),
        };
    }
    shown.finish()
}

/// A POST body up to [`MAX_FORM_BYTES`]; `None` when larger or broken.
async fn read_form(body: hyper::body::Incoming) -> Option<Vec<u8>> {
    let limited = http_body_util::Limited::new(body, MAX_FORM_BYTES);
    limited.collect().await.ok().map(|c| c.to_bytes().to_vec())
}

/// Vault's login form answered (`vendor/vault.rs`), for the vault this
/// server is (the host the request named).
fn vault_login(state: &State, form: &[u8], parts: &Parts) -> Answer {
    let own = parts
        .headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .map(|h| {
            h.rsplit_once(':')
                .map_or(h, |(host, _)| host)
                .to_ascii_lowercase()
        })
        .unwrap_or_else(|| "localhost".into());
    let body = vault::login(&state.config, &state.sessions, form, own);
    Answer::body(StatusCode::OK, "application/json", body)
}

/// A refused credential, as the profile's vendor reports it.
fn unauthenticated(profile: Profile) -> Answer {
    match vendor::refused_credential(profile) {
        (status, None) => Answer::status(status),
        (status, Some((content_type, body))) => Answer::body(status, content_type, body),
    }
}

/// Vault profile: a VQL query (`POST {vql_path}`) or one of its next pages.
fn is_vql(state: &State, method: &Method, req: &Parts) -> bool {
    let cfg = &state.config;
    let path = req.uri.path();
    cfg.profile.answers_queries()
        && method == Method::POST
        && (path == cfg.vql_path || path.starts_with(&format!("{}/", cfg.vql_path)))
}

async fn decide(
    state: &State,
    n: u64,
    method: &Method,
    req: &Parts,
    auth: Authn,
    form: Option<&[u8]>,
) -> Answer {
    let vql = is_vql(state, method, req);
    // REDCap: every request is a POST to the API path (REDCap's API help).
    let export = state.config.profile.exports_by_form() && req.uri.path() == vendor::redcap::API_PATH;
    if export && method != Method::POST {
        let mut a = Answer::status(StatusCode::METHOD_NOT_ALLOWED);
        a.headers.push((ALLOW, "POST".into()));
        return a;
    }
    if method != Method::GET && method != Method::HEAD && !vql && !export {
        let mut a = Answer::status(StatusCode::METHOD_NOT_ALLOWED);
        a.headers.push((ALLOW, "GET, HEAD".into()));
        return a;
    }
    if auth != Authn::Ok {
        return unauthenticated(state.config.profile);
    }
    let fault = state.config.faults.get(n).cloned();
    let fault_name = fault.as_ref().map(Fault::to_string);
    let mut answer = match &fault {
        Some(Fault::Throttle { status, retry_after }) => throttle(state, *status, retry_after),
        Some(Fault::Status(code)) => {
            Answer::status(StatusCode::from_u16(*code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        }
        Some(Fault::VaultFailure(kind)) => {
            Answer::body(StatusCode::OK, "application/json", vault::failure(kind))
        }
        Some(Fault::RaveError { status, code, odm }) => {
            let body = if *odm {
                rave::odm_error(code, "Simulated Rave error.")
            } else {
                rave::response_error(code, "Simulated Rave error")
            };
            Answer::body(
                StatusCode::from_u16(*status).unwrap_or(StatusCode::OK),
                "text/xml",
                body,
            )
        }
        Some(Fault::CastorError {
            status,
            claimed,
            detail,
        }) => {
            let code = StatusCode::from_u16(*status).unwrap_or(StatusCode::NOT_FOUND);
            let title = code.canonical_reason().unwrap_or("Error");
            Answer::body(
                code,
                "application/problem+json",
                vendor::castor::problem(*claimed, title, detail),
            )
        }
        // REDCap answers an error in the requested format (JSON here), and
        // its ban as a bare line of text (REDCap's API help, "Error
        // handling"; the ban: the issue trackers of PyCap and REDCapR).
        Some(Fault::RedcapError { status, text }) => {
            let code = StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST);
            if text.contains("banned") {
                Answer::body(code, "text/html; charset=utf-8", text.clone())
            } else {
                Answer::body(
                    code,
                    "application/json",
                    serde_json::json!({ "error": text }).to_string(),
                )
            }
        }
        Some(Fault::Redirect { status, url }) => redirect(*status, url),
        Some(Fault::Oversize(bytes)) => {
            let mut a = Answer::status(StatusCode::OK);
            let bytes = *bytes;
            a.page = Some(Page::from_fn(move || {
                let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
                let full = bytes / chunk.len() as u64;
                let rest = (bytes % chunk.len() as u64) as usize;
                std::iter::repeat_n(chunk.clone(), full as usize)
                    .chain((rest > 0).then(|| chunk.slice(..rest)))
            }));
            a
        }
        _ => match server_quota(state) {
            Err(retry) => {
                let mut a = throttle(
                    state,
                    429,
                    &RetryAfterForm::Seconds(retry.as_secs_f64().ceil() as u64),
                );
                a.fault = Some("server_quota".into());
                return a;
            }
            Ok(()) if vql => {
                let path = req.uri.path_and_query().map_or("", |p| p.as_str());
                let modified = match fault.as_ref() {
                    Some(Fault::CursorValue(text)) => super::render::Modified::Fixed(text.clone()),
                    _ => super::render::Modified::Real,
                };
                let (page, since) = super::vql::answer(&state.config, &state.queries, path, form, modified);
                let mut a = Answer::status(StatusCode::OK);
                a.headers.push((CONTENT_TYPE, "application/json".into()));
                a.page = Some(page);
                a.vql_since = since;
                a
            }
            Ok(()) if export => {
                let fields = form.map(vendor::redcap::form_fields).unwrap_or_default();
                let now = state.now();
                let own = state
                    .redcap_exports
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                let deleted = state
                    .redcap_deleted
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                let (status, content_type, body) =
                    vendor::redcap::export(&state.config, &fields, now, &own, &deleted);
                // A record deleted once an id list has named it: the batch
                // that asks for it next finds it gone.
                let id_list = fields.get("content").is_some_and(|c| c == "record")
                    && fields.keys().any(|k| k.starts_with("fields["));
                if let (true, Some(id)) = (id_list, state.config.redcap_delete_after_list) {
                    state
                        .redcap_deleted
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(id);
                }
                if status.is_success() && fields.get("content").is_some_and(|c| c != "version") {
                    let ms = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
                    state
                        .redcap_exports
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(ms);
                }
                Answer::body(status, content_type, body)
            }
            Ok(()) => route(state, req, fault.as_ref()),
        },
    };
    if answer.fault.is_none() {
        answer.fault = fault_name;
    }
    match fault {
        Some(Fault::Truncate) => answer.cut_after = answer.page.as_ref().map(|p| p.len / 2),
        Some(Fault::Stall(pause)) => answer.stall = Some(pause),
        Some(Fault::Gzip) => answer
            .headers
            .push((HeaderName::from_static("content-encoding"), "gzip".into())),
        Some(Fault::ContentType(ct)) => {
            answer.headers.retain(|(name, _)| name != CONTENT_TYPE);
            answer.headers.push((CONTENT_TYPE, ct));
        }
        _ => {}
    }
    answer
}

/// The simulator's own quotas, on the arrival: its bucket, then its
/// fixed window.
fn server_quota(state: &State) -> Result<(), Duration> {
    let now = SystemTime::now();
    let mut bucket = state.bucket.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(b) = bucket.as_mut() {
        b.admit(now)?;
    }
    let mut window = state.window.lock().unwrap_or_else(|p| p.into_inner());
    match window.as_mut() {
        Some(w) => w.admit(now),
        None => Ok(()),
    }
}

fn throttle(state: &State, status: u16, form: &RetryAfterForm) -> Answer {
    let mut a = Answer::status(StatusCode::from_u16(status).unwrap_or(StatusCode::TOO_MANY_REQUESTS));
    match form {
        RetryAfterForm::Seconds(s) => a.headers.push((RETRY_AFTER, s.to_string())),
        RetryAfterForm::Date(s) => a.headers.push((
            RETRY_AFTER,
            httpdate::fmt_http_date(state.now() + Duration::from_secs(*s)),
        )),
        RetryAfterForm::Absent => {}
        RetryAfterForm::Raw(text) => a.headers.push((RETRY_AFTER, text.clone())),
        RetryAfterForm::BadDate(text) => a.headers.push((DATE, text.clone())),
    }
    a
}

fn query_map(req: &Parts) -> BTreeMap<String, String> {
    let query = req.uri.query().unwrap_or_default();
    url::Url::parse(&format!("http://sim/?{query}"))
        .map(|u| {
            u.query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn route(state: &State, req: &Parts, fault: Option<&Fault>) -> Answer {
    let cfg = &state.config;
    let query = query_map(req);
    let path = req.uri.path();
    if matches!(fault, Some(Fault::Endless)) {
        state.endless.store(true, Ordering::SeqCst);
    }
    let cross_next = match fault {
        Some(Fault::CrossOriginNext(url)) => Some(url.clone()),
        _ if state.endless.load(Ordering::SeqCst) && path == cfg.json_path => {
            Some(super::render::next_offset_link(cfg, &query))
        }
        _ => None,
    };
    let garbage = matches!(fault, Some(Fault::Garbage));
    let mut answer = Answer::status(StatusCode::OK);
    if let Some(limit) = cfg.vault_daily {
        match vault::daily(limit, &state.daily_served) {
            Ok(headers) => answer.headers.extend(headers),
            Err(headers) => {
                let mut spent = Answer::body(
                    StatusCode::OK,
                    "application/json",
                    vault::failure("API_LIMIT_EXCEEDED"),
                );
                spent.headers.extend(headers);
                return spent;
            }
        }
    }
    let audit_trail = cfg
        .audit_trail
        .as_ref()
        .filter(|_| path.starts_with(&cfg.audit_trail_path) && path.len() > cfg.audit_trail_path.len());
    if matches!(fault, Some(Fault::Grow)) {
        state.grown.fetch_add(1, Ordering::SeqCst);
    }
    let castor_study = cfg.profile == Profile::Castor && path.starts_with("/api/study/");
    let collection = if castor_study && path.ends_with("/data-points/study") {
        let grown = state.grown.load(Ordering::SeqCst);
        Some(vendor::castor::study_data(cfg, grown, path, &query))
    } else if castor_study && path.ends_with("/record") {
        Some(vendor::castor::records(cfg, path, &query))
    } else {
        None
    };
    if let Some(page) = collection {
        return match page {
            Ok(body) => {
                answer.headers.push((CONTENT_TYPE, "application/hal+json".into()));
                answer.page = Some(crate::dataset::Page::whole(body));
                answer
            }
            Err((status, body)) => Answer::body(status, "application/problem+json", body),
        };
    }
    let castor_trail = cfg
        .audit_trail
        .as_ref()
        .filter(|_| castor_study && path.ends_with("/audit-trail"));
    let (page, next, content_type) = if let Some(arrivals) = castor_trail {
        match vendor::castor::audit_trail(&cfg.dataset, arrivals, &query, state.now()) {
            Ok(page) => (page, None, "application/json"),
            Err((status, body)) => return Answer::body(status, "application/problem+json", body),
        }
    } else if let Some(arrivals) = audit_trail {
        let page = super::audit_trail::page(&cfg.dataset, arrivals, path, &query, state.now());
        (page, None, "application/json")
    } else if path == cfg.json_path {
        let modified = match fault {
            Some(Fault::Backdated) => super::render::Modified::Backdated,
            Some(Fault::CursorValue(text)) => super::render::Modified::Fixed(text.clone()),
            _ => super::render::Modified::Real,
        };
        let (page, next) = super::render::json_page(cfg, &query, garbage, modified, cross_next);
        (page, next, "application/json")
    } else if path == cfg.odm_path {
        let (page, next) = super::render::odm_page(cfg, &query, garbage, cross_next);
        (page, next, "text/xml; charset=utf-8")
    } else if let Some(page) = cfg
        .profile
        .serves_study_datasets()
        .then(|| super::study_dataset::page(cfg, path, &query, state.now()))
        .flatten()
    {
        (page, None, "text/xml; charset=utf-8")
    } else {
        return Answer::status(StatusCode::NOT_FOUND);
    };
    answer.headers.push((CONTENT_TYPE, content_type.into()));
    if let Some(limit) = cfg.vault_burst {
        let mut window = state.burst_window.lock().unwrap_or_else(|p| p.into_inner());
        if window.0.elapsed() >= Duration::from_secs(300) {
            *window = (Instant::now(), 0);
        }
        window.1 += 1;
        let remaining = limit.saturating_sub(window.1);
        answer.headers.push((
            hyper::header::HeaderName::from_static("x-vaultapi-burstlimit"),
            limit.to_string(),
        ));
        answer.headers.push((
            hyper::header::HeaderName::from_static("x-vaultapi-burstlimitremaining"),
            remaining.to_string(),
        ));
    }
    if let Some(next) = &next {
        answer.headers.push((LINK, format!("<{next}>; rel=\"next\"")));
    }
    answer.page = Some(page);
    answer
}

/// A redirect answer to `url` with `status` (302 or 307).
fn redirect(status: u16, url: &str) -> Answer {
    let mut a = Answer::status(StatusCode::from_u16(status).unwrap_or(StatusCode::FOUND));
    a.headers.push((LOCATION, url.to_string()));
    a
}

/// The client ID of a request as Vault reads it: the `client_id` query
/// parameter wins over the `X-VaultAPI-ClientID` header (Vault REST API
/// reference, "Client ID").
fn client_id(parts: &hyper::http::request::Parts) -> Option<String> {
    let query = parts.uri.query().unwrap_or_default();
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "client_id")
        .map(|(_, v)| v.into_owned())
        .or_else(|| {
            parts
                .headers
                .get("x-vaultapi-clientid")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
}

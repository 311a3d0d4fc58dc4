//! The only way `edc-sync` talks to an EDC: [`ReadOnlyClient`].
//!
//! Invariant 1, read-only by construction: the type has `get` and `head`,
//! and exactly four POST shapes whose bodies it builds itself: the Vault
//! login form (`login.rs`) and the OAuth2 token request (`oauth.rs`), both
//! from [`Credentials`], a VQL query (`query`) from a
//! [`super::VqlSelect`], which can only be a SELECT, and a REDCap export
//! (`export`) from an [`Export`], whose content can only be a read. There is
//! no method that takes a body or a verb. Every URL it is given must be on the
//! configured origin, and so must every redirect, so no credential ever
//! leaves that origin.
//!
//! One concept: the read-only client, its every request shape and the
//! response metadata it records, kept together because the closed set of
//! shapes is the invariant.

use std::sync::Arc;
use std::time::SystemTime;

use reqwest::header::{
    HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, DATE, USER_AGENT,
};
use reqwest::{redirect, Url};

use super::auth::{AuthError, Authenticator, Credentials, Granted, Obtained, Proof};
use super::fetch_error::{describe, FetchError};
use super::oauth::TokenForm;
use super::origin::{Origin, OriginError};
use super::reply::{Reply, ResponseMeta};
use super::vendor::{ExportForm as Export, LoginForm, LoginReply};
use crate::config::HttpLimits;

/// Vendor quota headers recorded in the audit trail when present.
pub(super) const QUOTA_HEADERS: [&str; 6] = [
    "x-ratelimit-remaining",
    "x-vaultapi-burstlimit",
    "x-vaultapi-burstlimitremaining",
    "x-vaultapi-dailylimit",
    "x-vaultapi-dailylimitremaining",
    "x-vaultapi-responsedelay",
];

/// Vault's id of one request, which its support asks for (Vault REST API
/// reference, "Response headers"); recorded on every audit line about a
/// Vault response.
pub(super) const EXECUTION_ID_HEADER: &str = "x-vaultapi-executionid";

const MAX_REDIRECTS: usize = 5;

/// How much of an error body is read to find the vendor's reason: vendor
/// error documents are a few hundred bytes.
pub(crate) const ERROR_BODY_CAP: usize = 64 * 1024;

/// A client that can only read, and only from one origin.
#[derive(Clone)]
pub struct ReadOnlyClient {
    pub(super) http: reqwest::Client,
    pub(super) base: Url,
    pub(super) origin: Arc<Origin>,
    pub(super) limits: HttpLimits,
    pub(super) auth: Arc<Authenticator>,
    /// The server's clock minus ours at the last response with a `Date`, ms.
    skew_ms: Arc<std::sync::atomic::AtomicI64>,
    /// A response with a `Date` has been seen (`skew_ms` means something).
    clock_seen: Arc<std::sync::atomic::AtomicBool>,
    /// `X-VaultAPI-ClientID` on every request, the login included (the
    /// policy's `client_id`): Vault's API Usage Log names the integration
    /// by it, and a vault with Client ID Filtering admits only known ones.
    client_id: Option<HeaderValue>,
    /// The answers to what a vendor is asked before a window (REDCap's
    /// version, its project's fields and groups), by request: asked once
    /// a run, read by every stream of the server after the first.
    asked: Arc<std::sync::Mutex<std::collections::HashMap<String, Asked>>>,
}

/// The answer to one probe a run asks once.
pub(crate) type Asked = Arc<tokio::sync::OnceCell<Vec<u8>>>;

/// The header that names the integration to Vault (Vault REST API
/// reference, "Client ID"; VAPIL's `VaultClientId`).
pub(super) const CLIENT_ID_HEADER: &str = "x-vaultapi-clientid";

impl std::fmt::Debug for ReadOnlyClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadOnlyClient")
            .field("origin", &self.origin.to_string())
            .finish_non_exhaustive()
    }
}

impl ReadOnlyClient {
    /// Builds a client for `base_url` that authenticates with `credentials`.
    pub fn new(
        base_url: &str,
        credentials: Credentials,
        limits: HttpLimits,
    ) -> Result<ReadOnlyClient, FetchError> {
        // rustls with the ring provider; no OpenSSL anywhere. Installing
        // twice is harmless (the first one stays).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (origin, base) = Origin::of_base(base_url)?;
        let origin = Arc::new(origin);
        // The login form carries the password: it goes to auth.login_path
        // and nowhere else, so no redirect of it is followed, not even on
        // the origin (a 307 or 308 would re-send the form to another path).
        let login = match &credentials {
            Credentials::VaultSession { login_path, .. }
            | Credentials::OAuth2 {
                token_path: login_path,
                ..
            } => origin
                .endpoint(&base, login_path)
                .ok()
                .map(|u| u.path().to_string()),
            _ => None,
        };
        let auth = Authenticator::new(credentials).map_err(|e| match e {
            AuthError::Refused { detail, .. } => FetchError::Credential(detail),
            other => FetchError::Credential(other.to_string()),
        })?;
        let mut headers = HeaderMap::new();
        headers.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("edc-sync/", env!("CARGO_PKG_VERSION"))),
        );
        // The body is hashed and landed byte for byte as the vendor sent it:
        // no transfer compression to undo (RFC 9110 §12.5.3).
        headers.insert(
            reqwest::header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        let redirect_origin = origin.clone();
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(limits.connect_timeout)
            .timeout(limits.request_timeout)
            .redirect(redirect::Policy::custom(move |attempt| {
                let from_login = attempt
                    .previous()
                    .last()
                    .is_some_and(|u| Some(u.path()) == login.as_deref());
                if from_login {
                    let err = OriginError::LoginRedirected {
                        url: crate::redact::redact_arg(attempt.url().as_str()),
                    };
                    attempt.error(err)
                } else if attempt.previous().len() >= MAX_REDIRECTS {
                    attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
                } else if redirect_origin.matches(attempt.url()) {
                    attempt.follow()
                } else {
                    let err = OriginError::CrossOrigin {
                        url: attempt.url().to_string(),
                        origin: redirect_origin.to_string(),
                    };
                    attempt.error(err)
                }
            }))
            .build()
            .map_err(|e| FetchError::Build(e.to_string()))?;
        Ok(ReadOnlyClient {
            http,
            base,
            origin,
            limits,
            auth: Arc::new(auth),
            skew_ms: Arc::default(),
            clock_seen: Arc::default(),
            client_id: None,
            asked: Arc::default(),
        })
    }

    /// Sends `X-VaultAPI-ClientID: id` on every request, the login included.
    /// The policy has checked `id` (Vault's format: letters, digits, `.`,
    /// `_`, `-`, at most 100).
    pub fn with_client_id(mut self, id: Option<&str>) -> Result<ReadOnlyClient, FetchError> {
        self.client_id = id
            .map(HeaderValue::from_str)
            .transpose()
            .map_err(|e| FetchError::Build(format!("client_id: {e}")))?;
        Ok(self)
    }

    /// Renews a credential with an announced lifetime early enough to
    /// outlive `wait`, the longest a request may wait for its slot after
    /// the credential was checked (the policy's `max_wait_s`). Called on
    /// the new client, before it is shared.
    pub fn with_longest_wait(mut self, wait: std::time::Duration) -> ReadOnlyClient {
        match Arc::get_mut(&mut self.auth) {
            Some(auth) => auth.longest_wait = wait,
            None => debug_assert!(false, "with_longest_wait on a shared client"),
        }
        self
    }

    /// The client ID header, for a request builder.
    pub(super) fn client_id(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.client_id {
            Some(id) => request.header(CLIENT_ID_HEADER, id.clone()),
            None => request,
        }
    }

    /// Whether any response so far carried the server's `Date`.
    pub fn server_clock_known(&self) -> bool {
        self.clock_seen.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Keeps the server's clock as a response's `Date` showed it.
    pub(super) fn note_server_date(&self, server_date: Option<SystemTime>, received_at: SystemTime) {
        let Some(server) = server_date else { return };
        let skew_ms = match server.duration_since(received_at) {
            Ok(ahead) => ahead.as_millis() as i64,
            Err(behind) => -(behind.duration().as_millis() as i64),
        };
        self.skew_ms.store(skew_ms, std::sync::atomic::Ordering::Relaxed);
        self.clock_seen.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The server's clock minus ours at the last response with a `Date`, in
    /// seconds; `None` before any.
    pub fn server_skew_s(&self) -> Option<f64> {
        self.server_clock_known()
            .then(|| self.skew_ms.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1000.0)
    }

    /// The server's clock as last seen: ours, corrected by the skew of the
    /// last response that had a `Date` (ours alone before any response).
    pub fn server_now(&self) -> SystemTime {
        let skew = self.skew_ms.load(std::sync::atomic::Ordering::Relaxed);
        let shift = std::time::Duration::from_millis(skew.unsigned_abs());
        if skew >= 0 {
            SystemTime::now() + shift
        } else {
            SystemTime::now() - shift
        }
    }

    /// The authentication scheme in use (`bearer`, `basic`, ...).
    pub fn scheme(&self) -> &'static str {
        self.auth.credentials.scheme()
    }

    /// Whether the scheme obtains its credential at run time and can renew it.
    pub fn renewable(&self) -> bool {
        self.auth.credentials.renewable()
    }

    /// Whether the scheme's credential is obtained over the network (a
    /// login request that spends the quota like any other).
    pub fn logs_in(&self) -> bool {
        self.auth.credentials.requested()
    }

    /// The credential held when its announced lifetime is nearly over
    /// (renew it before a request): its generation and how long it has.
    pub fn credential_due(&self) -> Option<(u64, std::time::Duration)> {
        self.auth.due()
    }

    /// The generation of the credential held, if any.
    pub fn credential_generation(&self) -> Option<u64> {
        self.auth.current().map(|c| c.generation)
    }

    /// Obtains a credential (login or helper) unless a usable one is held:
    /// with `stale: None`, any credential is usable; with `Some(g)`, any
    /// but generation `g`, which the EDC just refused. `None` when nothing
    /// had to be done (another stream already did it).
    pub async fn obtain_credential(&self, stale: Option<u64>) -> Result<Option<Obtained>, AuthError> {
        let auth = self.auth.clone();
        auth.refresh(stale, || async {
            match &self.auth.credentials {
                Credentials::VaultSession {
                    username,
                    password,
                    login_path,
                    vault_dns,
                } => {
                    let dns = match vault_dns {
                        Some(d) => d.clone(),
                        None => self.base.host_str().unwrap_or_default().to_ascii_lowercase(),
                    };
                    let form = LoginForm {
                        username,
                        password,
                        vault_dns: &dns,
                    };
                    self.send_login(login_path, form.body()).await?.read(&dns)
                }
                Credentials::OAuth2 {
                    client_id,
                    client_secret,
                    token_path,
                } => {
                    let form = TokenForm {
                        client_id,
                        client_secret,
                    };
                    super::oauth::read(self.send_login(token_path, form.body()).await?)
                }
                Credentials::Command { argv, pass_env } => {
                    let header = super::auth::run_helper(argv, pass_env, self.limits.request_timeout).await?;
                    Ok(Granted {
                        header,
                        login_path: None,
                        execution_id: None,
                        lifetime: None,
                    })
                }
                other => Err(AuthError::Refused {
                    code: "NOT_RENEWABLE".into(),
                    detail: format!("the {} scheme has a fixed credential", other.scheme()),
                }),
            }
        })
        .await
    }

    /// Sends a credential form to `login_path` on the data origin and
    /// brings its answer back, at most [`ERROR_BODY_CAP`] bytes of it, for
    /// the scheme to read (`vendor/vault/login.rs`, `oauth.rs`). The body
    /// is one of the two closed forms, [`LoginForm`] or [`TokenForm`],
    /// built by `obtain_credential` from the credential values alone.
    async fn send_login(&self, login_path: &str, form: String) -> Result<LoginReply, AuthError> {
        let url = self
            .origin
            .endpoint(&self.base, login_path)
            .map_err(|e| AuthError::OffOrigin {
                url: login_path.to_string(),
                detail: e.to_string(),
            })?;
        let shown = url.path().to_string();
        let unavailable = |detail: String| AuthError::Unavailable {
            url: shown.clone(),
            detail,
        };
        let response = self
            .client_id(self.http.post(url.clone()))
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json")
            .body(form)
            .send()
            .await
            .map_err(|e| match find_origin_error(&e) {
                // A redirect off the origin is the same data error as on a
                // data request (65), not an outage to wait out.
                Some(o) => AuthError::OffOrigin {
                    url: shown.clone(),
                    detail: o.to_string(),
                },
                None => unavailable(describe(&e)),
            })?;
        let status = response.status();
        let server_date = response
            .headers()
            .get(reqwest::header::DATE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v).ok());
        self.note_server_date(server_date, std::time::SystemTime::now());
        let execution_id = response
            .headers()
            .get(EXECUTION_ID_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.chars().take(64).collect::<String>());
        let received_at = std::time::SystemTime::now();
        let retry_after: Vec<Vec<u8>> = response
            .headers()
            .get_all(reqwest::header::RETRY_AFTER)
            .iter()
            .map(|v| v.as_bytes().to_vec())
            .collect();
        let login_url = response.url().clone();
        let mut bytes = Vec::new();
        let mut response = response;
        while let Ok(Some(chunk)) = response.chunk().await {
            bytes.extend_from_slice(&chunk);
            if bytes.len() > ERROR_BODY_CAP {
                return Err(AuthError::Protocol {
                    url: shown,
                    detail: format!("the answer is larger than {ERROR_BODY_CAP} bytes"),
                });
            }
        }
        Ok(LoginReply {
            shown,
            status,
            url: login_url,
            received_at,
            server_date,
            retry_after,
            execution_id,
            body: bytes,
        })
    }

    pub fn base(&self) -> &Url {
        &self.base
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Resolves a link from a page against `against`, refusing other origins.
    pub fn resolve(&self, against: &Url, link: &str) -> Result<Url, OriginError> {
        self.origin.resolve(against, link)
    }

    /// `GET url`. Returns once the headers are in; read the body with
    /// `Reply::stream_into`.
    pub async fn get(&self, url: &Url) -> Result<Reply, FetchError> {
        self.send(reqwest::Method::GET, url, None).await
    }

    /// `HEAD url`.
    pub async fn head(&self, url: &Url) -> Result<Reply, FetchError> {
        self.send(reqwest::Method::HEAD, url, None).await
    }

    /// A VQL page: `POST url` with the form field `q` for a query's first
    /// page, or with no body for a `next_page` URL (Vault REST API
    /// reference, "Submitting a Query"). The body can only be a
    /// `VqlSelect`, which can only be a SELECT.
    pub async fn query(&self, url: &Url, select: Option<&super::VqlSelect>) -> Result<Reply, FetchError> {
        let body = select.map(super::VqlSelect::form_body).unwrap_or_default();
        self.send(reqwest::Method::POST, url, Some(body)).await
    }

    /// The answer to the probe `url` this run (`sync/preflight.rs`), asked
    /// once: streams that start together wait for the first one's answer.
    pub(crate) fn asked_once(&self, url: &Url) -> Asked {
        let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        asked.entry(url.to_string()).or_default().clone()
    }

    /// Whether data requests are REDCap exports ([`ReadOnlyClient::export`]):
    /// the credential is a token sent in their form body.
    pub fn exports_by_form(&self) -> bool {
        matches!(self.auth.credentials, Credentials::RedcapToken(_))
    }

    /// A REDCap export: the page key `key` (the API URL with the export's
    /// fields as its query) POSTed to the API URL, its fields and the
    /// token in the form body. Refused unless the key is a read export
    /// ([`Export::of_page`]) of this client's API URL.
    pub async fn export(&self, key: &Url) -> Result<Reply, FetchError> {
        let api = self.origin.endpoint(&self.base, "/")?;
        let export = Export::of_page(key, &api)?;
        self.send_as(reqwest::Method::POST, key, &api, Body::Export(&export))
            .await
    }

    /// The one place a data request is built. Private, and only ever given
    /// GET or HEAD, or POST with a VQL form body, by the methods above.
    async fn send(
        &self,
        method: reqwest::Method,
        url: &Url,
        form: Option<String>,
    ) -> Result<Reply, FetchError> {
        let body = match &form {
            Some(form) => Body::Form(form),
            None => Body::None,
        };
        self.send_as(method, url, url, body).await
    }

    /// Sends `body` to `target`; `url` names the request in errors and
    /// checks (a REDCap export's page key, else `target` itself).
    async fn send_as(
        &self,
        method: reqwest::Method,
        url: &Url,
        target: &Url,
        body: Body<'_>,
    ) -> Result<Reply, FetchError> {
        self.origin.check(url)?;
        self.origin.check(target)?;
        // How errors and the reply name the request: its method and URL
        // (an export's page key, which holds no token).
        let request_line = format!("{method} {url}");
        let credential = self.auth.current().ok_or_else(|| FetchError::NoCredential {
            request: request_line.clone(),
        })?;
        let mut request = self.client_id(self.http.request(method, target.clone()));
        // A token meant for a form goes in an export's body and nowhere
        // else: a GET or HEAD carries no credential at all.
        let form = match (&credential.proof, body) {
            (Proof::Header(_), Body::Export(_)) => {
                return Err(FetchError::Credential(
                    "a REDCap export carries its token in the form (auth.scheme: redcap_token)".into(),
                ));
            }
            (Proof::FormToken(token), Body::Export(export)) => Some(export.form_body(token)),
            (Proof::Header(header), Body::Form(form)) => {
                request = request.header(AUTHORIZATION, header.clone());
                Some(form.to_string())
            }
            (Proof::Header(header), Body::None) => {
                request = request.header(AUTHORIZATION, header.clone());
                None
            }
            (Proof::FormToken(_), Body::Form(form)) => Some(form.to_string()),
            (Proof::FormToken(_), Body::None) => None,
        };
        if let Some(form) = form {
            request = request
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(form);
        }
        let response = request.send().await.map_err(|e| {
            if let Some(origin_error) = find_origin_error(&e) {
                return FetchError::Origin(origin_error);
            }
            FetchError::Transport {
                request: request_line.clone(),
                detail: describe(&e),
            }
        })?;
        let received_at = SystemTime::now();
        let headers = response.headers();
        let all = |name| {
            headers
                .get_all(name)
                .iter()
                .map(|v: &HeaderValue| v.as_bytes().to_vec())
                .collect::<Vec<_>>()
        };
        let retry_after = all(reqwest::header::RETRY_AFTER);
        let link = all(reqwest::header::LINK)
            .into_iter()
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .collect();
        let content_type = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let content_encoding = headers
            .get(reqwest::header::CONTENT_ENCODING)
            .map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .chars()
                    .take(64)
                    .collect::<String>()
            })
            .filter(|v| !v.trim().eq_ignore_ascii_case("identity"));
        let headers_framed_twice =
            headers.contains_key(reqwest::header::TRANSFER_ENCODING) && headers.contains_key(CONTENT_LENGTH);
        let content_length = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let quota_headers = QUOTA_HEADERS
            .iter()
            .filter_map(|name| {
                let v = headers.get(*name)?.to_str().ok()?;
                Some((name.to_string(), v.chars().take(64).collect()))
            })
            .collect();
        let date_text = headers.get(DATE).map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .chars()
                .take(64)
                .collect::<String>()
        });
        let server_date = date_text
            .as_deref()
            .and_then(|v| httpdate::parse_http_date(v.trim()).ok());
        let date_unreadable = date_text.filter(|_| server_date.is_none());
        let execution_id = headers
            .get(EXECUTION_ID_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.chars().take(64).collect());
        let meta = ResponseMeta {
            url: response.url().clone(),
            status: response.status(),
            received_at,
            retry_after,
            link,
            content_type,
            content_encoding,
            content_length,
            quota_headers,
            server_date,
            date_unreadable,
            execution_id,
            credential_generation: credential.generation,
        };
        self.note_server_date(meta.server_date, meta.received_at);
        let reply = Reply {
            meta,
            response,
            max_body_bytes: self.limits.max_body_bytes,
            request: request_line.clone(),
        };
        if headers_framed_twice {
            return Err(FetchError::Framing {
                request: request_line,
            });
        }
        // Refuse an oversized body before reading a byte of it.
        if let Some(size) = reply.content_length.filter(|n| *n > self.limits.max_body_bytes) {
            return Err(FetchError::TooLarge {
                request: request_line,
                size,
                limit: self.limits.max_body_bytes,
            });
        }
        Ok(reply)
    }
}

/// What a data request sends: nothing, a form built by the caller (a VQL
/// query), or a REDCap export, whose form the client builds with the
/// token.
enum Body<'a> {
    None,
    Form(&'a str),
    Export(&'a Export),
}

/// Our own cross-origin refusal, when the redirect policy raised it.
pub(super) fn find_origin_error(e: &reqwest::Error) -> Option<OriginError> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(o) = s.downcast_ref::<OriginError>() {
            return Some(o.clone());
        }
        source = s.source();
    }
    None
}

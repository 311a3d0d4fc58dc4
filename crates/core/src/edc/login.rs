//! The one POST the read-only client can send: the Vault login form.
//!
//! Vault REST API reference, "Authentication" / "User Name and Password":
//! `POST /api/{version}/auth` with `Content-Type:
//! application/x-www-form-urlencoded` and the fields `username` and
//! `password`; the answer is JSON, `{"responseStatus":"SUCCESS",
//! "sessionId":"..."}`, or `FAILURE` with `errors[{type, message}]` (for
//! example `USERNAME_OR_PASSWORD_INCORRECT`), usually at HTTP 200. The
//! session id then goes in `Authorization` on every request (Vault also
//! accepts it as a Bearer value; the bare form is the documented one).
//!
//! The form also carries `vaultDNS`, the vault the session is for (Vault
//! REST API reference, "User Name and Password": "If the user does not
//! have access to the specified Vault, the session is generated for the
//! user's default Vault"). So the answer's `vaultId` is looked up in its
//! `vaultIds` and that vault's `url` must be on the vault asked for, as
//! VAPIL's `AuthenticationRequest.validateLoginResponse` checks; otherwise a
//! user with several vaults could sync the wrong one.
//!
//! The body is built here from the credential values and nothing else; the
//! URL is the configured `login_path` on the data origin, checked like
//! every other URL, so the password cannot be sent anywhere else.

use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE};

use super::auth::AuthError;
use super::client::{find_origin_error, ReadOnlyClient, ERROR_BODY_CAP, EXECUTION_ID_HEADER};
use super::fetch_error::describe;
use super::secret::Secret;

/// What Vault's login answer holds that we read.
#[derive(serde::Deserialize)]
struct LoginAnswer {
    #[serde(rename = "responseStatus")]
    status: Option<String>,
    #[serde(rename = "sessionId")]
    session_id: Option<Secret>,
    #[serde(default)]
    errors: Vec<LoginError>,
    #[serde(rename = "vaultId")]
    vault_id: Option<serde_json::Value>,
    #[serde(rename = "vaultIds", default)]
    vault_ids: Vec<VaultEntry>,
}

/// One vault the user may use, as the login answer lists it.
#[derive(serde::Deserialize)]
struct VaultEntry {
    id: Option<serde_json::Value>,
    #[serde(default)]
    url: String,
}

impl LoginAnswer {
    /// The host of the vault the session was made for, if the answer
    /// names one (its `vaultId` among its `vaultIds`).
    fn session_vault(&self) -> Option<String> {
        let id = self.vault_id.as_ref()?;
        let entry = self.vault_ids.iter().find(|v| v.id.as_ref() == Some(id))?;
        let url = reqwest::Url::parse(&entry.url).ok()?;
        url.host_str().map(str::to_ascii_lowercase)
    }
}

#[derive(serde::Deserialize)]
struct LoginError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

impl ReadOnlyClient {
    /// Logs in; returns the `Authorization` value, the path the form went
    /// to and the response's execution id.
    pub(super) async fn vault_login(
        &self,
        login_path: &str,
        username: &str,
        password: &Secret,
        vault_dns: &str,
    ) -> Result<(HeaderValue, Option<String>, Option<String>), AuthError> {
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
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("username", username)
            .append_pair("password", password.expose())
            .append_pair("vaultDNS", vault_dns)
            .finish();
        let response = self
            .client_id(self.http.post(url.clone()))
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json")
            .body(body)
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
        if status.is_server_error() || status.as_u16() == 429 {
            return Err(unavailable(format!("HTTP {status}")));
        }
        let answer: LoginAnswer = match serde_json::from_slice(&bytes) {
            Ok(a) => a,
            Err(_) if status == 401 || status == 403 => {
                return Err(AuthError::Refused {
                    code: format!("HTTP {}", status.as_u16()),
                    detail: "the login was refused".into(),
                })
            }
            Err(e) => {
                return Err(AuthError::Protocol {
                    url: shown,
                    detail: format!("HTTP {status}, not JSON ({e})"),
                })
            }
        };
        let session_vault = answer.session_vault();
        match (answer.status.as_deref(), answer.session_id) {
            (Some("SUCCESS"), Some(session)) if !session.expose().is_empty() && status.is_success() => {
                // Registered before anything can print it.
                crate::redact::register_secret(session.expose());
                if session_vault.as_deref() != Some(vault_dns) {
                    return Err(AuthError::WrongVault {
                        expected: vault_dns.to_string(),
                        got: session_vault.unwrap_or_else(|| {
                            "(none: the answer names no vaultId among its vaultIds)".into()
                        }),
                    });
                }
                let mut header =
                    HeaderValue::from_str(session.expose()).map_err(|_| AuthError::Protocol {
                        url: shown.clone(),
                        detail: "the sessionId is not a valid header value".into(),
                    })?;
                header.set_sensitive(true);
                Ok((header, Some(shown), execution_id))
            }
            (Some("SUCCESS"), _) => Err(AuthError::Protocol {
                url: shown,
                detail: format!("HTTP {status} with responseStatus SUCCESS but no sessionId"),
            }),
            (_, _) if answer.errors.iter().any(|e| e.kind == "API_LIMIT_EXCEEDED") => {
                let message: String = answer
                    .errors
                    .iter()
                    .find(|e| e.kind == "API_LIMIT_EXCEEDED")
                    .map(|e| e.message.chars().take(200).collect())
                    .unwrap_or_default();
                Err(AuthError::Throttled {
                    meta: Box::new(super::ResponseMeta {
                        url: login_url,
                        status,
                        received_at,
                        retry_after,
                        link: Vec::new(),
                        content_type: None,
                        content_encoding: None,
                        content_length: None,
                        quota_headers: Default::default(),
                        server_date,
                        date_unreadable: None,
                        execution_id,
                        credential_generation: 0,
                    }),
                    vendor: super::dialect::VendorError {
                        kind: super::dialect::VendorErrorKind::Throttled,
                        code: "API_LIMIT_EXCEEDED".into(),
                        message: crate::redact::scrub(&message).into_owned(),
                    },
                })
            }
            (other, _) => {
                let first = answer.errors.first();
                let code = first
                    .map(|e| e.kind.clone())
                    .filter(|k| !k.is_empty())
                    .unwrap_or_else(|| other.unwrap_or("no responseStatus").to_string());
                let message: String = first
                    .map(|e| e.message.as_str())
                    .unwrap_or("")
                    .chars()
                    .take(200)
                    .collect();
                Err(AuthError::Refused {
                    code,
                    detail: crate::redact::scrub(&message).into_owned(),
                })
            }
        }
    }
}

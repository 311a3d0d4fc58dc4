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
//! The form is a closed type built here from the credential values and
//! nothing else ([`LoginForm`]); the read-only client sends it, only to
//! the configured `login_path` on the data origin, checked like every
//! other URL, so the password cannot be sent anywhere else; and the answer
//! it brings back is read here ([`LoginReply::read`]).

use reqwest::header::HeaderValue;

use crate::edc::auth::{AuthError, Granted};
use crate::edc::secret::Secret;
use crate::edc::vendor_error::{VendorError, VendorErrorKind};

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

/// The login form: the one body of this POST shape, built only from the
/// credential values.
pub(crate) struct LoginForm<'a> {
    pub username: &'a str,
    pub password: &'a Secret,
    /// The vault the session must be for.
    pub vault_dns: &'a str,
}

impl LoginForm<'_> {
    /// `username`, `password` and `vaultDNS`, form-encoded.
    pub(crate) fn body(&self) -> String {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("username", self.username)
            .append_pair("password", self.password.expose())
            .append_pair("vaultDNS", self.vault_dns)
            .finish()
    }
}

/// What the login POST brought back, as the client received it.
pub(crate) struct LoginReply {
    /// The login path, as messages name it.
    pub shown: String,
    pub status: reqwest::StatusCode,
    /// Where the answer came from (after same-origin redirects).
    pub url: reqwest::Url,
    pub received_at: std::time::SystemTime,
    pub server_date: Option<std::time::SystemTime>,
    pub retry_after: Vec<Vec<u8>>,
    pub execution_id: Option<String>,
    /// The answer's bytes (at most the client's error-body cap).
    pub body: Vec<u8>,
}

impl LoginReply {
    /// The session it grants: the `Authorization` value, the path the form
    /// went to and the response's execution id; or why it grants none.
    pub(crate) fn read(self, vault_dns: &str) -> Result<Granted, AuthError> {
        let LoginReply {
            shown,
            status,
            url: login_url,
            received_at,
            server_date,
            retry_after,
            execution_id,
            body: bytes,
        } = self;
        if status.is_server_error() || status.as_u16() == 429 {
            return Err(AuthError::Unavailable {
                url: shown,
                detail: format!("HTTP {status}"),
            });
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
                Ok(Granted {
                    header,
                    login_path: Some(shown),
                    execution_id,
                    lifetime: None,
                })
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
                    meta: Box::new(crate::edc::ResponseMeta {
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
                    vendor: VendorError {
                        kind: VendorErrorKind::Throttled,
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

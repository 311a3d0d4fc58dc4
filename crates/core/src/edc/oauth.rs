//! The OAuth2 token request (RFC 6749, section 4.4, client credentials),
//! the second closed POST shape of the read-only client.
//!
//! Castor EDC takes it as castoredc_api's `CastorClient.request_auth_token`
//! sends it: `POST {base}/oauth/token`, a form with `client_id`,
//! `client_secret` and `grant_type=client_credentials`; the answer is JSON
//! with `access_token`, `token_type` (Bearer) and `expires_in` (seconds;
//! Castor's tokens last 5 hours), and the token then goes as
//! `Authorization: Bearer` on every request. A refusal is RFC 6749's error
//! response (section 5.2): HTTP 400 or 401 with `{"error":
//! "invalid_client", "error_description": ...}`.
//!
//! The form is built here from the credential values and nothing else
//! ([`TokenForm`]); the client sends it only to the configured
//! `token_path` on the data origin, checked like every other URL and never
//! redirected, so the secret cannot be sent anywhere else; the answer is
//! read here ([`read`]).

use std::time::Duration;

use reqwest::header::HeaderValue;

use super::auth::{AuthError, Granted};
use super::secret::Secret;
use super::vendor::LoginReply;
use super::vendor_error::{VendorError, VendorErrorKind};

/// The token request's form: the one body of this POST shape.
pub(crate) struct TokenForm<'a> {
    pub client_id: &'a str,
    pub client_secret: &'a Secret,
}

impl TokenForm<'_> {
    /// `grant_type`, `client_id` and `client_secret`, form-encoded.
    pub(crate) fn body(&self) -> String {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "client_credentials")
            .append_pair("client_id", self.client_id)
            .append_pair("client_secret", self.client_secret.expose())
            .finish()
    }
}

/// What a token answer holds that we read.
#[derive(serde::Deserialize)]
struct TokenAnswer {
    access_token: Option<Secret>,
    token_type: Option<String>,
    expires_in: Option<serde_json::Value>,
    error: Option<String>,
    error_description: Option<String>,
}

/// The token the answer grants, or why it grants none.
pub(crate) fn read(reply: LoginReply) -> Result<Granted, AuthError> {
    let LoginReply {
        shown,
        status,
        url,
        received_at,
        server_date,
        retry_after,
        execution_id,
        body,
    } = reply;
    if status.as_u16() == 429 {
        // The token request spends the quota like any other: waited out
        // within the page's budget, never a refusal.
        return Err(AuthError::Throttled {
            meta: Box::new(super::ResponseMeta {
                url,
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
                code: "HTTP 429".into(),
                message: "the token endpoint is throttled".into(),
            },
        });
    }
    if status.is_server_error() {
        return Err(AuthError::Unavailable {
            url: shown,
            detail: format!("HTTP {status}"),
        });
    }
    let answer: TokenAnswer = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(_) if status == 400 || status == 401 || status == 403 => {
            return Err(AuthError::Refused {
                code: format!("HTTP {}", status.as_u16()),
                detail: "the token request was refused".into(),
            })
        }
        Err(e) => {
            return Err(AuthError::Protocol {
                url: shown,
                detail: format!("HTTP {status}, not a JSON token answer ({e})"),
            })
        }
    };
    if let Some(token) = &answer.access_token {
        // Registered before anything can print it, whatever else is wrong.
        crate::redact::register_secret(token.expose());
    }
    if !status.is_success() || answer.error.is_some() {
        let code = answer
            .error
            .map(|e| e.chars().take(64).collect())
            .unwrap_or_else(|| format!("HTTP {}", status.as_u16()));
        let detail: String = answer
            .error_description
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect();
        return Err(AuthError::Refused {
            code: crate::redact::scrub(&code).into_owned(),
            detail: crate::redact::scrub(&detail).into_owned(),
        });
    }
    let token = answer
        .access_token
        .filter(|t| !t.expose().is_empty())
        .ok_or_else(|| AuthError::Protocol {
            url: shown.clone(),
            detail: format!("HTTP {status} without an access_token"),
        })?;
    if let Some(kind) = answer.token_type.as_deref() {
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::Protocol {
                url: shown,
                detail: format!("token_type {kind:?}: only Bearer tokens are sent"),
            });
        }
    }
    let lifetime = match answer.expires_in {
        None => None,
        Some(v) => Some(lifetime_of(&v).ok_or_else(|| AuthError::Protocol {
            url: shown.clone(),
            detail: format!("expires_in {v} is not a number of seconds"),
        })?),
    };
    let mut header =
        HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| AuthError::Protocol {
            url: shown.clone(),
            detail: "the access_token is not a valid header value".into(),
        })?;
    header.set_sensitive(true);
    Ok(Granted {
        header,
        login_path: Some(shown),
        execution_id,
        lifetime,
    })
}

/// `expires_in` as a duration: a whole number of seconds, sent as a JSON
/// number or a string of digits (both occur in the wild).
fn lifetime_of(v: &serde_json::Value) -> Option<Duration> {
    let secs = match v {
        serde_json::Value::Number(n) => n.as_u64()?,
        serde_json::Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, body: &str) -> LoginReply {
        LoginReply {
            shown: "/oauth/token".into(),
            status: reqwest::StatusCode::from_u16(status).unwrap(),
            url: "https://castor.example/oauth/token".parse().unwrap(),
            received_at: std::time::SystemTime::now(),
            server_date: None,
            retry_after: Vec::new(),
            execution_id: None,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn the_form_carries_the_grant_and_both_credentials() {
        let secret = Secret::new("s&cret=1");
        let form = TokenForm {
            client_id: "ABC-123",
            client_secret: &secret,
        };
        assert_eq!(
            form.body(),
            "grant_type=client_credentials&client_id=ABC-123&client_secret=s%26cret%3D1"
        );
    }

    #[test]
    fn a_token_answer_grants_a_bearer_header_and_its_lifetime() {
        let granted = read(reply(
            200,
            r#"{"access_token":"tok-1","token_type":"Bearer","expires_in":18000,"scope":"x"}"#,
        ))
        .unwrap();
        assert_eq!(granted.header.to_str().unwrap(), "Bearer tok-1");
        assert!(granted.header.is_sensitive());
        assert_eq!(granted.lifetime, Some(Duration::from_secs(18000)));
        let text = read(reply(200, r#"{"access_token":"t","expires_in":"60"}"#)).unwrap();
        assert_eq!(text.lifetime, Some(Duration::from_secs(60)));
    }

    #[test]
    fn refusals_throttles_and_nonsense_are_told_apart() {
        match read(reply(
            401,
            r#"{"error":"invalid_client","error_description":"Client authentication failed"}"#,
        )) {
            Err(AuthError::Refused { code, detail }) => {
                assert_eq!(
                    (code.as_str(), detail.as_str()),
                    ("invalid_client", "Client authentication failed")
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            read(reply(400, "<html>")),
            Err(AuthError::Refused { .. })
        ));
        assert!(matches!(read(reply(429, "")), Err(AuthError::Throttled { .. })));
        assert!(matches!(read(reply(503, "")), Err(AuthError::Unavailable { .. })));
        assert!(matches!(
            read(reply(200, "<html>login</html>")),
            Err(AuthError::Protocol { .. })
        ));
        assert!(matches!(
            read(reply(200, r#"{"token_type":"Bearer"}"#)),
            Err(AuthError::Protocol { .. })
        ));
        assert!(matches!(
            read(reply(200, r#"{"access_token":"t","token_type":"MAC"}"#)),
            Err(AuthError::Protocol { .. })
        ));
        assert!(matches!(
            read(reply(200, r#"{"access_token":"t","expires_in":-5}"#)),
            Err(AuthError::Protocol { .. })
        ));
    }
}

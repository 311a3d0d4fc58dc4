//! Vendor profiles: how the simulator authenticates and reports errors.
//!
//! `generic` is the simulator as it always was (a bearer token, bare HTTP
//! statuses). `rave` and `vault` imitate the vendors' documentation, and
//! each behaviour below names its source. When the documents and this
//! file disagree, this file is wrong.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Mutex;

use hyper::header::{HeaderMap, AUTHORIZATION};
use sha2::{Digest, Sha256};

/// Which vendor the simulator imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// A bearer token; errors are bare HTTP statuses.
    #[default]
    Generic,
    /// Medidata Rave Web Services.
    Rave,
    /// Veeva Vault.
    Vault,
}

impl FromStr for Profile {
    type Err = String;

    fn from_str(s: &str) -> Result<Profile, String> {
        match s {
            "generic" => Ok(Profile::Generic),
            "rave" => Ok(Profile::Rave),
            "vault" => Ok(Profile::Vault),
            other => Err(format!("unknown profile {other:?} (generic, rave, vault)")),
        }
    }
}

/// Whether a request carried an acceptable credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authn {
    Ok,
    Missing,
    Invalid,
    /// A Vault session that existed but is used up (`--session-ttl-requests`).
    Expired,
}

impl Authn {
    pub fn label(self) -> &'static str {
        match self {
            Authn::Ok => "ok",
            Authn::Missing => "missing",
            Authn::Invalid => "invalid",
            Authn::Expired => "expired",
        }
    }
}

/// Vault sessions the simulator issued: id -> data requests served.
#[derive(Default)]
pub struct Sessions {
    issued: Mutex<(u64, HashMap<String, u64>)>,
}

impl Sessions {
    /// A new session id: 128 hex digits like Vault's (Vault REST API
    /// reference, "User Name and Password", response example), derived
    /// from the seed and a counter so runs are reproducible.
    pub fn issue(&self, seed: u64) -> String {
        let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        issued.0 += 1;
        let mut id = String::new();
        for half in 0..2u8 {
            let mut h = Sha256::new();
            h.update(seed.to_le_bytes());
            h.update(issued.0.to_le_bytes());
            h.update([half]);
            id.push_str(&hex::encode_upper(h.finalize()));
        }
        issued.1.insert(id.clone(), 0);
        id
    }

    /// Spends one request of `id`; `Expired` once `ttl` requests were served.
    fn spend(&self, id: &str, ttl: Option<u64>) -> Authn {
        let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        let Some(used) = issued.1.get_mut(id) else {
            return Authn::Invalid;
        };
        if ttl.is_some_and(|ttl| *used >= ttl) {
            return Authn::Expired;
        }
        *used += 1;
        Authn::Ok
    }
}

/// Checks a data request's `Authorization` under `profile`.
pub fn authenticate(
    profile: Profile,
    headers: &HeaderMap,
    config: &super::SimConfig,
    sessions: &Sessions,
) -> Authn {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Authn::Missing;
    };
    let value = value.as_bytes();
    match profile {
        Profile::Generic => {
            if value == format!("Bearer {}", config.token).as_bytes() {
                Authn::Ok
            } else {
                Authn::Invalid
            }
        }
        // RWS: HTTP Basic with the Rave user's name and password
        // (mdsol/rwslib `RWSConnection.__init__`: `self.auth = (username,
        // password)`, handed to requests as Basic auth).
        Profile::Rave => {
            use base64::Engine;
            let expected = base64::engine::general_purpose::STANDARD
                .encode(format!("{}:{}", config.username, config.password));
            if value == format!("Basic {expected}").as_bytes() {
                Authn::Ok
            } else {
                Authn::Invalid
            }
        }
        // Vault: `Authorization: {sessionId}`, or `Bearer {sessionId}`
        // (Vault REST API reference, "Authentication").
        Profile::Vault => {
            let text = String::from_utf8_lossy(value);
            let id = text.strip_prefix("Bearer ").unwrap_or(&text);
            sessions.spend(id, config.session_ttl_requests)
        }
    }
}

/// Vault's error envelope at HTTP 200 (Vault REST API reference, "Errors":
/// `responseStatus` FAILURE and `errors[{type, message}]`).
pub fn vault_failure(kind: &str) -> String {
    let message = match kind {
        // "Error Types": INVALID_SESSION_ID "Invalid session ID provided."
        "INVALID_SESSION_ID" => "Invalid or expired session ID.",
        // "Error Types": API_LIMIT_EXCEEDED, the burst or daily limit.
        "API_LIMIT_EXCEEDED" => {
            "API limit exceeded; no further calls will be processed until the next period."
        }
        "USERNAME_OR_PASSWORD_INCORRECT" => "Authentication failed: invalid username or password.",
        "INSUFFICIENT_ACCESS" => "User does not have sufficient privileges to perform the action.",
        _ => "Simulated Vault error.",
    };
    serde_json::json!({
        "responseStatus": "FAILURE",
        "errors": [{"type": kind, "message": message}],
    })
    .to_string()
}

/// Vault's answer to a good login ("User Name and Password" response:
/// `responseStatus`, `sessionId`, `userId`, `vaultIds`, `vaultId`).
/// `vaults` are the DNS names of the user's vaults (numbered from 1776);
/// `chosen` is the one the session is for.
pub fn vault_login_success(session_id: &str, vaults: &[String], chosen: usize) -> String {
    let ids: Vec<serde_json::Value> = vaults
        .iter()
        .enumerate()
        .map(|(i, dns)| serde_json::json!({"id": 1776 + i, "name": format!("Vault {}", i + 1), "url": format!("https://{dns}/api")}))
        .collect();
    serde_json::json!({
        "responseStatus": "SUCCESS",
        "sessionId": session_id,
        "userId": 12021,
        "vaultIds": ids,
        "vaultId": 1776 + chosen,
    })
    .to_string()
}

/// Rave's answer to bad credentials: HTTP 401 with an ODM whose root
/// carries `mdsol:ErrorDescription` (mdsol/rwslib `RWSError` docstring and
/// tests: "Incorrect login and password combination. [RWS00008]").
pub fn rave_odm_error(code: &str, description: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?><ODM xmlns:mdsol="http://www.mdsol.com/ns/odm/metadata" FileType="Snapshot" CreationDateTime="2026-12-02T00:00:00.000-00:00" FileOID="4d13722a-ceb6-4419-a917-b6ad5d0bc30e" ODMVersion="1.3" mdsol:ErrorDescription="{description} [{code}]" xmlns="http://www.cdisc.org/ns/odm/v1.3" />"#
    )
}

/// Rave's `<Response>` error document (mdsol/rwslib `RWSErrorResponse`:
/// `ReferenceNumber`, `InboundODMFileOID`, `IsTransactionSuccessful="0"`,
/// `ReasonCode`, `ErrorClientResponseMessage`).
pub fn rave_response_error(code: &str, message: &str) -> String {
    format!(
        r#"<Response ReferenceNumber="0b47fe86-542f-4070-9e7d-16396a5ef08a" InboundODMFileOID="Not Supplied" IsTransactionSuccessful="0" ReasonCode="{code}" ErrorClientResponseMessage="{message}"></Response>"#
    )
}

/// One field of a url-encoded form body.
pub fn form_field(body: &[u8], name: &str) -> Option<String> {
    url::form_urlencoded::parse(body)
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// Reads `username` and `password` from a url-encoded form body.
pub fn login_form(body: &[u8]) -> (Option<String>, Option<String>) {
    let mut user = None;
    let mut pass = None;
    for (k, v) in url::form_urlencoded::parse(body) {
        match k.as_ref() {
            "username" => user = Some(v.into_owned()),
            "password" => pass = Some(v.into_owned()),
            _ => {}
        }
    }
    (user, pass)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vault_sessions_expire_after_their_request_budget() {
        let sessions = Sessions::default();
        let id = sessions.issue(1);
        assert_eq!(id.len(), 128);
        assert_eq!(sessions.spend(&id, Some(2)), Authn::Ok);
        assert_eq!(sessions.spend(&id, Some(2)), Authn::Ok);
        assert_eq!(sessions.spend(&id, Some(2)), Authn::Expired);
        assert_eq!(sessions.spend("nope", Some(2)), Authn::Invalid);
        assert_ne!(sessions.issue(1), id);
    }

    #[test]
    fn login_forms_are_decoded() {
        assert_eq!(
            login_form(b"username=a%40b.com&password=p%26w"),
            (Some("a@b.com".into()), Some("p&w".into()))
        );
    }
}

//! The vault profile: Veeva Vault, as the Vault REST API reference and
//! veeva/vault-api-library (VAPIL) describe it.

use std::collections::HashMap;
use std::sync::Mutex;

use hyper::StatusCode;
use sha2::{Digest, Sha256};

use super::Authn;

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

/// Vault: `Authorization: {sessionId}`, or `Bearer {sessionId}` (Vault
/// REST API reference, "Authentication").
pub(super) fn authenticate(value: &[u8], config: &crate::SimConfig, sessions: &Sessions) -> Authn {
    let text = String::from_utf8_lossy(value);
    let id = text.strip_prefix("Bearer ").unwrap_or(&text);
    sessions.spend(id, config.session_ttl_requests)
}

/// Vault: an invalid or expired session is HTTP 200 FAILURE
/// INVALID_SESSION_ID ("Errors", "Error Types").
pub(super) fn refused_credential() -> (StatusCode, Option<(&'static str, String)>) {
    (
        StatusCode::OK,
        Some(("application/json", failure("INVALID_SESSION_ID"))),
    )
}

/// Vault's login (Vault REST API reference, "User Name and Password"):
/// SUCCESS with a `sessionId`, or FAILURE `USERNAME_OR_PASSWORD_INCORRECT`,
/// both at HTTP 200.
///
/// The session is for the vault the form's `vaultDNS` names when the user
/// has access to it, else for the user's default vault ("If the user does
/// not have access to the specified Vault, the session is generated for the
/// user's default Vault"); the answer's `vaultId` and `vaultIds` say which.
/// The user's vaults are [`crate::SimConfig::vaults`], or, when that is
/// empty, the one vault this server is (`own`, the host the request named).
pub fn login(cfg: &crate::SimConfig, sessions: &Sessions, form: &[u8], own: String) -> String {
    let (user, pass) = login_form(form);
    let asked = form_field(form, "vaultDNS");
    let vaults = if cfg.vaults.is_empty() {
        vec![own]
    } else {
        cfg.vaults.clone()
    };
    match (user, pass) {
        (Some(u), Some(p)) if u == cfg.username && p == cfg.password => {
            let chosen = asked
                .as_deref()
                .and_then(|a| vaults.iter().position(|v| v.eq_ignore_ascii_case(a)))
                .unwrap_or(0);
            login_success(&sessions.issue(cfg.dataset.seed), &vaults, chosen)
        }
        (_, None) => failure("NO_PASSWORD_PROVIDED"),
        _ => failure("USERNAME_OR_PASSWORD_INCORRECT"),
    }
}

/// Response headers, as the server adds them.
pub type Headers = Vec<(hyper::header::HeaderName, String)>;

/// Vault's daily limit (Vault REST API v14.0 release notes, "Vault
/// Transactions API": once the 24-hour limit is reached "the API returns an
/// API_LIMIT_EXCEEDED error message and no further calls will be processed
/// until the next ... 24 hour period begins"; the counts travel in
/// X-VaultAPI-DailyLimit and X-VaultAPI-DailyLimitRemaining). `Ok`: serve
/// the page with these headers; `Err`: the limit is spent, answer
/// API_LIMIT_EXCEEDED with them. The simulator's day never ends.
pub fn daily(limit: u64, served: &std::sync::atomic::AtomicU64) -> Result<Headers, Headers> {
    use hyper::header::HeaderName;
    use std::sync::atomic::Ordering;
    let headers = |remaining: u64| {
        vec![
            (
                HeaderName::from_static("x-vaultapi-dailylimit"),
                limit.to_string(),
            ),
            (
                HeaderName::from_static("x-vaultapi-dailylimitremaining"),
                remaining.to_string(),
            ),
        ]
    };
    if served.load(Ordering::SeqCst) >= limit {
        return Err(headers(0));
    }
    let served = served.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(headers(limit.saturating_sub(served)))
}

/// Vault's error envelope at HTTP 200 (Vault REST API reference, "Errors":
/// `responseStatus` FAILURE and `errors[{type, message}]`).
pub fn failure(kind: &str) -> String {
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
pub fn login_success(session_id: &str, vaults: &[String], chosen: usize) -> String {
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

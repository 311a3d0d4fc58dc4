//! Credentials inside the page loop: the run's first login (or token
//! request, or credential helper run), the renewal of a token whose
//! announced lifetime is nearly over, and the one renewal a refused
//! session gets.
//!
//! A Vault login is a request to the EDC like any other, so it spends a
//! token of the quota and holds a concurrency slot (invariant 4); it is
//! obtained before the data request's own slot is taken, never while one
//! is held (a slot booked ahead for the next page is given back first), so
//! a cap of one cannot deadlock. Each login is audited
//! (`session_started` / `session_renewed`), never with the credential.

use super::events::{SessionRenewed, SessionStarted};
use super::request::Request;
use super::slots::{self, Slots};
use super::stream::Stream;
use super::SyncError;
use crate::edc::vendor::VendorError;
use crate::edc::{AuthError, ResponseMeta};
use quota_pacer::Pacer;

/// A login to wait out within the page's retry budget, as a data request
/// would be (`None`: the client holds a credential).
pub(super) enum LoginWait {
    /// The vendor throttled it (Vault's `API_LIMIT_EXCEEDED` at the login):
    /// the answer and the vendor's error, waited out like a 429.
    Throttled(Box<ResponseMeta>, VendorError),
    /// The server failed it or did not answer (a 5xx, a timeout, no
    /// connection): why, waited out with the retry backoff like a data
    /// request's transport failure.
    Unavailable(String),
}

pub(super) type LoginThrottled = Option<LoginWait>;

/// Makes sure the client holds a credential before a request, and one
/// whose announced lifetime (OAuth2 `expires_in`) is not nearly over: that
/// one is renewed first, so a long sync never sends a request with a token
/// about to expire.
pub(super) async fn ensure<P: Pacer>(
    stream: &mut Stream<'_, P>,
    slots: &mut Slots<P>,
    req: &Request<'_>,
) -> Result<LoginThrottled, SyncError> {
    if let Some((generation, left)) = stream.job.client.credential_due() {
        let reason = format!(
            "the credential's announced lifetime ends in {} s (renewed before it does)",
            left.as_secs()
        );
        return obtain(stream, slots, Some(generation), req, reason).await;
    }
    if stream.job.client.credential_generation().is_some() {
        return Ok(None);
    }
    obtain(stream, slots, None, req, String::new()).await
}

/// Replaces the credential of generation `refused`, which the EDC just
/// refused, unless another stream already did.
pub(super) async fn renew<P: Pacer>(
    stream: &mut Stream<'_, P>,
    slots: &mut Slots<P>,
    refused: u64,
    req: &Request<'_>,
    reason: String,
) -> Result<LoginThrottled, SyncError> {
    obtain(stream, slots, Some(refused), req, reason).await
}

async fn obtain<P: Pacer>(
    stream: &mut Stream<'_, P>,
    slots: &mut Slots<P>,
    refused: Option<u64>,
    req: &Request<'_>,
    reason: String,
) -> Result<LoginThrottled, SyncError> {
    let request_id = req.id;
    let job = stream.job;
    // A slot booked for the data request goes back first: the login
    // must not wait for a slot this stream itself holds.
    slots.drop_booking();
    let permit = match job.client.logs_in() {
        true => Some(slots::permit(stream, req).await?),
        false => None,
    };
    // A login or helper can hang up to its timeout: a stop request ends
    // the wait (nothing is committed by a login; the helper's group is
    // killed when its future is dropped).
    let result = tokio::select! {
        result = job.client.obtain_credential(refused) => result,
        _ = job.options.interrupt.wait() => {
            if let Some(permit) = permit {
                permit.release();
            }
            return Err(SyncError::Interrupted { stream: stream.name.clone() });
        }
    };
    if let Some(permit) = permit {
        permit.release();
    }
    let obtained = match result {
        Ok(Some(obtained)) => obtained,
        // Another stream logged in or renewed first: use its credential.
        Ok(None) => return Ok(None),
        Err(AuthError::Throttled { meta, vendor }) => return Ok(Some(LoginWait::Throttled(meta, vendor))),
        Err(error @ AuthError::Unavailable { .. }) => {
            let reason = format!("obtaining a credential ({}): {error}", job.client.scheme());
            return Ok(Some(LoginWait::Unavailable(reason)));
        }
        Err(error) => {
            let reason = format!("obtaining a credential ({}): {error}", job.client.scheme());
            stream.failed(req, None, None, reason).await?;
            // The variables are worth checking only when the credential
            // itself was refused; a redirect or an outage is elsewhere.
            let hint = match &error {
                AuthError::OffOrigin { .. } => {
                    "check the base URL and auth.login_path; nothing was posted elsewhere".to_string()
                }
                _ => job.policy.auth.hint(),
            };
            return Err(SyncError::Credential {
                stream: stream.name.clone(),
                hint,
                error,
            });
        }
    };
    let scheme = job.client.scheme();
    match refused {
        None => {
            let event = SessionStarted {
                stream: stream.name.clone(),
                request_id: request_id.to_string(),
                scheme,
                generation: obtained.generation,
                login_path: obtained.login_path,
                vendor_execution_id: obtained.execution_id,
                lifetime_s: obtained.lifetime.map(|l| l.as_secs()),
            };
            job.audit.record(event).await?;
        }
        Some(refused_generation) => {
            let event = SessionRenewed {
                stream: stream.name.clone(),
                request_id: request_id.to_string(),
                scheme,
                generation: obtained.generation,
                refused_generation,
                reason,
                login_path: obtained.login_path,
                vendor_execution_id: obtained.execution_id,
                lifetime_s: obtained.lifetime.map(|l| l.as_secs()),
            };
            job.audit.record(event).await?;
        }
    }
    Ok(None)
}

//! Credentials inside the page loop: the run's first login (or credential
//! helper run) and the one renewal a refused session gets.
//!
//! A Vault login is a request to the EDC like any other, so it spends a
//! token of the quota and holds a concurrency slot (invariant 4); it is
//! obtained before the data request's own slot is taken, never while one
//! is held (a slot booked ahead for the next page is given back first), so
//! a cap of one cannot deadlock. Each login is audited
//! (`session_started` / `session_renewed`), never with the credential.

use super::events::{RequestFailed, SessionRenewed, SessionStarted};
use super::request::Request;
use super::{Loop, SyncError};
use quota_pacer::Pacer;

impl<P: Pacer> Loop<'_, P> {
    /// Makes sure the client holds a credential before a request.
    pub(super) async fn ensure_credential(&mut self, req: &Request<'_>) -> Result<(), SyncError> {
        if self.job.client.credential_generation().is_some() {
            return Ok(());
        }
        self.obtain(None, req, String::new()).await
    }

    /// Replaces the credential of generation `refused`, which the EDC just
    /// refused, unless another stream already did.
    pub(super) async fn renew(
        &mut self,
        refused: u64,
        req: &Request<'_>,
        reason: String,
    ) -> Result<(), SyncError> {
        self.obtain(Some(refused), req, reason).await
    }

    async fn obtain(
        &mut self,
        refused: Option<u64>,
        req: &Request<'_>,
        reason: String,
    ) -> Result<(), SyncError> {
        let Request {
            url,
            id: request_id,
            attempt,
            ..
        } = *req;
        let job = self.job;
        // A slot booked for the data request goes back first: the login
        // must not wait for a slot this stream itself holds.
        self.booked = None;
        let permit = match job.client.logs_in() {
            true => Some(self.permit(req).await?),
            false => None,
        };
        let result = job.client.obtain_credential(refused).await;
        if let Some(permit) = permit {
            permit.release();
        }
        let obtained = match result {
            Ok(Some(obtained)) => obtained,
            // Another stream logged in or renewed first: use its credential.
            Ok(None) => return Ok(()),
            Err(error) => {
                let failed = RequestFailed {
                    stream: self.name.clone(),
                    request_id: request_id.to_string(),
                    attempt,
                    url: url.to_string(),
                    reason: format!("obtaining a credential ({}): {error}", job.client.scheme()),
                    ..RequestFailed::default()
                };
                job.audit.record(failed).await?;
                return Err(SyncError::Credential {
                    stream: self.name.clone(),
                    hint: job.policy.auth.hint(),
                    error,
                });
            }
        };
        let scheme = job.client.scheme();
        match refused {
            None => {
                let event = SessionStarted {
                    stream: self.name.clone(),
                    request_id: request_id.to_string(),
                    scheme,
                    generation: obtained.generation,
                    login_path: obtained.login_path,
                    vendor_execution_id: obtained.execution_id,
                };
                job.audit.record(event).await?;
            }
            Some(refused_generation) => {
                let event = SessionRenewed {
                    stream: self.name.clone(),
                    request_id: request_id.to_string(),
                    scheme,
                    generation: obtained.generation,
                    refused_generation,
                    reason,
                    login_path: obtained.login_path,
                    vendor_execution_id: obtained.execution_id,
                };
                job.audit.record(event).await?;
            }
        }
        Ok(())
    }
}

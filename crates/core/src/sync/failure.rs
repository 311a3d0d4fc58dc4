//! How an attempt that will not commit ends: a budget spent (audited as
//! `quota_exhausted`, 75 or 69), a fetch that failed, or a request that
//! ends the stream (audited as `request_failed`).

use super::events::{QuotaExhausted, RequestFailed};
use super::request::Request;
use super::{Attempt, Loop, Spent, SyncError};
use crate::edc::dialect::VendorError;
use crate::edc::{FetchError, ResponseMeta};
use crate::store::{Cursor, StoreError};
use quota_pacer::Pacer;
use reqwest::Url;

impl<P: Pacer> Loop<'_, P> {
    pub(super) async fn exhausted<T>(
        &mut self,
        url: &Url,
        attempts: u32,
        reason: String,
        cursor: &Cursor,
        spent: Spent,
    ) -> Result<T, SyncError> {
        let event = QuotaExhausted {
            stream: self.name.clone(),
            request_id: format!("{}:{}:{}", self.run_id, self.name, self.requests),
            attempts,
            url: url.to_string(),
            reason: reason.clone(),
            cursor: cursor.to_json(),
        };
        self.job.audit.record(event).await?;
        Err(match spent {
            Spent::Unreachable => SyncError::Unreachable {
                stream: self.name.clone(),
                attempts,
                detail: reason,
            },
            Spent::Quota => SyncError::Exhausted {
                stream: self.name.clone(),
                reason,
            },
        })
    }

    pub(super) async fn fetch_failed(
        &mut self,
        req: &Request<'_>,
        e: FetchError,
    ) -> Result<Attempt, SyncError> {
        let Request {
            url,
            cursor,
            attempt,
            budget,
            ..
        } = *req;
        if e.is_transient() {
            if attempt >= budget {
                let reason = format!("{e} (attempt {attempt} of {budget})");
                return self
                    .exhausted(url, attempt, reason, cursor, Spent::Unreachable)
                    .await;
            }
            return self.retry_later(req, e.to_string(), None).await;
        }
        if let FetchError::Sink { .. } = e {
            let error = std::io::Error::other(e.to_string());
            return Err(StoreError::Io {
                path: self.report.landing_dir.clone(),
                op: "write a page into",
                error,
            }
            .into());
        }
        self.failed(req, None, None, e.to_string()).await?;
        Err(self.rejected(e.to_string()))
    }

    /// A `request_failed` line for a request that ends the stream; `meta`
    /// when a response came back (its status and Vault execution id).
    pub(super) async fn failed(
        &mut self,
        req: &Request<'_>,
        meta: Option<&ResponseMeta>,
        vendor_error: Option<VendorError>,
        reason: String,
    ) -> Result<(), SyncError> {
        let Request {
            url,
            id: request_id,
            attempt,
            ..
        } = *req;
        let event = RequestFailed {
            stream: self.name.clone(),
            request_id: request_id.to_string(),
            attempt,
            url: url.to_string(),
            status: meta.map(|m| m.status.as_u16()),
            reason,
            vendor_error,
            vendor_execution_id: meta.and_then(|m| m.execution_id.clone()),
            ..RequestFailed::default()
        };
        self.job.audit.record(event).await?;
        Ok(())
    }
}

//! What the page loop does when the vendor reports an error in a body
//! (see `edc::dialect`): renew a refused session, wait out the vendor's
//! own limit like a 429, or stop with the vendor's code named. A vendor
//! error is never landed and never moves the cursor.

use super::request::Request;
use super::{Attempt, Loop, SyncError};
use crate::edc::dialect::{VendorError, VendorErrorKind};
use crate::edc::ResponseMeta;
use quota_pacer::Pacer;

impl<P: Pacer> Loop<'_, P> {
    /// Acts on `error`, which came with the response `meta`.
    pub(super) async fn vendor_error(
        &mut self,
        req: &Request<'_>,
        meta: &ResponseMeta,
        error: VendorError,
    ) -> Result<Attempt, SyncError> {
        let Request { url, .. } = *req;
        match error.kind {
            VendorErrorKind::InvalidSession if self.job.client.renewable() => Ok(Attempt::Renew {
                refused: meta.credential_generation,
                reason: format!("HTTP {} with {error}", meta.status.as_u16()),
            }),
            VendorErrorKind::Throttled => self.throttled(req, meta, Some(error)).await,
            VendorErrorKind::Permission | VendorErrorKind::InvalidSession => {
                let detail = format!("GET {url} answered HTTP {} with {error}", meta.status.as_u16());
                self.refused(req, meta, Some(error), detail).await
            }
            VendorErrorKind::Other => {
                let reason = format!(
                    "GET {url} answered HTTP {} with the vendor error {error}; nothing was committed",
                    meta.status.as_u16()
                );
                self.failed(req, Some(meta), Some(error), reason.clone()).await?;
                Err(self.rejected(reason))
            }
        }
    }

    /// The EDC refused the credential or its privileges: audit, exit 77
    /// naming the variables of the scheme in use.
    pub(super) async fn refused(
        &mut self,
        req: &Request<'_>,
        meta: &ResponseMeta,
        vendor: Option<VendorError>,
        detail: String,
    ) -> Result<Attempt, SyncError> {
        self.failed(req, Some(meta), vendor, detail.clone()).await?;
        Err(SyncError::Permission {
            stream: self.name.clone(),
            detail,
            hint: self.job.policy.auth.hint(),
        })
    }
}

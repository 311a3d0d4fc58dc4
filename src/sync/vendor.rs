//! What the page loop does when the vendor reports an error in a body
//! (see `edc::dialect`): renew a refused session, wait out the vendor's
//! own limit like a 429, or stop with the vendor's code named. A vendor
//! error is never landed and never moves the cursor.

use reqwest::Url;

use super::{Attempt, Loop, SyncError};
use crate::edc::dialect::{VendorError, VendorErrorKind};
use crate::edc::ResponseMeta;
use crate::limiter::Pacer;
use crate::store::Cursor;

impl<P: Pacer> Loop<'_, P> {
    /// Acts on `error`, which came with the response `meta`.
    pub(super) async fn vendor_error(
        &mut self,
        url: &Url,
        cursor: &Cursor,
        request_id: &str,
        attempt: u32,
        meta: &ResponseMeta,
        error: VendorError,
    ) -> Result<Attempt, SyncError> {
        match error.kind {
            VendorErrorKind::InvalidSession if self.job.client.renewable() => Ok(Attempt::Renew {
                refused: meta.credential_generation,
                reason: format!("HTTP {} with {error}", meta.status.as_u16()),
            }),
            VendorErrorKind::Throttled => {
                self.throttled(url, cursor, request_id, attempt, meta, Some(error))
                    .await
            }
            VendorErrorKind::Permission | VendorErrorKind::InvalidSession => {
                let detail = format!("GET {url} answered HTTP {} with {error}", meta.status.as_u16());
                self.refused(url, request_id, attempt, meta, Some(error), detail)
                    .await
            }
            VendorErrorKind::Other => {
                let reason = format!(
                    "GET {url} answered HTTP {} with the vendor error {error}; nothing was committed",
                    meta.status.as_u16()
                );
                self.failed(url, request_id, attempt, Some(meta), Some(error), reason.clone())
                    .await?;
                Err(self.rejected(reason))
            }
        }
    }

    /// The EDC refused the credential or its privileges: audit, exit 77
    /// naming the variables of the scheme in use.
    pub(super) async fn refused(
        &mut self,
        url: &Url,
        request_id: &str,
        attempt: u32,
        meta: &ResponseMeta,
        vendor: Option<VendorError>,
        detail: String,
    ) -> Result<Attempt, SyncError> {
        self.failed(url, request_id, attempt, Some(meta), vendor, detail.clone())
            .await?;
        Err(SyncError::Permission {
            stream: self.name.clone(),
            detail,
            hint: self.job.policy.auth.hint(),
        })
    }
}

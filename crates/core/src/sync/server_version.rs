//! REDCap's version, asked once a run before a window is planned
//! (`content=version`): its answer's `Date` is the server's clock the
//! window ends by, and Export Logging needs 10.8.0 or later (a log stream
//! on an older server stops with 78, naming the version). The answer is
//! a few bytes of plain text and is not landed.

use reqwest::Url;

use super::request::Request;
use super::slots;
use super::stream::Stream;
use super::SyncError;
use crate::config::Dialect;
use crate::edc::vendor::{self, redcap::export::Content, redcap::version::Version};
use crate::edc::ERROR_BODY_CAP;
use quota_pacer::Pacer;

/// Asks the version of the REDCap at `api` (paced like any request) and
/// refuses a server that cannot serve the content this stream exports.
pub(super) async fn check<P: Pacer>(
    stream: &mut Stream<'_, P>,
    req: &Request<'_>,
    api: &Url,
) -> Result<(), SyncError> {
    let job = stream.job;
    let mut probe = api.clone();
    probe.query_pairs_mut().clear().append_pair("content", "version");
    let asked = Request { url: &probe, ..*req };
    let permit = slots::permit(stream, &asked).await?;
    let sent = job.client.export(&probe).await;
    permit.release();
    let reply = sent.map_err(|e| SyncError::Unreachable {
        stream: stream.name.clone(),
        attempts: 1,
        detail: format!("asking the REDCap version (content=version): {e}"),
    })?;
    let meta = reply.meta.clone();
    let body = reply.error_body(ERROR_BODY_CAP).await;
    if !meta.status.is_success() {
        let error = vendor::error_in_body(Dialect::Redcap, meta.status.as_u16(), &body);
        return match error {
            Some(error) => stream.vendor_error(&asked, &meta, error).await.and_then(|_| {
                Err(stream.rejected(format!(
                    "POST {probe} answered HTTP {} to content=version",
                    meta.status.as_u16()
                )))
            }),
            None => {
                let reason = format!(
                    "POST {probe} answered HTTP {} to content=version; nothing was asked of the stream",
                    meta.status.as_u16()
                );
                stream.failed(&asked, Some(&meta), None, reason.clone()).await?;
                Err(stream.rejected(reason))
            }
        };
    }
    let version = Version::parse(&body).map_err(|why| stream.rejected(why))?;
    let exported = job
        .delta
        .query
        .iter()
        .chain(job.spec.query.iter())
        .find(|(name, _)| name == "content")
        .and_then(|(_, value)| Content::parse(value.as_str()));
    match exported.and_then(|content| version.lacks(content)) {
        Some(detail) => Err(SyncError::Unsupported {
            stream: stream.name.clone(),
            detail,
        }),
        None => {
            tracing::debug!(stream = %stream.name, %version, "REDCap version");
            Ok(())
        }
    }
}

//! What a REDCap server says of itself and its project, asked once a run
//! before a window is planned, read and never landed:
//!
//! - its version (`content=version`): the answer's `Date` is the server's
//!   clock the window ends by, and Export Logging needs 10.8.0 or later (a
//!   log stream on an older server stops with 78, naming the version);
//! - for a records stream, the project's fields as exports name them
//!   (`content=exportFieldNames`) and whether it has data access groups
//!   (`content=dag`): what a token with full export rights gets, against
//!   which every batch is checked (`edc/vendor/redcap/scope.rs`);
//! - and, before a run's first id list of a records stream lands, one of
//!   its records exported as the batches will be ([`columns`]): a
//!   restricted token is refused before anything of the window lands.

use reqwest::Url;

use super::classify::{classify, Verdict};
use super::request::Request;
use super::slots;
use super::stream::Stream;
use super::SyncError;
use crate::config::Dialect;
use crate::edc::vendor::{self, redcap::export::Content, redcap::scope::Scope, redcap::version::Version};
use crate::edc::ERROR_BODY_CAP;
use quota_pacer::Pacer;

/// Asks the version of the REDCap at `api` (paced like any request),
/// once a run: streams after the first read it from the client. Refuses a
/// server that cannot serve the content this stream exports.
pub(super) async fn check<P: Pacer>(
    stream: &mut Stream<'_, P>,
    req: &Request<'_>,
    api: &Url,
) -> Result<(), SyncError> {
    let job = stream.job;
    let version = *job
        .client
        .redcap_version()
        .get_or_try_init(|| async {
            let body = ask(
                stream,
                req,
                &content_url(api, "version"),
                "content=version",
                ERROR_BODY_CAP,
            )
            .await?;
            let version = Version::parse(&body).map_err(|why| stream.rejected(why))?;
            tracing::debug!(stream = %stream.name, %version, "REDCap version");
            Ok::<_, SyncError>(version)
        })
        .await?;
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
        None => Ok(()),
    }
}

/// The project's fields and groups, asked once a run (streams after the
/// first read them from the client).
pub(super) async fn scope<P: Pacer>(
    stream: &mut Stream<'_, P>,
    req: &Request<'_>,
    api: &Url,
) -> Result<Scope, SyncError> {
    let job = stream.job;
    let scope = job
        .client
        .redcap_scope()
        .get_or_try_init(|| async {
            let cap = page_cap(stream);
            let fields = ask(
                stream,
                req,
                &content_url(api, "exportFieldNames"),
                "content=exportFieldNames",
                cap,
            )
            .await?;
            let groups = ask(stream, req, &content_url(api, "dag"), "content=dag", cap).await?;
            Scope::of(&fields, &groups).map_err(|why| stream.rejected(why))
        })
        .await?;
    Ok(scope.clone())
}

/// One record of a records stream's first batch (`probe`: the batch cut
/// to its first id), exported as the batch will be, read and not landed:
/// its columns say what the token may export before the window's id list
/// lands.
pub(super) async fn columns<P: Pacer>(
    stream: &mut Stream<'_, P>,
    req: &Request<'_>,
    probe: &Url,
) -> Result<Vec<u8>, SyncError> {
    let cap = page_cap(stream);
    ask(stream, req, probe, "one record, for its columns", cap).await
}

/// The export of `content` alone from the API URL `api` (JSON, but the
/// version: plain text).
fn content_url(api: &Url, content: &str) -> Url {
    let mut url = api.clone();
    {
        let mut query = url.query_pairs_mut();
        query.clear().append_pair("content", content);
        if content != "version" {
            query.append_pair("format", "json");
        }
    }
    url
}

/// A page's size cap: a project's field list is a few hundred bytes a
/// field, a record a few per value.
fn page_cap<P: Pacer>(stream: &Stream<'_, P>) -> usize {
    usize::try_from(stream.job.policy.http.max_body_bytes).unwrap_or(usize::MAX)
}

/// One export (`probe`, `what` it asks for) whose answer is read, not
/// landed (at most `cap` bytes). It is not a page: an answer that is not
/// 2xx is judged as a page's would be and audited by the same steps (a ban
/// 76, a refused token 77, a throttle paused for every worker), but never
/// waited out here: a throttle ends the run with 75 and a server failure
/// with 69, and the next run asks again.
async fn ask<P: Pacer>(
    stream: &mut Stream<'_, P>,
    req: &Request<'_>,
    probe: &Url,
    what: &str,
    cap: usize,
) -> Result<Vec<u8>, SyncError> {
    let job = stream.job;
    let asked = Request { url: probe, ..*req };
    let permit = slots::permit(stream, &asked).await?;
    let sent = job.client.export(probe).await;
    permit.release();
    let unreachable = |stream: &Stream<'_, P>, detail: String| SyncError::Unreachable {
        stream: stream.name.clone(),
        attempts: 1,
        detail: format!("asking REDCap ({what}): {detail}"),
    };
    let reply = sent.map_err(|e| unreachable(stream, e.to_string()))?;
    let meta = reply.meta.clone();
    let body = reply.error_body(cap).await;
    if meta.status.is_success() {
        return Ok(body);
    }
    let vendor = vendor::error_in_body(Dialect::Redcap, meta.status.as_u16(), &body);
    let later = |stream: &Stream<'_, P>| SyncError::Exhausted {
        stream: stream.name.clone(),
        reason: format!(
            "POST {probe} ({what}) was throttled (HTTP {})",
            meta.status.as_u16()
        ),
    };
    match classify(
        meta.status,
        vendor,
        job.client.renewable(),
        &format!("POST {probe}"),
    ) {
        Verdict::Throttled => {
            stream.throttled(&asked, &meta, None).await?;
            Err(later(stream))
        }
        Verdict::Vendor(error) => {
            stream.vendor_error(&asked, &meta, error).await?;
            Err(later(stream))
        }
        Verdict::Retry(reason) => {
            stream.failed(&asked, Some(&meta), None, reason.clone()).await?;
            Err(unreachable(stream, reason))
        }
        Verdict::Refused(detail) => {
            stream.refused(&asked, &meta, None, detail).await?;
            Err(stream.rejected(format!("the request for {what} was refused")))
        }
        Verdict::Renew(reason) | Verdict::Failed(reason) => {
            let reason = format!("{reason} to the request for {what}; nothing was asked of the stream");
            stream.failed(&asked, Some(&meta), None, reason.clone()).await?;
            Err(stream.rejected(reason))
        }
    }
}

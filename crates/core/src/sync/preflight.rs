//! What a vendor asks before a window (`DeltaKind::preflight`: REDCap's
//! version, and its project's fields and groups), asked here and handed
//! back to the vendor to judge (`DeltaKind::facts`). Each is asked once a
//! run: streams after the first read the answer the client kept. An answer
//! is read, never landed; one that is not a 2xx is judged as a page's
//! would be and audited by the same steps.

use reqwest::Url;

use super::classify::{classify, Verdict};
use super::request::Request;
use super::slots;
use super::stream::Stream;
use super::SyncError;
use crate::edc::vendor::{self, Following, Probe, Refused, Sends};
use crate::edc::ERROR_BODY_CAP;
use quota_pacer::Pacer;

/// Asks the vendor's probes before a window at `endpoint` (`planned`: a
/// new window; otherwise an interrupted one resumes), and has the vendor
/// judge the answers into the window's `following`: a server that cannot serve the stream
/// stops it (78), an answer that is not what it should be (65).
pub(super) async fn ask<P: Pacer>(
    stream: &mut Stream<'_, P>,
    req: &Request<'_>,
    endpoint: &Url,
    planned: bool,
    following: &mut Following,
) -> Result<(), SyncError> {
    let job = stream.job;
    let mut answers = Vec::new();
    for probe in job.kind.preflight(endpoint, planned) {
        let asked = job.client.asked_once(&probe.url);
        let body = asked
            .get_or_try_init(|| async {
                let cap = match probe.page_sized {
                    true => page_cap(stream),
                    false => ERROR_BODY_CAP,
                };
                ask_one(stream, req, &probe, cap).await
            })
            .await?
            .clone();
        answers.push((probe, body));
    }
    match job.kind.facts(&answers, following) {
        Ok(()) => Ok(()),
        Err(Refused::Unsupported(detail)) => Err(SyncError::Unsupported {
            stream: stream.name.clone(),
            detail,
        }),
        Err(Refused::Invalid(why) | Refused::Restricted(why)) => Err(stream.rejected(why)),
    }
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
    let probe = Probe {
        url: probe.clone(),
        what: "one record, for its columns",
        page_sized: true,
    };
    ask_one(stream, req, &probe, cap).await
}

/// A page's size cap: a project's field list is a few hundred bytes a
/// field, a record a few per value.
fn page_cap<P: Pacer>(stream: &Stream<'_, P>) -> usize {
    usize::try_from(stream.job.policy.http.max_body_bytes).unwrap_or(usize::MAX)
}

/// One probe whose answer is read, not landed (at most `cap` bytes). It
/// is not a page: an answer that is not 2xx is judged as a page's would be
/// and audited by the same steps (a ban 76, a refused token 77, a throttle
/// paused for every worker), but never waited out here: a throttle ends
/// the run with 75 and a server failure with 69, and the next run asks
/// again.
async fn ask_one<P: Pacer>(
    stream: &mut Stream<'_, P>,
    req: &Request<'_>,
    probe: &Probe,
    cap: usize,
) -> Result<Vec<u8>, SyncError> {
    let job = stream.job;
    let (url, what) = (&probe.url, probe.what);
    let asked = Request { url, ..*req };
    let permit = slots::permit(stream, &asked).await?;
    let sent = match job.kind.sends() {
        Sends::Export => job.client.export(url).await,
        Sends::Get | Sends::Query => job.client.get(url).await,
    };
    permit.release();
    let unreachable = |stream: &Stream<'_, P>, detail: String| SyncError::Unreachable {
        stream: stream.name.clone(),
        attempts: 1,
        detail: format!("asking the EDC ({what}) before the window: {detail}"),
    };
    let reply = sent.map_err(|e| unreachable(stream, e.to_string()))?;
    let meta = reply.meta.clone();
    let body = reply.error_body(cap).await;
    if meta.status.is_success() {
        return Ok(body);
    }
    let vendor = vendor::error_in_body(job.policy.dialect, meta.status.as_u16(), &body);
    let later = |stream: &Stream<'_, P>| SyncError::Exhausted {
        stream: stream.name.clone(),
        reason: format!(
            "{} {url} ({what}) was throttled (HTTP {})",
            job.kind.sends().method(),
            meta.status.as_u16()
        ),
    };
    match classify(
        meta.status,
        vendor,
        job.client.renewable(),
        &job.request_line(url),
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

//! `window_quota`: a vendor that counts calls in fixed windows rather than
//! with a bucket (Castor: 600 calls in 10 minutes from the first request).
//!
//! `window_quota: {calls: N, window_s: S, starts: first_call|clock}`. The
//! pacer books every request in the window beside the bucket, on Redis's
//! clock, shared by every process of the quota key (docs/pacer.md, "Fixed
//! windows"). The bucket must fit in the window on its own
//! (`burst_capacity + sustained_rate_per_sec * window_s <= calls`): then
//! whatever the vendor's window phase, no window of it sees more than
//! `calls`, and the window gate is what holds every caller once the vendor
//! says the window is spent.

use quota_pacer::{Rate, WindowStart};

use super::check::{integer, positive, seconds, string, Fields, Report};
use super::policy::WindowQuota;
use super::yaml::Node;

const KEYS: [&str; 3] = ["calls", "window_s", "starts"];

/// The longest window taken: a day, the longest any vendor we know counts.
const MAX_WINDOW_S: f64 = 86_400.0;

pub(super) fn window_quota(
    report: &mut Report,
    path: Vec<String>,
    node: &Node,
    rate: Option<Rate>,
) -> Option<WindowQuota> {
    let mut f = Fields::of(report, path.clone(), node)?;
    let calls = f
        .required(report, "calls")
        .and_then(|(p, n)| integer(report, &p, n, 1, i64::from(u32::MAX)))
        .map(|c| c as u32);
    let window = f
        .required(report, "window_s")
        .and_then(|(p, n)| positive(report, &p, n, MAX_WINDOW_S))
        .map(seconds);
    let starts = f
        .required(report, "starts")
        .and_then(|(p, n)| match string(report, &p, n)? {
            "first_call" => Some(WindowStart::FirstCall),
            "clock" => Some(WindowStart::Clock),
            other => {
                report.add(
                    &p,
                    format!(
                        "must be first_call (the window starts at the first call after the last one \
                         ended) or clock (on multiples of window_s since the Unix epoch, UTC), got {other:?}"
                    ),
                );
                None
            }
        });
    f.finish(report, &KEYS);
    let quota = WindowQuota {
        calls: calls?,
        window: window?,
        starts: starts?,
    };
    if let Some(rate) = rate {
        let admits = quota.bucket_admits(rate);
        if admits > f64::from(quota.calls) {
            report.add(
                &path,
                format!(
                    "the bucket alone admits {admits:.0} calls in {} s (burst_capacity {} + \
                     sustained_rate_per_sec {} x {} s), more than the window's {} calls: lower the rate \
                     or the burst so that burst + rate x window_s <= calls",
                    quota.window.as_secs_f64(),
                    rate.burst(),
                    rate.per_sec(),
                    quota.window.as_secs_f64(),
                    quota.calls
                ),
            );
            return None;
        }
    }
    Some(quota)
}

//! Vault's audit trail as the vault profile serves it (Vault REST API
//! reference, "Retrieve Audit Details"):
//! `GET /api/{version}/audittrail/{audit_trail_type}` with `start_date` and
//! `end_date` in `YYYY-MM-DDTHH:MM:SSZ` (UTC; `start_date` no more than 30
//! days ago, both taken here as inclusive), `limit` 1..=1000 (default 200)
//! and `offset`; records newest first with second-resolution `timestamp`s;
//! the next page in `responseDetails.next_page`. A start beyond 30 days is
//! a 200 FAILURE, as Vault reports its errors.
//!
//! Records *arrive* over time: record n is stamped `origin + n * every` and
//! is not served before that instant, so tests can let new records appear
//! between runs.
//!
//! Two things a real vault may do that this profile can imitate, for the
//! lookback that guards against them: records that become *visible late*
//! (stamped at one instant, served only some time after it: replication
//! lag, a long transaction, an entry back-dated by the vault; nothing in
//! the reference promises an audit record is readable the instant it is
//! stamped), and *sub-second* stamps (`...:05.250Z`) compared exactly with
//! the whole-second `end_date`, so a record at 10.25 s falls after a
//! window ending at 10 s and before one starting at 11 s.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::dataset::{Dataset, Page};

/// Vault serves at most this far back.
pub const MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// When the audit trail's records happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrivals {
    /// Record n is stamped `origin + n * every` (whole seconds in the
    /// output, unless `subsecond`).
    pub origin: SystemTime,
    pub every: Duration,
    /// `(k, delay)`: every k-th record becomes visible `delay` after its
    /// stamp instead of at it.
    pub late: Option<(u32, Duration)>,
    /// Stamps carry milliseconds (record n is `(n * 137) % 1000` ms past
    /// its second) and the window's ends are compared with them exactly.
    pub subsecond: bool,
    /// Every k-th record is an exact twin of the one before it (the same
    /// id, stamp and fields): two identical rows that are two events, as an
    /// audit log without row ids shows two identical changes made in one
    /// second (REDCap's logging export, Castor's audit trail).
    pub twins: Option<u32>,
    /// `(k, delay)`: every k-th event's details are empty until `delay`
    /// after its stamp (Castor: an event's details fill in about an hour
    /// late in its export; castor profile only).
    pub details_late: Option<(u32, Duration)>,
}

impl Arrivals {
    /// Records stamped every `every` from `origin`, each visible at once,
    /// in whole seconds.
    pub fn every(origin: SystemTime, every: Duration) -> Arrivals {
        Arrivals {
            origin,
            every,
            late: None,
            subsecond: false,
            twins: None,
            details_late: None,
        }
    }

    /// The late-records scenario the tests and the OQ share: a record
    /// every 250 ms from `origin`, stamped to the millisecond, every 4th
    /// visible only 3 s after its stamp.
    pub fn late_and_subsecond(origin: SystemTime) -> Arrivals {
        Arrivals {
            late: Some((4, Duration::from_secs(3))),
            subsecond: true,
            ..Arrivals::every(origin, Duration::from_millis(250))
        }
    }
}

fn secs(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64) - 1,
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` of whole seconds since the epoch.
pub fn vault_date(secs: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs(secs.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

fn parse_vault_date(s: &str) -> Option<i64> {
    // Exactly the documented shape; anything else is refused.
    let ok = s.len() == 20 && s.ends_with('Z') && s.as_bytes()[10] == b'T';
    ok.then(|| humantime::parse_rfc3339(s).ok()).flatten().map(secs)
}

impl Arrivals {
    /// The record whose content record `n` shows: itself, or the one
    /// before it when `n` is a twin.
    pub fn original(&self, n: u32) -> u32 {
        match self.twins {
            Some(k) if k > 1 && n > 1 && n.is_multiple_of(k) => n - 1,
            _ => n,
        }
    }

    /// Whether record `n`'s details are still to come at `now_ms`.
    pub(crate) fn details_pending(&self, n: u32, now_ms: i64) -> bool {
        match self.details_late {
            Some((k, delay)) if k > 0 && n.is_multiple_of(k) => {
                now_ms < self.stamp_ms(n) + delay.as_millis() as i64
            }
            _ => false,
        }
    }

    /// The stamp of record `n`, in milliseconds since the epoch.
    pub(crate) fn stamp_ms(&self, n: u32) -> i64 {
        let n = self.original(n);
        let whole = secs(self.origin + self.every * n) * 1000;
        if self.subsecond {
            whole + i64::from(n.wrapping_mul(137) % 1000)
        } else {
            whole
        }
    }

    /// The stamp of record `n` as the page shows it.
    fn shown(&self, n: u32) -> String {
        let ms = self.stamp_ms(n);
        if self.subsecond {
            let t = UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
            humantime::format_rfc3339_millis(t).to_string()
        } else {
            vault_date(ms / 1000)
        }
    }

    /// When record `n` can first be served, in milliseconds since the epoch.
    pub(crate) fn visible_ms(&self, n: u32) -> i64 {
        match self.late {
            Some((k, delay)) if k > 0 && n.is_multiple_of(k) => self.stamp_ms(n) + delay.as_millis() as i64,
            _ => self.stamp_ms(n),
        }
    }

    /// The first record numbered >= 1 whose stamp is >= `at_ms` (records+1 if none).
    pub(crate) fn first_at_or_after(&self, records: u32, at_ms: i64) -> u32 {
        let (mut lo, mut hi) = (1u32, records + 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.stamp_ms(mid) >= at_ms {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }
}

/// The answer to one audit-trail request: a status body (always HTTP 200,
/// as Vault answers) and whether it is a page.
pub fn page(
    ds: &Dataset,
    arrivals: &Arrivals,
    path: &str,
    q: &BTreeMap<String, String>,
    now: SystemTime,
) -> Page {
    let failure = |message: &str| {
        Page::whole(
            serde_json::json!({
                "responseStatus": "FAILURE",
                "errors": [{"type": "INVALID_DATA", "message": message}],
            })
            .to_string(),
        )
    };
    let now_s = secs(now);
    let oldest = secs(now - MAX_AGE);
    let start = match q.get("start_date") {
        Some(s) => match parse_vault_date(s) {
            Some(t) => t,
            None => return failure("Invalid start_date: dates must be YYYY-MM-DDTHH:MM:SSZ"),
        },
        None => oldest,
    };
    if start < oldest {
        return failure("start_date cannot be more than 30 days ago");
    }
    let end = match q.get("end_date") {
        Some(s) => match parse_vault_date(s) {
            Some(t) => t,
            None => return failure("Invalid end_date: dates must be YYYY-MM-DDTHH:MM:SSZ"),
        },
        None => now_s,
    };
    let limit: u32 = match q.get("limit").map(|l| l.parse::<u32>()) {
        None => 200,
        Some(Ok(l)) if (1..=1000).contains(&l) => l,
        Some(_) => return failure("limit must be between 1 and 1000"),
    };
    let offset: u32 = q.get("offset").and_then(|o| o.parse().ok()).unwrap_or(0);
    // Served: stamped within [start, end] (to the millisecond) and
    // visible by now, newest first.
    let now_ms = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let first = arrivals.first_at_or_after(ds.records, start * 1000);
    let past_last = arrivals.first_at_or_after(ds.records, end * 1000 + 1);
    let served: Vec<u32> = (first..past_last)
        .rev()
        .filter(|n| arrivals.visible_ms(*n) <= now_ms)
        .collect();
    let total = served.len() as u32;
    let from = offset.min(total);
    let to = offset.saturating_add(limit).min(total);
    let next = (to < total).then(|| {
        let mut url =
            url::Url::parse("http://sim/").unwrap_or_else(|_| unreachable!("a constant URL parses"));
        url.set_path(path);
        url.query_pairs_mut()
            .append_pair("start_date", &vault_date(start))
            .append_pair("end_date", &vault_date(end))
            .append_pair("limit", &limit.to_string())
            .append_pair("offset", &to.to_string());
        format!("{}?{}", url.path(), url.query().unwrap_or_default())
    });
    let next_json = match &next {
        Some(n) => format!(r#","next_page":{}"#, serde_json::Value::String(n.clone())),
        None => String::new(),
    };
    let head = format!(
        r#"{{"responseStatus":"SUCCESS","responseDetails":{{"offset":{offset},"limit":{limit},"size":{},"total":{total}{next_json}}},"data":["#,
        to - from
    );
    let ds = ds.clone();
    let arrivals = arrivals.clone();
    let served = std::sync::Arc::new(served);
    // Newest first: position p holds record `served[p]`.
    Page::from_fn(move || {
        let ds = ds.clone();
        let arrivals = arrivals.clone();
        let served = served.clone();
        std::iter::once(Bytes::from(head.clone()))
            .chain((from..to).map(move |p| {
                let n = arrivals.original(served[p as usize]);
                let rec = ds.record(n);
                let comma = if p > from { "," } else { "" };
                Bytes::from(format!(
                    r#"{comma}{{"id":"AT-{n:07}","timestamp":"{}","user_name":"sim.user@example.invalid","type":"Edit","object":"{}","subject__v":"SUBJ-{:04}","field__v":"{}"}}"#,
                    arrivals.shown(n),
                    rec.form,
                    rec.subject,
                    rec.field
                ))
            }))
            .chain(std::iter::once(Bytes::from_static(b"]}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_have_the_documented_shape_only() {
        assert_eq!(parse_vault_date("2016-01-15T07:00:00Z"), Some(1452841200));
        assert_eq!(parse_vault_date("2016-01-15T07:00:00.5Z"), None);
        assert_eq!(parse_vault_date("2016-01-15"), None);
        assert_eq!(vault_date(1452841200), "2016-01-15T07:00:00Z");
    }
}

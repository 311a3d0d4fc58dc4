//! `Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP-date.
//!
//! The parser never fails: whatever the server sent, the caller gets a wait
//! and the *source* of that wait, which goes into the audit line so a
//! reviewer can see why each wait happened.

use std::fmt;
use std::time::{Duration, SystemTime};

/// Where a wait came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(rename_all = "snake_case"))]
pub enum RetryAfterSource {
    /// `Retry-After: 120`
    Seconds,
    /// `Retry-After: Wed, 21 Oct 2015 07:28:00 GMT` (or the RFC 850 /
    /// asctime forms); a date in the past means no wait.
    Date,
    /// No header: the policy's `default_retry_after_s`.
    Absent,
    /// A header that is neither form (or several that disagree): the
    /// policy's default, and the audit line says so.
    Unparseable,
    /// No header, and the throttle was reported in the response body (a
    /// vendor that answers HTTP 200 with a limit error, as Vault's
    /// `API_LIMIT_EXCEEDED`): the policy's default.
    VendorBody,
}

impl fmt::Display for RetryAfterSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RetryAfterSource::Seconds => "seconds",
            RetryAfterSource::Date => "date",
            RetryAfterSource::Absent => "absent",
            RetryAfterSource::Unparseable => "unparseable",
            RetryAfterSource::VendorBody => "vendor_body",
        })
    }
}

impl RetryAfterSource {
    /// The source its `Display` token names (`seconds`, `date`, ...), as
    /// an audit line records it.
    pub fn from_token(token: &str) -> Option<RetryAfterSource> {
        [
            RetryAfterSource::Seconds,
            RetryAfterSource::Date,
            RetryAfterSource::Absent,
            RetryAfterSource::Unparseable,
            RetryAfterSource::VendorBody,
        ]
        .into_iter()
        .find(|s| s.to_string() == token)
    }

    /// How the wait was asked for, in words for people (a progress line,
    /// a run's summary); the audit trail keeps the `Display` token.
    pub fn describe(self) -> &'static str {
        match self {
            RetryAfterSource::Seconds => "Retry-After in seconds",
            RetryAfterSource::Date => "Retry-After as an HTTP date",
            RetryAfterSource::Absent => "no Retry-After, the policy's default wait",
            RetryAfterSource::Unparseable => "an unreadable Retry-After, the policy's default wait",
            RetryAfterSource::VendorBody => "no Retry-After, the policy's default wait",
        }
    }
}

/// The wait a server asked for, and how it asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryAfter {
    /// How long to wait.
    pub wait: Duration,
    /// Where `wait` came from.
    pub source: RetryAfterSource,
    /// The header as sent (lossy UTF-8, at most 64 characters), for the
    /// audit line; `None` when absent.
    pub raw: Option<String>,
}

/// Longest raw header value kept for the audit line.
const RAW_MAX: usize = 64;

/// Parses every `Retry-After` value of one response. `now` is the time the
/// response arrived, for the date form.
pub fn parse(values: &[&[u8]], now: SystemTime, default: Duration) -> RetryAfter {
    let raw = (!values.is_empty()).then(|| {
        let joined = values
            .iter()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect::<Vec<_>>()
            .join(", ");
        joined.chars().take(RAW_MAX).collect::<String>()
    });
    let fallback = |source| RetryAfter {
        wait: default,
        source,
        raw: raw.clone(),
    };
    let Some(first) = values.first() else {
        return fallback(RetryAfterSource::Absent);
    };
    // Two headers that disagree are ambiguous; which one would be right?
    if values.iter().any(|v| v.trim_ascii() != first.trim_ascii()) {
        return fallback(RetryAfterSource::Unparseable);
    }
    let Ok(text) = std::str::from_utf8(first.trim_ascii()) else {
        return fallback(RetryAfterSource::Unparseable);
    };
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        // delta-seconds = 1*DIGIT. A value too large for u64 is "forever",
        // which the max-wait ceiling turns into exit 75, not a sleep.
        let secs = text.parse::<u64>().unwrap_or(u64::MAX);
        return RetryAfter {
            wait: Duration::from_secs(secs),
            source: RetryAfterSource::Seconds,
            raw,
        };
    }
    match httpdate::parse_http_date(text) {
        Ok(when) => RetryAfter {
            wait: when.duration_since(now).unwrap_or(Duration::ZERO),
            source: RetryAfterSource::Date,
            raw,
        },
        Err(_) => fallback(RetryAfterSource::Unparseable),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: Duration = Duration::from_secs(60);

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn one(v: &str, now: SystemTime) -> RetryAfter {
        parse(&[v.as_bytes()], now, DEFAULT)
    }

    // 1994-11-06 08:49:37 UTC, the RFC's example instant.
    const RFC_EXAMPLE: u64 = 784_111_777;

    #[test]
    fn delta_seconds() {
        let r = one("120", at(0));
        assert_eq!(
            (r.wait, r.source),
            (Duration::from_secs(120), RetryAfterSource::Seconds)
        );
        assert_eq!(one(" 0 ", at(0)).wait, Duration::ZERO);
        assert_eq!(
            one("99999999999999999999999", at(0)).wait,
            Duration::from_secs(u64::MAX)
        );
    }

    #[test]
    fn all_three_date_forms() {
        let now = at(RFC_EXAMPLE - 30);
        for form in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            let r = one(form, now);
            assert_eq!(
                (r.wait, r.source),
                (Duration::from_secs(30), RetryAfterSource::Date),
                "{form}"
            );
        }
    }

    #[test]
    fn a_past_date_means_no_wait() {
        let r = one("Thu, 01 Jan 1970 00:00:00 GMT", at(RFC_EXAMPLE));
        assert_eq!((r.wait, r.source), (Duration::ZERO, RetryAfterSource::Date));
    }

    #[test]
    fn a_far_future_date_is_a_long_wait() {
        let r = one("Tue, 01 Jan 2999 00:00:00 GMT", at(RFC_EXAMPLE));
        assert!(r.wait > Duration::from_secs(30_000_000_000));
    }

    #[test]
    fn absent_and_garbage_fall_back_to_the_default() {
        let absent = parse(&[], at(0), DEFAULT);
        assert_eq!(
            (absent.wait, absent.source, absent.raw),
            (DEFAULT, RetryAfterSource::Absent, None)
        );
        for garbage in [
            "-1",
            "abc",
            "1e12",
            "1.5",
            "",
            "+5",
            "Sun, 06 Nov 1994 08:49:37 PST",
        ] {
            let r = one(garbage, at(0));
            assert_eq!(
                (r.wait, r.source),
                (DEFAULT, RetryAfterSource::Unparseable),
                "{garbage:?}"
            );
        }
        assert_eq!(
            parse(&[b"\xff\xfe"], at(0), DEFAULT).source,
            RetryAfterSource::Unparseable
        );
    }

    #[test]
    fn duplicate_headers_must_agree() {
        assert_eq!(parse(&[b"5", b"5"], at(0), DEFAULT).wait, Duration::from_secs(5));
        let r = parse(&[b"5", b"10"], at(0), DEFAULT);
        assert_eq!((r.wait, r.source), (DEFAULT, RetryAfterSource::Unparseable));
        assert_eq!(r.raw.as_deref(), Some("5, 10"));
    }

    #[test]
    fn the_raw_value_is_bounded() {
        let long = "9".repeat(500);
        assert_eq!(one(&long, at(0)).raw.unwrap().len(), 64);
    }
}

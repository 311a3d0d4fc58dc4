//! A cursor value, and how cursor values compare. A high-water mark is a maximum, and a
//! maximum is only as good as its order: numbers compare as numbers, RFC
//! 3339 timestamps as the instants they name (so `...:00.500Z` is after
//! `...:00Z`, and `10:00+02:00` is before `09:00Z`), anything else as text.
//!
//! One concept: the order of cursor values, with the readings of a
//! timestamp it rests on (the plain UTC form read without the general
//! parser, an instant kept in the form it was written) and the marks and
//! seen values that carry it through a page; past 600 lines for the
//! property tests that hold every reading to the general parser.

use std::cmp::Ordering;

use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcDateTime};

use serde::{Deserialize, Serialize};

/// The instant an RFC 3339 timestamp names, if `s` is one.
pub(crate) fn instant(s: &str) -> Option<OffsetDateTime> {
    parsed(s).map(Instant::offset)
}

/// The same instant as the order keeps it.
fn parsed(s: &str) -> Option<Instant> {
    match utc_written_plainly(s.as_bytes()) {
        Plain::Instant(t) => Some(Instant::Utc(t)),
        Plain::NotAnInstant => None,
        Plain::OtherForm => OffsetDateTime::parse(s.trim(), &Rfc3339)
            .ok()
            .map(Instant::Offset),
    }
}

/// An instant as it was written: in UTC, the form nearly every vendor
/// sends, or with an offset. Two in UTC compare as they are; any other
/// pair as `OffsetDateTime`s, which converts both to UTC first (a page's
/// cursor values are compared with its marks at every record, and that
/// conversion was a tenth of a dense page's check).
#[derive(Debug, Clone, Copy)]
enum Instant {
    Utc(UtcDateTime),
    Offset(OffsetDateTime),
}

impl Instant {
    fn offset(self) -> OffsetDateTime {
        match self {
            Instant::Utc(t) => t.into(),
            Instant::Offset(t) => t,
        }
    }
}

impl PartialEq for Instant {
    fn eq(&self, other: &Instant) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Instant {}

impl PartialOrd for Instant {
    fn partial_cmp(&self, other: &Instant) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Instant {
    #[inline]
    fn cmp(&self, other: &Instant) -> Ordering {
        match (self, other) {
            (Instant::Utc(a), Instant::Utc(b)) => a.cmp(b),
            _ => self.offset().cmp(&other.offset()),
        }
    }
}

/// What [`utc_written_plainly`] made of a text.
enum Plain {
    Instant(UtcDateTime),
    /// Of the plain form, but no instant (`2026-02-30T...`, hour 24).
    NotAnInstant,
    /// Anything else: the general parser decides.
    OtherForm,
}

/// The instant of a timestamp in the form nearly every vendor sends,
/// `YYYY-MM-DDTHH:MM:SS[.f]Z` with at most nine fraction digits, read
/// without the general RFC 3339 parser: a page's cursor field holds one
/// in every record, and parsing it was a fifth of a dense page's check.
/// The same verdict and instant as the general parser's (a property
/// test holds it to it); a leap second, a lower-case `t` or `z`, an
/// offset, blanks or ten fraction digits are left to that parser.
fn utc_written_plainly(s: &[u8]) -> Plain {
    let digits = |from: usize, n: usize| -> Option<u32> {
        s.get(from..from + n)?.iter().try_fold(0u32, |v, &b| {
            b.is_ascii_digit().then(|| v * 10 + u32::from(b - b'0'))
        })
    };
    let punctuated = s.len() >= 20
        && s[4] == b'-'
        && s[7] == b'-'
        && s[10] == b'T'
        && s[13] == b':'
        && s[16] == b':'
        && s.last() == Some(&b'Z');
    let fraction = match s.get(19..s.len().saturating_sub(1)) {
        Some([]) => Some((0, 0)),
        Some([b'.', f @ ..]) if (1..=9).contains(&f.len()) => {
            digits(20, f.len()).map(|v| (v * 10u32.pow(9 - f.len() as u32), f.len()))
        }
        _ => None,
    };
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second), Some((nanos, _))) = (
        digits(0, 4),
        digits(5, 2),
        digits(8, 2),
        digits(11, 2),
        digits(14, 2),
        digits(17, 2),
        fraction,
    ) else {
        return Plain::OtherForm;
    };
    if !punctuated || second == 60 {
        return Plain::OtherForm;
    }
    let date = u8::try_from(month)
        .ok()
        .and_then(|m| time::Month::try_from(m).ok())
        .and_then(|m| time::Date::from_calendar_date(year as i32, m, day as u8).ok());
    let time = time::Time::from_hms_nano(hour as u8, minute as u8, second as u8, nanos).ok();
    match (date, time) {
        (Some(date), Some(time)) => Plain::Instant(time::PrimitiveDateTime::new(date, time).as_utc()),
        _ => Plain::NotAnInstant,
    }
}

/// Orders two cursor parameters (window starts, `--since` / `--until`):
/// both numbers, both timestamps, or else as text.
pub fn compare_params(a: &str, b: &str) -> Ordering {
    if written_alike_in_utc(a, b) {
        return a.cmp(b);
    }
    by_parsing(a, b)
}

/// Two values ending in `Z`, of one length, with digits in the same
/// places and every other byte the same: UTC timestamps written alike
/// (a lookback's memory is all of them) order as their text does, and so
/// does anything else of that shape, which is no number and, when not a
/// timestamp, is ordered as text anyway. Saves parsing both.
fn written_alike_in_utc(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.ends_with('Z')
        && b.ends_with('Z')
        && a.bytes()
            .zip(b.bytes())
            .all(|(x, y)| x == y || (x.is_ascii_digit() && y.is_ascii_digit()))
}

fn by_parsing(a: &str, b: &str) -> Ordering {
    if let (Ok(x), Ok(y)) = (a.trim().parse::<f64>(), b.trim().parse::<f64>()) {
        return x.partial_cmp(&y).unwrap_or(Ordering::Equal);
    }
    if let (Some(x), Some(y)) = (instant(a), instant(b)) {
        return x.cmp(&y);
    }
    a.cmp(b)
}

/// The RFC 3339 timestamp `secs` seconds before `s`, in UTC (`Z`) with as
/// many fraction digits as `s` had: the form the endpoint was sent before.
/// `None` when `s` is not a timestamp.
pub fn earlier(s: &str, secs: u64) -> Option<String> {
    let t = instant(s)?.to_offset(time::UtcOffset::UTC) - time::Duration::seconds(i64::try_from(secs).ok()?);
    let digits = s
        .split_once('.')
        .map_or(0, |(_, frac)| frac.bytes().take_while(u8::is_ascii_digit).count())
        .min(9);
    Some(utc_text(t, digits))
}

/// `t` in UTC as `YYYY-MM-DDTHH:MM:SS[.f]Z` with `digits` (at most 9)
/// fraction digits, cut, not rounded.
pub(crate) fn utc_text(t: OffsetDateTime, digits: usize) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    let digits = digits.min(9);
    let whole = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    );
    if digits == 0 {
        format!("{whole}Z")
    } else {
        let nanos = format!("{:09}", t.nanosecond());
        format!("{whole}.{}Z", &nanos[..digits])
    }
}

/// A cursor value with its instant parsed once: a page's low- and
/// high-water marks are compared against every record, and parsing both
/// sides of every comparison would cost more than the rest of the scan.
#[derive(Debug, Clone)]
pub(crate) struct Mark {
    value: CursorValue,
    instant: Option<Instant>,
}

impl Mark {
    /// A mark made whole from a value: the test oracle's way, and the
    /// reference [`Seen`] is held to.
    #[cfg(test)]
    pub(crate) fn new(value: CursorValue) -> Mark {
        let instant = match &value {
            CursorValue::Text(s) => parsed(s),
            CursorValue::Number(_) => None,
        };
        Mark { value, instant }
    }

    /// The same order as [`CursorValue::compare`].
    #[cfg(test)]
    pub(crate) fn compare(&self, other: &Mark) -> Result<Ordering, String> {
        match (&self.value, &other.value, self.instant, other.instant) {
            (CursorValue::Text(_), CursorValue::Text(_), Some(a), Some(b)) => Ok(a.cmp(&b)),
            _ => self.value.compare(&other.value),
        }
    }

    /// The value this mark holds.
    #[cfg(test)]
    pub(crate) fn value(&self) -> &CursorValue {
        &self.value
    }

    /// Whether the value is text that reads as an instant.
    #[cfg(test)]
    pub(crate) fn is_instant(&self) -> bool {
        self.instant.is_some()
    }

    pub(crate) fn into_value(self) -> CursorValue {
        self.value
    }

    /// Takes `seen`'s value, reusing this mark's text where both are
    /// text: a page in cursor order moves its high-water mark at every
    /// record.
    pub(crate) fn set(&mut self, seen: &Seen<'_>) {
        match (&mut self.value, seen.value) {
            (CursorValue::Text(text), SeenValue::Text(new)) => new.clone_into(text),
            _ => self.value = seen.value.to_owned(),
        }
        self.instant = seen.instant;
    }
}

/// A record's cursor value, borrowed from the page with its instant parsed
/// once: compared with the marks before anything is copied, and copied
/// only into a mark it moves.
pub(crate) struct Seen<'a> {
    value: SeenValue<'a>,
    instant: Option<Instant>,
}

#[derive(Clone, Copy)]
enum SeenValue<'a> {
    Text(&'a str),
    Number(&'a serde_json::Number),
}

impl<'a> SeenValue<'a> {
    fn of(value: &'a CursorValue) -> SeenValue<'a> {
        match value {
            CursorValue::Text(s) => SeenValue::Text(s),
            CursorValue::Number(n) => SeenValue::Number(n),
        }
    }

    /// The instant the value names, parsed.
    fn instant(self) -> Option<Instant> {
        match self {
            SeenValue::Text(s) => parsed(s),
            SeenValue::Number(_) => None,
        }
    }

    fn to_owned(self) -> CursorValue {
        match self {
            SeenValue::Text(s) => CursorValue::Text(s.to_string()),
            SeenValue::Number(n) => CursorValue::Number(n.clone()),
        }
    }
}

/// The one order of cursor values, each with its instant when it names
/// one: numbers as numbers, two instants as instants, other text as text;
/// numbers and text do not mix.
#[inline]
fn order(
    (a, a_instant): (SeenValue<'_>, Option<Instant>),
    (b, b_instant): (SeenValue<'_>, Option<Instant>),
) -> Result<Ordering, String> {
    match (a, b) {
        (SeenValue::Text(x), SeenValue::Text(y)) => Ok(match (a_instant, b_instant) {
            (Some(p), Some(q)) => p.cmp(&q),
            _ => x.cmp(y),
        }),
        (SeenValue::Number(x), SeenValue::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap_or(f64::NAN), y.as_f64().unwrap_or(f64::NAN));
            Ok(x.partial_cmp(&y).unwrap_or(Ordering::Equal))
        }
        _ => Err("cursor values mix numbers and strings".into()),
    }
}

impl<'a> Seen<'a> {
    pub(crate) fn text(text: &'a str) -> Seen<'a> {
        Seen {
            value: SeenValue::Text(text),
            instant: parsed(text),
        }
    }

    pub(crate) fn number(n: &'a serde_json::Number) -> Seen<'a> {
        Seen {
            value: SeenValue::Number(n),
            instant: None,
        }
    }

    /// The text, when the value is text.
    pub(crate) fn text_value(&self) -> Option<&'a str> {
        match self.value {
            SeenValue::Text(s) => Some(s),
            SeenValue::Number(_) => None,
        }
    }

    /// Whether the value is text that reads as an instant.
    pub(crate) fn is_instant(&self) -> bool {
        self.instant.is_some()
    }

    /// As a query-parameter value ([`CursorValue::as_param`]).
    pub(crate) fn as_param(&self) -> String {
        match self.value {
            SeenValue::Text(s) => s.to_string(),
            SeenValue::Number(n) => n.to_string(),
        }
    }

    /// How this value orders against `mark`: the order of
    /// [`Mark::compare`], without a mark made of it.
    #[inline]
    pub(crate) fn against(&self, mark: &Mark) -> Result<Ordering, String> {
        order(
            (self.value, self.instant),
            (SeenValue::of(&mark.value), mark.instant),
        )
    }

    /// A mark holding this value.
    pub(crate) fn to_mark(&self) -> Mark {
        Mark {
            value: self.value.to_owned(),
            instant: self.instant,
        }
    }
}

/// A cursor value seen on a page: a number or a string (RFC 3339
/// timestamps compare as instants; below).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CursorValue {
    Number(serde_json::Number),
    Text(String),
}

impl CursorValue {
    /// As a query-parameter value.
    pub fn as_param(&self) -> String {
        match self {
            CursorValue::Number(n) => n.to_string(),
            CursorValue::Text(s) => s.clone(),
        }
    }
}

impl CursorValue {
    /// Orders two values of one field; numbers and strings do not mix.
    pub fn compare(&self, other: &CursorValue) -> Result<Ordering, String> {
        let (a, b) = (SeenValue::of(self), SeenValue::of(other));
        order((a, a.instant()), (b, b.instant()))
    }

    /// The larger of two values (the first when they are equal).
    pub fn max(self, other: CursorValue) -> Result<CursorValue, String> {
        Ok(match self.compare(&other)? {
            Ordering::Less => other,
            _ => self,
        })
    }

    /// The smaller of two values (the first when they are equal).
    pub fn min(self, other: CursorValue) -> Result<CursorValue, String> {
        Ok(match self.compare(&other)? {
            Ordering::Greater => other,
            _ => self,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Values written alike are ordered as parsing both orders them:
        /// real instants (leap seconds included), impossible dates and
        /// other text of one layout.
        #[test]
        fn values_written_alike_order_as_parsed(
            a in (2000u32..2100, 1u32..14, 1u32..32, 0u32..25, 0u32..60, 0u32..61, 0u32..1000),
            b in (2000u32..2100, 1u32..14, 1u32..32, 0u32..25, 0u32..60, 0u32..61, 0u32..1000),
            layout in 0usize..3,
        ) {
            let text = |(y, mo, d, h, mi, s, f): (u32, u32, u32, u32, u32, u32, u32)| match layout {
                0 => format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"),
                1 => format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{f:03}Z"),
                _ => format!("{y:04}{mo:02}Z"),
            };
            let (x, y) = (text(a), text(b));
            proptest::prop_assert!(written_alike_in_utc(&x, &y));
            proptest::prop_assert_eq!(compare_params(&x, &y), by_parsing(&x, &y), "{} {}", x, y);
        }
    }

    proptest::proptest! {
        /// Timestamps in the plain UTC form, real or not (month 13, 30
        /// February, hour 24, a leap second), with every fraction length
        /// and the variants the general parser also reads (lower case,
        /// blanks, an offset), name the instant the general RFC 3339
        /// parser names, or none when it names none.
        #[test]
        fn plain_utc_timestamps_read_as_the_general_parser_reads_them(
            d in (0u32..10000, 0u32..14, 0u32..33, 0u32..25, 0u32..61, 0u32..62),
            fraction in "[0-9]{0,11}",
            dot in proptest::bool::weighted(0.9),
            variant in 0usize..8,
        ) {
            let (y, mo, da, h, mi, se) = d;
            let frac = if dot && !fraction.is_empty() { format!(".{fraction}") } else { String::new() };
            let plain = format!("{y:04}-{mo:02}-{da:02}T{h:02}:{mi:02}:{se:02}{frac}Z");
            let text = match variant {
                0 => plain.replace('T', "t"),
                1 => plain.replace('Z', "z"),
                2 => format!(" {plain}"),
                3 => plain.replace('Z', "+00:00"),
                4 => plain.replace('T', " "),
                _ => plain,
            };
            let general = OffsetDateTime::parse(text.trim(), &Rfc3339).ok();
            proptest::prop_assert_eq!(instant(&text), general, "{}", text);
        }
    }

    proptest::proptest! {
        /// Instants written in UTC and with offsets order as the instants
        /// they name, whichever forms meet (two in UTC compare without a
        /// conversion, any other pair after one), equal ones included.
        #[test]
        fn instants_in_any_form_order_as_the_instants_they_name(
            at in 0i64..4_000_000_000,
            nanos in 0u32..1_000_000_000,
            apart in -2i64..3,
            nanos_apart in 0u32..3,
            forms in (0usize..3, 0usize..3),
        ) {
            let write = |secs: i64, nanos: u32, form: usize| {
                let t = OffsetDateTime::from_unix_timestamp(secs).unwrap() + time::Duration::nanoseconds(i64::from(nanos));
                let t = match form {
                    0 => return (utc_text(t, 9), t),
                    1 => t.to_offset(time::UtcOffset::from_hms(2, 0, 0).unwrap()),
                    _ => t.to_offset(time::UtcOffset::from_hms(-5, -30, 0).unwrap()),
                };
                (t.format(&Rfc3339).unwrap(), t)
            };
            let (x, tx) = write(at, nanos, forms.0);
            let (y, ty) = write(at + apart, nanos.saturating_sub(nanos_apart), forms.1);
            let expected = tx.cmp(&ty);
            proptest::prop_assert_eq!(Mark::new(text(&x)).compare(&Mark::new(text(&y))), Ok(expected), "{} {}", x, y);
            proptest::prop_assert_eq!(Seen::text(&x).against(&Mark::new(text(&y))), Ok(expected), "{} {}", x, y);
        }
    }

    #[test]
    fn the_plain_form_is_read_without_the_general_parser_and_the_rest_with_it() {
        let verdict = |text: &str| match utc_written_plainly(text.as_bytes()) {
            Plain::Instant(_) => "an instant",
            Plain::NotAnInstant => "no instant",
            Plain::OtherForm => "for the general parser",
        };
        for (text, expected) in [
            ("2026-01-01T00:00:00Z", "an instant"),
            ("2024-02-29T23:59:59.123456789Z", "an instant"),
            ("0000-01-01T00:00:00.5Z", "an instant"),
            ("2026-02-29T00:00:00Z", "no instant"),
            ("2000-02-29T00:00:00Z", "an instant"),
            ("1900-02-29T00:00:00Z", "no instant"),
            ("2100-02-29T00:00:00Z", "no instant"),
            ("0000-02-29T00:00:00Z", "an instant"),
            ("2026-04-31T00:00:00Z", "no instant"),
            ("2026-12-31T23:59:59.999999999Z", "an instant"),
            ("2026-01-00T00:00:00Z", "no instant"),
            ("2026-00-01T00:00:00Z", "no instant"),
            ("2026-01-01T00:60:00Z", "no instant"),
            ("2026-13-01T00:00:00Z", "no instant"),
            ("2026-01-01T24:00:00Z", "no instant"),
            ("2026-06-30T23:59:60Z", "for the general parser"),
            ("2026-01-01t00:00:00Z", "for the general parser"),
            ("2026-01-01T00:00:00.1234567890Z", "for the general parser"),
            ("2026-01-01T00:00:00+00:00", "for the general parser"),
            ("2026-01-01T00:00:00Z ", "for the general parser"),
            ("x", "for the general parser"),
            ("", "for the general parser"),
        ] {
            assert_eq!(verdict(text), expected, "{text:?}");
            let general = OffsetDateTime::parse(text.trim(), &Rfc3339).ok();
            assert_eq!(instant(text), general, "{text:?}");
        }
        // A leap second is an instant only as the last second of a month
        // (read as the nanosecond before the next): the general parser's
        // rule, which random dates seldom meet.
        for leap in [
            "2026-06-30T23:59:60Z",
            "2026-12-31T23:59:60.5Z",
            "2026-06-15T23:59:60Z",
            "2026-06-30T12:59:60Z",
        ] {
            let general = OffsetDateTime::parse(leap, &Rfc3339).ok();
            assert_eq!(instant(leap), general, "{leap}");
        }
        assert!(instant("2026-06-30T23:59:60Z").is_some());
    }

    fn text(s: &str) -> CursorValue {
        CursorValue::Text(s.into())
    }

    #[test]
    fn timestamps_compare_as_instants_not_as_strings() {
        // As strings, '.' sorts before 'Z': the later instant would lose.
        let later = text("2026-01-01T00:00:00.500Z");
        assert_eq!(later.clone().max(text("2026-01-01T00:00:00Z")).unwrap(), later);
        // 10:00 at +02:00 is 08:00Z: before 09:00Z, though its digits are larger.
        let earlier = text("2026-01-01T10:00:00+02:00");
        let nine = text("2026-01-01T09:00:00Z");
        assert_eq!(earlier.clone().max(nine.clone()).unwrap(), nine);
        assert_eq!(earlier.clone().min(nine).unwrap(), earlier);
        assert_eq!(
            compare_params("2026-01-01T10:00:00+02:00", "2026-01-01T09:00:00Z"),
            Ordering::Less
        );
    }

    #[test]
    fn earlier_keeps_the_form_it_was_given() {
        assert_eq!(
            earlier("2026-01-01T00:10:00Z", 3600).as_deref(),
            Some("2025-12-31T23:10:00Z")
        );
        assert_eq!(
            earlier("2026-01-01T00:10:00.250Z", 1).as_deref(),
            Some("2026-01-01T00:09:59.250Z")
        );
        assert_eq!(
            earlier("2026-01-01T02:00:00.5+02:00", 0).as_deref(),
            Some("2026-01-01T00:00:00.5Z")
        );
        assert_eq!(earlier("42", 1), None);
    }

    #[test]
    fn marks_order_like_values() {
        let values = [
            text("2026-01-01T00:00:00.500Z"),
            text("2026-01-01T00:00:00Z"),
            text("2026-01-01T10:00:00+02:00"),
            text("2026-01-01T09:00:00Z"),
            text("b"),
            text("a"),
        ];
        for a in &values {
            for b in &values {
                assert_eq!(
                    Mark::new(a.clone()).compare(&Mark::new(b.clone())).unwrap(),
                    a.compare(b).unwrap(),
                    "{a:?} {b:?}"
                );
            }
        }
    }

    #[test]
    fn a_seen_value_orders_as_its_mark_would_and_a_mark_set_to_it_holds_it() {
        let texts = [
            "2026-01-01T00:00:00.500Z",
            "2026-01-01T00:00:00Z",
            "2026-01-01T10:00:00+02:00",
            "2026-01-01T09:00:00Z",
            "b",
            "a",
        ];
        let number = Mark::new(CursorValue::Number(7.into()));
        for a in texts {
            let seen = Seen::text(a);
            assert!(seen.against(&number).is_err(), "text against a number");
            let mut moved = number.clone();
            moved.set(&seen);
            assert_eq!(moved.value(), &text(a));
            for b in texts {
                let mark = Mark::new(text(b));
                assert_eq!(
                    seen.against(&mark).unwrap(),
                    Mark::new(text(a)).compare(&mark).unwrap(),
                    "{a} {b}"
                );
                let mut reused = Mark::new(text(b));
                reused.set(&seen);
                assert_eq!(reused.value(), &text(a));
                assert_eq!(reused.is_instant(), seen.is_instant());
                assert_eq!(
                    seen.to_mark().compare(&mark).unwrap(),
                    seen.against(&mark).unwrap()
                );
            }
        }
    }

    #[test]
    fn a_seen_number_orders_as_its_mark_would() {
        let numbers: Vec<serde_json::Number> =
            vec![9.into(), 10.into(), serde_json::Number::from_f64(9.5).unwrap()];
        for a in &numbers {
            let seen = Seen::number(a);
            assert!(
                seen.against(&Mark::new(text("x"))).is_err(),
                "a number against text"
            );
            for b in &numbers {
                let mark = Mark::new(CursorValue::Number(b.clone()));
                let own = Mark::new(CursorValue::Number(a.clone()));
                assert_eq!(
                    seen.against(&mark).unwrap(),
                    own.compare(&mark).unwrap(),
                    "{a} {b}"
                );
                let mut moved = Mark::new(text("x"));
                moved.set(&seen);
                assert_eq!(moved.value(), &CursorValue::Number(a.clone()));
            }
        }
    }

    #[test]
    fn numbers_compare_as_numbers_and_other_text_as_text() {
        assert_eq!(compare_params("9", "10"), Ordering::Less);
        assert_eq!(compare_params("b", "a"), Ordering::Greater);
        let n = |v: u64| CursorValue::Number(v.into());
        assert_eq!(n(9).max(n(10)).unwrap(), n(10));
        assert!(n(1).max(text("x")).is_err());
    }
}

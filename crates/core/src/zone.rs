//! Times a vendor states in a time zone: Castor's PHP `DateTime` objects
//! (`{"date": "2022-06-28 09:13:49.000000", "timezone_type": 3,
//! "timezone": "Europe/Amsterdam"}`, castoredc_api's audit-trail tests;
//! PHP's `DateTime` serialises so) turned into the instants the cursor and
//! the lookback compare, and instants turned back into the calendar dates
//! a vendor's day windows take (`date_from`, `date_to`).
//!
//! The IANA zone database is the one `jiff` bundles, so the same value
//! converts the same on every host whatever its `/usr/share/zoneinfo`
//! holds. A local time that a DST fall-back makes ambiguous takes its
//! earlier instant and one that spring-forward skips its later (RFC 5545's
//! "compatible" rule, PHP's own choice); either is within the hour of the
//! event, which the lookback of a zoned stream (at least an hour) covers.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// An IANA time zone the policy names (`Europe/Amsterdam`), checked when
/// the policy is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    name: String,
    tz: TimeZone,
}

impl Zone {
    /// The zone called `name` in the bundled database, or why not.
    pub fn parse(name: &str) -> Result<Zone, String> {
        let tz = TimeZone::get(name).map_err(|_| {
            format!("{name:?} is not an IANA time zone name (such as Europe/Amsterdam or America/Chicago)")
        })?;
        Ok(Zone {
            name: name.to_string(),
            tz,
        })
    }

    /// Its IANA name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The first instant (RFC 3339, UTC) of the day in this zone that the
    /// RFC 3339 instant `at` falls in.
    pub fn start_of_day(&self, at: &str) -> Result<String, String> {
        let ts: Timestamp = at
            .trim()
            .parse()
            .map_err(|_| format!("{at:?} is not an RFC 3339 instant"))?;
        let day = ts
            .to_zoned(self.tz.clone())
            .start_of_day()
            .map_err(|e| format!("the day of {at}: {e}"))?;
        Ok(day.timestamp().to_string())
    }

    /// The calendar date (`YYYY-MM-DD`) in this zone of the RFC 3339
    /// instant `at`.
    pub fn date_of(&self, at: &str) -> Result<String, String> {
        let ts: Timestamp = at
            .trim()
            .parse()
            .map_err(|_| format!("{at:?} is not an RFC 3339 instant"))?;
        Ok(ts.to_zoned(self.tz.clone()).date().to_string())
    }
}

/// How finely a server-local wall time is written: REDCap's log takes
/// minutes (`beginTime`, `YYYY-MM-DD HH:MM`), its records seconds
/// (`dateRangeBegin`, `YYYY-MM-DD HH:MM:SS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    Minute,
    Second,
}

impl Precision {
    fn unit(self) -> jiff::SignedDuration {
        match self {
            Precision::Minute => jiff::SignedDuration::from_secs(60),
            Precision::Second => jiff::SignedDuration::from_secs(1),
        }
    }

    fn pattern(self) -> &'static str {
        match self {
            Precision::Minute => "%Y-%m-%d %H:%M",
            Precision::Second => "%Y-%m-%d %H:%M:%S",
        }
    }
}

/// How far from a window's edge a DST fall-back can reach its wall times:
/// two hours, longer than any zone's repeated span (an hour; half an hour
/// on Lord Howe Island). Fall-backs are looked for this far after an
/// aligned start, and this far before the end of a window with no start.
const FOLD_REACH: jiff::SignedDuration = jiff::SignedDuration::from_hours(2);

impl Zone {
    /// The instant (RFC 3339, UTC) of a server-local wall time
    /// `YYYY-MM-DD HH:MM[:SS]` (REDCap's log `timestamp`): a time that a
    /// DST fall-back repeats is taken as its *later* instant, so a record
    /// of the repeated hour is remembered at least as long as any reading
    /// of it could come back in a window; one that spring-forward skips
    /// (no server clock shows it) is read with the offset before the gap,
    /// past it.
    pub fn instant_of_wall(&self, text: &str) -> Result<String, String> {
        let civil = wall_time(text)?;
        let instant = self
            .tz
            .to_ambiguous_timestamp(civil)
            .later()
            .map_err(|e| format!("{text:?} in {}: {e}", self.name))?;
        Ok(instant.to_string())
    }

    /// Where a window whose cursor is `start` really starts, aligned to
    /// the wall clock: the earliest instant showing one `precision` unit
    /// before `start`'s own wall time, truncated. Whether the server reads
    /// a bound as inclusive or exclusive ("after", "before": the REDCap API
    /// help leaves it open), the unit `start` falls in is asked for, and
    /// the records of that extra unit are recognised by the lookback.
    ///
    /// Within the repeated hour's length before a DST fall-back, the next
    /// request asks from a unit before the fall-back's first wall time
    /// ([`Zone::wall_bounds`]): the start moves back to it, so the
    /// lookback's memory holds every record that request can bring back.
    pub fn wall_start(&self, start: &str, precision: Precision) -> Result<String, String> {
        let mut shown = before_unit(self.wall(instant(start)?), precision);
        let aligned = self.earliest(shown, start)?;
        let reach = aligned
            .checked_add(FOLD_REACH)
            .map_err(|e| format!("the window start {start}: {e}"))?;
        for (_, after) in self.fall_backs(aligned, reach) {
            shown = shown.min(before_unit(after, precision));
        }
        Ok(self.earliest(shown, start)?.to_string())
    }

    /// The window `[start, end]` (RFC 3339 instants) as the server-local
    /// wall times that cover it, at `precision`, for a server that reads
    /// its bounds inclusively or not: from `start`'s wall time (a window
    /// start is aligned a unit back already, `wall_start`) to `end`'s.
    /// Across a DST fall-back the wall clock runs back an hour: the begin
    /// is then a unit before the first wall time after the change, and the
    /// end a unit past the last one before it, so every record of the
    /// window comes back, with some before and after it, which the lookback
    /// recognises. `start` absent: only `end` is bounded.
    pub fn wall_bounds(
        &self,
        start: Option<&str>,
        end: &str,
        precision: Precision,
    ) -> Result<(Option<String>, String), String> {
        let end_ts = instant(end)?;
        let start_ts = start.map(instant).transpose()?;
        let from = match start_ts {
            Some(s) => s,
            None => end_ts
                .checked_sub(FOLD_REACH)
                .map_err(|e| format!("the window end {end}: {e}"))?,
        };
        let mut begin = start_ts.map(|s| truncated(self.wall(s), precision));
        let mut last = truncated(self.wall(end_ts), precision);
        for (before, after) in self.fall_backs(from, end_ts) {
            begin = begin.map(|b| b.min(before_unit(after, precision)));
            last = last.max(after_unit(before, precision));
        }
        let show = |dt: DateTime| dt.strftime(precision.pattern()).to_string();
        Ok((begin.map(show), show(last)))
    }

    /// The wall time of `ts` here.
    fn wall(&self, ts: Timestamp) -> DateTime {
        ts.to_zoned(self.tz.clone()).datetime()
    }

    /// The earliest instant showing the wall time `shown` (`start` names
    /// the window in errors).
    fn earliest(&self, shown: DateTime, start: &str) -> Result<Timestamp, String> {
        self.tz
            .to_ambiguous_timestamp(shown)
            .earlier()
            .map_err(|e| format!("the window start {start} in {}: {e}", self.name))
    }

    /// The DST fall-backs in `(from, to]`: the last wall time before each
    /// (a second before it) and the first after.
    fn fall_backs(&self, from: Timestamp, to: Timestamp) -> Vec<(DateTime, DateTime)> {
        self.tz
            .following(from)
            .take_while(|change| change.timestamp() <= to)
            .filter_map(|change| {
                let at = change.timestamp();
                let before = self.wall(at - jiff::SignedDuration::from_secs(1));
                let after = self.wall(at);
                (after < before).then_some((before, after))
            })
            .collect()
    }
}

/// `YYYY-MM-DD HH:MM` or `YYYY-MM-DD HH:MM:SS` as a civil time.
fn wall_time(text: &str) -> Result<DateTime, String> {
    let t = text.trim();
    let shaped = t.len() >= 16 && t.as_bytes().get(10) == Some(&b' ');
    let parsed = shaped
        .then(|| t.replacen(' ', "T", 1).parse::<DateTime>().ok())
        .flatten();
    parsed.ok_or_else(|| format!("{text:?} is not a server-local time YYYY-MM-DD HH:MM[:SS]"))
}

/// An RFC 3339 instant.
fn instant(at: &str) -> Result<Timestamp, String> {
    at.trim()
        .parse()
        .map_err(|_| format!("{at:?} is not an RFC 3339 instant"))
}

/// The unit before the one `dt` falls in (itself at the calendar's start).
fn before_unit(dt: DateTime, precision: Precision) -> DateTime {
    let unit = truncated(dt, precision);
    unit.checked_sub(precision.unit()).unwrap_or(unit)
}

/// The unit after the one `dt` falls in (itself at the calendar's end).
fn after_unit(dt: DateTime, precision: Precision) -> DateTime {
    let unit = truncated(dt, precision);
    unit.checked_add(precision.unit()).unwrap_or(unit)
}

/// `dt` cut to whole `precision` units.
fn truncated(dt: DateTime, precision: Precision) -> DateTime {
    let dt = dt.with().subsec_nanosecond(0).build().unwrap_or(dt);
    match precision {
        Precision::Second => dt,
        Precision::Minute => dt.with().second(0).build().unwrap_or(dt),
    }
}

impl serde::Serialize for Zone {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.name)
    }
}

/// The instant (RFC 3339, UTC) of a PHP `DateTime` object, or why it is
/// not one. `timezone_type` 3 names an IANA zone and 1 an offset
/// (`+02:00`); 2, an abbreviation (`CEST`), names no rule and is refused.
pub(crate) fn php_datetime(value: &serde_json::Value) -> Result<String, String> {
    let date = value
        .get("date")
        .and_then(|d| d.as_str())
        .ok_or("a PHP DateTime has a \"date\" string")?;
    let zone = value
        .get("timezone")
        .and_then(|z| z.as_str())
        .ok_or("a PHP DateTime has a \"timezone\" string")?;
    let civil: DateTime = date
        .trim()
        .replacen(' ', "T", 1)
        .parse()
        .map_err(|_| format!("the date {date:?} is not YYYY-MM-DD HH:MM:SS[.ffffff]"))?;
    let tz = match value.get("timezone_type").and_then(|t| t.as_u64()) {
        Some(3) => TimeZone::get(zone).map_err(|_| format!("the time zone {zone:?} is not an IANA name"))?,
        Some(1) => TimeZone::fixed(offset(zone).ok_or_else(|| format!("the offset {zone:?} is not +HH:MM"))?),
        Some(2) => {
            return Err(format!(
                "the time zone {zone:?} is an abbreviation (timezone_type 2), which names no rule"
            ))
        }
        _ => return Err("a PHP DateTime's timezone_type is 1, 2 or 3".into()),
    };
    let zoned = tz.to_zoned(civil).map_err(|e| format!("{date} in {zone}: {e}"))?;
    Ok(zoned.timestamp().to_string())
}

/// Whether a PHP `DateTime` (`value`, at `instant`) falls on another day in
/// `zone` than in the zone it names: that day pair, described, or `None`
/// when they agree. A window of days in the wrong zone asks for days that
/// are not the study's (Castor's study days are its events' zone).
pub(crate) fn other_day(zone: &Zone, value: &serde_json::Value, instant: &str) -> Option<String> {
    let own = value.get("date")?.as_str()?.trim().get(..10)?;
    let named = value
        .get("timezone")
        .and_then(|z| z.as_str())
        .unwrap_or("its zone");
    let ours = zone.date_of(instant).ok()?;
    let fix = match value.get("timezone_type").and_then(|t| t.as_u64()) {
        Some(3) => format!("set delta.window.zone: {named}"),
        _ => "set delta.window.zone to the study's zone".to_string(),
    };
    (ours != own).then(|| {
        format!(
            "stamped {own} in {named}, which is {ours} in {} (delta.window.zone): the study's days are the zone its \
             events name; {fix}",
            zone.name()
        )
    })
}

/// `+HH:MM` or `-HH:MM` as an offset.
fn offset(text: &str) -> Option<jiff::tz::Offset> {
    let (sign, rest) = match text.as_bytes().first()? {
        b'+' => (1, &text[1..]),
        b'-' => (-1, &text[1..]),
        _ => return None,
    };
    let (h, m) = rest.split_once(':')?;
    let (h, m): (i32, i32) = (h.parse().ok()?, m.parse().ok()?);
    if h.to_string().len() > 2 || !(0..=59).contains(&m) || h > 25 {
        return None;
    }
    jiff::tz::Offset::from_seconds(sign * (h * 3600 + m * 60)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn php(date: &str, kind: u64, zone: &str) -> Result<String, String> {
        php_datetime(&serde_json::json!({"date": date, "timezone_type": kind, "timezone": zone}))
    }

    #[test]
    fn a_php_datetime_is_the_instant_its_zone_makes_it() {
        // Summer: CEST, UTC+2.
        assert_eq!(
            php("2022-06-28 09:13:49.000000", 3, "Europe/Amsterdam").unwrap(),
            "2022-06-28T07:13:49Z"
        );
        assert_eq!(
            php("2022-06-28 09:13:49.250000", 3, "Europe/Amsterdam").unwrap(),
            "2022-06-28T07:13:49.25Z"
        );
        // Winter: CET, UTC+1.
        assert_eq!(
            php("2026-12-05 23:59:59.999000", 3, "Europe/Amsterdam").unwrap(),
            "2026-12-05T22:59:59.999Z"
        );
        assert_eq!(
            php("2022-06-28 09:13:49.000000", 1, "+02:00").unwrap(),
            "2022-06-28T07:13:49Z"
        );
        assert!(php("2022-06-28 09:13:49", 2, "CEST")
            .unwrap_err()
            .contains("abbreviation"));
        assert!(php("2022-06-28 09:13:49", 3, "Mars/Olympus").is_err());
        assert!(php("28-06-2022", 3, "Europe/Amsterdam").is_err());
        assert!(php_datetime(&serde_json::json!("2022-06-28")).is_err());
    }

    #[test]
    fn a_dst_change_is_taken_as_php_takes_it() {
        // 2026-10-25: Amsterdam's clocks go from 03:00 CEST back to 02:00
        // CET; 02:30 happens twice, the earlier (CEST) is taken.
        assert_eq!(
            php("2026-10-25 02:30:00.000000", 3, "Europe/Amsterdam").unwrap(),
            "2026-10-25T00:30:00Z"
        );
        // 2026-03-29: from 02:00 CET to 03:00 CEST; 02:30 never happens,
        // the later reading (03:30 CEST) is taken.
        assert_eq!(
            php("2026-03-29 02:30:00.000000", 3, "Europe/Amsterdam").unwrap(),
            "2026-03-29T01:30:00Z"
        );
    }

    #[test]
    fn a_wall_time_of_the_repeated_hour_is_its_later_instant() {
        // 2026-11-01, America/Chicago: 02:00 CDT goes back to 01:00 CST.
        let chi = Zone::parse("America/Chicago").unwrap();
        assert_eq!(
            chi.instant_of_wall("2026-11-01 01:30").unwrap(),
            "2026-11-01T07:30:00Z"
        );
        assert_eq!(
            chi.instant_of_wall("2026-11-01 00:59:59").unwrap(),
            "2026-11-01T05:59:59Z"
        );
        assert_eq!(
            chi.instant_of_wall("2026-11-01 02:00").unwrap(),
            "2026-11-01T08:00:00Z"
        );
        // 2026-03-08: 02:00 CST jumps to 03:00 CDT; 02:30 is never shown.
        assert_eq!(
            chi.instant_of_wall("2026-03-08 02:30").unwrap(),
            "2026-03-08T08:30:00Z"
        );
        assert!(chi.instant_of_wall("2026-11-01T01:30:00Z").is_err());
        assert!(chi.instant_of_wall("01:30").is_err());
    }

    #[test]
    fn a_window_start_is_aligned_one_unit_back_on_the_wall_clock() {
        let chi = Zone::parse("America/Chicago").unwrap();
        // 10:05:30 CST is shown 10:05; a unit back, 10:04, is 16:04Z.
        assert_eq!(
            chi.wall_start("2026-12-01T16:05:30Z", Precision::Minute).unwrap(),
            "2026-12-01T16:04:00Z"
        );
        assert_eq!(
            chi.wall_start("2026-12-01T16:05:30Z", Precision::Second).unwrap(),
            "2026-12-01T16:05:29Z"
        );
        // In the repeated hour (01:20 CST, the second 01:20), the aligned
        // start is the *first* 01:19 (CDT): nothing between is skipped,
        // and the fall-back ahead of it moves it to a unit before the
        // repeated hour (00:59 CDT), where the next request asks from.
        assert_eq!(
            chi.wall_start("2026-11-01T07:20:00Z", Precision::Minute).unwrap(),
            "2026-11-01T05:59:00Z"
        );
        // An hour and more before the fall-back, nothing moves.
        assert_eq!(
            chi.wall_start("2026-11-01T04:30:00Z", Precision::Minute).unwrap(),
            "2026-11-01T04:29:00Z"
        );
        // After the repeated hour, nothing moves either.
        assert_eq!(
            chi.wall_start("2026-11-01T08:30:00Z", Precision::Minute).unwrap(),
            "2026-11-01T08:29:00Z"
        );
    }

    #[test]
    fn a_window_across_a_fall_back_is_asked_for_by_its_widest_wall_times() {
        let chi = Zone::parse("America/Chicago").unwrap();
        let m = Precision::Minute;
        // An ordinary window: its own ends, at minute precision.
        assert_eq!(
            chi.wall_bounds(Some("2026-12-01T16:04:00Z"), "2026-12-01T16:10:59Z", m)
                .unwrap(),
            (Some("2026-12-01 10:04".into()), "2026-12-01 10:10".into())
        );
        // From 01:50 CDT to 01:05 CST: the wall clock ran back at 02:00
        // CDT, so the window is every wall time from 01:00 to 01:59, and
        // a unit either side of it for a server reading bounds strictly.
        assert_eq!(
            chi.wall_bounds(Some("2026-11-01T06:50:00Z"), "2026-11-01T07:05:00Z", m)
                .unwrap(),
            (Some("2026-11-01 00:59".into()), "2026-11-01 02:00".into())
        );
        assert_eq!(
            chi.wall_bounds(
                Some("2026-11-01T06:50:00Z"),
                "2026-11-01T07:05:00Z",
                Precision::Second
            )
            .unwrap(),
            (Some("2026-11-01 00:59:59".into()), "2026-11-01 02:00:00".into())
        );
        // Spring-forward skips an hour: the wall times are monotonic.
        assert_eq!(
            chi.wall_bounds(Some("2026-03-08T07:50:00Z"), "2026-03-08T08:10:00Z", m)
                .unwrap(),
            (Some("2026-03-08 01:50".into()), "2026-03-08 03:10".into())
        );
        // A first window has no start; a fall-back just before its end
        // still widens its end.
        assert_eq!(
            chi.wall_bounds(None, "2026-11-01T07:05:00Z", m).unwrap(),
            (None, "2026-11-01 02:00".into())
        );
    }

    #[test]
    fn an_instant_has_the_date_of_its_zone() {
        let ams = Zone::parse("Europe/Amsterdam").unwrap();
        assert_eq!(ams.date_of("2026-12-05T22:59:59Z").unwrap(), "2026-12-05");
        assert_eq!(ams.date_of("2026-12-05T23:00:00Z").unwrap(), "2026-12-06");
        assert_eq!(ams.date_of("2026-06-30T22:00:00Z").unwrap(), "2026-07-01");
        assert_eq!(
            ams.start_of_day("2026-12-05T22:59:59Z").unwrap(),
            "2026-12-04T23:00:00Z"
        );
        assert_eq!(
            ams.start_of_day("2026-07-01T09:00:00Z").unwrap(),
            "2026-06-30T22:00:00Z"
        );
        // The day the clocks go back has 25 hours; it starts at CEST midnight.
        assert_eq!(
            ams.start_of_day("2026-10-25T20:00:00Z").unwrap(),
            "2026-10-24T22:00:00Z"
        );
        assert!(Zone::parse("Europe/Nowhere").unwrap_err().contains("IANA"));
        assert!(ams.date_of("yesterday").is_err());
    }

    #[test]
    fn an_event_on_another_day_in_the_windows_zone_is_named() {
        let event = serde_json::json!({"date": "2026-10-25 00:09:59.000000", "timezone_type": 3, "timezone": "Europe/Amsterdam"});
        let instant = php_datetime(&event).unwrap();
        let ams = Zone::parse("Europe/Amsterdam").unwrap();
        assert_eq!(other_day(&ams, &event, &instant), None);
        let ny = Zone::parse("America/New_York").unwrap();
        let said = other_day(&ny, &event, &instant).unwrap();
        assert!(
            said.contains("stamped 2026-10-25 in Europe/Amsterdam, which is 2026-10-24 in America/New_York")
                && said.ends_with("set delta.window.zone: Europe/Amsterdam"),
            "{said}"
        );
    }
}

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

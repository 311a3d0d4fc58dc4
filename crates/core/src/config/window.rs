//! `delta.window`: endpoints whose delta is a closed date window, such as
//! Vault's audit trail (`start_date`, `end_date`, at most 30 days back),
//! Castor's by days in a zone, or REDCap's in the server's wall-clock
//! minutes or seconds (`server_timezone`).

use std::time::Duration;

use super::check::{non_negative, string, Fields, Report};
use super::policy::{DateWindow, WindowFormat};
use super::yaml::Node;
use crate::zone::Precision;

const WINDOW_KEYS: [&str; 5] = ["end_param", "max_age_days", "settle_lag_s", "format", "zone"];

/// Seconds a window's end stays behind the server's clock by default, so
/// records still being written are left for the next run.
const DEFAULT_SETTLE_LAG_S: f64 = 60.0;

/// The formats, as the policy spells them.
const FORMATS: &str = "rfc3339 (YYYY-MM-DDTHH:MM:SSZ), date (YYYY-MM-DD in zone, both ends inclusive), \
                       local_minute (YYYY-MM-DD HH:MM) or local_second (YYYY-MM-DD HH:MM:SS) in the server's zone";

/// `server_zone`: the vendor's `server_timezone`, the zone of the
/// `local_*` formats when the window names none.
pub(super) fn window(
    report: &mut Report,
    path: Vec<String>,
    node: &Node,
    server_zone: Option<&crate::zone::Zone>,
) -> Option<DateWindow> {
    let mut f = Fields::of(report, path, node)?;
    let end_param = f
        .required(report, "end_param")
        .and_then(|(p, n)| string(report, &p, n).map(str::to_string));
    let max_age = match f.optional("max_age_days") {
        Some((_, Node::Int(days))) if (1..=3650).contains(days) => {
            Some(Some(Duration::from_secs(*days as u64 * 86_400)))
        }
        Some((p, n)) => {
            report.add(&p, format!("must be a whole number of days in 1..=3650, got {n}"));
            None
        }
        None => Some(None),
    };
    let settle_lag = match f.optional("settle_lag_s") {
        Some((p, n)) => non_negative(report, &p, n, 86_400.0),
        None => Some(DEFAULT_SETTLE_LAG_S),
    };
    let zone_path = f.child("zone");
    let zone = super::check::optional_zone(report, f.optional("zone"));
    let format = match f.optional("format") {
        Some((p, n)) => match string(report, &p, n) {
            Some("rfc3339") => Some("rfc3339"),
            Some("date") => Some("date"),
            Some("local_minute") => Some("local_minute"),
            Some("local_second") => Some("local_second"),
            Some(other) => {
                report.add(&p, format!("must be {FORMATS}, got {other:?}"));
                None
            }
            None => None,
        },
        None => Some("rfc3339"),
    };
    f.finish(report, &WINDOW_KEYS);
    let format = match (format?, zone?) {
        ("date", Some(zone)) => WindowFormat::Date { zone },
        ("date", None) => {
            report.add(
                &zone_path,
                "required key is missing (format: date writes the dates of a time zone, such as Europe/Amsterdam)",
            );
            return None;
        }
        (local @ ("local_minute" | "local_second"), zone) => {
            let precision = match local {
                "local_minute" => Precision::Minute,
                _ => Precision::Second,
            };
            match zone.or_else(|| server_zone.cloned()) {
                Some(zone) => WindowFormat::Local { zone, precision },
                None => {
                    report.add(
                        &zone_path,
                        format!(
                            "required key is missing (format: {local} writes the server's wall-clock time: \
                             set the vendor's server_timezone, such as America/Chicago)"
                        ),
                    );
                    return None;
                }
            }
        }
        (_, Some(_)) => {
            report.add(
                &zone_path,
                "only used with format: date, local_minute or local_second",
            );
            return None;
        }
        _ => WindowFormat::Rfc3339,
    };
    Some(DateWindow {
        end_param: end_param?,
        max_age: max_age?,
        settle_lag: Duration::from_secs_f64(settle_lag?),
        format,
    })
}

//! `delta.window`: endpoints whose delta is a closed date window, such as
//! Vault's audit trail (`start_date`, `end_date`, at most 30 days back).

use std::time::Duration;

use super::check::{non_negative, string, Fields, Report};
use super::policy::{DateWindow, WindowFormat};
use super::yaml::Node;

const WINDOW_KEYS: [&str; 5] = ["end_param", "max_age_days", "settle_lag_s", "format", "zone"];

/// Seconds a window's end stays behind the server's clock by default, so
/// records still being written are left for the next run.
const DEFAULT_SETTLE_LAG_S: f64 = 60.0;

pub(super) fn window(report: &mut Report, path: Vec<String>, node: &Node) -> Option<DateWindow> {
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
    let zone = match f.optional("zone") {
        Some((p, n)) => string(report, &p, n).and_then(|name| match crate::zone::Zone::parse(name) {
            Ok(zone) => Some(Some(zone)),
            Err(e) => {
                report.add(&p, e);
                None
            }
        }),
        None => Some(None),
    };
    let format = match f.optional("format") {
        Some((p, n)) => match string(report, &p, n) {
            Some("rfc3339") => Some("rfc3339"),
            Some("date") => Some("date"),
            Some(other) => {
                report.add(
                    &p,
                    format!(
                        "must be rfc3339 (YYYY-MM-DDTHH:MM:SSZ) or date (YYYY-MM-DD in zone, both ends \
                         inclusive), got {other:?}"
                    ),
                );
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
        (_, Some(_)) => {
            report.add(&zone_path, "only used with format: date");
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

//! `delta.window`: endpoints whose delta is a closed date window, such as
//! Vault's audit trail (`start_date`, `end_date`, at most 30 days back).

use std::time::Duration;

use super::check::{non_negative, string, Fields, Report};
use super::policy::DateWindow;
use super::yaml::Node;

const WINDOW_KEYS: [&str; 3] = ["end_param", "max_age_days", "settle_lag_s"];

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
    f.finish(report, &WINDOW_KEYS);
    Some(DateWindow {
        end_param: end_param?,
        max_age: max_age?,
        settle_lag: Duration::from_secs_f64(settle_lag?),
    })
}

//! Export Logging (`content=log`, REDCap >= 10.8.0; REDCap's API help,
//! "Export Logging"; REDCapR `R/redcap-log-read.R`, redcapAPI
//! `R/exportLogging.R`): a bare JSON array of `timestamp` (`YYYY-MM-DD
//! HH:MM`, the server's local time, no offset), `username`, `action`,
//! `details`, `record`, newest first, the rows `beginTime`..`endTime`
//! (wall-clock minutes) of the `logtype` asked (all but page views when
//! none). Rows carry no id: two identical changes in one minute are two
//! identical rows.

use std::collections::BTreeMap;
use std::time::SystemTime;

use jiff::civil::DateTime;

use super::Wall;
use crate::audit_trail::Arrivals;
use crate::Dataset;

/// The rows of `beginTime`..`endTime`, newest first.
pub(super) fn export(
    config: &crate::SimConfig,
    form: &BTreeMap<String, String>,
    now: SystemTime,
    own_exports: &[i64],
) -> Result<String, String> {
    let clock = Wall::of(config)?;
    let (begin, end) = (
        Wall::bound(form, "beginTime", 16)?,
        Wall::bound(form, "endTime", 16)?,
    );
    let logtype = form.get("logtype").map(String::as_str).unwrap_or("");
    let now_ms = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    // The log states minutes.
    let wall = |ms: i64| {
        let dt = clock.at(ms);
        dt.with().second(0).build().unwrap_or(dt)
    };
    let inside = |at: DateTime| clock.inside(at, begin, end);
    // (instant ms, row): record changes, and this server's own API exports.
    let mut rows: Vec<(i64, serde_json::Value)> = Vec::new();
    if matches!(logtype, "" | "record" | "record_edit") {
        if let Some(arrivals) = &config.audit_trail {
            rows.extend(record_rows(&config.dataset, arrivals, now_ms, &wall, &inside));
        }
    }
    if matches!(logtype, "" | "export") {
        for ms in own_exports.iter().filter(|ms| **ms <= now_ms) {
            let at = wall(*ms);
            if inside(at) {
                rows.push((
                    *ms,
                    serde_json::json!({
                        "timestamp": at.strftime("%Y-%m-%d %H:%M").to_string(),
                        "username": config.username,
                        "action": "Data export (API)",
                        "details": "Export logging (API)",
                        "record": "",
                    }),
                ));
            }
        }
    }
    // Newest first, as REDCap's Logging page and its export list them.
    rows.sort_by_key(|row| std::cmp::Reverse(row.0));
    let rows: Vec<serde_json::Value> = rows.into_iter().map(|(_, row)| row).collect();
    Ok(serde_json::Value::Array(rows).to_string())
}

/// The record changes visible at `now_ms` whose wall minute is inside.
fn record_rows(
    ds: &Dataset,
    arrivals: &Arrivals,
    now_ms: i64,
    wall: &dyn Fn(i64) -> DateTime,
    inside: &dyn Fn(DateTime) -> bool,
) -> Vec<(i64, serde_json::Value)> {
    (1..=ds.records)
        .filter(|n| arrivals.visible_ms(*n) <= now_ms)
        .filter_map(|n| {
            let at = wall(arrivals.stamp_ms(n));
            if !inside(at) {
                return None;
            }
            let shown = arrivals.original(n);
            let rec = ds.record(shown);
            // The fields changed, as REDCap's log lists them; `visit` numbers
            // the change, so a test can tell which it is (a twin shows its
            // original's).
            let row = serde_json::json!({
                "timestamp": at.strftime("%Y-%m-%d %H:%M").to_string(),
                "username": "sim_user",
                "action": format!("Update record {}", rec.subject),
                "details": format!("{} = '{}', visit = '{shown}'", rec.field, rec.value),
                "record": rec.subject.to_string(),
            });
            Some((arrivals.stamp_ms(n), row))
        })
        .collect()
}

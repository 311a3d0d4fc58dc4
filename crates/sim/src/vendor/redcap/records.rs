//! Export Records (`content=record`; REDCap's API help, "Export Records";
//! PyCap `Project.export_records`, REDCapR `R/redcap-read.R`, which reads
//! the ids first and then the records in batches by `records[]`):
//! `format=json`, `type=flat`, a bare JSON array of rows, every row with
//! every column asked (`""` where it does not apply).
//!
//! The project is longitudinal with one arm: each record has a row in event
//! `baseline_arm_1` holding the latest value of each field, and a row of
//! the repeating instrument `visit` in event `followup_arm_1` for each
//! change made to it (`redcap_repeat_instance` 1, 2, ...). Change n of the
//! arrivals is made to record `subject(n)`; a record exists from its first
//! change, and was last modified at its latest.
//!
//! - `dateRangeBegin`/`dateRangeEnd` (`YYYY-MM-DD HH:MM:SS`, the server's
//!   wall clock): the records created or modified between them;
//! - `records[N]`: only those records; `fields[N]`: only those fields
//!   (with the row keys: `record_id`, `redcap_event_name`,
//!   `redcap_repeat_instrument`, `redcap_repeat_instance`);
//! - `exportDataAccessGroups=true`: the column `redcap_data_access_group`
//!   (each record in `site_a` or `site_b`); `exportSurveyFields=true`:
//!   `redcap_survey_identifier` and `visit_timestamp`.
//!
//! A token with restricted rights exports a subset without saying so
//! (REDCap's API help, "Export Records": "if you have 'De-Identified' or
//! 'Remove all tagged Identifier fields' data export rights, then some
//! data fields *might* be removed"; a user in a data access group sees
//! only its records, and no group column): `SimConfig::redcap_rights`
//! plays either. `content=exportFieldNames` and `content=dag` describe the
//! whole project whatever the token.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use super::Wall;

/// The fields of the project, in its data dictionary's order.
const FIELDS: [&str; 6] = ["record_id", "sysbp", "diabp", "hgb", "aeterm", "visit_change"];

/// The columns that say which row of a record a row is.
const ROW_KEYS: [&str; 4] = [
    "record_id",
    "redcap_event_name",
    "redcap_repeat_instrument",
    "redcap_repeat_instance",
];

/// One record as it stands: its changes (numbers), oldest first.
struct Record {
    id: u32,
    changes: Vec<u32>,
    /// When its latest change was made, ms since the epoch.
    modified_ms: i64,
}

/// The field tagged as an identifier, which de-identified rights remove.
const IDENTIFIER: &str = "aeterm";

/// Export List of Export Field Names: every field, as its export names it.
pub(super) fn field_names() -> String {
    let names: Vec<serde_json::Value> = FIELDS
        .iter()
        .map(|f| serde_json::json!({"original_field_name": f, "choice_value": "", "export_field_name": f}))
        .collect();
    serde_json::Value::Array(names).to_string()
}

/// Export DAGs: the project's two data access groups.
pub(super) fn groups() -> String {
    serde_json::json!([
        {"data_access_group_name": "Site A", "unique_group_name": "site_a", "data_access_group_id": 1},
        {"data_access_group_name": "Site B", "unique_group_name": "site_b", "data_access_group_id": 2}
    ])
    .to_string()
}

/// The records of `content=record` for `form` at `now`, deleted ones left out.
pub(super) fn export(
    config: &crate::SimConfig,
    form: &BTreeMap<String, String>,
    now: SystemTime,
    deleted: &BTreeSet<u32>,
) -> Result<String, String> {
    let clock = Wall::of(config)?;
    let (begin, end) = (
        Wall::bound(form, "dateRangeBegin", 19)?,
        Wall::bound(form, "dateRangeEnd", 19)?,
    );
    let listed = |prefix: &str| -> Vec<String> {
        form.iter()
            .filter(|(k, _)| k.starts_with(prefix) && k.ends_with(']'))
            .map(|(_, v)| v.clone())
            .collect()
    };
    let only: BTreeSet<String> = listed("records[").into_iter().collect();
    let fields = listed("fields[");
    let yes = |name: &str| form.get(name).is_some_and(|v| v == "true");
    let now_ms = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let in_group = config.redcap_rights == crate::RedcapRights::OneGroup;
    let records = records(config, now_ms, &only)
        .into_iter()
        .filter(|r| !deleted.contains(&r.id))
        .filter(|r| !in_group || r.id % 2 == 1)
        .filter(|r| only.is_empty() || only.contains(&r.id.to_string()))
        .filter(|r| clock.inside(clock.at(r.modified_ms), begin, end));
    let mut columns: Vec<&str> = ROW_KEYS.to_vec();
    columns.extend(
        FIELDS
            .iter()
            .skip(1)
            .filter(|f| fields.is_empty() || fields.iter().any(|x| x == *f)),
    );
    if config.redcap_rights == crate::RedcapRights::DeIdentified {
        columns.retain(|c| *c != IDENTIFIER);
    }
    // A user in a group gets no group column, asked or not.
    if yes("exportDataAccessGroups") && !in_group {
        columns.push("redcap_data_access_group");
    }
    if yes("exportSurveyFields") {
        columns.extend(["redcap_survey_identifier", "visit_timestamp"]);
    }
    let mut rows = Vec::new();
    for record in records {
        for row in rows_of(config, &clock, &record) {
            let shaped: serde_json::Map<String, serde_json::Value> = columns
                .iter()
                .map(|c| (c.to_string(), row.get(*c).cloned().unwrap_or_default().into()))
                .collect();
            rows.push(serde_json::Value::Object(shaped));
        }
    }
    Ok(serde_json::Value::Array(rows).to_string())
}

/// Every record with a change visible at `now_ms`, by id; only those of
/// `only` when it names any (a batch: the changes of record `id` are
/// `id`, `id + subjects`, ..., so a batch costs its records, not the
/// project's changes).
fn records(config: &crate::SimConfig, now_ms: i64, only: &BTreeSet<String>) -> Vec<Record> {
    let mut by_id: BTreeMap<u32, Record> = BTreeMap::new();
    let Some(arrivals) = &config.audit_trail else {
        return Vec::new();
    };
    let subjects = config.dataset.subjects.max(1);
    let changes: Box<dyn Iterator<Item = u32>> = match only.is_empty() {
        true => Box::new(1..=config.dataset.records),
        false => {
            let ids: BTreeSet<u32> = only.iter().filter_map(|id| id.parse().ok()).collect();
            let records = config.dataset.records;
            Box::new(
                ids.into_iter()
                    .filter(move |id| (1..=subjects).contains(id))
                    .flat_map(move |id| (id..=records).step_by(subjects as usize)),
            )
        }
    };
    for n in changes.filter(|n| arrivals.visible_ms(*n) <= now_ms) {
        let id = config.dataset.record(n).subject;
        let record = by_id.entry(id).or_insert(Record {
            id,
            changes: Vec::new(),
            modified_ms: 0,
        });
        record.changes.push(n);
        record.modified_ms = record.modified_ms.max(arrivals.stamp_ms(n));
    }
    by_id.into_values().collect()
}

/// The rows of `record`: its baseline row, then a visit row per change.
fn rows_of(config: &crate::SimConfig, clock: &Wall, record: &Record) -> Vec<BTreeMap<&'static str, String>> {
    let id = record.id.to_string();
    let group = if record.id % 2 == 1 { "site_a" } else { "site_b" };
    let mut baseline: BTreeMap<&'static str, String> = BTreeMap::new();
    baseline.insert("record_id", id.clone());
    baseline.insert("redcap_event_name", "baseline_arm_1".into());
    baseline.insert("redcap_data_access_group", group.into());
    baseline.insert("redcap_survey_identifier", String::new());
    for n in &record.changes {
        let change = config.dataset.record(*n);
        baseline.insert(field_of(change.field), change.value.to_string());
    }
    let mut rows = vec![baseline];
    for (instance, n) in record.changes.iter().enumerate() {
        let stamp = config.audit_trail.as_ref().map_or(0, |a| a.stamp_ms(*n));
        let mut visit: BTreeMap<&'static str, String> = BTreeMap::new();
        visit.insert("record_id", id.clone());
        visit.insert("redcap_event_name", "followup_arm_1".into());
        visit.insert("redcap_repeat_instrument", "visit".into());
        visit.insert("redcap_repeat_instance", (instance + 1).to_string());
        visit.insert("redcap_data_access_group", group.into());
        visit.insert("redcap_survey_identifier", String::new());
        visit.insert("visit_change", n.to_string());
        visit.insert(
            "visit_timestamp",
            clock.at(stamp).strftime("%Y-%m-%d %H:%M:%S").to_string(),
        );
        rows.push(visit);
    }
    rows
}

/// The project's field for a dataset field name.
fn field_of(field: &str) -> &'static str {
    match field {
        "SYSBP" => "sysbp",
        "DIABP" => "diabp",
        "HGB" => "hgb",
        _ => "aeterm",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit_trail::Arrivals;
    use std::time::{Duration, UNIX_EPOCH};

    /// 12 changes a minute apart from 2026-12-01 16:00Z (10:00 CST), to 4
    /// records.
    fn config() -> crate::SimConfig {
        crate::SimConfig {
            dataset: crate::Dataset {
                subjects: 4,
                records: 12,
                seed: 7,
                padding: 0,
            },
            audit_trail: Some(Arrivals::every(
                UNIX_EPOCH + Duration::from_secs(1_796_140_800),
                Duration::from_secs(60),
            )),
            ..crate::SimConfig::default()
        }
    }

    fn ask(pairs: &[(&str, &str)], now_s: u64, deleted: &[u32]) -> Vec<serde_json::Value> {
        let form = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let now = UNIX_EPOCH + Duration::from_secs(now_s);
        let body = export(&config(), &form, now, &deleted.iter().copied().collect()).unwrap();
        serde_json::from_str::<serde_json::Value>(&body)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    #[test]
    fn the_ids_changed_in_a_range_then_whole_records_by_id() {
        let end = 1_796_140_800 + 3600;
        // Change n is at 10:0n CST, to record (n - 1) % 4 + 1: the last
        // changes of records 1 to 4 are 9, 10, 11 and 12.
        let ids = ask(
            &[
                ("fields[0]", "record_id"),
                ("dateRangeBegin", "2026-12-01 10:09:00"),
                ("dateRangeEnd", "2026-12-01 10:11:00"),
            ],
            end,
            &[],
        );
        let listed: BTreeSet<&str> = ids.iter().map(|r| r["record_id"].as_str().unwrap()).collect();
        assert_eq!(listed, BTreeSet::from(["1", "2", "3"]));
        assert!(ids
            .iter()
            .all(|r| r.get("sysbp").is_none() && r.get("redcap_event_name").is_some()));
        let whole = ask(
            &[("records[0]", "3"), ("exportDataAccessGroups", "true")],
            end,
            &[],
        );
        // Its baseline row and one visit row for each of its three changes.
        assert_eq!(whole.len(), 4, "{whole:?}");
        assert!(whole
            .iter()
            .all(|r| r["record_id"] == "3" && r["redcap_data_access_group"] == "site_a"));
        assert_eq!(whole[3]["redcap_repeat_instance"], "3");
        assert_eq!(whole[3]["visit_change"], "11");
        // A deleted record is in no answer.
        assert!(ask(&[("records[0]", "3")], end, &[3]).is_empty());
        // A change not made yet is not there.
        assert_eq!(ask(&[("records[0]", "1")], 1_796_140_800 + 150, &[]).len(), 2);
    }
}

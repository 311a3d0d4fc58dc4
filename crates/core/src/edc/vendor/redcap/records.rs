//! REDCap's records by batches (`paging: redcap_records`): a window's
//! first page lists the ids of the records created or modified in it (an
//! export of the record id field alone, with the window's date range), and
//! every next page is a batch of whole records named by `records[N]`
//! (REDCap's API help, "Export Records"; REDCapR `redcap_read` reads the
//! ids first, then batches of them). Pure: what a page says becomes the
//! next request, so the rule is tested without a server.
//!
//! The ids live only in memory: a window left part-way is read again from
//! its id list (what it landed is recognised by the lookback). A record
//! the list named and its batch does not hold was deleted in between: the
//! loop audits it, never skips it silently. Every batch is checked against
//! the project's scope (`scope.rs`), and before a run's first id list lands
//! one record exported as the batches will be proves the token's scope.

use std::collections::{BTreeSet, VecDeque};

use reqwest::Url;

use super::scope::Scope;
use crate::config::RestrictedScope;
use crate::edc::vendor::answer::Refused;

/// How a records stream is read: the record id field, the batch size, the
/// window's two date-range parameters (which the batches leave out), and
/// what the policy declares the token may not export.
#[derive(Debug, Clone)]
pub(crate) struct RecordsPaging {
    pub id_field: String,
    pub batch_size: u32,
    pub begin: String,
    pub end: String,
    pub declared: RestrictedScope,
}

/// A records window in progress.
#[derive(Debug)]
pub(crate) struct Records {
    paging: RecordsPaging,
    batches: Batches,
    /// What a full export of the project holds, each batch checked
    /// against it (asked before the window, `facts.rs`).
    scope: Option<Scope>,
    /// A record exported as the batches are has been checked against the
    /// scope this window (before its id list landed).
    scope_proven: bool,
}

/// What follows a page of the records: the next request, the one record to
/// ask first to prove the token's scope (before an id list lands), and the
/// records a batch asked for and did not get.
#[derive(Debug, Default)]
pub(crate) struct AfterRecords {
    pub next: Option<Url>,
    pub probe: Option<Url>,
    pub vanished: Option<Vanished>,
}

impl Records {
    pub(crate) fn new(paging: RecordsPaging) -> Records {
        Records {
            paging,
            batches: Batches::default(),
            scope: None,
            scope_proven: false,
        }
    }

    /// The project's scope, which every batch is checked against.
    pub(crate) fn set_scope(&mut self, scope: Scope) {
        self.scope = Some(scope);
    }

    /// What follows the page `url` (its `body`): after the id list, the
    /// first batch of the ids it names (and, once a window, the record that
    /// proves the scope first); after a batch, the next, with the records
    /// the batch asked for and did not get.
    pub(crate) fn after(&mut self, url: &Url, body: &[u8]) -> Result<AfterRecords, Refused> {
        let mut vanished = None;
        match Kind::of(url) {
            Kind::IdList => {
                self.batches = Batches::listed(body, &self.paging.id_field).map_err(Refused::Invalid)?
            }
            Kind::Batch(asked) => {
                let rows = Rows::of(body, &self.paging.id_field).map_err(Refused::Invalid)?;
                self.check_columns(&rows, url)?;
                let gone = rows.vanished(&asked);
                if !gone.missing.is_empty() {
                    vanished = Some(gone);
                }
            }
        }
        let p = &self.paging;
        let next = self.batches.next(url, p.batch_size, &p.begin, &p.end);
        let unproven = self.scope.is_some() && !self.scope_proven;
        let probe = match (Kind::of(url), &next) {
            (Kind::IdList, Some(batch)) if unproven => Some(first_record(batch)),
            _ => None,
        };
        Ok(AfterRecords {
            next,
            probe,
            vanished,
        })
    }

    /// Checks the answer to [`AfterRecords::probe`] (asked as `probe`): its
    /// columns against the project's. A record deleted since the list
    /// leaves it unproven (every batch is still checked).
    pub(crate) fn prove(&mut self, probe: &Url, body: &[u8]) -> Result<(), Refused> {
        let rows = Rows::of(body, &self.paging.id_field).map_err(Refused::Invalid)?;
        self.check_columns(&rows, probe)?;
        self.scope_proven = rows.columns().is_some();
        Ok(())
    }

    /// Refuses rows that lack what a full export of the project holds,
    /// less what the policy declared (`asked`: the export they answer).
    fn check_columns(&self, rows: &Rows, asked: &Url) -> Result<(), Refused> {
        let groups_asked = asked
            .query_pairs()
            .any(|(k, v)| k == "exportDataAccessGroups" && v == "true");
        let restricted = self
            .scope
            .as_ref()
            .zip(rows.columns())
            .and_then(|(scope, columns)| scope.restricted(columns, groups_asked, &self.paging.declared));
        match restricted {
            Some(what) => Err(Refused::Restricted(what)),
            None => Ok(()),
        }
    }
}

/// The records of a window still to ask for.
#[derive(Debug, Default)]
struct Batches {
    left: VecDeque<String>,
}

/// A page of the records stream: the id list, or a batch.
enum Kind {
    IdList,
    /// The ids it asked for, in order.
    Batch(Vec<String>),
}

/// What a batch page brought back of what it asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Vanished {
    pub asked: usize,
    /// The ids asked for that no row holds (deleted since the list).
    pub missing: Vec<String>,
}

/// The query parameter of a batch's `n`-th record id.
fn record_param(n: usize) -> String {
    format!("records[{n}]")
}

impl Kind {
    /// Which page `url` is: a batch names its records.
    fn of(url: &Url) -> Kind {
        let asked: Vec<String> = url
            .query_pairs()
            .filter(|(k, _)| k.starts_with("records[") && k.ends_with(']'))
            .map(|(_, v)| v.into_owned())
            .collect();
        match asked.is_empty() {
            true => Kind::IdList,
            false => Kind::Batch(asked),
        }
    }
}

impl Batches {
    /// The distinct ids of an id list (`body`: a JSON array of rows, one a
    /// record's event or instance), in the order they first appear.
    fn listed(body: &[u8], id_field: &str) -> Result<Batches, String> {
        let mut seen = BTreeSet::new();
        let left = ids(&rows(body)?, id_field)?
            .into_iter()
            .filter(|id| seen.insert(id.clone()))
            .collect();
        Ok(Batches { left })
    }

    /// The next batch after the page `url` (the id list or a batch): the
    /// same export without the list's own fields (`fields[N]`, the date
    /// range `begin` and `end`) or the last batch's ids, naming the next
    /// `size` records; `None` when none is left.
    fn next(&mut self, url: &Url, size: u32, begin: &str, end: &str) -> Option<Url> {
        if self.left.is_empty() {
            return None;
        }
        let kept: Vec<(String, String)> = url
            .query_pairs()
            .filter(|(k, _)| {
                let array = |prefix: &str| k.starts_with(prefix) && k.ends_with(']');
                !array("fields[") && !array("records[") && k != begin && k != end
            })
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let mut next = url.clone();
        {
            let mut query = next.query_pairs_mut();
            query.clear();
            for (k, v) in &kept {
                query.append_pair(k, v);
            }
            let take = self.left.len().min(size as usize);
            for (n, id) in self.left.drain(..take).enumerate() {
                query.append_pair(&record_param(n), &id);
            }
        }
        Some(next)
    }
}

/// The first record of the batch `batch` alone: what a run asks once,
/// before its first id list lands, to see the columns the batches will
/// have.
fn first_record(batch: &Url) -> Url {
    let first = record_param(0);
    let kept: Vec<(String, String)> = batch
        .query_pairs()
        .filter(|(k, _)| !(k.starts_with("records[") && k.ends_with(']')) || *k == first)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let mut probe = batch.clone();
    probe.query_pairs_mut().clear().extend_pairs(kept);
    probe
}

/// A batch's rows, as far as they are looked at: the record each is of,
/// and the columns of a flat export (every row has them all).
struct Rows {
    ids: Vec<String>,
    columns: Option<BTreeSet<String>>,
}

impl Rows {
    fn of(body: &[u8], id_field: &str) -> Result<Rows, String> {
        let rows = rows(body)?;
        Ok(Rows {
            ids: ids(&rows, id_field)?,
            columns: rows.first().map(|row| row.keys().cloned().collect()),
        })
    }

    /// The columns of the batch (`None`: no rows).
    fn columns(&self) -> Option<&BTreeSet<String>> {
        self.columns.as_ref()
    }

    /// What of `asked` the batch holds no row of.
    fn vanished(&self, asked: &[String]) -> Vanished {
        let present: BTreeSet<&String> = self.ids.iter().collect();
        Vanished {
            asked: asked.len(),
            missing: asked.iter().filter(|id| !present.contains(id)).cloned().collect(),
        }
    }
}

/// A bare JSON array of rows.
fn rows(body: &[u8]) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, String> {
    serde_json::from_slice(body).map_err(|e| format!("the records are not a JSON array of rows: {e}"))
}

/// The `id_field` of every row: a string or a number.
fn ids(rows: &[serde_json::Map<String, serde_json::Value>], id_field: &str) -> Result<Vec<String>, String> {
    rows.iter()
        .enumerate()
        .map(|(n, row)| match row.get(id_field) {
            Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(serde_json::Value::Number(v)) => Ok(v.to_string()),
            _ => Err(format!("row {} has no record id {id_field:?}", n + 1)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(query: &str) -> Url {
        Url::parse(&format!("https://redcap.example/api/?{query}")).unwrap()
    }

    #[test]
    fn an_id_list_becomes_batches_of_whole_records() {
        let list = url(
            "content=record&format=json&type=flat&fields%5B0%5D=record_id&dateRangeBegin=2026-12-01+10%3A00%3A00\
             &dateRangeEnd=2026-12-01+10%3A05%3A00",
        );
        assert!(matches!(Kind::of(&list), Kind::IdList));
        // One row per event or instance: each id once, in order.
        let body = br#"[{"record_id":"7","redcap_event_name":"a"},{"record_id":"7","redcap_event_name":"b"},
                        {"record_id":"3"},{"record_id":12},{"record_id":"5"}]"#;
        let mut batches = Batches::listed(body, "record_id").unwrap();
        let first = batches.next(&list, 3, "dateRangeBegin", "dateRangeEnd").unwrap();
        assert_eq!(
            first.query(),
            Some("content=record&format=json&type=flat&records%5B0%5D=7&records%5B1%5D=3&records%5B2%5D=12")
        );
        let Kind::Batch(asked) = Kind::of(&first) else {
            panic!("a batch")
        };
        assert_eq!(asked, ["7", "3", "12"]);
        let second = batches.next(&first, 3, "dateRangeBegin", "dateRangeEnd").unwrap();
        assert_eq!(
            second.query(),
            Some("content=record&format=json&type=flat&records%5B0%5D=5")
        );
        assert_eq!(batches.next(&second, 3, "dateRangeBegin", "dateRangeEnd"), None);
        assert_eq!(
            first_record(&first).query(),
            Some("content=record&format=json&type=flat&records%5B0%5D=7")
        );
        let mut none = Batches::listed(b"[]", "record_id").unwrap();
        assert_eq!(none.next(&list, 3, "dateRangeBegin", "dateRangeEnd"), None);
    }

    #[test]
    fn a_record_deleted_since_the_list_is_named() {
        let asked = ["7".to_string(), "3".to_string()];
        let body = br#"[{"record_id":"7","x":"1"},{"record_id":"7","x":"2"}]"#;
        let rows = Rows::of(body, "record_id").unwrap();
        assert_eq!(rows.columns().unwrap().len(), 2);
        assert_eq!(
            rows.vanished(&asked),
            Vanished {
                asked: 2,
                missing: vec!["3".into()]
            }
        );
        assert!(Batches::listed(br#"[{"id":"1"}]"#, "record_id")
            .unwrap_err()
            .contains("row 1 has no record id"));
        assert!(Batches::listed(b"<html>", "record_id").is_err());
    }
}

//! The `delta` block of a policy: the endpoint, its format and paging, the
//! cursor, and the optional date `window` and `vql` sub-blocks.

use super::check::{integer, json_pointer, or_default, query_map, string, template, Fields, Report};
use super::policy::{CursorKind, Delta, Paging, PayloadFormat, RecordOrder};
use super::yaml::Node;

const DEFAULT_NEXT_POINTER: &str = "/responseDetails/next_page";

const DEFAULT_MAX_PAGES_PER_WINDOW: i64 = 100_000;

const NOT_WITH_COLLECTION: &str =
    "not used with delta.collection (a collection has no since-filter: every run reads it whole)";

/// The page number's query parameter when the policy names none
/// (Castor's, as castoredc_api and Airbyte's source-castor-edc send it).
const DEFAULT_PAGE_PARAM: &str = "page";

/// Records a REDCap batch asks for when the policy names no size (REDCapR
/// `redcap_read` reads 100 records a batch by default).
const DEFAULT_BATCH_SIZE: i64 = 100;

const DELTA_KEYS: [&str; 21] = [
    "restricted_scope",
    "record_id_field",
    "batch_size",
    "collection",
    "lookback",
    "page_param",
    "vql",
    "order",
    "window",
    "path",
    "format",
    "paging",
    "next_pointer",
    "records_pointer",
    "cursor_param",
    "cursor_field",
    "cursor_kind",
    "page_size_param",
    "page_size",
    "max_pages_per_window",
    "query",
];

/// `server_zone`: the vendor's `server_timezone`, if it states one.
pub(super) fn delta(
    report: &mut Report,
    path: Vec<String>,
    node: &Node,
    server_zone: Option<&crate::zone::Zone>,
) -> Option<Delta> {
    let mut f = Fields::of(report, path, node)?;
    let endpoint = f.required(report, "path").and_then(|(p, n)| {
        let t = template(report, &p, n)?;
        if t.as_str().starts_with("//") {
            report.add(
                &p,
                format!(
                    "must not start with '//' (that names another host), got {:?}",
                    t.as_str()
                ),
            );
            None
        } else if t
            .as_str()
            .split(['/', '?'])
            .any(|segment| segment == "." || segment == "..")
        {
            report.add(
                &p,
                format!(
                    "holds a '.' or '..' segment, which would ask for another path than the one named, got {:?}",
                    t.as_str()
                ),
            );
            None
        } else if t.as_str().starts_with('/') {
            Some(t)
        } else {
            report.add(&p, format!("must start with '/', got {:?}", t.as_str()));
            None
        }
    });
    let format = f
        .required(report, "format")
        .and_then(|(p, n)| match string(report, &p, n)? {
            "json" => Some(PayloadFormat::Json),
            "odm" => Some(PayloadFormat::Odm),
            other => {
                report.add(&p, format!("must be one of json, odm; got {other:?}"));
                None
            }
        });
    let paging_path = f.child("paging");
    let paging_name = f.required(report, "paging").and_then(|(p, n)| {
        let s = string(report, &p, n)?;
        match s {
            "json_next" | "link_header" | "page_number" | "rave_startid" | "rave_dataset"
            | "whole_window" | "redcap_records" => Some(s),
            other => {
                report.add(
                    &p,
                    format!(
                        "must be one of json_next, link_header, page_number, rave_startid, rave_dataset, \
                         whole_window, redcap_records; got {other:?}"
                    ),
                );
                None
            }
        }
    });
    let next_pointer = f.optional("next_pointer");
    let next_pointer_path = f.child("next_pointer");
    let page_param_path = f.child("page_param");
    let page_param = match f.optional("page_param") {
        Some((p, n)) => string(report, &p, n).map(|s| Some(s.to_string())),
        None => Some(None),
    };
    let next_pointer = match next_pointer {
        Some((p, n)) => json_pointer(report, &p, n).map(Some),
        None => Some(None),
    };
    let records_pointer = match f.optional("records_pointer") {
        Some((p, n)) => json_pointer(report, &p, n).map(Some),
        None => Some(None),
    };
    // A VQL delta carries its cursor and page size inside the query.
    let vql = match f.optional("vql") {
        Some((p, n)) => super::vql::vql(report, p, n).map(Some),
        None => Some(None),
    };
    let is_vql = matches!(vql, Some(Some(_)));
    // A live collection read whole: no since-filter, no cursor field.
    let collection_path = f.child("collection");
    let collection = match f.optional("collection") {
        Some((p, n)) => super::collection::collection(report, p, n).map(Some),
        None => Some(None),
    };
    let is_collection = matches!(collection, Some(Some(_)));
    // A Rave study dataset is one document a run, a whole window one
    // document a window: nothing to page by.
    let is_dataset = paging_name == Some("rave_dataset");
    let is_batches = paging_name == Some("redcap_records");
    let one_document = is_dataset || is_batches || paging_name == Some("whole_window");
    let one_document_why = match paging_name {
        Some("whole_window") => "not used with paging: whole_window (a window is one document)",
        Some("redcap_records") => "not used with paging: redcap_records (its pages are batches: batch_size)",
        _ => "not used with paging: rave_dataset (a study dataset is one document)",
    };
    // REDCap's records: the ids changed in a window, then batches of them.
    let record_id_field_path = f.child("record_id_field");
    let record_id_field = match f.optional("record_id_field") {
        Some((p, n)) => string(report, &p, n).map(|s| Some(s.to_string())),
        None => Some(None),
    };
    let batch_size_path = f.child("batch_size");
    let batch_size = or_default(f.optional("batch_size"), DEFAULT_BATCH_SIZE, |p, n| {
        integer(report, p, n, 1, 1000)
    });
    let declared = match f.optional("restricted_scope") {
        Some((p, n)) if is_batches => super::redcap::restricted_scope(report, p, n),
        Some((p, _)) => {
            report.add(&p, "only used with paging: redcap_records");
            None
        }
        None => Some(Default::default()),
    };
    let batch_keys_given = match (&record_id_field, f.optional("batch_size")) {
        (Some(Some(_)), _) => Some(record_id_field_path.clone()),
        (_, Some(_)) => Some(batch_size_path.clone()),
        _ => None,
    };
    let param = |f: &mut Fields, report: &mut Report, key: &str| {
        if is_vql {
            if f.optional(key).is_some() {
                report.add(&f.child(key), "not used with delta.vql (the query carries it)");
            }
            Some(String::new())
        } else if is_collection && key == "cursor_param" {
            if f.optional(key).is_some() {
                report.add(&f.child(key), NOT_WITH_COLLECTION);
            }
            Some(String::new())
        } else if one_document && key == "page_size_param" {
            if f.optional(key).is_some() {
                report.add(&f.child(key), one_document_why);
            }
            Some(String::new())
        } else {
            f.required(report, key)
                .and_then(|(p, n)| string(report, &p, n).map(str::to_string))
        }
    };
    let cursor_param = param(&mut f, report, "cursor_param");
    let cursor_field = match f.optional("cursor_field") {
        Some((p, _)) if is_collection => {
            report.add(&p, NOT_WITH_COLLECTION);
            None
        }
        Some((p, _)) if is_batches => {
            report.add(
                &p,
                "not used with paging: redcap_records (a record carries no time: the window's date range finds it)",
            );
            None
        }
        Some((p, n)) => string(report, &p, n).map(|s| Some(s.to_string())),
        None => Some(None),
    };
    let cursor_kind_path = f.child("cursor_kind");
    let cursor_kind_entry = f.optional("cursor_kind");
    let cursor_kind_given = cursor_kind_entry.is_some();
    let cursor_kind = or_default(cursor_kind_entry, CursorKind::Timestamp, |p, n| {
        match string(report, p, n)? {
            "timestamp" => Some(CursorKind::Timestamp),
            "number" => Some(CursorKind::Number),
            "text" => Some(CursorKind::Text),
            "php_datetime" => Some(CursorKind::PhpDatetime),
            "server_local" => Some(CursorKind::ServerLocal),
            other => {
                report.add(
                    p,
                    format!(
                        "must be one of timestamp, number, text, php_datetime, server_local; got {other:?}"
                    ),
                );
                None
            }
        }
    });
    let page_size_param = param(&mut f, report, "page_size_param");
    let page_size = if one_document {
        if f.optional("page_size").is_some() {
            report.add(&f.child("page_size"), one_document_why);
        }
        Some(1)
    } else {
        f.required(report, "page_size")
            .and_then(|(p, n)| integer(report, &p, n, 1, 100_000))
    };
    let query = match f.optional("query") {
        Some((p, n)) => query_map(report, p, n),
        None => Some(Vec::new()),
    };
    let max_pages = or_default(
        f.optional("max_pages_per_window"),
        DEFAULT_MAX_PAGES_PER_WINDOW,
        |p, n| integer(report, p, n, 1, 100_000_000),
    );
    let order = or_default(
        f.optional("order"),
        RecordOrder::Ascending,
        |p, n| match string(report, p, n)? {
            "ascending" => Some(RecordOrder::Ascending),
            "newest_first" => Some(RecordOrder::NewestFirst),
            "unordered" => Some(RecordOrder::Unordered),
            other => {
                report.add(
                    p,
                    format!("must be one of ascending, newest_first, unordered; got {other:?}"),
                );
                None
            }
        },
    );
    let window = match f.optional("window") {
        Some((p, n)) => super::window::window(report, p, n, server_zone).map(Some),
        None => Some(None),
    };
    let lookback_path = f.child("lookback");
    let lookback_entry = f.optional("lookback");
    let vql_path = f.child("vql");
    let f_window_path = f.child("window");
    let records_pointer_path = f.child("records_pointer");
    let cursor_field_path = f.child("cursor_field");
    f.finish(report, &DELTA_KEYS);

    // Cross-key rules: each paging style fits one payload format, and JSON
    // needs to know where its records and its high-water mark are.
    let (format, paging_name, next_pointer, page_param) = (format?, paging_name?, next_pointer?, page_param?);
    let paging = match (paging_name, format) {
        ("json_next", PayloadFormat::Json) => Paging::JsonNext {
            next_pointer: next_pointer
                .clone()
                .unwrap_or_else(|| DEFAULT_NEXT_POINTER.to_string()),
        },
        ("json_next", PayloadFormat::Odm) => {
            report.add(&paging_path, "json_next paging needs format: json");
            return None;
        }
        ("rave_startid", PayloadFormat::Json) => {
            report.add(&paging_path, "rave_startid paging needs format: odm");
            return None;
        }
        ("rave_startid", PayloadFormat::Odm) => Paging::RaveStartid,
        ("rave_dataset", PayloadFormat::Json) => {
            report.add(&paging_path, "rave_dataset paging needs format: odm");
            return None;
        }
        ("rave_dataset", PayloadFormat::Odm) => Paging::RaveDataset,
        ("whole_window", PayloadFormat::Json) => Paging::WholeWindow,
        ("redcap_records", PayloadFormat::Json) => match (record_id_field.clone()?, batch_size?) {
            (Some(id_field), size) => Paging::RedcapRecords {
                id_field,
                batch_size: u32::try_from(size).ok()?,
                declared: declared.clone()?,
            },
            (None, _) => {
                report.add(
                    &record_id_field_path,
                    "required key is missing (paging: redcap_records lists the ids changed in a window by this \
                     field, the project's first, such as record_id)",
                );
                return None;
            }
        },
        ("redcap_records", PayloadFormat::Odm) => {
            report.add(&paging_path, "redcap_records paging needs format: json");
            return None;
        }
        ("whole_window", PayloadFormat::Odm) => {
            report.add(&paging_path, "whole_window paging needs format: json");
            return None;
        }
        ("page_number", PayloadFormat::Json) => Paging::PageNumber {
            page_param: page_param
                .clone()
                .unwrap_or_else(|| DEFAULT_PAGE_PARAM.to_string()),
        },
        ("page_number", PayloadFormat::Odm) => {
            report.add(&paging_path, "page_number paging needs format: json");
            return None;
        }
        _ => Paging::LinkHeader,
    };
    if let Some(given) = batch_keys_given.filter(|_| !is_batches) {
        report.add(&given, "only used with paging: redcap_records");
    }
    if page_param.is_some() && !matches!(paging, Paging::PageNumber { .. }) {
        report.add(&page_param_path, "only used with paging: page_number");
    }
    if is_vql && matches!(window, Some(Some(_))) {
        report.add(&vql_path, "a VQL delta is not a date window: remove delta.window");
        return None;
    }
    if is_vql && !matches!(paging, Paging::JsonNext { .. }) {
        report.add(
            &paging_path,
            "delta.vql needs paging: json_next (Vault's next_page)",
        );
        return None;
    }
    if next_pointer.is_some() && !matches!(paging, Paging::JsonNext { .. }) {
        report.add(&next_pointer_path, "only used with paging: json_next");
    }
    let collection = collection?;
    if collection.is_some() {
        if !matches!(paging, Paging::PageNumber { .. }) {
            report.add(
                &collection_path,
                "needs paging: page_number (a collection is read by its page numbers, 1 to page_count)",
            );
            return None;
        }
        for (given, path) in [
            (matches!(window, Some(Some(_))), &f_window_path),
            (lookback_entry.is_some(), &lookback_path),
            (is_vql, &vql_path),
        ] {
            if given {
                report.add(path, NOT_WITH_COLLECTION);
                return None;
            }
        }
    }
    let (records_pointer, cursor_field) = (records_pointer?, cursor_field?);
    if format == PayloadFormat::Json {
        if records_pointer.is_none() {
            report.add(&records_pointer_path, "required key is missing (format: json)");
        }
        if cursor_field.is_none() && collection.is_none() && !is_batches {
            report.add(&cursor_field_path, "required key is missing (format: json)");
        }
    }
    if format == PayloadFormat::Odm && cursor_kind_given {
        report.add(
            &cursor_kind_path,
            "only used with format: json (an ODM cursor is the AuditRecord SourceID, a number)",
        );
    }
    if format == PayloadFormat::Json
        && (records_pointer.is_none() || (cursor_field.is_none() && collection.is_none() && !is_batches))
    {
        return None;
    }
    // A lookback re-reads a span of time: only a timestamp cursor has one.
    let (window, cursor_kind) = (window?, cursor_kind?);
    if is_dataset && window.is_some() {
        report.add(
            &f_window_path,
            "not used with paging: rave_dataset (its cursor is the document's time)",
        );
        return None;
    }
    if paging == Paging::WholeWindow && window.is_none() {
        report.add(
            &paging_path,
            "whole_window paging needs a delta.window (each window is asked for in one request)",
        );
        return None;
    }
    if is_batches && window.is_none() {
        report.add(
            &paging_path,
            "redcap_records paging needs a delta.window (the records changed in a window are read)",
        );
        return None;
    }
    if cursor_kind == CursorKind::ServerLocal && server_zone.is_none() {
        report.add(
            &cursor_kind_path,
            "server_local needs the vendor's server_timezone (the zone the server's clock shows, such as \
             America/Chicago)",
        );
        return None;
    }
    let default_s = if is_dataset {
        Some(super::lookback::DEFAULT_DATASET_LOOKBACK_S)
    } else {
        super::lookback::default_seconds(format, cursor_kind, window.is_some())
    };
    let lookback = match (lookback_entry, default_s) {
        (Some((p, _)), None) => {
            report.add(&p, super::lookback::NOT_A_TIME);
            return None;
        }
        (Some((p, n)), Some(default_s)) => super::lookback::lookback(report, p, n, default_s)?,
        (None, default_s) => super::lookback::default(default_s.unwrap_or(0)),
    };
    // A dataset's `start` has whole seconds: its boundary second is always
    // read again, and recognised, even with `seconds: 0`; so is the day a
    // window of whole days starts in.
    let whole_units = window.as_ref().is_some_and(|w| w.format.reads_before_start());
    let lookback =
        (collection.is_none() && (is_dataset || whole_units || !lookback.span.is_zero())).then_some(lookback);
    Some(Delta {
        path: endpoint?,
        format,
        paging,
        records_pointer,
        cursor_param: cursor_param?,
        cursor_field,
        cursor_kind,
        page_size_param: page_size_param?,
        page_size: u32::try_from(page_size?).ok()?,
        max_pages_per_window: u64::try_from(max_pages?).ok()?,
        order: order?,
        window,
        lookback,
        vql: vql?,
        query: query?,
        collection,
        server_zone: server_zone.cloned(),
    })
}

//! What a REDCap policy must be (`dialect: redcap`): every request is an
//! export POSTed to the project's API URL with the token in its form
//! (REDCap's API help; PyCap `redcap/request.py`), so the auth scheme is
//! `redcap_token` and only with this dialect, each delta's path is `/`
//! (the API URL itself), and each stream exports one read content (the
//! closed set of `redcap_export.rs`) with only the fields that export
//! documents, never with a `token`.

use super::check::{string, Fields, Report};
use super::policy::{Auth, Delta, Dialect, Paging, RestrictedScope, StreamSpec};
use super::redcap_export::ExportContent;
use super::yaml::Node;

/// Reports what in a vendor's policy does not fit REDCap's one request
/// shape. `at` is the vendor's path in the file.
pub(super) fn check(
    report: &mut Report,
    at: &[String],
    dialect: Dialect,
    auth: &Auth,
    delta: Option<&Delta>,
    streams: &[StreamSpec],
) {
    let child = |keys: &[&str]| {
        let mut p = at.to_vec();
        p.extend(keys.iter().map(|k| k.to_string()));
        p
    };
    let form_token = matches!(auth, Auth::RedcapToken { .. });
    if dialect != Dialect::Redcap {
        if form_token {
            report.add(
                &child(&["auth", "scheme"]),
                "redcap_token is REDCap's: it needs dialect: redcap",
            );
        }
        return;
    }
    if !form_token {
        report.add(
            &child(&["auth", "scheme"]),
            "dialect: redcap needs auth.scheme: redcap_token (REDCap takes its token as a form field of every \
             export, never a header)",
        );
    }
    for stream in streams {
        let (delta, delta_at) = match (&stream.delta, delta) {
            (Some(own), _) => (&**own, vec!["streams", stream.name.as_str(), "delta"]),
            (None, Some(d)) => (d, vec!["delta"]),
            (None, None) => continue,
        };
        if delta.path.as_str() != "/" {
            let mut p = delta_at.clone();
            p.push("path");
            report.add(
                &child(&p),
                format!(
                    "must be \"/\": every REDCap export goes to the API URL itself (the base URL), got {:?}",
                    delta.path.as_str()
                ),
            );
        }
        // Every form field this stream's exports carry, with the key that
        // names it: the queries, the window's two bounds, a page size or
        // number, and the id list's and batches' own arrays.
        let key = |tail: &[&str]| {
            let mut p = delta_at.clone();
            p.extend_from_slice(tail);
            child(&p)
        };
        let mut named: Vec<(&str, Option<&str>, Vec<String>)> = Vec::new();
        for (name, value) in &delta.query {
            named.push((name, Some(value.as_str()), key(&["query", name])));
        }
        for (name, value) in &stream.query {
            named.push((
                name,
                Some(value.as_str()),
                child(&["streams", &stream.name, "query", name]),
            ));
        }
        for (name, tail) in [
            (&delta.cursor_param, &["cursor_param"][..]),
            (&delta.page_size_param, &["page_size_param"][..]),
        ] {
            if !name.is_empty() {
                named.push((name, None, key(tail)));
            }
        }
        if let Some(window) = &delta.window {
            named.push((&window.end_param, None, key(&["window", "end_param"])));
        }
        match &delta.paging {
            Paging::PageNumber { page_param } => named.push((page_param, None, key(&["page_param"]))),
            Paging::RedcapRecords { .. } => {
                for own in ["fields[0]", "records[0]"] {
                    named.push((own, None, key(&["paging"])));
                }
            }
            _ => {}
        }
        let contents: Vec<_> = named.iter().filter(|(name, ..)| *name == "content").collect();
        let content = match contents.as_slice() {
            [(_, Some(value), at)] => match ExportContent::parse(value) {
                Some(content) => Some(content),
                None => {
                    report.add(
                        at,
                        format!(
                            "must be a read content (version, project, metadata, exportFieldNames, dag, record, \
                             log), got {value:?}"
                        ),
                    );
                    None
                }
            },
            _ => {
                report.add(
                    &child(&["streams", &stream.name, "query"]),
                    "must name exactly one content (the delta's query or the stream's), such as content: log",
                );
                None
            }
        };
        for (i, (name, value, at)) in named.iter().enumerate() {
            // A field takes one value: one the window or another key
            // writes too would be sent twice (an array's `[N]` is many).
            let earlier = named[..i]
                .iter()
                .find(|(other, ..)| other == name && !name.ends_with(']'));
            if let Some((_, _, first)) = earlier {
                report.add(
                    at,
                    format!(
                        "names the form field {name:?}, which {} writes already: a field is sent once",
                        first.join(".")
                    ),
                );
                continue;
            }
            match (*name, value) {
                ("content", _) => {}
                ("token", _) => report.add(
                    at,
                    "must not name token: the token goes in the form body only (token_env)",
                ),
                ("action", Some(value)) if *value != "export" => report.add(
                    at,
                    format!("edc-sync only exports (action absent or export), got {value:?}"),
                ),
                _ => {
                    if let Some(Err(refused)) = content.map(|c| c.admits(name)) {
                        report.add(at, refused.to_string());
                    }
                }
            }
        }
    }
}

/// `restricted_scope: {fields: [...], one_group: true}`.
pub(super) fn restricted_scope(
    report: &mut Report,
    path: Vec<String>,
    node: &Node,
) -> Option<RestrictedScope> {
    let mut f = Fields::of(report, path, node)?;
    let fields = match f.optional("fields") {
        Some((p, Node::Seq(items))) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let mut ip = p.clone();
                ip.push(i.to_string());
                out.extend(string(report, &ip, item).map(str::to_string));
            }
            (out.len() == items.len()).then_some(out)
        }
        Some((p, other)) => {
            report.add(&p, format!("must be a list of field names, got {}", other.kind()));
            None
        }
        None => Some(Vec::new()),
    };
    let one_group = match f.optional("one_group") {
        Some((_, Node::Bool(b))) => Some(*b),
        Some((p, other)) => {
            report.add(&p, format!("must be true or false, got {other}"));
            None
        }
        None => Some(false),
    };
    f.finish(report, &["fields", "one_group"]);
    Some(RestrictedScope {
        fields: fields?,
        one_group: one_group?,
    })
}

//! What a REDCap policy must be (`dialect: redcap`): every request is an
//! export POSTed to the project's API URL with the token in its form
//! (REDCap's API help; PyCap `redcap/request.py`), so the auth scheme is
//! `redcap_token` and only with this dialect, each delta's path is `/`
//! (the API URL itself), and each stream exports one read content (the
//! closed set of `edc/vendor/redcap/export.rs`), never with a `token`.

use super::check::{string, Fields, Report};
use super::policy::{Auth, Delta, Dialect, RestrictedScope, StreamSpec};
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
        let fields = delta.query.iter().chain(stream.query.iter());
        let mut contents = Vec::new();
        for (name, value) in fields {
            match name.as_str() {
                "token" => report.add(
                    &child(&["streams", &stream.name, "query"]),
                    "must not name token: the token goes in the form body only (token_env)",
                ),
                "content" => contents.push(value.as_str().to_string()),
                "action" if value.as_str() != "export" => report.add(
                    &child(&["streams", &stream.name, "query", "action"]),
                    format!(
                        "edc-sync only exports (action absent or export), got {:?}",
                        value.as_str()
                    ),
                ),
                _ => {}
            }
        }
        match contents.as_slice() {
            [one] if ExportContent::parse(one).is_some() => {}
            [one] => report.add(
                &child(&["streams", &stream.name, "query", "content"]),
                format!(
                    "must be a read content (version, project, metadata, exportFieldNames, dag, record, log), got \
                     {one:?}"
                ),
            ),
            _ => report.add(
                &child(&["streams", &stream.name, "query"]),
                "must name exactly one content (the delta's query or the stream's), such as content: log",
            ),
        }
    }
}

/// The contents edc-sync may export: every one a read (REDCap's API help,
/// "Export ..." methods). Imports, deletes, renames, file uploads and
/// every other content have no variant, so no such request can be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportContent {
    /// Export REDCap Version (`content=version`): plain text `14.0.1`.
    Version,
    /// Export Project Info.
    Project,
    /// Export Metadata (Data Dictionary).
    Metadata,
    /// Export List of Export Field Names.
    ExportFieldNames,
    /// Export DAGs.
    Dag,
    /// Export Records (`action` absent or `export`).
    Record,
    /// Export Logging (REDCap 10.8.0 and later).
    Log,
}

impl ExportContent {
    /// Every content, in the order the API help lists them.
    pub const ALL: [ExportContent; 7] = [
        ExportContent::Version,
        ExportContent::Project,
        ExportContent::Metadata,
        ExportContent::ExportFieldNames,
        ExportContent::Dag,
        ExportContent::Record,
        ExportContent::Log,
    ];

    /// Its form value.
    pub fn as_str(self) -> &'static str {
        match self {
            ExportContent::Version => "version",
            ExportContent::Project => "project",
            ExportContent::Metadata => "metadata",
            ExportContent::ExportFieldNames => "exportFieldNames",
            ExportContent::Dag => "dag",
            ExportContent::Record => "record",
            ExportContent::Log => "log",
        }
    }

    /// The content named `value`, if it is one of the read contents.
    pub fn parse(value: &str) -> Option<ExportContent> {
        ExportContent::ALL.into_iter().find(|c| c.as_str() == value)
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

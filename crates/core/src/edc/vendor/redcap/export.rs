//! REDCap's one request shape: an export, `POST {API URL}` with form
//! fields (REDCap's API help: "all API requests are POST"; PyCap
//! `redcap/request.py` `_RCRequest` posts `payload` as form data; REDCapR
//! and redcapAPI `makeApiCall` the same). The token is a form field, never
//! a header or a URL parameter.
//!
//! Read-only by construction: `content` is one of a closed set of read
//! contents ([`Content`]), every other field one that content's export
//! documents (an allow-list, `config/redcap_export.rs`), `action` absent or
//! `export`, and the form is built here from a page key. A page key is the API URL with the export's
//! fields as its query (`...api/?content=log&format=json&beginTime=...`):
//! that is what the audit trail and the manifest name, with no token in
//! it, and what the page loop's windows and lookback already handle. The
//! client sends it only to the configured API URL, with the query moved
//! into the body and the token added.

use reqwest::Url;

pub(crate) use crate::config::ExportContent as Content;

/// Why a page key is not an export edc-sync may send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAnExport {
    #[error("{url}: a REDCap request goes to the API URL {api} only")]
    OtherUrl { url: String, api: String },
    #[error("{url}: a REDCap export names its content")]
    NoContent { url: String },
    #[error(
        "{url}: content={content:?} is not one of the read contents edc-sync exports (version, project, metadata, \
         exportFieldNames, dag, record, log)"
    )]
    NotARead { url: String, content: String },
    #[error("{url}: action={action:?}: edc-sync only exports (action absent or export)")]
    NotExport { url: String, action: String },
    /// `api` only: the URL holds the token, and is never shown.
    #[error("{api}: a request whose URL holds token= was refused unsent: the token is never a URL parameter; it goes in the form body only")]
    TokenInUrl { api: String },
    #[error("{url}: the field {field:?} is given twice")]
    Twice { url: String, field: String },
    /// A field the content's export does not document, or a name PHP
    /// would read as another (`config/redcap_export.rs`).
    #[error("{url}: {refused}")]
    NotAField {
        url: String,
        refused: crate::config::FieldRefused,
    },
}

/// One export request: its content and the other form fields, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Export {
    content: Content,
    fields: Vec<(String, String)>,
}

impl Export {
    /// The export a page key asks for, when `key` is the API URL `api`
    /// with a read export's fields as its query.
    pub(crate) fn of_page(key: &Url, api: &Url) -> Result<Export, NotAnExport> {
        let url = key.to_string();
        let mut bare = key.clone();
        bare.set_query(None);
        bare.set_fragment(None);
        if bare != *api {
            return Err(NotAnExport::OtherUrl {
                url,
                api: api.to_string(),
            });
        }
        let pairs: Vec<(String, String)> = key.query_pairs().into_owned().collect();
        if pairs.iter().any(|(name, _)| name == "token") {
            return Err(NotAnExport::TokenInUrl { api: api.to_string() });
        }
        let content = match pairs
            .iter()
            .filter(|(name, _)| name == "content")
            .collect::<Vec<_>>()[..]
        {
            [] => return Err(NotAnExport::NoContent { url }),
            [(_, value)] => Content::parse(value).ok_or_else(|| NotAnExport::NotARead {
                url: url.clone(),
                content: value.clone(),
            })?,
            _ => {
                return Err(NotAnExport::Twice {
                    url,
                    field: "content".into(),
                })
            }
        };
        let mut fields: Vec<(String, String)> = Vec::new();
        for (name, value) in pairs {
            if name == "content" {
                continue;
            }
            content.admits(&name).map_err(|refused| NotAnExport::NotAField {
                url: url.clone(),
                refused,
            })?;
            if name == "action" && value != "export" {
                return Err(NotAnExport::NotExport { url, action: value });
            }
            // `records[0]`, `fields[1]`: arrays are many fields; any
            // other name is one.
            if !name.ends_with(']') && fields.iter().any(|(n, _)| *n == name) {
                return Err(NotAnExport::Twice { url, field: name });
            }
            fields.push((name, value));
        }
        Ok(Export { content, fields })
    }

    #[cfg(test)]
    pub(crate) fn content(&self) -> Content {
        self.content
    }

    /// The form body: the token first, then `content`, then the other
    /// fields as the page key lists them.
    pub(crate) fn form_body(&self, token: &crate::edc::secret::Secret) -> String {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("token", token.expose());
        form.append_pair("content", self.content.as_str());
        for (name, value) in &self.fields {
            form.append_pair(name, value);
        }
        form.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api() -> Url {
        Url::parse("https://redcap.example.edu/api/").unwrap()
    }

    fn key(query: &str) -> Url {
        Url::parse(&format!("https://redcap.example.edu/api/?{query}")).unwrap()
    }

    /// Import Records' fields on a read content, and names PHP would read
    /// as `action` or `content`, never reach a form.
    #[test]
    fn a_page_key_with_a_field_its_export_does_not_document_is_refused() {
        for query in [
            "content=record&data=%5B%5D&overwriteBehavior=overwrite",
            "content=log&%20action=import",
            "content=log&%20content=record",
            "content=log&fields%5B0%5D=dob",
            "content=version&returnFormat=json",
            "content=record&format%5B0%5D=json",
        ] {
            let refused = Export::of_page(&key(query), &api()).unwrap_err();
            assert!(
                matches!(refused, NotAnExport::NotAField { .. }),
                "{query}: {refused}"
            );
        }
    }

    #[test]
    fn only_the_read_contents_can_be_exported() {
        for content in Content::ALL {
            let export = Export::of_page(&key(&format!("content={}", content.as_str())), &api()).unwrap();
            assert_eq!(export.content(), content);
        }
        // Every write or side-effect content of REDCap's API help is refused.
        for write in [
            "arm",
            "event",
            "file",
            "fileRepository",
            "formEventMapping",
            "participantList",
            "surveyLink",
            "surveyQueueLink",
            "surveyReturnCode",
            "user",
            "userRole",
            "userRoleMapping",
            "userDagMapping",
            "repeatingFormsEvents",
            "generateNextRecordName",
            "pdf",
            "report",
            "attachment",
            "instrument",
            "appRightsCheck",
            "mycap",
            "tableauLink",
            "",
        ] {
            let refused = Export::of_page(&key(&format!("content={write}")), &api()).unwrap_err();
            assert!(
                matches!(refused, NotAnExport::NotARead { .. }),
                "{write}: {refused}"
            );
        }
        for action in ["import", "delete", "rename", "createFolder", "switch"] {
            let refused =
                Export::of_page(&key(&format!("content=record&action={action}")), &api()).unwrap_err();
            assert!(
                matches!(refused, NotAnExport::NotExport { .. }),
                "{action}: {refused}"
            );
        }
        assert!(Export::of_page(&key("content=record&action=export"), &api()).is_ok());
        assert!(matches!(
            Export::of_page(&key("format=json"), &api()),
            Err(NotAnExport::NoContent { .. })
        ));
        assert!(matches!(
            Export::of_page(&key("content=log&content=user"), &api()),
            Err(NotAnExport::Twice { .. })
        ));
    }

    #[test]
    fn the_token_goes_in_the_form_body_and_the_request_to_the_api_url_only() {
        let refused = Export::of_page(&key("content=log&token=ABC123SECRET"), &api()).unwrap_err();
        assert!(matches!(refused, NotAnExport::TokenInUrl { .. }));
        assert!(!refused.to_string().contains("ABC123SECRET"), "{refused}");
        let elsewhere = Url::parse("https://redcap.example.edu/redcap_v14/api/?content=log").unwrap();
        assert!(matches!(
            Export::of_page(&elsewhere, &api()),
            Err(NotAnExport::OtherUrl { .. })
        ));
        let export = Export::of_page(
            &key("content=record&format=json&dateRangeBegin=2026-11-01+01%3A00%3A00&records%5B0%5D=1&records%5B1%5D=2"),
            &api(),
        )
        .unwrap();
        let body = export.form_body(&crate::edc::secret::Secret::new("0123456789ABCDEF"));
        assert_eq!(
            body,
            "token=0123456789ABCDEF&content=record&format=json&dateRangeBegin=2026-11-01+01%3A00%3A00&records%5B0%5D=1&\
             records%5B1%5D=2"
        );
    }

    /// How PHP names a form field it parses (`php_register_variable`):
    /// leading spaces dropped, and a space or `.` in the name before its
    /// first `[` made `_`. What REDCap reads is this name, not ours.
    fn as_php_reads(name: &str) -> String {
        let name = name.trim_start_matches(' ');
        let cut = name.find('[').unwrap_or(name.len());
        let base: String = name[..cut]
            .chars()
            .map(|c| if c == ' ' || c == '.' { '_' } else { c })
            .collect();
        format!("{base}{}", &name[cut..])
    }

    /// A REDCap policy whose stream exports with `query` (and `paging`),
    /// as a user could commit it.
    fn policy(paging: &str, query: &[(String, String)]) -> String {
        let quoted = |s: &str| serde_json::to_string(s).unwrap();
        let mut text = String::from(
            "redcap:\n  base_url_env: REDCAP_API_URL\n  server_timezone: America/Chicago\n  token_env: \
             REDCAP_API_TOKEN\n  auth:\n    scheme: redcap_token\n  dialect: redcap\n  sustained_rate_per_sec: 1\n  \
             burst_capacity: 10\n  bucket_key: \"rl:redcap:{host}\"\n  delta:\n    path: /\n    format: json\n",
        );
        match paging {
            "whole_window" => text.push_str(
                "    paging: whole_window\n    cursor_param: beginTime\n    cursor_field: timestamp\n    cursor_kind: \
                 server_local\n    order: newest_first\n",
            ),
            _ => text.push_str(
                "    paging: redcap_records\n    record_id_field: record_id\n    batch_size: 10\n    cursor_param: \
                 dateRangeBegin\n",
            ),
        }
        text.push_str(
            "    records_pointer: \"\"\n    window:\n      format: local_minute\n      end_param: ",
        );
        text.push_str(if paging == "whole_window" {
            "endTime\n"
        } else {
            "dateRangeEnd\n"
        });
        text.push_str("    query:\n");
        for (name, value) in query {
            text.push_str(&format!("      {}: {}\n", quoted(name), quoted(value)));
        }
        text
    }

    fn field_name() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let known: Vec<String> = [
            "format",
            "returnFormat",
            "type",
            "records[0]",
            "records",
            "fields[1]",
            "fields",
            "forms[]",
            "events[2]",
            "action",
            "logtype",
            "user",
            "record",
            "dag",
            "beginTime",
            "endTime",
            "dateRangeBegin",
            "filterLogic",
            "field",
            "data",
            "overwriteBehavior",
            "forceAutoNumber",
            "returnContent",
            "dateFormat",
            "token",
            "content",
            " action",
            " content",
            "action ",
            "con.tent",
            "con tent",
            " data",
            "format[0]",
            "records[x]",
            "records[0][1]",
            "Content",
            "ACTION",
            "arm",
            "file",
            "import",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        prop_oneof![
            3 => proptest::sample::select(known),
            1 => "[ .\\[\\]A-Za-z0-9_]{1,12}",
            1 => "\\PC{1,8}",
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Whatever a policy's query map holds, a form edc-sync sends
        /// carries, as PHP reads it, the token, one read content and only
        /// fields that content's export documents, `action` only as
        /// `export`; and a policy that validates never yields a request
        /// the client refuses.
        #[test]
        fn no_form_from_any_policy_carries_a_field_outside_its_contents_list(
            content in proptest::sample::select(vec![
                "log", "record", "version", "project", "metadata", "exportFieldNames", "dag", "user", "file",
                "arm", "",
            ]),
            paging in proptest::sample::select(vec!["whole_window", "redcap_records"]),
            extra in proptest::collection::vec((field_name(), "[a-z0-9 ]{0,6}|import|export|overwrite"), 0..5),
        ) {
            let mut query = vec![("content".to_string(), content.to_string())];
            for (name, value) in extra {
                if !query.iter().any(|(n, _)| *n == name) {
                    query.push((name, value));
                }
            }
            let text = policy(paging, &query);
            let Ok(config) = crate::config::parse(std::path::Path::new("rate_limits.yaml"), &text) else {
                return Ok(());
            };
            let policy = config.vendor("redcap").unwrap();
            let delta = policy.delta.as_ref().unwrap();
            let (origin, base) = crate::edc::origin::Origin::of_base("https://redcap.example.edu/api/").unwrap();
            let id = crate::stream::StreamIdentity { vendor: "redcap".into(), ..Default::default() };
            for stream in &policy.streams {
                let key = crate::edc::vendor::paging::first_page(
                    &origin, &base, delta, stream, &id,
                    Some("2026-11-01T06:00:00Z"), Some("2026-11-01T07:00:00Z"),
                ).unwrap();
                let export = Export::of_page(&key, &base);
                proptest::prop_assert!(export.is_ok(), "{text}\n{key}: {export:?}");
                let body = export.unwrap().form_body(&crate::edc::secret::Secret::new("T0KEN"));
                let read: Vec<(String, String)> = url::form_urlencoded::parse(body.as_bytes())
                    .map(|(n, v)| (as_php_reads(&n), v.into_owned()))
                    .collect();
                proptest::prop_assert_eq!(&read[0], &("token".to_string(), "T0KEN".to_string()));
                proptest::prop_assert_eq!(read.iter().filter(|(n, _)| n == "content").count(), 1);
                let content = Content::parse(&read[1].1);
                proptest::prop_assert!(content.is_some(), "{body}");
                let content = content.unwrap();
                for (name, value) in &read[2..] {
                    proptest::prop_assert!(content.admits(name).is_ok(), "{body}: {name}");
                    proptest::prop_assert!(name != "action" || value == "export", "{body}");
                }
            }
        }
    }
}

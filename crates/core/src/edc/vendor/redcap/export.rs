//! REDCap's one request shape: an export, `POST {API URL}` with form
//! fields (REDCap's API help: "all API requests are POST"; PyCap
//! `redcap/request.py` `_RCRequest` posts `payload` as form data; REDCapR
//! and redcapAPI `makeApiCall` the same). The token is a form field, never
//! a header or a URL parameter.
//!
//! Read-only by construction: `content` is one of a closed set of read
//! contents ([`Content`]), `action` is absent or `export`, and the form is
//! built here from a page key. A page key is the API URL with the export's
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
        let mut content = None;
        let mut fields: Vec<(String, String)> = Vec::new();
        for (name, value) in key.query_pairs() {
            let once = |seen: bool| match seen {
                true => Err(NotAnExport::Twice {
                    url: url.clone(),
                    field: name.to_string(),
                }),
                false => Ok(()),
            };
            match name.as_ref() {
                "token" => return Err(NotAnExport::TokenInUrl { api: api.to_string() }),
                "content" => {
                    once(content.is_some())?;
                    content = Some(Content::parse(&value).ok_or_else(|| NotAnExport::NotARead {
                        url: url.clone(),
                        content: value.to_string(),
                    })?);
                }
                "action" if value != "export" => {
                    return Err(NotAnExport::NotExport {
                        url,
                        action: value.to_string(),
                    })
                }
                // `records[0]`, `fields[1]`: arrays are many fields; any
                // other name is one.
                other if !other.ends_with(']') => {
                    once(fields.iter().any(|(n, _)| n == other))?;
                    fields.push((other.to_string(), value.to_string()));
                }
                other => fields.push((other.to_string(), value.to_string())),
            }
        }
        let content = content.ok_or(NotAnExport::NoContent { url })?;
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
            &key("content=log&format=json&beginTime=2026-11-01+01%3A00&records%5B0%5D=1&records%5B1%5D=2"),
            &api(),
        )
        .unwrap();
        let body = export.form_body(&crate::edc::secret::Secret::new("0123456789ABCDEF"));
        assert_eq!(
            body,
            "token=0123456789ABCDEF&content=log&format=json&beginTime=2026-11-01+01%3A00&records%5B0%5D=1&records%5B1%5D=2"
        );
    }
}

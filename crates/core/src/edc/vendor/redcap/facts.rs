//! What a REDCap server says of itself and its project, asked before a
//! window and never landed: its version (`content=version`: the answer's
//! `Date` is the server's clock the window ends by, and Export Logging
//! needs 10.8.0 or later), and for a records stream the project's fields
//! as exports name them (`content=exportFieldNames`) and whether it has
//! data access groups (`content=dag`): what a token with full export rights
//! gets, against which every batch is checked (`scope.rs`). The loop asks
//! each once a run and hands the answers back here.

use reqwest::Url;

use super::export::Content;
use super::scope::Scope;
use super::version::Version;
use crate::edc::vendor::answer::{Probe, Refused};

const VERSION: &str = "content=version";
const FIELD_NAMES: &str = "content=exportFieldNames";
const GROUPS: &str = "content=dag";

/// What the answers say the window needs.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    /// A records stream's project scope.
    pub scope: Option<Scope>,
}

/// The probes before a window at the API URL `api`: the version when a
/// window is planned (its `Date` ends the window), and for a records
/// stream the project's scope.
pub(crate) fn probes(api: &Url, planned: bool, records: bool) -> Vec<Probe> {
    let mut probes = Vec::new();
    if planned {
        probes.push(probe(api, "version", VERSION, false));
    }
    if records {
        probes.push(probe(api, "exportFieldNames", FIELD_NAMES, true));
        probes.push(probe(api, "dag", GROUPS, true));
    }
    probes
}

/// The export of `content` alone from the API URL `api` (JSON, but the
/// version: plain text).
fn probe(api: &Url, content: &str, what: &'static str, page_sized: bool) -> Probe {
    let mut url = api.clone();
    {
        let mut query = url.query_pairs_mut();
        query.clear().append_pair("content", content);
        if content != "version" {
            query.append_pair("format", "json");
        }
    }
    Probe {
        url,
        what,
        page_sized,
    }
}

/// Judges the answers (in the order [`probes`] gave them) for a stream
/// that exports `content`: a server that cannot serve it is refused (78).
pub(crate) fn read(answers: &[(Probe, Vec<u8>)], content: Option<Content>) -> Result<Facts, Refused> {
    let answer = |what: &str| answers.iter().find(|(p, _)| p.what == what).map(|(_, body)| body);
    if let Some(body) = answer(VERSION) {
        let version = Version::parse(body).map_err(Refused::Invalid)?;
        tracing::debug!(%version, "REDCap version");
        if let Some(detail) = content.and_then(|c| version.lacks(c)) {
            return Err(Refused::Unsupported(detail));
        }
    }
    let scope = match (answer(FIELD_NAMES), answer(GROUPS)) {
        (Some(fields), Some(groups)) => Some(Scope::of(fields, groups).map_err(Refused::Invalid)?),
        _ => None,
    };
    Ok(Facts { scope })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planned_window_asks_the_version_and_a_records_stream_its_scope() {
        let api = Url::parse("https://r.example/api/").unwrap();
        let asked: Vec<&str> = probes(&api, true, true).iter().map(|p| p.what).collect();
        assert_eq!(asked, [VERSION, FIELD_NAMES, GROUPS]);
        assert!(probes(&api, false, false).is_empty());
        assert_eq!(probes(&api, true, false)[0].url.query(), Some("content=version"));
        let old = [(probes(&api, true, false).remove(0), b"10.7.9".to_vec())];
        assert!(matches!(
            read(&old, Some(Content::Log)),
            Err(Refused::Unsupported(_))
        ));
        assert!(read(&old, Some(Content::Record)).is_ok());
    }
}

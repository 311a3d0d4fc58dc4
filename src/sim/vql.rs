//! Vault's VQL endpoint as the vault profile serves it (Vault REST API
//! reference, "Submitting a Query"): `POST /api/{version}/query` with the
//! form field `q`; the answer's `responseDetails.next_page` is a URL to be
//! POSTed (with no body) for the next page. Only the shape this tool sends
//! is understood: `... WHERE modified_date__v > '<literal>' ... PAGESIZE n`;
//! anything else is a 200 FAILURE `INCORRECT_QUERY_SYNTAX_ERROR`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use super::dataset::Page;
use super::SimConfig;
use crate::edc::vql::{tokens, Token};

/// One answered query: its window start and page size.
type Query = (String, u32);

/// Queries the endpoint has answered: a counter for ids, and id -> query.
#[derive(Default)]
pub struct Queries(Mutex<(u64, HashMap<String, Query>)>);

/// What a VQL request parsed to, for the request log.
pub struct Parsed {
    pub since: String,
    pub page_size: u32,
}

/// The window start and page size of a query this endpoint understands.
pub fn parse(q: &str) -> Option<Parsed> {
    let t = tokens(q).ok()?;
    let since = t.windows(3).find_map(|w| match w {
        [Token::Word(f), Token::Word(op), Token::Literal(v)] if f == "modified_date__v" && op == ">" => {
            Some(v.clone())
        }
        _ => None,
    })?;
    let page_size = t.windows(2).find_map(|w| match w {
        [Token::Word(k), Token::Word(n)] if k.eq_ignore_ascii_case("PAGESIZE") => n.parse().ok(),
        _ => None,
    })?;
    Some(Parsed { since, page_size })
}

fn failure(kind: &str, message: &str) -> Page {
    Page::whole(
        serde_json::json!({"responseStatus": "FAILURE", "errors": [{"type": kind, "message": message}]})
            .to_string(),
    )
}

/// Answers `POST path` with `form` (the first page) or with no form (a
/// `next_page`); returns the page and, for the log, the query's literal.
pub fn answer(
    cfg: &SimConfig,
    queries: &Queries,
    path: &str,
    form: Option<&[u8]>,
    modified: super::render::Modified,
) -> (Page, Option<String>) {
    let q = form.and_then(|body| {
        url::form_urlencoded::parse(body)
            .find(|(k, _)| k == "q")
            .map(|(_, v)| v.into_owned())
    });
    let (since, page_size, offset, id) = match q {
        Some(q) => {
            let Some(parsed) = parse(&q) else {
                return (
                    failure("INCORRECT_QUERY_SYNTAX_ERROR", "Query could not be parsed."),
                    None,
                );
            };
            let mut state = queries.0.lock().unwrap_or_else(|p| p.into_inner());
            state.0 += 1;
            let id = format!("sim-q-{:06}", state.0);
            state
                .1
                .insert(id.clone(), (parsed.since.clone(), parsed.page_size));
            (parsed.since, parsed.page_size, 0u32, id)
        }
        None => {
            // A next page: /query/{id}?pageoffset=N
            let (id, offset) = match path.rsplit_once('/').map(|(_, rest)| rest) {
                Some(rest) => {
                    let (id, query) = rest.split_once('?').unwrap_or((rest, ""));
                    let offset = url::form_urlencoded::parse(query.as_bytes())
                        .find(|(k, _)| k == "pageoffset")
                        .and_then(|(_, v)| v.parse().ok())
                        .unwrap_or(0);
                    (id.to_string(), offset)
                }
                None => (String::new(), 0),
            };
            let state = queries.0.lock().unwrap_or_else(|p| p.into_inner());
            match state.1.get(&id) {
                Some((since, size)) => (since.clone(), *size, offset, id),
                None => return (failure("INVALID_DATA", "Unknown or expired query."), None),
            }
        }
    };
    let first = cfg.dataset.first_after_modified(Some(&since));
    let total = (cfg.dataset.records + 1).saturating_sub(first);
    let next = (offset + page_size < total).then(|| {
        format!(
            "/api/v24.1/query/{id}?pagesize={page_size}&pageoffset={}",
            offset + page_size
        )
    });
    let q: BTreeMap<String, String> = [
        ("modified_since".to_string(), since.clone()),
        ("limit".to_string(), page_size.to_string()),
        ("offset".to_string(), offset.to_string()),
    ]
    .into();
    let (page, _) = super::render::json_page(cfg, &q, false, modified, next);
    (page, Some(since))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn the_window_start_is_the_literal_after_the_comparison() {
        let p =
            parse("SELECT id FROM s WHERE modified_date__v > 'x\\' OR \\'1' ORDER BY id PAGESIZE 7").unwrap();
        assert_eq!((p.since.as_str(), p.page_size), ("x' OR '1", 7));
        assert!(parse("SELECT id FROM s").is_none());
    }
}

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

/// One piece of a statement: a string literal (its value, escapes undone)
/// or a run of other characters between whitespace and quotes.
#[derive(Debug, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Word(String),
}

/// Splits a statement the way Vault's reference describes VQL strings
/// ("VQL Operators" and "Escaping special characters": a string is in
/// single quotes; a single quote or a backslash inside one is preceded by
/// a backslash). Written apart from the client's own VQL code, so that an
/// escaping mistake there shows here as a query that means something else.
/// An escape of any other character, or an unterminated string, is a
/// syntax error, as Vault answers it.
fn pieces(q: &str) -> Option<Vec<Piece>> {
    let bytes = q.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' => {
                let mut value = Vec::new();
                i += 1;
                loop {
                    match *bytes.get(i)? {
                        b'\'' => break,
                        b'\\' => {
                            let escaped = *bytes.get(i + 1)?;
                            if escaped != b'\'' && escaped != b'\\' {
                                return None;
                            }
                            value.push(escaped);
                            i += 2;
                        }
                        other => {
                            value.push(other);
                            i += 1;
                        }
                    }
                }
                i += 1;
                out.push(Piece::Literal(String::from_utf8(value).ok()?));
            }
            b if b.is_ascii_whitespace() => i += 1,
            _ => {
                let start = i;
                while i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b'\'' {
                    i += 1;
                }
                out.push(Piece::Word(q[start..i].to_string()));
            }
        }
    }
    Some(out)
}

/// The window start and page size of a query this endpoint understands.
pub fn parse(q: &str) -> Option<Parsed> {
    let t = pieces(q)?;
    let since = t.windows(3).find_map(|w| match w {
        [Piece::Word(f), Piece::Word(op), Piece::Literal(v)] if f == "modified_date__v" && op == ">" => {
            Some(v.clone())
        }
        _ => None,
    })?;
    let page_size = t.windows(2).find_map(|w| match w {
        [Piece::Word(k), Piece::Word(n)] if k.eq_ignore_ascii_case("PAGESIZE") => n.parse().ok(),
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

    #[test]
    fn only_the_documented_escapes_and_closed_strings_are_understood() {
        let q = |lit: &str| format!("SELECT id FROM s WHERE modified_date__v > '{lit}' PAGESIZE 7");
        assert_eq!(parse(&q("a\\\\b")).unwrap().since, "a\\b");
        assert!(parse(&q("a\\nb")).is_none(), "an escape Vault does not document");
        assert!(parse("SELECT id FROM s WHERE modified_date__v > 'open PAGESIZE 7").is_none());
    }
}

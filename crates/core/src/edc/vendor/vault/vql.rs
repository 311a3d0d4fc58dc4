//! VQL queries (Vault Query Language), the second and last POST shape the
//! read-only client can send: `POST /api/{version}/query` with the form
//! field `q` (Vault REST API reference, "Submitting a Query"); next pages
//! are POSTs to the `next_page` URL with no body.
//!
//! A [`VqlSelect`] can only be made from a policy's validated template and
//! a cursor value, which goes in as one quoted, escaped string literal: no
//! cursor value, whatever the vendor's data puts in it, can change the
//! query's structure (a property test tokenises every generated query).

pub use crate::config::vql::{tokens, Token};

/// `value` as a VQL string literal: quoted, `\` and `'` escaped. Control
/// characters have no business in a cursor and are refused.
pub(crate) fn literal(value: &str) -> Result<String, String> {
    if value.chars().any(char::is_control) {
        return Err(format!(
            "the cursor value ({} characters) holds a control character; it is not put in a query",
            value.chars().count()
        ));
    }
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        if c == '\\' || c == '\'' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\'');
    Ok(out)
}

/// A complete VQL SELECT, ready to send as the form field `q`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VqlSelect(String);

impl VqlSelect {
    /// The policy's `template` (validated: one SELECT, one `{cursor}`
    /// outside any literal, no PAGESIZE) with `cursor` as a literal and
    /// `PAGESIZE page_size` appended.
    pub fn new(template: &str, cursor: &str, page_size: u32) -> Result<VqlSelect, String> {
        let q = template.replacen("{cursor}", &literal(cursor)?, 1);
        Ok(VqlSelect(format!("{q} PAGESIZE {page_size}")))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The url-encoded form body `q=...`.
    pub(crate) fn form_body(&self) -> String {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("q", &self.0)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "SELECT id, modified_date__v FROM subject__v WHERE modified_date__v > {cursor} ORDER BY modified_date__v ASC";

    #[test]
    fn the_cursor_is_one_escaped_literal() {
        let q = VqlSelect::new(T, "2026-01-01T00:00:00.000Z", 200).unwrap();
        assert_eq!(
            q.as_str(),
            "SELECT id, modified_date__v FROM subject__v WHERE modified_date__v > '2026-01-01T00:00:00.000Z' ORDER BY modified_date__v ASC PAGESIZE 200"
        );
        let evil = "x' OR id != '";
        let q = VqlSelect::new(T, evil, 5).unwrap();
        let literals: Vec<_> = tokens(q.as_str())
            .unwrap()
            .into_iter()
            .filter(|t| matches!(t, Token::Literal(_)))
            .collect();
        assert_eq!(literals, vec![Token::Literal(evil.into())]);
        assert!(VqlSelect::new(T, "a\nb", 5).is_err());
    }
}

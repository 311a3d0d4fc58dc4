//! `delta.vql`: a Vault VQL delta. The template is checked here to be one
//! SELECT with one `{cursor}` outside any string literal; the cursor goes
//! in as an escaped literal at run time (`edc::vql`). The tokenizer lives
//! here, at the bottom of the house, and `edc` and the simulator use it.

use super::check::{string, Fields, Report};
use super::policy::Vql;
use super::yaml::Node;

/// One token of a VQL statement, as far as structure goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// A quoted string literal, unescaped.
    Literal(String),
    /// A keyword, name, number or operator run.
    Word(String),
}

/// Splits `q` into tokens: `'...'` literals with backslash escapes, and
/// whitespace-separated words. An unterminated literal is an error.
pub fn tokens(q: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = q.chars().peekable();
    let mut word = String::new();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                if !word.is_empty() {
                    out.push(Token::Word(std::mem::take(&mut word)));
                }
                let mut lit = String::new();
                loop {
                    match chars.next() {
                        Some('\\') => match chars.next() {
                            Some(e) => lit.push(e),
                            None => return Err("a backslash at the end of a literal".into()),
                        },
                        Some('\'') => break,
                        Some(ch) => lit.push(ch),
                        None => return Err("an unterminated string literal".into()),
                    }
                }
                out.push(Token::Literal(lit));
            }
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    out.push(Token::Word(std::mem::take(&mut word)));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(Token::Word(word));
    }
    Ok(out)
}

const VQL_KEYS: [&str; 2] = ["select", "initial_cursor"];

pub(super) fn vql(report: &mut Report, path: Vec<String>, node: &Node) -> Option<Vql> {
    let mut f = Fields::of(report, path, node)?;
    let select = f
        .required(report, "select")
        .and_then(|(p, n)| string(report, &p, n).map(|s| (p, s.trim().to_string())))
        .and_then(|(p, s)| match check(&s) {
            Ok(()) => Some(s),
            Err(e) => {
                report.add(&p, e);
                None
            }
        });
    let initial_cursor = f
        .required(report, "initial_cursor")
        .and_then(|(p, n)| string(report, &p, n).map(str::to_string));
    f.finish(report, &VQL_KEYS);
    Some(Vql {
        select: select?,
        initial_cursor: initial_cursor?,
    })
}

/// One SELECT statement with exactly one `{cursor}`, outside any literal.
fn check(q: &str) -> Result<(), String> {
    let upper = q.to_ascii_uppercase();
    if !upper.starts_with("SELECT ") {
        return Err("must be a single VQL SELECT statement".into());
    }
    if q.matches("{cursor}").count() != 1 {
        return Err(
            "must hold {cursor} exactly once (where the window's start goes, as a quoted literal)".into(),
        );
    }
    let probe = q.replacen("{cursor}", "__cursor__", 1);
    let tokens = tokens(&probe).map_err(|e| format!("is not a well-formed query: {e}"))?;
    let mut words = Vec::new();
    for t in &tokens {
        match t {
            Token::Literal(l) if l.contains("__cursor__") => {
                return Err("{cursor} must stand outside quotes: it is quoted and escaped at run time".into())
            }
            Token::Word(w) => words.push(w.to_ascii_uppercase()),
            _ => {}
        }
    }
    if words
        .iter()
        .any(|w| w.contains(';') || w.contains("--") || w.contains("/*"))
    {
        return Err("must be one statement: no ';' and no comments".into());
    }
    if words.iter().any(|w| w.contains('{') || w.contains('}')) {
        return Err("holds a placeholder other than {cursor}".into());
    }
    if words.iter().any(|w| w == "PAGESIZE" || w == "PAGEOFFSET") {
        return Err("must not set PAGESIZE or PAGEOFFSET: delta.page_size is appended as PAGESIZE".into());
    }
    if words
        .iter()
        .skip(1)
        .any(|w| w.trim_start_matches('(') == "SELECT")
    {
        return Err("must be a single SELECT (no subquery in this tool)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn only_one_select_with_one_unquoted_cursor_passes() {
        let ok = "SELECT id FROM subject__v WHERE modified_date__v > {cursor} ORDER BY modified_date__v ASC";
        assert!(check(ok).is_ok());
        for bad in [
            "DELETE FROM subject__v WHERE modified_date__v > {cursor}",
            "SELECT id FROM subject__v",
            "SELECT id FROM subject__v WHERE modified_date__v > '{cursor}'",
            "SELECT id FROM s WHERE m > {cursor}; SELECT id FROM t",
            "SELECT id FROM s WHERE m > {cursor} PAGESIZE 5",
            "SELECT id FROM s WHERE m > {cursor} AND x = {study}",
            "SELECT id FROM s WHERE m > {cursor} AND name = 'unterminated",
            "SELECT id FROM s WHERE id IN (SELECT id FROM t) AND m > {cursor}",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }
}

//! Finds the line of a key path in block-style YAML text.
//!
//! The parser's tree carries no positions, but an operator fixing a policy
//! file wants `file:line`. Policy files are written in block style, where a
//! key's line can be found from indentation alone. This is deliberately a
//! best effort: when the text is in flow style (or the key is absent) the
//! nearest enclosing key's line is returned, or nothing.

/// One `key:` line of the text: its 1-based number, indentation and key.
struct KeyLine<'a> {
    number: usize,
    indent: usize,
    key: &'a str,
}

fn key_lines(text: &str) -> Vec<KeyLine<'_>> {
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let body = line.trim_start();
            if body.is_empty() || body.starts_with('#') || body.starts_with('-') {
                return None;
            }
            let indent = line.len() - body.len();
            let key = split_key(body)?;
            Some(KeyLine {
                number: i + 1,
                indent,
                key,
            })
        })
        .collect()
}

/// The key of a `key: value` line, unquoted, if the line is one.
fn split_key(body: &str) -> Option<&str> {
    for quote in ['"', '\''] {
        if let Some(rest) = body.strip_prefix(quote) {
            let end = rest.find(quote)?;
            return rest[end + 1..]
                .trim_start()
                .starts_with(':')
                .then(|| &rest[..end]);
        }
    }
    let colon = body
        .find(": ")
        .or_else(|| body.strip_suffix(':').map(|k| k.len()))?;
    Some(body[..colon].trim_end())
}

/// The 1-based line of `path` in `text`, or of its deepest present ancestor.
pub(super) fn line_of(text: &str, path: &[&str]) -> Option<usize> {
    let lines = key_lines(text);
    let mut scope = 0..lines.len();
    let mut parent_indent: Option<usize> = None;
    let mut found = None;
    for segment in path {
        // Children of the current scope sit at the smallest indentation in it.
        let Some(child_indent) = lines[scope.clone()]
            .iter()
            .map(|l| l.indent)
            .filter(|&i| parent_indent.is_none_or(|p| i > p))
            .min()
        else {
            return found;
        };
        let Some(pos) = scope
            .clone()
            .find(|&i| lines[i].indent == child_indent && lines[i].key == *segment)
        else {
            return found;
        };
        found = Some(lines[pos].number);
        let end = (pos + 1..scope.end)
            .find(|&i| lines[i].indent <= child_indent)
            .unwrap_or(scope.end);
        scope = pos + 1..end;
        parent_indent = Some(child_indent);
    }
    found
}

/// The line of the second `key:` at 1-based `column` from line `from` on,
/// within that one map: where a duplicate key was written.
pub(super) fn duplicate_line(text: &str, from: usize, column: usize, key: &str) -> Option<usize> {
    let indent = column.saturating_sub(1);
    key_lines(text)
        .into_iter()
        .filter(|l| l.number >= from)
        .take_while(|l| l.indent >= indent)
        .filter(|l| l.indent == indent && l.key == key)
        .nth(1)
        .map(|l| l.number)
}

#[cfg(test)]
mod tests {
    use super::{duplicate_line, line_of};

    #[test]
    fn finds_the_second_occurrence_of_a_duplicate() {
        assert_eq!(
            duplicate_line("v:\n  a: 1\n  b: 2\n  a: 3\nw:\n  a: 1\n", 2, 3, "a"),
            Some(4)
        );
    }

    const TEXT: &str = "\
# comment
veeva_vault:
  base_url_env: A
  delta:
    path: /x
    paging: json_next
  burst_capacity: 3
rave:
  delta:
    path: /y
";

    #[test]
    fn finds_nested_keys_in_their_own_block() {
        assert_eq!(line_of(TEXT, &["veeva_vault"]), Some(2));
        assert_eq!(line_of(TEXT, &["veeva_vault", "burst_capacity"]), Some(7));
        assert_eq!(line_of(TEXT, &["veeva_vault", "delta", "paging"]), Some(6));
        assert_eq!(line_of(TEXT, &["rave", "delta", "path"]), Some(10));
    }

    #[test]
    fn falls_back_to_the_deepest_present_ancestor() {
        assert_eq!(line_of(TEXT, &["rave", "delta", "paging"]), Some(9));
        assert_eq!(line_of(TEXT, &["nope"]), None);
    }

    #[test]
    fn quoted_keys_are_found() {
        assert_eq!(line_of("\"a b\":\n  'c': 1\n", &["a b", "c"]), Some(2));
    }
}

//! The only place that knows which YAML library parses the policy file.
//!
//! `serde_yaml` is deprecated upstream. Everything else in `config/` works on
//! the owned [`Node`] tree built here, so replacing the parser means
//! rewriting this one file.

use std::fmt;

/// A parsed YAML document, reduced to the shapes a policy file may contain.
///
/// Mapping entries keep their order of appearance so that errors are
/// reported in file order.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    /// A short name of the node's type, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Int(_) => "an integer",
            Node::Float(_) => "a number",
            Node::Str(_) => "a string",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a map",
        }
    }
}

impl fmt::Display for Node {
    /// Renders scalars the way a reader typed them; containers by kind only,
    /// so an error message never echoes a large (or sensitive) subtree.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Null => f.write_str("null"),
            Node::Bool(b) => write!(f, "{b}"),
            Node::Int(i) => write!(f, "{i}"),
            Node::Float(x) if x.is_nan() => f.write_str("NaN"),
            Node::Float(x) => write!(f, "{x}"),
            Node::Str(s) => write!(f, "{s:?}"),
            Node::Seq(_) | Node::Map(_) => f.write_str(self.kind()),
        }
    }
}

/// Why the text is not a YAML document this tool accepts.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    pub line: Option<usize>,
    pub message: String,
    /// For a duplicate key: the key, and the 1-based column of the map
    /// that holds it (the parser reports the map, not the second key).
    pub duplicate: Option<(String, usize)>,
}

/// Parses `text` into a [`Node`] tree.
///
/// Duplicate keys, tags and non-string keys are refused here: they are legal
/// YAML but have no meaning in a policy file, and silently picking one of two
/// duplicate values is exactly what change control must not allow.
///
/// A byte order mark before the first document is allowed, as YAML 1.2
/// allows it (section 5.2), and read past: editors on Windows write one, and
/// the parser would otherwise take it for content before a `---`.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let value: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| {
        let message = e.to_string();
        let duplicate = message
            .split_once("duplicate entry with key \"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .zip(e.location())
            .map(|((key, _), loc)| (key.to_string(), loc.column()));
        SyntaxError {
            line: e.location().map(|l| l.line()),
            message,
            duplicate,
        }
    })?;
    convert(value)
}

fn convert(value: serde_yaml::Value) -> Result<Node, SyntaxError> {
    use serde_yaml::Value;
    Ok(match value {
        Value::Null => Node::Null,
        Value::Bool(b) => Node::Bool(b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Node::Int(i),
            // u64 above i64::MAX and every float land here; range checks
            // downstream reject them with the value in the message.
            None => Node::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Node::Str(s),
        Value::Sequence(items) => Node::Seq(items.into_iter().map(convert).collect::<Result<_, _>>()?),
        Value::Mapping(map) => {
            let mut entries = Vec::with_capacity(map.len());
            for (k, v) in map {
                let key = match k {
                    Value::String(s) => s,
                    other => {
                        return Err(SyntaxError {
                            line: None,
                            message: format!("map keys must be strings, found {}", describe(&other)),
                            duplicate: None,
                        })
                    }
                };
                entries.push((key, convert(v)?));
            }
            Node::Map(entries)
        }
        Value::Tagged(t) => {
            return Err(SyntaxError {
                line: None,
                message: format!("YAML tags are not allowed (found {})", t.tag),
                duplicate: None,
            })
        }
    })
}

fn describe(v: &serde_yaml::Value) -> String {
    match v {
        serde_yaml::Value::Null => "null".into(),
        serde_yaml::Value::Bool(b) => b.to_string(),
        serde_yaml::Value::Number(n) => n.to_string(),
        _ => "a non-scalar key".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_map_order_and_scalar_kinds() {
        let n = parse("b: 1\na: 2.5\nc: [x, true]\n").unwrap();
        assert_eq!(
            n,
            Node::Map(vec![
                ("b".into(), Node::Int(1)),
                ("a".into(), Node::Float(2.5)),
                (
                    "c".into(),
                    Node::Seq(vec![Node::Str("x".into()), Node::Bool(true)])
                ),
            ])
        );
    }

    #[test]
    fn a_byte_order_mark_before_the_first_document_is_read_past() {
        let want = Node::Map(vec![("a".into(), Node::Int(1))]);
        assert_eq!(parse("\u{feff}---\na: 1\n").unwrap(), want);
        assert_eq!(parse("\u{feff}a: 1\n").unwrap(), want);
        assert_eq!(parse("\u{feff}# policy\n---\na: 1\n").unwrap(), want);
    }

    #[test]
    fn duplicate_keys_are_refused_with_a_line() {
        let e = parse("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert!(e.message.contains("duplicate"), "{}", e.message);
        assert_eq!(e.duplicate, Some(("a".to_string(), 1)));
    }

    #[test]
    fn tags_and_non_string_keys_are_refused() {
        assert!(parse("a: !secret x\n").is_err());
        assert!(parse("1: x\n").is_err());
    }
}

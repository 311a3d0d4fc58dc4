//! The collecting validator's toolkit, independent of the schema: a report
//! that gathers every problem with its dotted key path and line, a cursor
//! over a map's fields that catches unknown keys (with a "did you mean"),
//! and typed readers for numbers, integers, strings, templates, variable
//! names and JSON pointers. `validate.rs` and the block files (`auth.rs`,
//! `window.rs`, `vql.rs`, `delta.rs`) describe the schema with it.

use std::time::Duration;

use super::locate;
use super::policy::EnvVarName;
use super::template::{Placeholder, Template};
use super::yaml::Node;
use super::Problem;

/// Waits are bounded by a cron slot; a day is already far beyond sane.
pub(super) const MAX_SECONDS: f64 = 86_400.0;

/// Collects problems against the source text (for line numbers).
pub(super) struct Report<'t> {
    text: &'t str,
    problems: Vec<Problem>,
}

impl<'t> Report<'t> {
    /// A report against `text`, the policy file's source.
    pub(super) fn new(text: &'t str) -> Report<'t> {
        Report {
            text,
            problems: Vec::new(),
        }
    }

    /// Every problem, in file order (problems without a line go last), or
    /// none.
    pub(super) fn finish(mut self) -> Result<(), Vec<Problem>> {
        if self.problems.is_empty() {
            return Ok(());
        }
        self.problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
        Err(self.problems)
    }

    pub(super) fn add(&mut self, path: &[String], message: impl Into<String>) {
        let segments: Vec<&str> = path.iter().map(String::as_str).collect();
        self.problems.push(Problem {
            key: path.join("."),
            line: locate::line_of(self.text, &segments),
            message: message.into(),
        });
    }
}

/// The entries of one map, taken key by key; what is left over is unknown.
pub(super) struct Fields<'n> {
    path: Vec<String>,
    entries: Vec<(&'n str, &'n Node, bool)>,
}

impl<'n> Fields<'n> {
    /// `None` (with a problem reported) unless `node` is a map.
    pub(super) fn of(report: &mut Report, path: Vec<String>, node: &'n Node) -> Option<Self> {
        match node {
            Node::Map(entries) => Some(Fields {
                path,
                entries: entries.iter().map(|(k, v)| (k.as_str(), v, false)).collect(),
            }),
            other => {
                report.add(&path, format!("must be a map, got {}", other.kind()));
                None
            }
        }
    }

    pub(super) fn child(&self, key: &str) -> Vec<String> {
        let mut p = self.path.clone();
        p.push(key.to_string());
        p
    }

    fn take(&mut self, key: &str) -> Option<&'n Node> {
        let entry = self.entries.iter_mut().find(|(k, _, _)| *k == key)?;
        entry.2 = true;
        Some(entry.1)
    }

    /// Takes `key`, reporting it when absent.
    pub(super) fn required(&mut self, report: &mut Report, key: &str) -> Option<(Vec<String>, &'n Node)> {
        let path = self.child(key);
        match self.take(key) {
            Some(n) => Some((path, n)),
            None => {
                report.add(&path, "required key is missing");
                None
            }
        }
    }

    pub(super) fn optional(&mut self, key: &str) -> Option<(Vec<String>, &'n Node)> {
        let path = self.child(key);
        self.take(key).map(|n| (path, n))
    }

    /// Reports every key that was never taken, suggesting a near known key.
    pub(super) fn finish(self, report: &mut Report, known: &[&str]) {
        for (key, _, taken) in &self.entries {
            if *taken {
                continue;
            }
            let mut path = self.path.clone();
            path.push(key.to_string());
            let message = match closest(key, known) {
                Some(k) => format!("unknown key (did you mean {k}?)"),
                None => format!("unknown key (known keys: {})", known.join(", ")),
            };
            report.add(&path, message);
        }
    }
}

/// A known key within edit distance 2 of `key`, if any.
pub(super) fn closest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    fn distance(a: &str, b: &str) -> usize {
        let b: Vec<char> = b.chars().collect();
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut prev = row[0];
            row[0] = i + 1;
            for (j, cb) in b.iter().enumerate() {
                let cur = row[j + 1];
                row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
                prev = cur;
            }
        }
        row[b.len()]
    }
    known
        .iter()
        .map(|k| (distance(key, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

pub(super) fn number(report: &mut Report, path: &[String], node: &Node) -> Option<f64> {
    match node {
        Node::Int(i) => Some(*i as f64),
        Node::Float(x) => Some(*x),
        other => {
            report.add(path, format!("must be a number, got {} ({other})", other.kind()));
            None
        }
    }
}

/// A finite number > 0 and at most `MAX_SECONDS`-style `max`.
pub(super) fn positive(report: &mut Report, path: &[String], node: &Node, max: f64) -> Option<f64> {
    let x = number(report, path, node)?;
    if !(x.is_finite() && x > 0.0) {
        report.add(path, format!("must be > 0, got {node}"));
        None
    } else if x > max {
        report.add(path, format!("must be <= {max}, got {node}"));
        None
    } else {
        Some(x)
    }
}

pub(super) fn non_negative(report: &mut Report, path: &[String], node: &Node, max: f64) -> Option<f64> {
    let x = number(report, path, node)?;
    if !(x.is_finite() && x >= 0.0) {
        report.add(path, format!("must be >= 0, got {node}"));
        None
    } else if x > max {
        report.add(path, format!("must be <= {max}, got {node}"));
        None
    } else {
        Some(x)
    }
}

pub(super) fn integer(report: &mut Report, path: &[String], node: &Node, min: i64, max: i64) -> Option<i64> {
    match node {
        Node::Int(i) if (min..=max).contains(i) => Some(*i),
        Node::Int(_) => {
            report.add(path, format!("must be an integer in {min}..={max}, got {node}"));
            None
        }
        other => {
            report.add(path, format!("must be an integer >= {min}, got {other}"));
            None
        }
    }
}

pub(super) fn string<'n>(report: &mut Report, path: &[String], node: &'n Node) -> Option<&'n str> {
    match node {
        Node::Str(s) if !s.trim().is_empty() => Some(s),
        Node::Str(_) => {
            report.add(path, "must not be empty");
            None
        }
        other => {
            report.add(path, format!("must be a string, got {} ({other})", other.kind()));
            None
        }
    }
}

pub(super) fn template(report: &mut Report, path: &[String], node: &Node) -> Option<Template> {
    let t = quota_template(report, path, node)?;
    if t.placeholders().contains(&Placeholder::Host) {
        report.add(
            path,
            format!(
                "{{host}} is only taken in bucket_key (one quota for every project on a server), got {:?}",
                t.as_str()
            ),
        );
        return None;
    }
    Some(t)
}

/// A template that may also name `{host}`: the quota key's.
pub(super) fn quota_template(report: &mut Report, path: &[String], node: &Node) -> Option<Template> {
    let s = string(report, path, node)?;
    Template::parse(s).map_err(|e| report.add(path, e)).ok()
}

pub(super) fn env_name(report: &mut Report, path: &[String], node: &Node) -> Option<EnvVarName> {
    let s = string(report, path, node)?;
    EnvVarName::parse(s).map_err(|e| report.add(path, e)).ok()
}

/// An optional IANA time zone name (`server_timezone`, `window.zone`):
/// `Some(None)` when absent, `None` when given and not a zone.
pub(super) fn optional_zone(
    report: &mut Report,
    entry: Option<(Vec<String>, &Node)>,
) -> Option<Option<crate::zone::Zone>> {
    match entry {
        Some((p, n)) => string(report, &p, n).and_then(|name| match crate::zone::Zone::parse(name) {
            Ok(zone) => Some(Some(zone)),
            Err(e) => {
                report.add(&p, e);
                None
            }
        }),
        None => Some(None),
    }
}

pub(super) fn json_pointer(report: &mut Report, path: &[String], node: &Node) -> Option<String> {
    let s = match node {
        Node::Str(s) if s.is_empty() => "",
        _ => string(report, path, node)?,
    };
    // "" is the whole document (RFC 6901, section 5): a bare array.
    if s.is_empty() || s.starts_with('/') {
        Some(s.to_string())
    } else {
        report.add(
            path,
            format!("must be a JSON pointer: \"\" (the whole document) or starting with '/', got {s:?}"),
        );
        None
    }
}

pub(super) fn seconds(x: f64) -> Duration {
    Duration::from_secs_f64(x)
}

/// Reads an optional value with a default; a present-but-bad value yields
/// `None` so the policy is not built.
pub(super) fn or_default<T>(
    entry: Option<(Vec<String>, &Node)>,
    default: T,
    read: impl FnOnce(&[String], &Node) -> Option<T>,
) -> Option<T> {
    match entry {
        Some((path, node)) => read(&path, node),
        None => Some(default),
    }
}

/// A map of query parameter name to value: each value a template (numbers
/// and booleans taken as their text).
pub(super) fn query_map(
    report: &mut Report,
    path: Vec<String>,
    node: &Node,
) -> Option<Vec<(String, Template)>> {
    let Node::Map(entries) = node else {
        report.add(
            &path,
            format!("must be a map of parameter name to value, got {}", node.kind()),
        );
        return None;
    };
    let mut out = Vec::with_capacity(entries.len());
    let mut ok = true;
    for (k, v) in entries {
        let mut p = path.clone();
        p.push(k.clone());
        let value = match v {
            Node::Int(_) | Node::Float(_) | Node::Bool(_) => Template::parse(&v.to_string()).ok(),
            _ => template(report, &p, v),
        };
        match value {
            Some(t) => out.push((k.clone(), t)),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

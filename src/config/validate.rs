//! Turns a [`Node`] tree into a [`Config`], collecting every problem.
//!
//! A policy file is edited by hand and reviewed under change control, so one
//! validation run reports all of its problems at once, each with the dotted
//! key path and (when it can be found) the line.

use std::time::Duration;

use super::locate;
use super::policy::{
    Config, Delta, EnvVarName, HttpLimits, Paging, PayloadFormat, Policy, Rate, RecordOrder, StreamSpec,
};
use super::template::Template;
use super::yaml::Node;
use super::Problem;

const DEFAULT_MAX_RETRY_ATTEMPTS: i64 = 5;
const DEFAULT_RETRY_AFTER_S: f64 = 60.0;
const DEFAULT_MAX_WAIT_S: f64 = 900.0;
const DEFAULT_MAX_CONCURRENCY: i64 = 4;
const DEFAULT_PACING_MARGIN_MS: i64 = 10;
const DEFAULT_CONNECT_TIMEOUT_S: f64 = 10.0;
const DEFAULT_REQUEST_TIMEOUT_S: f64 = 300.0;
const DEFAULT_MAX_BODY_BYTES: i64 = 64 * 1024 * 1024;
/// Seconds of server-vs-local clock difference tolerated without a warning.
const DEFAULT_CLOCK_SKEW_WARN_S: f64 = 30.0;
const DEFAULT_NEXT_POINTER: &str = "/responseDetails/next_page";
/// Waits are bounded by a cron slot; a day is already far beyond sane.
const MAX_SECONDS: f64 = 86_400.0;

/// Collects problems against the source text (for line numbers).
pub(super) struct Report<'t> {
    text: &'t str,
    problems: Vec<Problem>,
}

impl Report<'_> {
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
fn closest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
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

fn number(report: &mut Report, path: &[String], node: &Node) -> Option<f64> {
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
fn positive(report: &mut Report, path: &[String], node: &Node, max: f64) -> Option<f64> {
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

fn integer(report: &mut Report, path: &[String], node: &Node, min: i64, max: i64) -> Option<i64> {
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

fn template(report: &mut Report, path: &[String], node: &Node) -> Option<Template> {
    let s = string(report, path, node)?;
    Template::parse(s).map_err(|e| report.add(path, e)).ok()
}

pub(super) fn env_name(report: &mut Report, path: &[String], node: &Node) -> Option<EnvVarName> {
    let s = string(report, path, node)?;
    EnvVarName::parse(s).map_err(|e| report.add(path, e)).ok()
}

fn json_pointer(report: &mut Report, path: &[String], node: &Node) -> Option<String> {
    let s = string(report, path, node)?;
    if s.starts_with('/') {
        Some(s.to_string())
    } else {
        report.add(
            path,
            format!("must be a JSON pointer starting with '/', got {s:?}"),
        );
        None
    }
}

fn seconds(x: f64) -> Duration {
    Duration::from_secs_f64(x)
}

/// Reads an optional value with a default; a present-but-bad value yields
/// `None` so the policy is not built.
fn or_default<T>(
    entry: Option<(Vec<String>, &Node)>,
    default: T,
    read: impl FnOnce(&[String], &Node) -> Option<T>,
) -> Option<T> {
    match entry {
        Some((path, node)) => read(&path, node),
        None => Some(default),
    }
}

/// One token a day.
const MIN_RATE_PER_SEC: f64 = 1.0 / 86_400.0;

const RATE_KEYS: [&str; 2] = ["sustained_rate_per_sec", "burst_capacity"];

fn rate_fields(report: &mut Report, f: &mut Fields) -> Option<Rate> {
    let per_sec = f
        .required(report, "sustained_rate_per_sec")
        .and_then(|(p, n)| positive(report, &p, n, 1_000_000.0).map(|x| (p, x)))
        .and_then(|(p, x)| {
            // Slower than a token a day is no quota but a division by ~zero:
            // its waits overflow every clock the pacer has.
            if x < MIN_RATE_PER_SEC {
                report.add(
                    &p,
                    format!("must be at least one token a day (>= {MIN_RATE_PER_SEC:.7}), got {x}"),
                );
                None
            } else {
                Some(x)
            }
        });
    let burst = f
        .required(report, "burst_capacity")
        .and_then(|(p, n)| integer(report, &p, n, 1, 1_000_000));
    Rate::new(per_sec?, u32::try_from(burst?).ok()?)
}

/// A `{sustained_rate_per_sec, burst_capacity}` map (a sub-limit).
fn rate_map(report: &mut Report, path: Vec<String>, node: &Node) -> Option<Rate> {
    let mut f = Fields::of(report, path, node)?;
    let rate = rate_fields(report, &mut f);
    f.finish(report, &RATE_KEYS);
    rate
}

fn query_map(report: &mut Report, path: Vec<String>, node: &Node) -> Option<Vec<(String, Template)>> {
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

const HTTP_KEYS: [&str; 3] = ["connect_timeout_s", "request_timeout_s", "max_body_bytes"];

fn http(report: &mut Report, path: Vec<String>, node: Option<&Node>) -> Option<HttpLimits> {
    let defaults = HttpLimits {
        connect_timeout: seconds(DEFAULT_CONNECT_TIMEOUT_S),
        request_timeout: seconds(DEFAULT_REQUEST_TIMEOUT_S),
        max_body_bytes: DEFAULT_MAX_BODY_BYTES as u64,
    };
    let Some(node) = node else { return Some(defaults) };
    let mut f = Fields::of(report, path, node)?;
    let connect = or_default(
        f.optional("connect_timeout_s"),
        defaults.connect_timeout,
        |p, n| positive(report, p, n, 600.0).map(seconds),
    );
    let request = or_default(
        f.optional("request_timeout_s"),
        defaults.request_timeout,
        |p, n| positive(report, p, n, 3600.0).map(seconds),
    );
    let body = or_default(f.optional("max_body_bytes"), defaults.max_body_bytes, |p, n| {
        integer(report, p, n, 1024, 1 << 40).map(|b| b as u64)
    });
    let limits = HttpLimits {
        connect_timeout: connect?,
        request_timeout: request?,
        max_body_bytes: body?,
    };
    if limits.connect_timeout > limits.request_timeout {
        report.add(
            &f.child("connect_timeout_s"),
            "must not exceed request_timeout_s (the whole request includes connecting)",
        );
        f.finish(report, &HTTP_KEYS);
        return None;
    }
    f.finish(report, &HTTP_KEYS);
    Some(limits)
}

const DEFAULT_MAX_PAGES_PER_WINDOW: i64 = 100_000;

const DELTA_KEYS: [&str; 14] = [
    "vql",
    "order",
    "window",
    "path",
    "format",
    "paging",
    "next_pointer",
    "records_pointer",
    "cursor_param",
    "cursor_field",
    "page_size_param",
    "page_size",
    "max_pages_per_window",
    "query",
];

fn delta(report: &mut Report, path: Vec<String>, node: &Node) -> Option<Delta> {
    let mut f = Fields::of(report, path, node)?;
    let endpoint = f.required(report, "path").and_then(|(p, n)| {
        let t = template(report, &p, n)?;
        if t.as_str().starts_with("//") {
            report.add(
                &p,
                format!(
                    "must not start with '//' (that names another host), got {:?}",
                    t.as_str()
                ),
            );
            None
        } else if t.as_str().starts_with('/') {
            Some(t)
        } else {
            report.add(&p, format!("must start with '/', got {:?}", t.as_str()));
            None
        }
    });
    let format = f
        .required(report, "format")
        .and_then(|(p, n)| match string(report, &p, n)? {
            "json" => Some(PayloadFormat::Json),
            "odm" => Some(PayloadFormat::Odm),
            other => {
                report.add(&p, format!("must be one of json, odm; got {other:?}"));
                None
            }
        });
    let paging_path = f.child("paging");
    let paging_name = f.required(report, "paging").and_then(|(p, n)| {
        let s = string(report, &p, n)?;
        match s {
            "json_next" | "link_header" | "rave_startid" => Some(s),
            other => {
                report.add(
                    &p,
                    format!("must be one of json_next, link_header, rave_startid; got {other:?}"),
                );
                None
            }
        }
    });
    let next_pointer = f.optional("next_pointer");
    let next_pointer_path = f.child("next_pointer");
    let next_pointer = match next_pointer {
        Some((p, n)) => json_pointer(report, &p, n).map(Some),
        None => Some(None),
    };
    let records_pointer = match f.optional("records_pointer") {
        Some((p, n)) => json_pointer(report, &p, n).map(Some),
        None => Some(None),
    };
    // A VQL delta carries its cursor and page size inside the query.
    let vql = match f.optional("vql") {
        Some((p, n)) => super::vql::vql(report, p, n).map(Some),
        None => Some(None),
    };
    let is_vql = matches!(vql, Some(Some(_)));
    let param = |f: &mut Fields, report: &mut Report, key: &str| {
        if is_vql {
            if f.optional(key).is_some() {
                report.add(&f.child(key), "not used with delta.vql (the query carries it)");
            }
            Some(String::new())
        } else {
            f.required(report, key)
                .and_then(|(p, n)| string(report, &p, n).map(str::to_string))
        }
    };
    let cursor_param = param(&mut f, report, "cursor_param");
    let cursor_field = match f.optional("cursor_field") {
        Some((p, n)) => string(report, &p, n).map(|s| Some(s.to_string())),
        None => Some(None),
    };
    let page_size_param = param(&mut f, report, "page_size_param");
    let page_size = f
        .required(report, "page_size")
        .and_then(|(p, n)| integer(report, &p, n, 1, 100_000));
    let query = match f.optional("query") {
        Some((p, n)) => query_map(report, p, n),
        None => Some(Vec::new()),
    };
    let max_pages = or_default(
        f.optional("max_pages_per_window"),
        DEFAULT_MAX_PAGES_PER_WINDOW,
        |p, n| integer(report, p, n, 1, 100_000_000),
    );
    let order = or_default(
        f.optional("order"),
        RecordOrder::Ascending,
        |p, n| match string(report, p, n)? {
            "ascending" => Some(RecordOrder::Ascending),
            "newest_first" => Some(RecordOrder::NewestFirst),
            "unordered" => Some(RecordOrder::Unordered),
            other => {
                report.add(
                    p,
                    format!("must be one of ascending, newest_first, unordered; got {other:?}"),
                );
                None
            }
        },
    );
    let window = match f.optional("window") {
        Some((p, n)) => super::window::window(report, p, n).map(Some),
        None => Some(None),
    };
    let vql_path = f.child("vql");
    let records_pointer_path = f.child("records_pointer");
    let cursor_field_path = f.child("cursor_field");
    f.finish(report, &DELTA_KEYS);

    // Cross-key rules: each paging style fits one payload format, and JSON
    // needs to know where its records and its high-water mark are.
    let (format, paging_name, next_pointer) = (format?, paging_name?, next_pointer?);
    let paging = match (paging_name, format) {
        ("json_next", PayloadFormat::Json) => Paging::JsonNext {
            next_pointer: next_pointer
                .clone()
                .unwrap_or_else(|| DEFAULT_NEXT_POINTER.to_string()),
        },
        ("json_next", PayloadFormat::Odm) => {
            report.add(&paging_path, "json_next paging needs format: json");
            return None;
        }
        ("rave_startid", PayloadFormat::Json) => {
            report.add(&paging_path, "rave_startid paging needs format: odm");
            return None;
        }
        ("rave_startid", PayloadFormat::Odm) => Paging::RaveStartid,
        _ => Paging::LinkHeader,
    };
    if is_vql && matches!(window, Some(Some(_))) {
        report.add(&vql_path, "a VQL delta is not a date window: remove delta.window");
        return None;
    }
    if is_vql && !matches!(paging, Paging::JsonNext { .. }) {
        report.add(
            &paging_path,
            "delta.vql needs paging: json_next (Vault's next_page)",
        );
        return None;
    }
    if next_pointer.is_some() && !matches!(paging, Paging::JsonNext { .. }) {
        report.add(&next_pointer_path, "only used with paging: json_next");
    }
    let (records_pointer, cursor_field) = (records_pointer?, cursor_field?);
    if format == PayloadFormat::Json {
        if records_pointer.is_none() {
            report.add(&records_pointer_path, "required key is missing (format: json)");
        }
        if cursor_field.is_none() {
            report.add(&cursor_field_path, "required key is missing (format: json)");
        }
    }
    if format == PayloadFormat::Json && (records_pointer.is_none() || cursor_field.is_none()) {
        return None;
    }
    Some(Delta {
        path: endpoint?,
        format,
        paging,
        records_pointer,
        cursor_param: cursor_param?,
        cursor_field,
        page_size_param: page_size_param?,
        page_size: u32::try_from(page_size?).ok()?,
        max_pages_per_window: u64::try_from(max_pages?).ok()?,
        order: order?,
        window: window?,
        vql: vql?,
        query: query?,
    })
}

const STREAM_KEYS: [&str; 2] = ["query", "sub_limit"];

fn streams(report: &mut Report, path: Vec<String>, node: Option<&Node>) -> Option<Vec<StreamSpec>> {
    let Some(node) = node else {
        // No streams listed: the vendor's delta is one stream of its own.
        return Some(vec![StreamSpec {
            name: "default".into(),
            query: Vec::new(),
            sub_limit: None,
        }]);
    };
    let Node::Map(entries) = node else {
        report.add(
            &path,
            format!("must be a map of stream name to stream, got {}", node.kind()),
        );
        return None;
    };
    if entries.is_empty() {
        report.add(&path, "must list at least one stream (or be left out)");
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for (name, body) in entries {
        let mut p = path.clone();
        p.push(name.clone());
        if !is_identifier(name) {
            report.add(&p, "stream names may use only letters, digits, '_' and '-'");
            ok = false;
            continue;
        }
        let stream = (|| {
            let mut f = Fields::of(report, p, body)?;
            let query = match f.optional("query") {
                Some((qp, n)) => query_map(report, qp, n),
                None => Some(Vec::new()),
            };
            let sub_limit = match f.optional("sub_limit") {
                Some((sp, n)) => rate_map(report, sp, n).map(Some),
                None => Some(None),
            };
            f.finish(report, &STREAM_KEYS);
            Some(StreamSpec {
                name: name.clone(),
                query: query?,
                sub_limit: sub_limit?,
            })
        })();
        match stream {
            Some(s) => out.push(s),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// Vendor and stream names end up in file paths and Redis keys.
fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

const POLICY_KEYS: [&str; 19] = [
    "base_url_env",
    "token_env",
    "auth",
    "dialect",
    "clock_skew_warn_s",
    "sustained_rate_per_sec",
    "burst_capacity",
    "max_retry_attempts",
    "default_retry_after_s",
    "bucket_key",
    "max_wait_s",
    "max_concurrency",
    "pacing_margin_ms",
    "vendor_burst_floor",
    "http",
    "delta",
    "streams",
    "study_limit",
    "masked_query_params",
];

fn policy(report: &mut Report, vendor: &str, node: &Node) -> Option<Policy> {
    let path = vec![vendor.to_string()];
    if !is_identifier(vendor) {
        report.add(&path, "vendor names may use only letters, digits, '_' and '-'");
    }
    let mut f = Fields::of(report, path, node)?;
    let base_url_path = f.child("base_url_env");
    let auth_path = f.child("auth");
    let base_url_env = f
        .required(report, "base_url_env")
        .and_then(|(p, n)| env_name(report, &p, n));
    let token_env = f.optional("token_env");
    let token_env_path = f.child("token_env");
    let auth_node = f.optional("auth");
    let auth = super::auth::auth(report, f.child("auth"), auth_node, (token_env_path, token_env));
    let dialect_node = f.optional("dialect");
    let rate = rate_fields(report, &mut f);
    let max_retry_attempts = or_default(
        f.optional("max_retry_attempts"),
        DEFAULT_MAX_RETRY_ATTEMPTS,
        |p, n| integer(report, p, n, 1, 1000),
    );
    let default_retry_after = or_default(
        f.optional("default_retry_after_s"),
        DEFAULT_RETRY_AFTER_S,
        |p, n| non_negative(report, p, n, MAX_SECONDS),
    );
    let bucket_key = f
        .required(report, "bucket_key")
        .and_then(|(p, n)| template(report, &p, n));
    let max_wait_path = f.child("max_wait_s");
    let max_wait = or_default(f.optional("max_wait_s"), DEFAULT_MAX_WAIT_S, |p, n| {
        positive(report, p, n, MAX_SECONDS)
    });
    let max_concurrency = or_default(f.optional("max_concurrency"), DEFAULT_MAX_CONCURRENCY, |p, n| {
        integer(report, p, n, 1, 1024)
    });
    let pacing_margin = or_default(
        f.optional("pacing_margin_ms"),
        DEFAULT_PACING_MARGIN_MS,
        |p, n| integer(report, p, n, 0, 10_000),
    );
    let vendor_burst_floor = match f.optional("vendor_burst_floor") {
        Some((p, n)) => integer(report, &p, n, 0, i64::MAX).map(|v| Some(v as u64)),
        None => Some(None),
    };
    let http_node = f.optional("http");
    let http = http(report, f.child("http"), http_node.map(|(_, n)| n));
    let delta = match f.optional("delta") {
        Some((p, n)) => delta(report, p, n).map(Some),
        None => Some(None),
    };
    let streams_node = f.optional("streams");
    let streams = streams(report, f.child("streams"), streams_node.map(|(_, n)| n));
    let masked_query_params = match f.optional("masked_query_params") {
        Some((p, Node::Seq(items))) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let mut ip = p.clone();
                ip.push(i.to_string());
                if let Some(s) = string(report, &ip, item) {
                    out.push(s.to_string());
                }
            }
            (out.len() == items.len()).then_some(out)
        }
        Some((p, other)) => {
            report.add(
                &p,
                format!("must be a list of query parameter names, got {}", other.kind()),
            );
            None
        }
        None => Some(
            crate::mask::DEFAULT_PARAMS
                .iter()
                .map(|s| s.to_string())
                .collect(),
        ),
    };
    let study_limit = match f.optional("study_limit") {
        Some((p, n)) => rate_map(report, p, n).map(Some),
        None => Some(None),
    };
    let clock_skew_warn = or_default(
        f.optional("clock_skew_warn_s"),
        DEFAULT_CLOCK_SKEW_WARN_S,
        |p, n| non_negative(report, p, n, MAX_SECONDS),
    );
    // A VQL delta is one POSTed query: URL parameters would be silently unused.
    if let (Some(Some(d)), Some(ss)) = (&delta, &streams) {
        if d.vql.is_some() {
            let mut query_path = f.child("delta");
            query_path.push("query".into());
            if !d.query.is_empty() {
                report.add(
                    &query_path,
                    "not used with delta.vql (the query is the whole request)",
                );
            }
            for s in ss.iter().filter(|s| !s.query.is_empty()) {
                let mut p = f.child("streams");
                p.extend([s.name.clone(), "query".into()]);
                report.add(&p, "not used with delta.vql (the query is the whole request)");
            }
        }
    }
    let format = delta.as_ref().and_then(|d| d.as_ref().map(|d| d.format));
    let dialect = super::auth::dialect(report, dialect_node, format);
    f.finish(report, &POLICY_KEYS);

    // A secret variable that is also the URL variable would print the
    // secret wherever the URL goes (errors, audit lines, logs).
    if let (Some(url_env), Some(auth)) = (&base_url_env, &auth) {
        let secret_keys = auth
            .env_vars()
            .into_iter()
            .filter(|(key, _)| *key != "auth.username_env");
        for (key, name) in secret_keys {
            if name == url_env {
                report.add(
                    &base_url_path,
                    format!(
                        "names {name}, which {key} names too: a secret variable must not also be the URL"
                    ),
                );
            }
        }
    }
    // Nor may a secret variable be named by another auth key (a password
    // that is also the user name would be shown wherever the user is).
    if let Some(auth) = &auth {
        let vars = auth.env_vars();
        for (i, (key, name)) in vars.iter().enumerate() {
            let Some((other, _)) = vars[i + 1..].iter().find(|(_, n)| n == name) else {
                continue;
            };
            report.add(
                &auth_path,
                format!("{key} and {other} both name {name}: each credential needs its own variable"),
            );
        }
    }
    let (default_retry_after, max_wait) = (default_retry_after?, max_wait?);
    if default_retry_after > max_wait {
        report.add(
            &max_wait_path,
            format!(
                "must be >= default_retry_after_s ({default_retry_after}), or every 429 without \
                 Retry-After would end the run; got {max_wait}"
            ),
        );
        return None;
    }
    Some(Policy {
        vendor: vendor.to_string(),
        base_url_env: base_url_env?,
        auth: auth?,
        dialect: dialect?,
        rate: rate?,
        max_retry_attempts: u32::try_from(max_retry_attempts?).ok()?,
        default_retry_after: seconds(default_retry_after),
        max_wait: seconds(max_wait),
        bucket_key: bucket_key?,
        max_concurrency: u32::try_from(max_concurrency?).ok()?,
        pacing_margin: Duration::from_millis(u64::try_from(pacing_margin?).ok()?),
        vendor_burst_floor: vendor_burst_floor?,
        http: http?,
        delta: delta?,
        streams: streams?,
        study_limit: study_limit?,
        masked_query_params: masked_query_params?,
        clock_skew_warn: seconds(clock_skew_warn?),
    })
}

/// Validates a whole document. `text` is the source, for line numbers.
pub fn config(text: &str, root: &Node) -> Result<Config, Vec<Problem>> {
    let mut report = Report {
        text,
        problems: Vec::new(),
    };
    let vendors = match root {
        Node::Null => {
            report.add(&[], "the file is empty; expected a map of vendor name to policy");
            Vec::new()
        }
        Node::Map(entries) if entries.is_empty() => {
            report.add(&[], "no vendors are defined");
            Vec::new()
        }
        Node::Map(entries) => entries
            .iter()
            .filter_map(|(vendor, node)| policy(&mut report, vendor, node))
            .collect(),
        other => {
            report.add(
                &[],
                format!("expected a map of vendor name to policy, got {}", other.kind()),
            );
            Vec::new()
        }
    };
    if report.problems.is_empty() {
        Ok(Config { vendors })
    } else {
        // File order reads best; problems without a line go last.
        report.problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
        Err(report.problems)
    }
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn suggests_near_keys_only() {
        let known = ["sustained_rate_per_sec", "burst_capacity"];
        assert_eq!(
            closest("sustained_rate_per_se", &known),
            Some("sustained_rate_per_sec")
        );
        assert_eq!(closest("burst", &known), None);
    }
}

//! Turns a [`Node`] tree into a [`Config`], collecting every problem.
//!
//! A policy file is edited by hand and reviewed under change control, so one
//! validation run reports all of its problems at once, each with the dotted
//! key path and (when it can be found) the line.

use std::time::Duration;

use super::check::{
    env_name, integer, non_negative, or_default, positive, query_map, seconds, string, Fields, Report,
    MAX_SECONDS,
};
use super::delta::delta;
use super::policy::{Config, HttpLimits, Policy, Rate, StreamSpec};
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
/// A server clock further than this from ours is not taken as evidence:
/// an hour covers a host or a server with broken NTP for a while, and is
/// far short of the days or centuries a bad `Date` header can claim.
const DEFAULT_CLOCK_SKEW_MAX_S: f64 = 3600.0;

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

const STREAM_KEYS: [&str; 4] = ["query", "sub_limit", "lookback", "delta"];

fn streams(
    report: &mut Report,
    path: Vec<String>,
    node: Option<&Node>,
    delta: Option<&super::policy::Delta>,
    server_zone: Option<&crate::zone::Zone>,
) -> Option<Vec<StreamSpec>> {
    let Some(node) = node else {
        // No streams listed: the vendor's delta is one stream of its own.
        return Some(vec![StreamSpec {
            name: "default".into(),
            query: Vec::new(),
            sub_limit: None,
            lookback: None,
            delta: None,
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
            let own = match f.optional("delta") {
                Some((dp, n)) => super::delta::delta(report, dp, n, server_zone).map(|d| Some(Box::new(d))),
                None => Some(None),
            };
            let lookback = match (f.optional("lookback"), &own) {
                (Some((lp, _)), Some(Some(_))) => {
                    report.add(
                        &lp,
                        "not used with the stream's own delta: give it a delta.lookback",
                    );
                    None
                }
                (Some((lp, n)), _) => super::lookback::for_stream(report, lp, n, delta).map(Some),
                (None, _) => Some(None),
            };
            f.finish(report, &STREAM_KEYS);
            Some(StreamSpec {
                name: name.clone(),
                query: query?,
                sub_limit: sub_limit?,
                lookback: lookback?,
                delta: own?,
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

const POLICY_KEYS: [&str; 24] = [
    "base_url_env",
    "server_timezone",
    "token_env",
    "auth",
    "dialect",
    "client_id",
    "clock_skew_warn_s",
    "clock_skew_max_s",
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
    "window_quota",
    "masked_query_params",
    "object_lock",
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
    let client_id = match f.optional("client_id") {
        Some((p, n)) => string(report, &p, n).and_then(|id| {
            let valid = !id.is_empty()
                && id.len() <= 100
                && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
            if !valid {
                report.add(
                    &p,
                    "a Vault client ID is 1 to 100 letters, digits, '.', '_' or '-' (Vault REST API reference, \
                     \"Client ID\"); Vault would log any other value as invalid_client_id",
                );
            }
            valid.then(|| Some(id.to_string()))
        }),
        None => Some(None),
    };
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
        .and_then(|(p, n)| super::check::quota_template(report, &p, n));
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
    // REDCap states every time in its server's local time, without an
    // offset (REDCap's API help): the zone that clock shows.
    let server_timezone_path = f.child("server_timezone");
    let server_timezone = super::check::optional_zone(report, f.optional("server_timezone"));
    let zone = server_timezone.as_ref().and_then(Option::as_ref);
    let delta = match f.optional("delta") {
        Some((p, n)) => delta(report, p, n, zone).map(Some),
        None => Some(None),
    };
    let streams_node = f.optional("streams");
    let streams = streams(
        report,
        f.child("streams"),
        streams_node.map(|(_, n)| n),
        delta.as_ref().and_then(Option::as_ref),
        zone,
    );
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
    let object_lock = match f.optional("object_lock") {
        Some((p, n)) => super::object_lock::object_lock(report, p, n).map(Some),
        None => Some(None),
    };
    let study_limit = match f.optional("study_limit") {
        Some((p, n)) => rate_map(report, p, n).map(Some),
        None => Some(None),
    };
    let window_quota = match f.optional("window_quota") {
        Some((p, n)) => super::window_quota::window_quota(report, p, n, rate).map(Some),
        None => Some(None),
    };
    let clock_skew_warn = or_default(
        f.optional("clock_skew_warn_s"),
        DEFAULT_CLOCK_SKEW_WARN_S,
        |p, n| non_negative(report, p, n, MAX_SECONDS),
    );
    let clock_skew_max_path = f.child("clock_skew_max_s");
    let clock_skew_max = or_default(
        f.optional("clock_skew_max_s"),
        DEFAULT_CLOCK_SKEW_MAX_S,
        |p, n| positive(report, p, n, MAX_SECONDS),
    );
    if let (Some(warn), Some(max)) = (clock_skew_warn, clock_skew_max) {
        if max < warn {
            report.add(
                &clock_skew_max_path,
                format!("must be >= clock_skew_warn_s ({warn}); got {max}"),
            );
        }
    }
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
        let secret_keys = auth.secret_env_vars();
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
    let dialect = dialect?;
    if let (Some(auth), Some(delta), Some(streams)) = (&auth, &delta, &streams) {
        super::redcap::check(
            report,
            &[vendor.to_string()],
            dialect,
            auth,
            delta.as_ref(),
            streams,
        );
    }
    if dialect == super::policy::Dialect::Redcap && matches!(server_timezone, Some(None)) {
        report.add(
            &server_timezone_path,
            "required key is missing (REDCap states every time in its server's local time, without an offset: \
             name that zone, such as America/Chicago)",
        );
        return None;
    }
    let client_id = client_id?.or_else(|| {
        (dialect == super::policy::Dialect::Vault).then(|| super::policy::DEFAULT_VAULT_CLIENT_ID.to_string())
    });
    Some(Policy {
        vendor: vendor.to_string(),
        base_url_env: base_url_env?,
        auth: auth?,
        dialect,
        client_id,
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
        window_quota: window_quota?,
        masked_query_params: masked_query_params?,
        object_lock: object_lock?,
        clock_skew_warn: seconds(clock_skew_warn?),
        clock_skew_max: seconds(clock_skew_max.filter(|max| *max >= clock_skew_warn.unwrap_or(0.0))?),
        server_timezone: server_timezone?,
    })
}

/// Validates a whole document. `text` is the source, for line numbers.
pub(super) fn config(text: &str, root: &Node) -> Result<Config, Vec<Problem>> {
    let mut report = Report::new(text);
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
    secrets_apart(&mut report, &vendors);
    report.finish().map(|()| Config { vendors })
}

/// Across vendors: a variable that holds one vendor's secret must not be
/// another vendor's URL or user-name variable, which are shown in messages
/// and audit lines. (Within one vendor, `policy` checks the same.)
fn secrets_apart(report: &mut Report, vendors: &[Policy]) {
    for owner in vendors {
        let secrets = owner.auth.secret_env_vars();
        for (key, secret) in secrets {
            for other in vendors.iter().filter(|p| p.vendor != owner.vendor) {
                let shown =
                    std::iter::once(("base_url_env", &other.base_url_env)).chain(other.auth.shown_env_vars());
                for (other_key, var) in shown {
                    if var == secret {
                        report.add(
                            &[other.vendor.clone(), other_key.to_string()],
                            format!(
                                "names {}, which {}.{key} names as a secret: a secret variable must not \
                                 also be shown as a URL or user name",
                                var.as_str(),
                                owner.vendor
                            ),
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::check::closest;

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

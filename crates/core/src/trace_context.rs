//! The scheduler's trace context, as W3C Trace Context's environment
//! carrier passes it to a child process: `TRACEPARENT` and `TRACESTATE`.
//!
//! A run stamps it into its `run_started` line, so that the audit trail of
//! a run joins the trace of the scheduler task that started it (Airflow,
//! Dagster and OpenTelemetry's instrumentations set these variables). It is
//! evidence of who asked, never sent to a vendor.
//!
//! Parsed as the W3C recommendation says (version-format `00`: lowercase
//! hex, an all-zero trace-id or parent-id is invalid, version `ff` is
//! invalid). An invalid traceparent is left out with a warning naming the
//! variable, and then tracestate too (the recommendation: a tracestate
//! without a valid traceparent is not used): a malformed variable from a
//! scheduler never stops a sync.

use serde::Serialize;

/// The environment variable holding the traceparent.
pub(crate) const TRACEPARENT: &str = "TRACEPARENT";
/// The environment variable holding the tracestate.
pub(crate) const TRACESTATE: &str = "TRACESTATE";

/// The longest tracestate the recommendation allows a vendor to pass on.
const TRACESTATE_MAX: usize = 512;

/// A valid trace context, as the run header records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceContext {
    pub traceparent: String,
    pub trace_id: String,
    pub parent_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// The context in this process's environment; `None` when there is
    /// none or it is invalid (then with a warning naming the variable).
    pub(crate) fn from_env() -> Option<TraceContext> {
        let parent = std::env::var(TRACEPARENT).ok()?;
        let state = std::env::var(TRACESTATE).ok();
        match TraceContext::parse(&parent, state.as_deref()) {
            Ok((context, state_refused)) => {
                if let Some(why) = state_refused {
                    tracing::warn!("{TRACESTATE} is left out of the run header: {why}");
                }
                Some(context)
            }
            Err(why) => {
                tracing::warn!(
                    "{TRACEPARENT} is left out of the run header (and {TRACESTATE} with it): {why}"
                );
                None
            }
        }
    }

    /// `traceparent` (and `tracestate`, dropped with the reason when
    /// invalid), or why the traceparent is invalid.
    pub(crate) fn parse(
        traceparent: &str,
        tracestate: Option<&str>,
    ) -> Result<(TraceContext, Option<String>), String> {
        let parts: Vec<&str> = traceparent.trim().split('-').collect();
        let [version, trace_id, parent_id, flags, ..] = parts[..] else {
            return Err("not version-traceid-parentid-flags".into());
        };
        let hex =
            |s: &str, len: usize| s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !hex(version, 2) || version == "ff" {
            return Err(format!(
                "version {version:?} is not two lowercase hex digits other than ff"
            ));
        }
        // Version 00 has exactly four fields; a later version may add more.
        if version == "00" && parts.len() != 4 {
            return Err("version 00 has exactly four fields".into());
        }
        if !hex(trace_id, 32) || trace_id.bytes().all(|b| b == b'0') {
            return Err("the trace-id is not 32 lowercase hex digits, not all zero".into());
        }
        if !hex(parent_id, 16) || parent_id.bytes().all(|b| b == b'0') {
            return Err("the parent-id is not 16 lowercase hex digits, not all zero".into());
        }
        if !hex(flags, 2) {
            return Err("the trace-flags are not two lowercase hex digits".into());
        }
        let (tracestate, refused) = match tracestate.map(str::trim).filter(|s| !s.is_empty()) {
            None => (None, None),
            Some(s) if s.len() > TRACESTATE_MAX => {
                (None, Some(format!("longer than {TRACESTATE_MAX} characters")))
            }
            Some(s) if !s.bytes().all(|b| (0x20..0x7f).contains(&b)) => {
                (None, Some("holds characters other than printable ASCII".into()))
            }
            Some(s) => match list_problem(s) {
                Some(why) => (None, Some(why)),
                None => (Some(s.to_string()), None),
            },
        };
        let context = TraceContext {
            traceparent: traceparent.trim().to_string(),
            trace_id: trace_id.into(),
            parent_id: parent_id.into(),
            tracestate,
        };
        Ok((context, refused))
    }
}

/// The most list-members a tracestate may carry.
const TRACESTATE_MEMBERS: usize = 32;

/// Why `list` is not a tracestate as the recommendation's grammar writes
/// it (section 3.3.1): at most 32 comma-separated `key=value` members
/// (empty ones allowed), each key a simple key or `tenant@system`, each
/// value up to 256 printable characters without `,` or `=` and not ending
/// in a space, no key twice. A recipient discards a tracestate that breaks
/// it, whole.
fn list_problem(list: &str) -> Option<String> {
    let key_char = |b: u8| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'*' | b'/');
    let simple = |k: &str, first_digit: bool, max: usize| {
        k.len() <= max
            && k.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_lowercase() || (first_digit && b.is_ascii_digit()))
            && k.bytes().all(key_char)
    };
    let mut keys = std::collections::HashSet::new();
    let members: Vec<&str> = list
        .split(',')
        .map(|m| m.trim_matches([' ', '\t']))
        .filter(|m| !m.is_empty())
        .collect();
    if members.len() > TRACESTATE_MEMBERS {
        return Some(format!("more than {TRACESTATE_MEMBERS} list-members"));
    }
    for (i, member) in members.iter().enumerate() {
        let n = i + 1;
        let Some((key, value)) = member.split_once('=') else {
            return Some(format!("list-member {n} is not key=value"));
        };
        let key_ok = match key.split_once('@') {
            Some((tenant, system)) => simple(tenant, true, 241) && simple(system, false, 14),
            None => simple(key, false, 256),
        };
        if !key_ok {
            return Some(format!(
                "list-member {n}'s key is not a lowercase key the recommendation allows"
            ));
        }
        let value_ok = (1..=256).contains(&value.len())
            && !value.ends_with(' ')
            && value
                .bytes()
                .all(|b| (0x20..0x7f).contains(&b) && b != b',' && b != b'=');
        if !value_ok {
            return Some(format!(
                "list-member {n}'s value is not 1 to 256 printable characters without ',' or '='"
            ));
        }
        if !keys.insert(key) {
            return Some(format!("list-member {n} repeats a key"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::TraceContext;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_recommendations_example_is_read() {
        let (c, refused) =
            TraceContext::parse(VALID, Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")).unwrap();
        assert_eq!(c.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(c.parent_id, "00f067aa0ba902b7");
        assert_eq!(
            c.tracestate.as_deref(),
            Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
        );
        assert_eq!(refused, None);
        // A later version may carry more fields.
        assert!(TraceContext::parse(&format!("01{}-extra", &VALID[2..]), None).is_ok());
    }

    #[test]
    fn what_the_recommendation_calls_invalid_is_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-x1",
        ] {
            assert!(TraceContext::parse(bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_tracestate_too_long_or_not_ascii_is_dropped_with_the_reason() {
        let (c, why) = TraceContext::parse(VALID, Some(&"a=b,".repeat(200))).unwrap();
        assert_eq!((c.tracestate, why.is_some()), (None, true));
        let (c, why) = TraceContext::parse(VALID, Some("a=é")).unwrap();
        assert_eq!((c.tracestate, why.is_some()), (None, true));
    }

    #[test]
    fn a_tracestate_outside_the_recommendations_grammar_is_dropped_naming_the_member() {
        for (bad, said) in [
            ("rojo", "list-member 1 is not key=value"),
            ("Rojo=1", "list-member 1's key"),
            ("rojo=1,9x=2", "list-member 2's key"),
            ("a@Sys=1", "list-member 1's key"),
            ("rojo=a=b", "list-member 1's value"),
            ("rojo=", "list-member 1's value"),
            ("rojo=1,rojo=2", "list-member 2 repeats a key"),
        ] {
            let (c, why) = TraceContext::parse(VALID, Some(bad)).unwrap();
            assert_eq!(c.tracestate, None, "{bad}");
            assert!(why.as_deref().is_some_and(|w| w.contains(said)), "{bad}: {why:?}");
        }
        let many: String = (0..33).map(|i| format!("k{i}=v")).collect::<Vec<_>>().join(",");
        let (c, why) = TraceContext::parse(VALID, Some(&many)).unwrap();
        assert_eq!(
            (c.tracestate, why.as_deref()),
            (None, Some("more than 32 list-members"))
        );
        // Empty members, spaces around members, a tenant key and a value
        // with spaces inside are all the grammar's.
        let good = "t61@dd=a b, ,rojo=00f067aa0ba902b7 ,congo=t61rcWkgMzE";
        let (c, why) = TraceContext::parse(VALID, Some(good)).unwrap();
        assert_eq!((c.tracestate.as_deref(), why), (Some(good), None));
    }
}

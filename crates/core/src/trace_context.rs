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
            Some(s) => (Some(s.to_string()), None),
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
}

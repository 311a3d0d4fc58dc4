//! `--metrics-file`: a Prometheus textfile-collector file, replaced
//! atomically at the end of every run, one series per stream.
//!
//! The node exporter reads the directory; alert on
//! `edc_sync_last_success_timestamp_seconds` going stale, not on exit 75.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::stream::StreamIdentity;
use crate::sync::{StreamReport, WaitKind};

/// Label values are quoted; backslash, quote and newline are escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn labels(id: &StreamIdentity, stream: &str) -> String {
    format!(
        "vendor=\"{}\",tenant=\"{}\",study=\"{}\",protocol_version=\"{}\",stream=\"{}\"",
        label(&id.vendor),
        label(id.tenant.as_deref().unwrap_or("")),
        label(id.study.as_deref().unwrap_or("")),
        label(id.protocol_version.as_deref().unwrap_or("")),
        label(stream)
    )
}

/// The last-success timestamps in an existing file, by label set, so a
/// failed run does not erase when the stream last succeeded.
fn previous_successes(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("edc_sync_last_success_timestamp_seconds{"))
        .filter_map(|rest| {
            rest.split_once("} ")
                .map(|(labels, value)| (labels.to_string(), value.trim().to_string()))
        })
        .collect()
}

/// The temp file the metrics are written to before the rename.
fn temp_of(path: &Path) -> std::path::PathBuf {
    path.with_extension("prom.tmp")
}

/// Proves before a run that its metrics can be written where asked (the
/// temp file created and removed), so a wrong `--metrics-file` stops the
/// run before anything is fetched rather than after a successful sync.
pub(crate) fn check_writable(path: &Path) -> std::io::Result<()> {
    if path.is_dir() {
        return Err(std::io::Error::other("it is a directory"));
    }
    let tmp = temp_of(path);
    crate::no_follow::create(&tmp)?;
    std::fs::remove_file(&tmp)
}

/// Writes the metrics of one run to `path` (temp file, fsync, rename).
pub(crate) fn write(
    path: &Path,
    base: &StreamIdentity,
    reports: &[StreamReport],
    streams: &[String],
    exit_code: u8,
    duration_s: f64,
) -> std::io::Result<()> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default();
    let previous = crate::no_follow::read_string(path)
        .map(|t| previous_successes(&t))
        .unwrap_or_default();
    let mut out = String::new();
    let metric = |out: &mut String, name: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    };
    let series = |name: &str, f: &dyn Fn(&StreamReport) -> f64| -> String {
        let mut s = String::new();
        for r in reports {
            let _ = writeln!(s, "{name}{{{}}} {}", labels(base, &r.stream), f(r));
        }
        s
    };
    metric(&mut out, "edc_sync_pages", "Pages committed by the last run.");
    out.push_str(&series("edc_sync_pages", &|r| r.pages as f64));
    metric(&mut out, "edc_sync_records", "Records committed by the last run.");
    out.push_str(&series("edc_sync_records", &|r| r.records as f64));
    metric(&mut out, "edc_sync_bytes", "Bytes landed by the last run.");
    out.push_str(&series("edc_sync_bytes", &|r| r.bytes as f64));
    metric(
        &mut out,
        "edc_sync_throttled",
        "429/503 responses in the last run.",
    );
    out.push_str(&series("edc_sync_throttled", &|r| {
        r.waits.iter().filter(|w| w.kind == WaitKind::Throttled).count() as f64
    }));
    metric(
        &mut out,
        "edc_sync_retries",
        "Retries after 5xx, transport errors or truncated bodies in the last run.",
    );
    out.push_str(&series("edc_sync_retries", &|r| {
        r.waits.iter().filter(|w| w.kind == WaitKind::Retry).count() as f64
    }));
    metric(
        &mut out,
        "edc_sync_wait_seconds",
        "Seconds waited in the last run, by reason.",
    );
    for r in reports {
        for kind in [WaitKind::Throttled, WaitKind::Retry, WaitKind::VendorBurst] {
            // An empty f64 sum is -0.0: written as 0.
            let total: f64 =
                unsigned_zero(r.waits.iter().filter(|w| w.kind == kind).map(|w| w.seconds).sum());
            let _ = writeln!(
                out,
                "edc_sync_wait_seconds{{{},reason=\"{}\"}} {total}",
                labels(base, &r.stream),
                kind.label()
            );
        }
    }
    metric(
        &mut out,
        "edc_sync_clock_skew_seconds",
        "The EDC's clock (Date header) minus this host's, at the last response of the run.",
    );
    for r in reports {
        if let Some(skew) = r.clock_skew_s {
            let skew = unsigned_zero(skew);
            let _ = writeln!(
                out,
                "edc_sync_clock_skew_seconds{{{}}} {skew}",
                labels(base, &r.stream)
            );
        }
    }
    metric(
        &mut out,
        "edc_sync_last_success_timestamp_seconds",
        "Unix time the stream last finished a run with exit 0.",
    );
    for stream in streams {
        let l = labels(base, stream);
        let value = if exit_code == 0 {
            format!("{now:.3}")
        } else {
            previous.get(&l).cloned().unwrap_or_else(|| "0".into())
        };
        let _ = writeln!(out, "edc_sync_last_success_timestamp_seconds{{{l}}} {value}");
    }
    metric(
        &mut out,
        "edc_sync_last_exit_code",
        "Exit code of the last run (75 = try later, not an alarm).",
    );
    for stream in streams {
        let _ = writeln!(
            out,
            "edc_sync_last_exit_code{{{}}} {exit_code}",
            labels(base, stream)
        );
    }
    metric(
        &mut out,
        "edc_sync_run_duration_seconds",
        "Wall time of the last run.",
    );
    for stream in streams {
        let _ = writeln!(
            out,
            "edc_sync_run_duration_seconds{{{}}} {duration_s:.3}",
            labels(base, stream)
        );
    }
    crate::durable::replace_durably(path, &temp_of(path), out.as_bytes())
}

/// `-0` is 0 to a reader (and to Prometheus): adding +0.0 turns -0.0
/// into 0.0 and leaves every other value as it is.
fn unsigned_zero(x: f64) -> f64 {
    x + 0.0
}

#[cfg(test)]
mod tests {
    #[test]
    fn previous_success_times_are_read_back() {
        let text =
            "# HELP x\nedc_sync_last_success_timestamp_seconds{vendor=\"v\",stream=\"s\"} 1764700000.5\n";
        let m = super::previous_successes(text);
        assert_eq!(
            m.get("vendor=\"v\",stream=\"s\"").map(String::as_str),
            Some("1764700000.5")
        );
        assert_eq!(super::label("a\"b\\c"), "a\\\"b\\\\c");
    }

    #[test]
    fn no_figure_is_written_as_minus_0() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.prom");
        let base = crate::stream::StreamIdentity {
            vendor: "v".into(),
            tenant: None,
            study: Some("s".into()),
            protocol_version: None,
            stream: None,
        };
        let report = crate::sync::StreamReport {
            stream: "default".into(),
            clock_skew_s: Some(-0.0),
            ..Default::default()
        };
        super::write(&path, &base, &[report], &["default".into()], 0, 1.0).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(" -0"), "{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("edc_sync_clock_skew_seconds{") && l.ends_with(" 0")),
            "{text}"
        );
    }
}

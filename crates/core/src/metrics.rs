//! A run's figures in Prometheus' text exposition format, one series per
//! stream, and where they go: `--metrics-file`, a textfile-collector file
//! replaced atomically at the end of every run, and `--metrics-push`, a
//! Pushgateway (`metrics_push`). A run refused before it starts reports
//! too, so that a host that never succeeded is seen.
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

/// Where a run's figures go: a textfile-collector file (`--metrics-file`),
/// a Prometheus Pushgateway (`--metrics-push`), both or neither.
#[derive(Debug, Clone, Default)]
pub struct MetricsOutlets {
    pub file: Option<std::path::PathBuf>,
    /// The Pushgateway's base URL, as given (checked when the run is
    /// planned).
    pub push: Option<String>,
}

/// One metric: its name, its help, and its samples (label set, value).
struct Metric {
    name: &'static str,
    help: &'static str,
    samples: Vec<(String, String)>,
}

/// Metrics in Prometheus' text exposition format; a metric without a
/// sample is left out whole.
fn render(metrics: &[Metric]) -> String {
    let mut out = String::new();
    for m in metrics.iter().filter(|m| !m.samples.is_empty()) {
        let _ = writeln!(out, "# HELP {} {}\n# TYPE {} gauge", m.name, m.help, m.name);
        for (labels, value) in &m.samples {
            let _ = writeln!(out, "{}{{{labels}}} {value}", m.name);
        }
    }
    out
}

/// The figures of one run: `last_success` gives the value of a stream's
/// last-success series (by its label set), or `None` to leave it out.
pub(crate) fn exposition(
    base: &StreamIdentity,
    reports: &[StreamReport],
    streams: &[String],
    exit_code: u8,
    duration_s: f64,
    last_success: &dyn Fn(&str) -> Option<String>,
) -> String {
    let per_report = |f: &dyn Fn(&StreamReport) -> f64| -> Vec<(String, String)> {
        reports
            .iter()
            .map(|r| (labels(base, &r.stream), f(r).to_string()))
            .collect()
    };
    let per_stream = |f: &dyn Fn(&str) -> Option<String>| -> Vec<(String, String)> {
        streams
            .iter()
            .filter_map(|s| {
                let l = labels(base, s);
                f(&l).map(|v| (l, v))
            })
            .collect()
    };
    let waits =
        |kind: WaitKind| move |r: &StreamReport| r.waits.iter().filter(|w| w.kind == kind).count() as f64;
    let mut wait_seconds = Vec::new();
    for r in reports {
        for kind in [WaitKind::Throttled, WaitKind::Retry, WaitKind::VendorBurst] {
            // An empty f64 sum is -0.0: written as 0.
            let total: f64 =
                unsigned_zero(r.waits.iter().filter(|w| w.kind == kind).map(|w| w.seconds).sum());
            wait_seconds.push((
                format!("{},reason=\"{}\"", labels(base, &r.stream), kind.label()),
                total.to_string(),
            ));
        }
    }
    let skew = reports
        .iter()
        .filter_map(|r| {
            r.clock_skew_s
                .map(|s| (labels(base, &r.stream), unsigned_zero(s).to_string()))
        })
        .collect();
    render(&[
        Metric {
            name: "edc_sync_pages",
            help: "Pages committed by the last run.",
            samples: per_report(&|r| r.pages as f64),
        },
        Metric {
            name: "edc_sync_records",
            help: "Records committed by the last run.",
            samples: per_report(&|r| r.records as f64),
        },
        Metric {
            name: "edc_sync_bytes",
            help: "Bytes landed by the last run.",
            samples: per_report(&|r| r.bytes as f64),
        },
        Metric {
            name: "edc_sync_throttled",
            help: "429/503 responses in the last run.",
            samples: per_report(&waits(WaitKind::Throttled)),
        },
        Metric {
            name: "edc_sync_retries",
            help: "Retries after 5xx, transport errors or truncated bodies in the last run.",
            samples: per_report(&waits(WaitKind::Retry)),
        },
        Metric {
            name: "edc_sync_wait_seconds",
            help: "Seconds waited in the last run, by reason.",
            samples: wait_seconds,
        },
        Metric {
            name: "edc_sync_clock_skew_seconds",
            help: "The EDC's clock (Date header) minus this host's, at the last response of the run.",
            samples: skew,
        },
        Metric {
            name: "edc_sync_last_success_timestamp_seconds",
            help: "Unix time the stream last finished a run with exit 0.",
            samples: per_stream(last_success),
        },
        Metric {
            name: "edc_sync_last_exit_code",
            help: "Exit code of the last run (75 = try later, not an alarm).",
            samples: per_stream(&|_| Some(exit_code.to_string())),
        },
        Metric {
            name: "edc_sync_run_duration_seconds",
            help: "Wall time of the last run.",
            samples: per_stream(&|_| Some(format!("{duration_s:.3}"))),
        },
    ])
}

/// Seconds since the epoch, now.
fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// Writes the metrics of one run to `path` (temp file, fsync, rename). A
/// stream's last success is now after exit 0, else what the file said, or
/// 0 for a stream that never succeeded (so that a staleness alert fires).
pub(crate) fn write(
    path: &Path,
    base: &StreamIdentity,
    reports: &[StreamReport],
    streams: &[String],
    exit_code: u8,
    duration_s: f64,
) -> std::io::Result<()> {
    let now = now_s();
    let previous = crate::no_follow::read_string(path)
        .map(|t| previous_successes(&t))
        .unwrap_or_default();
    let last_success = |l: &str| {
        Some(match exit_code {
            0 => format!("{now:.3}"),
            _ => previous.get(l).cloned().unwrap_or_else(|| "0".into()),
        })
    };
    let text = exposition(base, reports, streams, exit_code, duration_s, &last_success);
    crate::durable::replace_durably(path, &temp_of(path), text.as_bytes())
}

/// Reports a run refused before it started (exit `exit_code`) to every
/// outlet, so that monitoring sees it: the file keeps each stream's last
/// success it held (0 for a host that never succeeded) with the refusal's
/// exit code; the Pushgateway gets the exit code of each stream the
/// command named (`""` when it named none: `--all-streams` before the
/// policy said which). Best effort: a failure here is a warning, the
/// refusal's own error is what the run reports.
pub(crate) async fn refused(
    outlets: &MetricsOutlets,
    base: &StreamIdentity,
    named: &[String],
    exit_code: u8,
) {
    let named: Vec<String> = match named.is_empty() {
        true => vec![String::new()],
        false => named.to_vec(),
    };
    if let Some(path) = &outlets.file {
        let previous = crate::no_follow::read_string(path)
            .map(|t| previous_successes(&t))
            .unwrap_or_default();
        let mut successes: Vec<(String, String)> = previous.into_iter().collect();
        if successes.is_empty() {
            successes = named.iter().map(|s| (labels(base, s), "0".into())).collect();
        }
        let text = render(&[
            Metric {
                name: "edc_sync_last_success_timestamp_seconds",
                help: "Unix time the stream last finished a run with exit 0.",
                samples: successes.clone(),
            },
            Metric {
                name: "edc_sync_last_exit_code",
                help: "Exit code of the last run (75 = try later, not an alarm).",
                samples: successes
                    .into_iter()
                    .map(|(l, _)| (l, exit_code.to_string()))
                    .collect(),
            },
        ]);
        if let Err(e) = crate::durable::replace_durably(path, &temp_of(path), text.as_bytes()) {
            tracing::warn!(
                "the metrics file {} was not written for the refused run: {e}",
                path.display()
            );
        }
    }
    if let Some(url) = &outlets.push {
        if let Ok(gateway) = crate::metrics_push::Pushgateway::parse(url) {
            for stream in &named {
                let text = exposition(base, &[], std::slice::from_ref(stream), exit_code, 0.0, &|_| None);
                gateway.push(base, stream, &text).await;
            }
        }
    }
}

/// Pushes the metrics of one run to the Pushgateway at `gateway`, one
/// group per stream; a stream's last success only after exit 0 (a POST
/// replaces only the metrics it carries, so the group keeps the last
/// success of an earlier run).
pub(crate) async fn push(
    gateway: &crate::metrics_push::Pushgateway,
    base: &StreamIdentity,
    reports: &[StreamReport],
    streams: &[String],
    exit_code: u8,
    duration_s: f64,
) {
    let now = format!("{:.3}", now_s());
    for stream in streams {
        let mine: Vec<StreamReport> = reports.iter().filter(|r| &r.stream == stream).cloned().collect();
        let last_success = |_: &str| (exit_code == 0).then(|| now.clone());
        let text = exposition(
            base,
            &mine,
            std::slice::from_ref(stream),
            exit_code,
            duration_s,
            &last_success,
        );
        gateway.push(base, stream, &text).await;
    }
    // A refusal before the streams were known was pushed under the
    // stream "": a run that knows them supersedes it.
    gateway.forget(base, "").await;
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

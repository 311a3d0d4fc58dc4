//! `bench large-page`: a page of any size commits and reads back. A
//! REDCap project of ROWS changes, each of its own record, on the
//! simulator's redcap profile (`edc-sync simulate --profile redcap`): its
//! log read in one window (one page of ROWS rows) and its records (an id
//! list of ROWS ids, then the records in batches), each stream synced,
//! synced again, and then `verify` and `audit verify` over what the runs
//! left. Every run and check must exit 0; the trail's longest line must be
//! within the 4 MiB a trail line may be.
//!
//! Figures: each run's wall time, CPU (user + system) and peak RSS
//! (`wait4`), the trail's lines, part lines and longest line. The floor of
//! a page's cost is its bytes: the page's size is printed beside it.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};
use serde::Serialize;

use super::harness::{waited, SimProcess};

/// How a part line's event is written.
const PART: &[u8] = b"\"event\":\"page_committed_part\"";

/// The most a trail line may be (the product's `line::MAX_LINE`).
const MAX_LINE: usize = 4 * 1024 * 1024;

/// One run of `sync` (or a check) as a child process.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub what: String,
    pub wall_s: f64,
    pub cpu_s: f64,
    pub peak_rss_mib: f64,
}

/// The figures of `bench large-page`.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub rows: u32,
    pub batch_size: u32,
    /// The landed log page's size: the one page of the log's window.
    pub log_page_bytes: u64,
    /// The landed id list's size.
    pub id_list_bytes: u64,
    pub runs: Vec<Run>,
    pub trail_lines: u64,
    pub part_lines: u64,
    pub longest_line_bytes: usize,
}

/// The policy: the shipped `redcap` block's shape with the quota opened
/// and the page cap raised to a gibibyte, the log and the records.
fn policy(batch_size: u32) -> String {
    format!(
        r#"redcap:
  base_url_env: EDC_SYNC_BENCH_URL
  server_timezone: America/Chicago
  token_env: EDC_SYNC_BENCH_TOKEN
  auth:
    scheme: redcap_token
  dialect: redcap
  sustained_rate_per_sec: 100000
  burst_capacity: 100000
  bucket_key: "rl:bench:{{host}}"
  max_wait_s: 300
  max_concurrency: 2
  masked_query_params: [records]
  http:
    max_body_bytes: 1073741824
    request_timeout_s: 600
  delta:
    path: /
    format: json
    paging: whole_window
    records_pointer: ""
    cursor_param: beginTime
    cursor_field: timestamp
    cursor_kind: server_local
    order: newest_first
    query:
      content: log
      format: json
      returnFormat: json
      logtype: record
    window:
      end_param: endTime
      format: local_minute
      settle_lag_s: 60
    lookback:
      seconds: 300
      identical_records: distinct
  streams:
    log: {{}}
    records:
      delta:
        path: /
        format: json
        paging: redcap_records
        record_id_field: record_id
        batch_size: {batch_size}
        records_pointer: ""
        cursor_param: dateRangeBegin
        query:
          content: record
          format: json
          type: flat
          exportSurveyFields: "false"
          exportDataAccessGroups: "true"
        window:
          end_param: dateRangeEnd
          format: local_second
          settle_lag_s: 60
        lookback:
          seconds: 300
"#
    )
}

/// Runs the benchmark in `work` with the `edc-sync` binary `exe`.
pub fn run(exe: &Path, work: &Path, rows: u32, batch_size: u32) -> anyhow::Result<Figures> {
    let rows_text = rows.to_string();
    let sim = SimProcess::start_with(
        exe,
        &[
            "--profile",
            "redcap",
            "--records",
            &rows_text,
            "--subjects",
            &rows_text,
        ],
    )?;
    std::fs::create_dir_all(work)?;
    let config = work.join("bench-policy.yaml");
    std::fs::write(&config, policy(batch_size))?;
    let trail = work.join("audit.jsonl");
    let api = format!("{}/api/", sim.url);
    let command = |args: &[&str]| {
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .env("EDC_SYNC_BENCH_URL", &api)
            .env("EDC_SYNC_BENCH_TOKEN", "bench-token")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        cmd
    };
    let (landing, state) = (work.join("landing"), work.join("state"));
    let (landing, state, config, trail_arg) = (
        landing.to_str().context("a UTF-8 work directory")?,
        state.to_str().context("a UTF-8 work directory")?,
        config.to_str().context("a UTF-8 work directory")?,
        trail.to_str().context("a UTF-8 work directory")?,
    );
    let mut runs = Vec::new();
    for stream in ["log", "records"] {
        for pass in ["first", "again"] {
            let sync = command(&[
                "sync",
                "--allow-dirty",
                "--pacer",
                "local",
                "--config",
                config,
                "--vendor",
                "redcap",
                "--study",
                "BENCH",
                "--stream",
                stream,
                "--out",
                landing,
                "--state",
                state,
                "--audit-log",
                trail_arg,
            ]);
            runs.push(measure(format!("sync --stream {stream} ({pass})"), sync)?);
        }
    }
    runs.push(measure(
        "verify".into(),
        command(&[
            "verify",
            "--out",
            landing,
            "--state",
            state,
            "--audit-log",
            trail_arg,
        ]),
    )?);
    runs.push(measure(
        "audit verify".into(),
        command(&["audit", "verify", trail_arg]),
    )?);
    let text = std::fs::read(&trail).with_context(|| format!("reading {}", trail.display()))?;
    let lines: Vec<&[u8]> = text.split(|b| *b == b'\n').filter(|l| !l.is_empty()).collect();
    let part_lines = lines
        .iter()
        .filter(|l| l.windows(PART.len()).any(|w| w == PART))
        .count() as u64;
    let longest_line_bytes = lines.iter().map(|l| l.len()).max().unwrap_or(0);
    if longest_line_bytes > MAX_LINE {
        bail!(
            "the trail holds a line of {longest_line_bytes} bytes, over the {MAX_LINE} a trail line may be"
        );
    }
    let page_bytes = |stream: &str| -> u64 {
        lines
            .iter()
            .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
            .filter(|l| l["event"] == "page_committed" && l["stream"] == stream)
            .filter_map(|l| l["bytes"].as_u64())
            .max()
            .unwrap_or(0)
    };
    Ok(Figures {
        rows,
        batch_size,
        log_page_bytes: page_bytes("log"),
        id_list_bytes: page_bytes("records"),
        runs,
        trail_lines: lines.len() as u64,
        part_lines,
        longest_line_bytes,
    })
}

/// Runs `cmd`, which must exit 0, and measures it.
fn measure(what: String, cmd: Command) -> anyhow::Result<Run> {
    let started = Instant::now();
    let (ok, usage) = waited(cmd)?;
    if !ok {
        bail!("{what} did not exit 0");
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Run {
        what,
        wall_s: started.elapsed().as_secs_f64(),
        cpu_s: tv(usage.ru_utime) + tv(usage.ru_stime),
        peak_rss_mib: usage.ru_maxrss as f64 / 1024.0,
    })
}

/// The figures as text, then one JSON line.
pub fn render(f: &Figures) -> String {
    let mut out = format!(
        "bench large-page: a REDCap project of {} changes, each of its own record (log page {:.1} MiB, id list \
         {:.1} MiB, batches of {})\n",
        f.rows,
        f.log_page_bytes as f64 / 1048576.0,
        f.id_list_bytes as f64 / 1048576.0,
        f.batch_size
    );
    for r in &f.runs {
        out.push_str(&format!(
            "  {:<30} exit 0  wall {:>8.2} s  CPU {:>8.2} s  peak RSS {:>8.1} MiB\n",
            r.what, r.wall_s, r.cpu_s, r.peak_rss_mib
        ));
    }
    out.push_str(&format!(
        "  trail: {} lines, {} page_committed_part lines, longest line {} bytes (bound {MAX_LINE})\n",
        f.trail_lines, f.part_lines, f.longest_line_bytes
    ));
    out.push_str(&serde_json::to_string(f).unwrap_or_default());
    out
}

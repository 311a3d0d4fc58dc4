//! `edc-sync sync`

use std::io::Write;
use std::path::Path;

use serde_json::json;

use crate::cli::{BackfillArgs, SummaryFormat, SyncArgs};
use edc_core::audit::AuditKey;
use edc_core::config::ConfigError;
use edc_core::error::IoContext;
use edc_core::ledger::StateLocation;
use edc_core::run::{self, AuditOptions, PacerChoice, RunResult, RunSpec, Streams};
use edc_core::store::{sanitize, LandingLocation};
use edc_core::sync::SyncOptions;
use edc_core::Error;

pub fn run(args: SyncArgs) -> Result<(), Error> {
    let format = args.summary;
    let result = refused_as(format, || {
        let mut spec = spec(args)?;
        spec.options.progress = progress("sync");
        let bar = spec.options.progress.clone();
        let result = run::execute_blocking(spec)?;
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        Ok(result)
    })?;
    print_summary(&result, format).io(|| "writing the summary to stdout".into())?;
    result.outcome
}

/// Runs `start`; with `--summary json`, an error before any run (a policy,
/// a flag, a variable) is the last stdout line too, as a refused run.
fn refused_as(
    format: SummaryFormat,
    start: impl FnOnce() -> Result<RunResult, Error>,
) -> Result<RunResult, Error> {
    let result = start();
    if let (SummaryFormat::Json, Err(e)) = (format, &result) {
        let line = json!({
            "outcome": "refused",
            "exit_code": e.exit().code(),
            "error": format!("{e:#}"),
        });
        writeln!(std::io::stdout().lock(), "{line}").io(|| "writing the summary to stdout".into())?;
    }
    result
}

/// `edc-sync backfill`: a sync whose state and landing live apart.
pub fn backfill(args: BackfillArgs) -> Result<(), Error> {
    if let Some(until) = &args.until {
        if edc_core::edc::payload::compare_params(&args.since, until) == std::cmp::Ordering::Greater {
            // A usage error, before anything happens: clap prints it and exits 2.
            use clap::CommandFactory;
            crate::cli::Cli::command()
                .error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!(
                        "--since {} is later than --until {until}: the window would be empty",
                        args.since
                    ),
                )
                .exit();
        }
    }
    let label = format!(
        "{}..{}",
        sanitize(&args.since),
        args.until.as_deref().map_or("open".into(), sanitize)
    );
    let missing_only = args.missing_only;
    let format = args.sync.summary;
    let result = refused_as(format, || backfill_run(args, label, missing_only))?;
    print_summary(&result, format).io(|| "writing the summary to stdout".into())?;
    if missing_only && format == SummaryFormat::Text {
        let mut out = std::io::stdout().lock();
        for r in &result.reports {
            writeln!(
                out,
                "  stream {}: {} records missing from the landing (landed now), {} already landed",
                r.stream, r.records, r.repeated_records
            )
            .io(|| "writing the summary to stdout".into())?;
        }
    }
    result.outcome
}

/// The backfill's run, planned and carried out; its summary printed.
fn backfill_run(args: BackfillArgs, mut label: String, missing_only: bool) -> Result<RunResult, Error> {
    let mut spec = spec(args.sync)?;
    if missing_only {
        let (Some(_), Some(out)) = (spec.state.dir(), spec.out.dir().map(Path::to_path_buf)) else {
            use clap::CommandFactory;
            crate::cli::Cli::command()
                .error(
                    clap::error::ErrorKind::ArgumentConflict,
                    "--missing-only compares with the manifest files of a landing directory: it needs --state \
                     and --out to be directories",
                )
                .exit();
        };
        // Each check reads its whole window afresh, beside the landing it
        // checks: what it lands is what was missing.
        spec.options.missing_from = Some(out);
        label = format!("missing-{label}-{}", sanitize(&edc_core::audit::now_rfc3339()));
    }
    match spec.state.clone() {
        // A state database keeps the backfill's cursor and manifest under
        // keys of their own, which are also where its pages land below
        // --out (OUT/backfill/SINCE..UNTIL/..., as with files), so the
        // trail names them from the one landing root.
        StateLocation::Db(_) => spec.options.state_namespace = Some(format!("backfill/{label}")),
        StateLocation::Dir(state) => {
            let legacy = format!(
                "{}..{}",
                edc_core::store::legacy_sanitize(&args.since),
                args.until
                    .as_deref()
                    .map_or("open".into(), edc_core::store::legacy_sanitize)
            );
            for root in [Some(&state), spec.out.dir().map(Path::to_path_buf).as_ref()]
                .into_iter()
                .flatten()
            {
                let (old, new) = (
                    root.join("backfill").join(&legacy),
                    root.join("backfill").join(&label),
                );
                // Found outside any run lock and before the trail is open,
                // so it is not moved here (unaudited, racing another run):
                // the operator moves it, and the next run proves it.
                if old != new && old.is_dir() && !new.exists() {
                    return Err(ConfigError::Identity(format!(
                        "backfill: {} holds this window under the name an earlier version gave it; move it to \
                         {} (`mv` the directory, with no run of this window going) and run again; nothing was \
                         fetched or moved",
                        old.display(),
                        new.display()
                    ))
                    .into());
                }
            }
            spec.options.landing_root = Some(format!("backfill/{label}"));
            spec.out = spec.out.join(&format!("backfill/{label}"));
            // The trail is the syncs' trail: its anchor stays where theirs is.
            spec.audit.anchor_root = Some(state.clone());
            spec.state = StateLocation::Dir(state.join("backfill").join(&label));
        }
    }
    spec.options.since = Some(args.since);
    spec.options.until = args.until;
    spec.options.progress = progress("backfill");
    let bar = spec.options.progress.clone();
    let result = run::execute_blocking(spec)?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(result)
}

fn spec(args: SyncArgs) -> Result<RunSpec, Error> {
    let streams = match (args.stream_name, args.all_streams) {
        (Some(name), _) => Streams::One(name),
        (None, true) => Streams::All,
        (None, false) => Streams::One("default".into()),
    };
    let pacer = match args.redis {
        Some(url) => PacerChoice::Redis(url),
        None => PacerChoice::Local,
    };
    // The audit key: a file named on the command line, else the variable.
    let key = match &args.audit_key_file {
        Some(path) => Some(AuditKey::from_file(path)?),
        None => AuditKey::from_env()?,
    };
    Ok(RunSpec {
        config: args.path.config,
        allow_dirty: args.allow_dirty,
        vendor: args.stream.vendor,
        tenant: args.stream.tenant,
        study: args.stream.study,
        protocol_version: args.stream.protocol_version,
        streams,
        out: LandingLocation::parse("--out", &args.dirs.out)?,
        state: StateLocation::parse("--state", &args.dirs.state)?,
        audit_log: args.dirs.audit_log,
        pacer,
        options: SyncOptions {
            max_pages: args.max_pages,
            dry_run: args.dry_run,
            repair_state: args.repair_state,
            accept_rollback: args.accept_rollback,
            ..SyncOptions::default()
        },
        endpoint: None,
        metrics: edc_core::run::MetricsOutlets {
            file: args.metrics_file,
            push: args.metrics_push,
        },
        audit: AuditOptions {
            repair: args.repair_audit,
            key,
            adopt_unsealed: args.adopt_unsealed_trail,
            anchor_root: None,
        },
    })
}

/// A spinner with pages and records, at a terminal only (`spinner`).
fn progress(what: &str) -> Option<indicatif::ProgressBar> {
    let bar = super::spinner("{spinner} {prefix} {pos} pages  {msg}  [{elapsed}]")?;
    bar.set_prefix(what.to_string());
    Some(bar)
}

/// A few lines for the operator, or one JSON object for a scheduler
/// (`--summary json`); the audit trail is the record.
pub fn print_summary(result: &RunResult, format: SummaryFormat) -> std::io::Result<()> {
    if format == SummaryFormat::Json {
        return writeln!(std::io::stdout().lock(), "{}", summary_json(result));
    }
    let mut out = std::io::stdout().lock();
    let status = if result.outcome.is_ok() { "ok" } else { "stopped" };
    writeln!(out, "run {}: {status}", result.run_id)?;
    for r in &result.reports {
        let window = if r.window_complete {
            "window complete"
        } else {
            "window in progress"
        };
        writeln!(
            out,
            "  stream {}: {} pages, {} records, {} bytes, {window}",
            r.stream, r.pages, r.records, r.bytes
        )?;
        for w in &r.waits {
            writeln!(out, "    waited {:.1} s: {}", w.seconds, w.reason)?;
        }
    }
    writeln!(out, "  audit trail: {}", result.audit_log.display())
}

/// The run as one JSON object: what `--summary json` prints last.
fn summary_json(result: &RunResult) -> serde_json::Value {
    let streams: Vec<serde_json::Value> = result
        .reports
        .iter()
        .map(|r| {
            json!({
                "stream": r.stream,
                "pages": r.pages,
                "records": r.records,
                "bytes": r.bytes,
                "already_landed_records": r.repeated_records,
                "window_complete": r.window_complete,
                "waits": r.waits.len(),
                "waited_s": r.waits.iter().map(|w| w.seconds).sum::<f64>(),
            })
        })
        .collect();
    let (outcome, exit_code, error) = match &result.outcome {
        Ok(()) => ("ok", 0, None),
        Err(e) => ("stopped", e.exit().code(), Some(format!("{e:#}"))),
    };
    json!({
        "run_id": result.run_id.to_string(),
        "outcome": outcome,
        "exit_code": exit_code,
        "error": error,
        "streams": streams,
        "pages": result.reports.iter().map(|r| r.pages).sum::<u64>(),
        "records": result.reports.iter().map(|r| r.records).sum::<u64>(),
        "waits": result.reports.iter().map(|r| r.waits.len()).sum::<usize>(),
        "audit_trail": result.audit_log.display().to_string(),
    })
}

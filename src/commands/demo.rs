//! `edc-sync demo`: the embedded default. The simulator in this process,
//! the in-process pacer, a full sync with a 429 in each Retry-After form
//! and a 503 in it, a summary, and `audit verify` on its own trail.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use crate::cli::DemoArgs;
use edc_core::audit::verify;
use edc_core::error::IoContext;
use edc_core::run::{self, Endpoint, PacerChoice, RunSpec, Streams};
use edc_core::sync::SyncOptions;
use edc_core::Error;
use edc_sim::{Dataset, FaultSchedule, SimConfig, Simulator};

/// The demo policy, committed as `config/demo.yaml`; this copy is used when
/// the demo runs outside the repository (an installed binary).
const DEMO_POLICY: &str = include_str!("../../config/demo.yaml");
const DEMO_TOKEN: &str = "demo-token";

/// The faults the demo injects, by request number.
const DEMO_FAULTS: [&str; 4] = [
    "2=429:seconds:1",
    "4=429:date:2",
    "6=429:absent",
    "8=503:seconds:1",
];

/// Left in `--dir` by a demo: the one sign that what is there is a demo's
/// own output, which the next demo may clear.
const MARKER: &str = ".edc-sync-demo";

/// The marker's first line; the files the demo left follow a `files:` line.
const MARKER_HEAD: &str =
    "made by edc-sync demo: the next demo here clears the files listed below (under landing/ \
                           and state/, audit.jsonl, simulator-requests.jsonl) and nothing else";

pub fn run(args: DemoArgs) -> Result<(), Error> {
    let dir = args.dir.clone();
    refuse_foreign(&dir);
    refuse_unlisted(&dir);
    std::fs::create_dir_all(&dir).io(|| format!("creating {}", dir.display()))?;
    write_marker(&dir, &[])?;
    // Start fresh each time, but only ever remove what the demo itself makes.
    for sub in ["landing", "state"] {
        let p = dir.join(sub);
        if p.exists() {
            std::fs::remove_dir_all(&p).io(|| format!("clearing {}", p.display()))?;
        }
    }
    for file in ["audit.jsonl", "simulator-requests.jsonl"] {
        let p = dir.join(file);
        if p.exists() {
            std::fs::remove_file(&p).io(|| format!("clearing {}", p.display()))?;
        }
    }
    let (config, from_repo) = demo_config(&dir)?;
    let mut faults = FaultSchedule::default();
    for f in DEMO_FAULTS {
        let (n, fault) = FaultSchedule::parse_entry(f)
            .map_err(|e| Error::io(format!("the demo's fault {f}"), std::io::Error::other(e)))?;
        faults.insert(n, fault);
    }
    let sim_config = SimConfig {
        dataset: Dataset {
            subjects: 25,
            records: args.records,
            seed: 2026,
            padding: 0,
        },
        token: DEMO_TOKEN.into(),
        faults,
        request_log: Some(dir.join("simulator-requests.jsonl")),
        ..SimConfig::default()
    };
    let rt = super::runtime()?;
    let result = rt.block_on(async {
        let sim = Simulator::start(sim_config, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .await
            .io(|| "starting the simulator on 127.0.0.1".into())?;
        let spec = RunSpec {
            config: config.clone(),
            // The demo records that it may run with an uncommitted policy.
            allow_dirty: true,
            vendor: "demo_vault".into(),
            tenant: None,
            study: "DEMO-001".into(),
            protocol_version: None,
            streams: Streams::One("default".into()),
            out: dir.join("landing").into(),
            state: dir.join("state").into(),
            audit_log: dir.join("audit.jsonl"),
            pacer: PacerChoice::Local,
            options: SyncOptions::default(),
            metrics: Default::default(),
            audit: Default::default(),
            endpoint: Some(Endpoint::bearer(sim.base_url(), DEMO_TOKEN)),
        };
        let result = run::execute(spec).await;
        let requests = sim.requests();
        sim.stop().await;
        result.map(|r| (r, requests))
    })?;
    let (result, requests) = result;
    write_marker(&dir, &output_files(&dir))?;
    let report = verify(&result.audit_log)?;
    let provenance = edc_core::config::load(&config)?.provenance;
    print(&dir, &config, from_repo, &provenance, &result, &requests, &report)
        .io(|| "writing the demo's summary to stdout".into())?;
    result.outcome?;
    if !report.intact() {
        return Err(edc_core::audit::NotIntact(report).into());
    }
    Ok(())
}

/// What the demo did, for the person who ran it.
fn print(
    dir: &Path,
    config: &Path,
    from_repo: bool,
    provenance: &edc_core::config::Provenance,
    result: &run::RunResult,
    requests: &[edc_sim::LogEntry],
    report: &edc_core::audit::Report,
) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "edc-sync demo: a sync against the built-in EDC simulator (no network, no Redis)\n"
    )?;
    let git = match provenance.why_uncontrolled() {
        None => format!(
            "git commit {}",
            provenance.config_git_commit.as_deref().unwrap_or("?")
        ),
        Some(why) => format!("{why}; the demo runs with --allow-dirty, recorded in the audit header"),
    };
    let origin = if from_repo {
        "this repository's"
    } else {
        "embedded copy"
    };
    writeln!(out, "policy      {} ({origin}; {git})", config.display())?;
    for r in &result.reports {
        writeln!(
            out,
            "pages       {} ({} records, {} bytes), window complete: {}",
            r.pages, r.records, r.bytes, r.window_complete
        )?;
        writeln!(out, "waits       {}", r.waits.len())?;
        for w in &r.waits {
            writeln!(out, "  {:>5.2} s  {}", w.seconds, w.reason)?;
        }
        writeln!(out, "landing     {}", r.landing_dir.display())?;
        writeln!(
            out,
            "manifest    {}",
            r.landing_dir.join("manifest.jsonl").display()
        )?;
        writeln!(out, "cursor      {}", r.cursor_file.display())?;
    }
    writeln!(
        out,
        "requests    {} seen by the simulator, all GET: {}",
        requests.len(),
        requests.iter().all(|r| r.method == "GET")
    )?;
    writeln!(
        out,
        "sim log     {}",
        dir.join("simulator-requests.jsonl").display()
    )?;
    writeln!(out, "audit       {}", result.audit_log.display())?;
    writeln!(out, "verify      {report}")?;
    Ok(())
}

/// `config/demo.yaml` when run from the repository (so the audit header
/// stamps its real git ids), else the embedded copy written to `dir`.
/// A `--dir` that exists, holds anything and was not made by a demo is
/// someone's directory: a usage error (2), before anything is touched.
fn refuse_foreign(dir: &Path) {
    // `--dir` is the operator's: it may be a link (a mount point).
    let Ok(entries) = edc_core::no_follow::read_root_dir(dir) else {
        return;
    };
    if dir.join(MARKER).is_file() {
        return;
    }
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if names.is_empty() {
        return;
    }
    names.sort();
    use clap::CommandFactory;
    crate::cli::Cli::command()
        .error(
            clap::error::ErrorKind::ValueValidation,
            format!(
                "--dir {} holds {} that no demo made (no {MARKER} file); the demo clears its own output \
                 only: name an empty or new directory",
                dir.display(),
                names.join(", ")
            ),
        )
        .exit();
}

/// Writes the marker, listing `files` (relative to `dir`) as the demo's
/// own output, which the next demo may clear.
fn write_marker(dir: &Path, files: &[String]) -> Result<(), Error> {
    let mut text = format!("{MARKER_HEAD}\nfiles:\n");
    for file in files {
        text.push_str(file);
        text.push('\n');
    }
    let path = dir.join(MARKER);
    let _ = std::fs::remove_file(&path);
    edc_core::no_follow::write(&path, text).io(|| format!("writing {}", path.display()))
}

/// Every file under `landing/` and `state/`, relative to `dir`, sorted.
fn output_files(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
        let Ok(entries) = edc_core::no_follow::read_dir(dir.join(rel)) else {
            return;
        };
        for entry in entries.flatten() {
            let name = format!("{rel}/{}", entry.file_name().to_string_lossy());
            match entry.file_type() {
                Ok(t) if t.is_dir() => walk(dir, &name, out),
                _ => out.push(name),
            }
        }
    }
    let mut out = Vec::new();
    for sub in ["landing", "state"] {
        walk(dir, sub, &mut out);
    }
    out.sort();
    out
}

/// A demo directory whose `landing/` or `state/` holds a file the last
/// demo did not list (someone put it there) is not the demo's to clear: a
/// usage error (2) naming it, before anything is touched. A marker of a
/// version that listed nothing keeps the old rule (clear both).
fn refuse_unlisted(dir: &Path) {
    let Ok(marker) = edc_core::no_follow::read_string(dir.join(MARKER)) else {
        return;
    };
    let Some((_, listed)) = marker.split_once("\nfiles:\n") else {
        return;
    };
    let listed: std::collections::HashSet<&str> = listed.lines().collect();
    let unlisted: Vec<String> = output_files(dir)
        .into_iter()
        .filter(|f| !listed.contains(f.as_str()))
        .collect();
    if unlisted.is_empty() {
        return;
    }
    use clap::CommandFactory;
    crate::cli::Cli::command()
        .error(
            clap::error::ErrorKind::ValueValidation,
            format!(
                "--dir {} holds {} that no demo made (not in {MARKER}); the demo clears its own output only: move \
                 {} away, or name another directory",
                dir.display(),
                unlisted.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
                if unlisted.len() == 1 { "it" } else { "them" }
            ),
        )
        .exit();
}

fn demo_config(dir: &Path) -> Result<(PathBuf, bool), Error> {
    let in_repo = PathBuf::from("config/demo.yaml");
    if edc_core::no_follow::operator_input(&in_repo).is_ok_and(|text| text == DEMO_POLICY.as_bytes()) {
        return Ok((in_repo, true));
    }
    let copy = dir.join("demo-policy.yaml");
    edc_core::no_follow::write(&copy, DEMO_POLICY).io(|| format!("writing {}", copy.display()))?;
    Ok((copy, false))
}

//! `edc-sync qualify iq|oq`

use std::io::Write;

use crate::cli::QualifyCommand;
use edc_core::error::IoContext;
use edc_core::Error;
use edc_qualify::evidence::Evidence;
use edc_qualify::{self as qualify, NotQualified};

pub fn run(cmd: QualifyCommand) -> Result<(), Error> {
    let rt = super::runtime()?;
    let (evidence, dir) = match cmd {
        QualifyCommand::Oq {
            evidence,
            path,
            redis,
            only,
        } => {
            let exe = std::env::current_exe().io(|| "locating the edc-sync executable".into())?;
            let result = rt.block_on(qualify::oq(&evidence, &path.config, redis, &exe, &only))?;
            (result, evidence)
        }
        QualifyCommand::Iq {
            evidence,
            path,
            redis,
            dirs,
            release_record,
        } => {
            let result = rt.block_on(qualify::iq::iq(
                &evidence,
                &path.config,
                redis,
                &dirs,
                release_record.as_deref(),
            ))?;
            (result, evidence)
        }
    };
    report(&evidence, &dir)
}

fn report(evidence: &Evidence, dir: &std::path::Path) -> Result<(), Error> {
    let html = dir.join(format!("{}-report.html", evidence.kind));
    print(evidence, dir, &html).io(|| "writing the results to stdout".into())?;
    let sum = &evidence.summary;
    if sum.failed > 0 {
        return Err(NotQualified {
            kind: evidence.kind.to_uppercase(),
            failed: sum.failed,
            executed: sum.passed + sum.failed,
            report: html.display().to_string(),
        }
        .into());
    }
    Ok(())
}

/// One line a scenario, then the summary and where the report is.
fn print(evidence: &Evidence, dir: &std::path::Path, html: &std::path::Path) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    for s in &evidence.scenarios {
        let status = match s.status {
            qualify::evidence::Status::Passed => "PASS",
            qualify::evidence::Status::Failed => "FAIL",
            qualify::evidence::Status::NotExecuted => "NOT EXECUTED",
        };
        writeln!(out, "{:<7} {:<13} {}", s.id, status, s.title)?;
    }
    let sum = &evidence.summary;
    writeln!(
        out,
        "\n{} passed, {} failed, {} not executed; evidence in {}",
        sum.passed,
        sum.failed,
        sum.not_executed,
        dir.display()
    )?;
    writeln!(out, "report: {}", html.display())
}

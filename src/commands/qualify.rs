//! `edc-sync qualify iq|oq`

use std::io::Write;

use anyhow::Context;

use crate::cli::QualifyCommand;
use crate::qualify::evidence::Evidence;
use crate::qualify::{self, NotQualified};
use edc_testkit::redis_server::{self, PrivateRedis};

pub fn run(cmd: QualifyCommand) -> anyhow::Result<()> {
    let rt = super::runtime()?;
    let (evidence, dir) = match cmd {
        QualifyCommand::Oq {
            evidence,
            path,
            redis,
            only,
        } => {
            let exe = std::env::current_exe().context("locating the edc-sync executable")?;
            // Given, else a local server, else a private one if redis-server
            // is installed; else the Redis scenarios are not executed.
            let mut private = None;
            let redis = redis.or_else(local_redis).or_else(|| {
                private = PrivateRedis::start().ok();
                private.as_ref().map(|p| p.url())
            });
            if let Some(p) = &private {
                tracing::info!(url = %p.url(), "started a private redis-server for the OQ; it is stopped at the end");
            }
            let result = rt.block_on(qualify::oq(&evidence, &path.config, redis, &exe, &only))?;
            drop(private);
            (result, evidence)
        }
        QualifyCommand::Iq {
            evidence,
            path,
            redis,
            dirs,
        } => {
            let result = rt.block_on(qualify::iq::iq(&evidence, &path.config, redis, &dirs))?;
            (result, evidence)
        }
    };
    report(&evidence, &dir)
}

/// A Redis on the default local port, if one answers PING at once.
fn local_redis() -> Option<String> {
    redis_server::ping(6379).then(|| "redis://127.0.0.1:6379/".to_string())
}

fn report(evidence: &Evidence, dir: &std::path::Path) -> anyhow::Result<()> {
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
    let html = dir.join(format!("{}-report.html", evidence.kind));
    writeln!(
        out,
        "\n{} passed, {} failed, {} not executed; evidence in {}",
        sum.passed,
        sum.failed,
        sum.not_executed,
        dir.display()
    )?;
    writeln!(out, "report: {}", html.display())?;
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

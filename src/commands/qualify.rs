//! `edc-sync qualify iq|oq`

use std::io::Write;
use std::time::Duration;

use anyhow::Context;

use crate::cli::QualifyCommand;
use crate::qualify::evidence::Evidence;
use crate::qualify::{self, NotQualified};

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
            let redis = redis.or_else(local_redis);
            let result = rt.block_on(qualify::oq(&evidence, &path.config, redis, &exe, &only))?;
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
    use std::io::Read;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 6379));
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(300))).ok()?;
    s.write_all(b"PING\r\n").ok()?;
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).ok()?;
    (&buf == b"+PONG\r\n").then(|| "redis://127.0.0.1:6379/".to_string())
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

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
            // Given, else a local server, else a private one if redis-server
            // is installed; else the Redis scenarios are not executed.
            let mut private = None;
            let redis = redis.or_else(local_redis).or_else(|| {
                private = PrivateRedis::start();
                private.as_ref().map(|p| p.url.clone())
            });
            if let Some(p) = &private {
                tracing::info!(url = %p.url, "started a private redis-server for the OQ; it is stopped at the end");
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

/// A `redis-server` the OQ starts for itself on a free loopback port, with
/// persistence off, in a temporary directory; stopped on drop.
struct PrivateRedis {
    child: std::process::Child,
    url: String,
    dir: std::path::PathBuf,
}

impl PrivateRedis {
    fn start() -> Option<PrivateRedis> {
        let binary = std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .chain(["/usr/bin".into(), "/usr/sbin".into()])
            .map(|d: std::path::PathBuf| d.join("redis-server"))
            .find(|p| p.is_file())?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let dir = std::env::temp_dir().join(format!("edc-sync-oq-redis-{port}"));
        std::fs::create_dir_all(&dir).ok()?;
        let child = std::process::Command::new(binary)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let private = PrivateRedis {
            child,
            url: format!("redis://127.0.0.1:{port}/"),
            dir,
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if ping(port) {
                return Some(private);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ping(port: u16) -> bool {
    use std::io::Read;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// A Redis on the default local port, if one answers PING at once.
fn local_redis() -> Option<String> {
    ping(6379).then(|| "redis://127.0.0.1:6379/".to_string())
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

//! `edc-sync bench state`: what a committed page costs with the state in
//! files and in PostgreSQL, side by side in one run, and how many pages a
//! second 1, 4 and 16 processes commit on one database. One JSON line per
//! figure set.
//!
//! Each cost is the difference between a sync of 45 pages and one of 5
//! (so start-up cancels), per page: wall milliseconds, the sync's CPU
//! milliseconds (its process, from `getrusage(RUSAGE_CHILDREN)`), the
//! server's CPU for PostgreSQL (its postmaster's reaped children), and
//! fsync-class calls (the sync's, counted by `strace -c -f` in a separate
//! run; plus, for PostgreSQL, the server's WAL syncs from `pg_stat_wal`).
//! The simulator runs as a process of its own; the database is a private
//! server on loopback with `fsync = on`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;

use super::harness::{policy, SimProcess};
use edc_testkit::postgres_server::PrivatePostgres;

/// Records per page, and pages of the two measured syncs.
const PAGE_SIZE: u64 = 100;
const FEW: u64 = 5;
const MANY: u64 = 45;
/// Pages each process commits in the throughput runs.
const PER_PROCESS: u64 = 40;

/// One commit-cost line.
#[derive(Debug, Clone, Serialize)]
pub struct Commit {
    pub benchmark: &'static str,
    pub state: &'static str,
    pub pages: u64,
    pub wall_ms_per_page: f64,
    pub cpu_ms_per_page: f64,
    /// The database server's CPU per page (PostgreSQL only).
    pub server_cpu_ms_per_page: Option<f64>,
    /// fsync-class calls of the sync process per page.
    pub client_syncs_per_page: Option<f64>,
    /// WAL syncs of the server per page (PostgreSQL only).
    pub server_wal_syncs_per_page: Option<f64>,
    pub syncs_per_page: Option<f64>,
}

/// One throughput line.
#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    pub benchmark: &'static str,
    pub state: &'static str,
    pub processes: u32,
    pub pages: u64,
    pub wall_s: f64,
    pub pages_per_s: f64,
    pub failed_processes: u32,
}

/// Where a measured sync keeps its state.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Backend {
    Files,
    Postgres,
}

struct Bench<'a> {
    exe: &'a Path,
    work: &'a Path,
    config: PathBuf,
    sim: SimProcess,
    pg: PrivatePostgres,
    runs: std::cell::Cell<u32>,
}

/// Runs every measurement; returns the JSON lines.
pub fn run(exe: &Path, work: &Path) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(work)?;
    let pg = PrivatePostgres::start().map_err(|e| {
        anyhow::anyhow!("{e}; bench state needs PostgreSQL 15 (sudo apt-get install -y postgresql-15)")
    })?;
    pg.migrate_with(exe).map_err(anyhow::Error::msg)?;
    let config = work.join("bench-policy.yaml");
    std::fs::write(&config, policy(PAGE_SIZE, 1 << 20))?;
    let sim = SimProcess::start(exe, PAGE_SIZE * (MANY + 5), 0)?;
    let bench = Bench {
        exe,
        work,
        config,
        sim,
        pg,
        runs: Default::default(),
    };
    let mut lines = Vec::new();
    for backend in [Backend::Files, Backend::Postgres] {
        lines.push(serde_json::to_string(&bench.commit(backend)?)?);
    }
    for processes in [1, 4, 16] {
        lines.push(serde_json::to_string(&bench.throughput(processes)?)?);
    }
    Ok(lines)
}

impl Bench<'_> {
    /// A fresh study (a stream never synced), its directory, and the sync
    /// command of it.
    fn sync(&self, backend: Backend, runner: Command) -> (Command, PathBuf) {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        let dir = self.work.join(format!("run-{n}"));
        let state = match backend {
            Backend::Files => dir.join("state").into_os_string(),
            Backend::Postgres => self.pg.run_url().into(),
        };
        let mut cmd = runner;
        cmd.args(["sync", "--allow-dirty", "--pacer", "local", "--config"])
            .arg(&self.config)
            .args(["--vendor", "bench", "--study", &format!("BENCH-{n}"), "--out"])
            .arg(dir.join("landing"))
            .arg("--state")
            .arg(state)
            .arg("--audit-log")
            .arg(dir.join("audit.jsonl"))
            .env("EDC_SYNC_BENCH_URL", &self.sim.url)
            .env("EDC_SYNC_BENCH_TOKEN", "bench-token")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        (cmd, dir)
    }

    /// Wall, sync CPU, server CPU and WAL syncs of one sync of `pages`.
    fn measured(&self, backend: Backend, pages: u64) -> anyhow::Result<(f64, f64, f64, f64)> {
        let (mut cmd, _) = self.sync(backend, Command::new(self.exe));
        cmd.args(["--max-pages", &pages.to_string()]);
        let (server0, wal0) = (self.server_cpu()?, self.wal_syncs()?);
        let cpu0 = children_cpu();
        let t0 = Instant::now();
        let out = cmd.output().context("running a measured sync")?;
        let wall = t0.elapsed();
        if !out.status.success() {
            bail!("a measured sync failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let cpu = children_cpu() - cpu0;
        // The backend is reaped by the postmaster once it disconnected.
        std::thread::sleep(Duration::from_millis(100));
        let (server1, wal1) = (self.server_cpu()?, self.wal_syncs()?);
        Ok((
            wall.as_secs_f64() * 1000.0,
            cpu.as_secs_f64() * 1000.0,
            (server1 - server0) * 1000.0,
            wal1 - wal0,
        ))
    }

    fn commit(&self, backend: Backend) -> anyhow::Result<Commit> {
        let few = self.measured(backend, FEW)?;
        let many = self.measured(backend, MANY)?;
        let per = |a: f64, b: f64| (b - a) / (MANY - FEW) as f64;
        let client = self.client_syncs_per_page(backend)?;
        let server_wal = (backend == Backend::Postgres).then(|| per(few.3, many.3));
        Ok(Commit {
            benchmark: "state_commit",
            state: match backend {
                Backend::Files => "files",
                Backend::Postgres => "postgres",
            },
            pages: MANY - FEW,
            wall_ms_per_page: per(few.0, many.0),
            cpu_ms_per_page: per(few.1, many.1),
            server_cpu_ms_per_page: (backend == Backend::Postgres).then(|| per(few.2, many.2)),
            client_syncs_per_page: client,
            server_wal_syncs_per_page: server_wal,
            syncs_per_page: client.map(|c| c + server_wal.unwrap_or(0.0)),
        })
    }

    /// fsync-class calls of the sync process per page (`strace -c -f`).
    fn client_syncs_per_page(&self, backend: Backend) -> anyhow::Result<Option<f64>> {
        let Some(strace) = ["/usr/bin/strace", "/bin/strace"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
        else {
            return Ok(None);
        };
        let mut counts = Vec::new();
        for pages in [FEW, MANY] {
            let summary = self.work.join(format!("strace-{}.txt", self.runs.get()));
            let mut runner = Command::new(strace);
            runner
                .args([
                    "-f",
                    "-c",
                    "-e",
                    "trace=fsync,fdatasync,syncfs,sync_file_range",
                    "-o",
                ])
                .arg(&summary)
                .arg(self.exe);
            let (mut cmd, _) = self.sync(backend, runner);
            let out = cmd.args(["--max-pages", &pages.to_string()]).output()?;
            if !out.status.success() {
                bail!("a counted sync failed: {}", String::from_utf8_lossy(&out.stderr));
            }
            counts.push(super::peers::sync_calls(&std::fs::read_to_string(&summary)?) as f64);
        }
        Ok(Some((counts[1] - counts[0]) / (MANY - FEW) as f64))
    }

    /// `processes` syncs of streams of their own on one database at once.
    fn throughput(&self, processes: u32) -> anyhow::Result<Throughput> {
        let mut children = Vec::new();
        let t0 = Instant::now();
        for _ in 0..processes {
            let (mut cmd, _) = self.sync(Backend::Postgres, Command::new(self.exe));
            cmd.args(["--max-pages", &PER_PROCESS.to_string()]);
            children.push(cmd.spawn().context("starting a sync")?);
        }
        let mut failed = 0;
        for mut child in children {
            failed += u32::from(!child.wait()?.success());
        }
        let wall = t0.elapsed().as_secs_f64();
        let pages = PER_PROCESS * u64::from(processes - failed);
        Ok(Throughput {
            benchmark: "state_throughput",
            state: "postgres",
            processes,
            pages,
            wall_s: wall,
            pages_per_s: pages as f64 / wall,
            failed_processes: failed,
        })
    }

    /// The server's CPU seconds so far: the postmaster's own and its
    /// reaped children's (every backend, once it exited).
    fn server_cpu(&self) -> anyhow::Result<f64> {
        let pid = self.pg.postmaster_pid().map_err(anyhow::Error::msg)?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, r)| r)
            .unwrap_or("")
            .split_whitespace()
            .collect();
        // utime, stime, cutime, cstime: fields 14-17 of stat(5), 12-15 after the name.
        let ticks: f64 = fields[11..15].iter().filter_map(|f| f.parse::<f64>().ok()).sum();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        Ok(ticks / hz)
    }

    /// WAL syncs the server made so far (`pg_stat_wal.wal_sync`).
    fn wal_syncs(&self) -> anyhow::Result<f64> {
        let text = self
            .pg
            .psql("edc", "SELECT wal_sync FROM pg_stat_wal")
            .map_err(anyhow::Error::msg)?;
        text.trim().parse().context("reading pg_stat_wal")
    }
}

/// CPU time of the waited-for children of this process.
fn children_cpu() -> Duration {
    // SAFETY: getrusage only writes into the struct we pass it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_CHILDREN with a valid pointer is always a valid call.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv =
        |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

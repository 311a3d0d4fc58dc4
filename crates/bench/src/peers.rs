//! What `bench sync` compares edc-sync's page with, in the same invocation
//!: a straightforward Python loop doing the same work at
//! the same durability (`peer/python_sync.py`), the bare floor of the
//! syscalls a page still needs (write, fsync, rename, directory fsync,
//! appends, one fdatasync; no parsing), without the network and with a
//! bare GET of the page (measured beside each sync, `side_by_side.rs`),
//! and the fsync-class calls a committed page costs, counted by
//! `strace -c`.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

/// The peers of the small pages, from one invocation.
#[derive(Debug, Clone, Serialize)]
pub struct Peers {
    pub python: Option<PythonPeer>,
    pub syncs_per_page: Option<f64>,
}

/// Records on a small page: the small phase's, its floors' and peers'.
pub const SMALL_PAGE_RECORDS: u64 = 100;

/// The padding of a small page's records for a page of about
/// `page_bytes`.
pub fn small_padding(page_bytes: u64) -> usize {
    (page_bytes / SMALL_PAGE_RECORDS).saturating_sub(200) as usize
}

/// The path and query of the bench policy's first small page.
pub fn first_small_page() -> String {
    format!("{}?limit={SMALL_PAGE_RECORDS}", super::harness::DELTA_PATH)
}

/// Runs the peers on pages like the small phase's ([`SMALL_PAGE_RECORDS`]
/// records of [`small_padding`] extra bytes), against a simulator of
/// their own.
pub fn measure(exe: &Path, work: &Path, pages: u64, page_bytes: u64) -> anyhow::Result<Peers> {
    let page_size = SMALL_PAGE_RECORDS;
    let sim = super::harness::SimProcess::start(exe, pages * page_size, small_padding(page_bytes))?;
    std::fs::create_dir_all(work)?;
    let config = work.join("bench-policy.yaml");
    std::fs::write(&config, super::harness::policy(page_size, page_bytes * 2))?;
    let python = python(&sim.url, &work.join("python"), page_size, pages)?;
    let syncs_per_page = syncs_per_page(exe, &config, work, &sim.url)?;
    Ok(Peers {
        python,
        syncs_per_page,
    })
}

/// The Python loop's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PythonPeer {
    pub pages: u64,
    pub cpu_ms_per_page: f64,
    pub user_ms_per_page: f64,
    pub wall_s: f64,
}

/// The Python loop over pages like the large phase's (1,000 padded
/// records a page), for the one-pass comparison.
pub fn python_on_large_pages(
    exe: &Path,
    work: &Path,
    pages: u64,
    page_bytes: u64,
) -> anyhow::Result<Option<PythonPeer>> {
    let sim =
        super::harness::SimProcess::start(exe, pages * 1000, super::harness::large_padding(page_bytes))?;
    python(&sim.url, work, 1000, pages)
}

/// Runs the Python loop against the simulator at `url`; `None` (and a
/// note on stderr) when there is no `python3`.
pub fn python(url: &str, work: &Path, page_size: u64, pages: u64) -> anyhow::Result<Option<PythonPeer>> {
    std::fs::create_dir_all(work)?;
    let script = work.join("python_sync.py");
    std::fs::write(&script, include_str!("peer/python_sync.py"))?;
    let out = match Command::new("python3")
        .arg(&script)
        .args([url, "bench-token", &page_size.to_string(), &pages.to_string()])
        .arg(work)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("bench sync: no python3 ({e}); the Python peer is skipped");
            return Ok(None);
        }
    };
    if !out.status.success() {
        bail!("the Python peer failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(Some(
        serde_json::from_str(text.lines().last().unwrap_or_default()).context("the Python peer's figures")?,
    ))
}

/// One floor: wall and CPU milliseconds per page.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Floor {
    pub wall_ms_per_page: f64,
    pub cpu_ms_per_page: f64,
}

/// The floor: per page, the syscalls edc-sync's commit still makes, with
/// `page_bytes` of data and the commit's own records at their sizes
/// (`commit`: the audit line, the manifest line, the cursor file, the
/// journal line of a lookback's memory), and
/// nothing else; with `receive`, each page is first received by a bare
/// GET and its bytes are the ones written.
pub fn floor(
    work: &Path,
    pages: u64,
    page_bytes: u64,
    commit: super::commit_bytes::CommitBytes,
    mut receive: Option<&mut super::bare_get::BareGet>,
) -> anyhow::Result<Floor> {
    let landing = work.join("pages");
    std::fs::create_dir_all(&landing)?;
    let dir = std::fs::File::open(&landing)?;
    let mut audit = OpenOptions::new()
        .create(true)
        .append(true)
        .open(work.join("audit.jsonl"))?;
    let mut manifest = OpenOptions::new()
        .create(true)
        .append(true)
        .open(work.join("manifest.jsonl"))?;
    let body = vec![b'x'; page_bytes as usize];
    let line = |n: u64| vec![b'y'; n as usize];
    let (audit_line, manifest_line, cursor_file, journal_line) = (
        line(commit.audit_line),
        line(commit.manifest_line),
        line(commit.cursor),
        line(commit.journal_line),
    );
    let mut journal = OpenOptions::new()
        .create(true)
        .append(true)
        .open(work.join("memory.jsonl"))?;
    let cpu0 = super::harness::cpu_time();
    let t0 = Instant::now();
    for n in 0..pages {
        let part = work.join(format!("{n}.part"));
        let mut f = std::fs::File::create(&part)?;
        match receive.as_deref_mut() {
            Some(get) => f.write_all(get.page()?)?,
            None => f.write_all(&body)?,
        }
        f.sync_all()?;
        std::fs::rename(&part, landing.join(format!("{n}.json")))?;
        dir.sync_all()?;
        manifest.write_all(&manifest_line)?;
        audit.write_all(&audit_line)?;
        audit.sync_data()?;
        if !journal_line.is_empty() {
            journal.write_all(&journal_line)?;
        }
        let cursor = work.join("cursor.json");
        std::fs::write(cursor.with_extension("tmp"), &cursor_file)?;
        std::fs::rename(cursor.with_extension("tmp"), &cursor)?;
    }
    Ok(Floor {
        wall_ms_per_page: t0.elapsed().as_secs_f64() * 1000.0 / pages.max(1) as f64,
        cpu_ms_per_page: (super::harness::cpu_time() - cpu0).as_secs_f64() * 1000.0 / pages.max(1) as f64,
    })
}

/// The fsync-class syscalls `strace -c` counted, from its summary table
/// (`% time  seconds  usecs/call  calls  errors  syscall`).
pub fn sync_calls(summary: &str) -> u64 {
    summary
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            match cols.last() {
                Some(name) if ["fsync", "fdatasync", "syncfs", "sync_file_range"].contains(name) => {
                    cols.get(3).and_then(|c| c.parse::<u64>().ok())
                }
                _ => None,
            }
        })
        .sum()
}

/// fsync-class calls a committed page costs: two `edc-sync sync` children
/// under `strace -c -f` with different page counts, so the per-run calls
/// cancel. `None` without strace.
pub fn syncs_per_page(exe: &Path, config: &Path, work: &Path, url: &str) -> anyhow::Result<Option<f64>> {
    let Some(strace) = ["/usr/bin/strace", "/bin/strace"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
    else {
        eprintln!("bench sync: no strace; syncs_per_page is not counted");
        return Ok(None);
    };
    let mut counts = Vec::new();
    for pages in [5u64, 25] {
        let dir = work.join(format!("strace-{pages}"));
        std::fs::create_dir_all(&dir)?;
        let summary = dir.join("strace.txt");
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
            .arg(exe);
        let status = super::harness::bench_sync(runner, config, &dir, url)
            .args(["--max-pages", &pages.to_string()])
            .status()?;
        if !status.success() {
            bail!("the counted sync of {pages} pages failed: {status}");
        }
        counts.push(sync_calls(&std::fs::read_to_string(&summary)?));
    }
    Ok(Some((counts[1] as f64 - counts[0] as f64) / 20.0))
}

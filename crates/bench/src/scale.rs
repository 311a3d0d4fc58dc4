//! `bench scale`: what the trail costs as a study grows, against the
//! targets the ledger is held to.
//!
//! - **Trail bytes a page**: a sync of N one-record pages with the shipped
//!   policy's lookback (300 s, records known by their id), the trail's
//!   growth over N against the target of 2 KB a one-record page; and the
//!   growth of one run that finds nothing new (an empty poll, which with a
//!   lookback re-reads its span), against a bounded line.
//! - **A page at a full memory**: a sync of pages of 100 records with a
//!   lookback that keeps 20,000 identities (a day's span, the default
//!   `max_records`): the `page_committed` line and the cursor file of its
//!   last pages, when the memory is full. The line is held to the page
//!   (it carries the page's change and the memory's seal); the cursor
//!   file keeps the memory whole.
//! - **A quiet stream's start-up**: a quiet stream (its own vendor and
//!   simulator) shares its trail with a busy one. Its run with nothing new
//!   is timed on the trail as its own sync left it (a copy of its
//!   directory) and on the trail after the busy stream appended N pages,
//!   five runs of each in turn, the median's wall time: target within
//!   1.1x.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};
use serde::Serialize;

use super::harness::{delta_block, policy, sync_command, waited, SimProcess};
use super::startup::Measured;

/// The figures of one run of `bench scale`.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub pages: u64,
    /// Trail growth over the pages of a sync with the shipped lookback.
    pub trail_bytes_per_page: f64,
    /// Trail growth of a run with nothing new, with the same lookback.
    pub empty_poll_trail_bytes: u64,
    /// At a full memory: the identities it holds, and the average
    /// `page_committed` line and the cursor file of the last pages.
    pub full_memory: FullMemory,
    /// The same with the state in PostgreSQL.
    pub full_memory_db: FullMemoryDb,
    /// Lines the busy stream appended between the quiet stream's runs.
    pub busy_lines: u64,
    pub quiet_fresh: Measured,
    pub quiet_after_busy: Measured,
    pub quiet_ratio: f64,
}

/// What a page costs the trail and the cursor once the lookback memory
/// is full.
#[derive(Debug, Clone, Serialize)]
pub struct FullMemory {
    pub records_per_page: u64,
    pub identities: u64,
    pub line_bytes: u64,
    pub cursor_bytes: u64,
    /// The average change line of the lookback memory's journal (0: a
    /// binary that writes the memory into the cursor file).
    pub journal_line_bytes: u64,
    /// Everything the sync wrote (Linux's `wchar` of the reaped child:
    /// trail, pages, manifest, cursor, journal), a page.
    pub written_per_page: u64,
    /// The pages' own landed bytes, a page: the least a page writes.
    pub landed_per_page: u64,
    /// The sync's CPU (user and system), a page.
    pub cpu_ms_per_page: f64,
    /// A start-up at that memory (`--max-pages 0`, the median of
    /// [`STARTUPS`]): its CPU.
    pub startup_cpu_ms: f64,
    /// What that start-up read (`rchar`), all told, against the journal's
    /// size: the floor reads the journal once.
    pub startup_read_bytes: u64,
    pub journal_bytes: u64,
}

/// Start-ups measured at the full memory; the median is reported.
const STARTUPS: usize = 5;

/// The same sync with its state in PostgreSQL: what the database writes.
#[derive(Debug, Clone, Serialize)]
pub struct FullMemoryDb {
    /// WAL the server wrote during the sync, a page
    /// (`pg_wal_lsn_diff` of `pg_current_wal_lsn()` around it).
    pub wal_bytes_per_page: u64,
    /// The cursor row's text after it.
    pub cursor_row_bytes: u64,
    pub wall_ms_per_page: f64,
    /// A start-up at that memory (`--max-pages 0`, the median of
    /// [`STARTUPS`] by CPU): its wall time and its CPU.
    pub startup_wall_ms: f64,
    pub startup_cpu_ms: f64,
}

/// Records a page, and at most pages, of the full-memory sync: 40,000
/// records, twice what the memory keeps (fewer with a smaller `--pages`).
const FULL_PAGE: u64 = 100;
const FULL_PAGES: u64 = 400;

/// The target of a one-record page's trail bytes.
pub const TRAIL_BYTES_TARGET: f64 = 2048.0;
/// The target of the quiet stream's start-up after the busy one's pages.
pub const QUIET_RATIO_TARGET: f64 = 1.1;

/// Measures both figures in `work`, `pages` pages each.
pub fn run(exe: &Path, work: &Path, pages: u64) -> anyhow::Result<Figures> {
    std::fs::create_dir_all(work)?;
    let (trail_bytes_per_page, empty_poll_trail_bytes) = trail_growth(exe, &work.join("lookback"), pages)?;
    let full_memory = full_memory(exe, &work.join("full-memory"), pages.min(FULL_PAGES))?;
    let full_memory_db = full_memory_db(exe, &work.join("full-memory-db"), pages.min(FULL_PAGES))?;
    let quiet = work.join("quiet");
    let fresh = work.join("quiet-fresh");
    std::fs::create_dir_all(&quiet)?;
    let busy_sim = SimProcess::start(exe, pages, 0)?;
    let quiet_sim = SimProcess::start(exe, 5, 0)?;
    std::fs::write(quiet.join("two-streams.yaml"), two_vendors())?;
    // Every path a run records is relative to its directory, so a copy of
    // the directory is the same trail and state elsewhere.
    let run = |dir: &Path, vendor: &str| {
        let (config, trail) = (dir.join("two-streams.yaml"), dir.join("audit.jsonl"));
        let mut cmd = sync_command(exe, &config, vendor, "SCALE", dir, &trail);
        cmd.args(["--pacer", "local"])
            .env("EDC_SYNC_BENCH_URL", &busy_sim.url)
            .env("EDC_SYNC_QUIET_URL", &quiet_sim.url);
        cmd
    };
    let ok = |(ok, _): (bool, libc::rusage), what: &str| match ok {
        true => Ok(()),
        false => bail!("{what} failed"),
    };
    ok(waited(run(&quiet, "quiet"))?, "the quiet stream's first sync")?;
    // The quiet stream's trail as its own sync left it, kept aside: its
    // runs there and on the shared trail are timed in turn.
    copy_dir(&quiet, &fresh)?;
    let trail = quiet.join("audit.jsonl");
    let before = line_count(&trail)?;
    ok(waited(run(&quiet, "busy"))?, "the busy stream's sync")?;
    let busy_lines = line_count(&trail)? - before;
    let (mut on_own, mut after_busy) = (Vec::new(), Vec::new());
    for _ in 0..QUIET_RUNS {
        on_own.push(timed(
            run(&fresh, "quiet"),
            "the quiet stream's run on its own trail",
        ));
        after_busy.push(timed(
            run(&quiet, "quiet"),
            "the quiet stream's run after the busy one's",
        ));
    }
    let quiet_fresh = median(on_own.into_iter())?;
    let quiet_after_busy = median(after_busy.into_iter())?;
    Ok(Figures {
        pages,
        trail_bytes_per_page,
        empty_poll_trail_bytes,
        full_memory,
        full_memory_db,
        busy_lines,
        quiet_ratio: quiet_after_busy.wall_s / quiet_fresh.wall_s,
        quiet_fresh,
        quiet_after_busy,
    })
}

/// Trail bytes a one-record page, and of a run with nothing new, with the
/// shipped lookback.
fn trail_growth(exe: &Path, work: &Path, pages: u64) -> anyhow::Result<(f64, u64)> {
    std::fs::create_dir_all(work)?;
    let sim = SimProcess::start(exe, pages, 0)?;
    let config = work.join("bench-policy.yaml");
    std::fs::write(&config, policy(1, 1024 * 1024))?;
    let trail = work.join("audit.jsonl");
    let sync = || super::harness::bench_sync(Command::new(exe), &config, work, &sim.url);
    if !waited(sync())?.0 {
        bail!("the sync of {pages} one-record pages failed");
    }
    let landed = size(&trail)?;
    if !waited(sync())?.0 {
        bail!("the run with nothing new failed");
    }
    Ok((landed as f64 / pages as f64, size(&trail)? - landed))
}

/// A sync of `pages` pages of [`FULL_PAGE`] records whose lookback keeps
/// 20,000 identities: its last 50 `page_committed` lines and its cursor
/// file.
fn full_memory(exe: &Path, work: &Path, pages: u64) -> anyhow::Result<FullMemory> {
    std::fs::create_dir_all(work)?;
    let sim = SimProcess::start(exe, FULL_PAGE * pages, 0)?;
    let config = work.join("bench-policy.yaml");
    let policy = policy(FULL_PAGE, 1024 * 1024).replace("      seconds: 300\n", "      seconds: 86400\n");
    std::fs::write(&config, policy)?;
    let trail = work.join("audit.jsonl");
    let written_before = reaped_children_io("wchar")?;
    let (ok, usage) = waited(super::harness::bench_sync(
        Command::new(exe),
        &config,
        work,
        &sim.url,
    ))?;
    if !ok {
        bail!("the sync of {pages} pages of {FULL_PAGE} records failed");
    }
    let written = reaped_children_io("wchar")? - written_before;
    let cpu_ms_per_page = cpu_ms(&usage) / pages.max(1) as f64;
    let text = std::fs::read_to_string(&trail).context("reading the full-memory trail")?;
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("\"event\":\"page_committed\""))
        .collect();
    let last = &lines[lines.len().saturating_sub(50)..];
    let line_bytes = last.iter().map(|l| l.len() as u64).sum::<u64>() / (last.len() as u64).max(1);
    let identities = last
        .last()
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|l| l["cursor_state"]["lookback"]["identities"].as_u64())
        .unwrap_or(0);
    let state = edc_qualify::files::under(&work.join("state"));
    let cursor = state
        .iter()
        .find(|p| p.to_string_lossy().ends_with(".cursor.json"))
        .context("the full-memory sync left no cursor file")?;
    let journal = state
        .iter()
        .find(|p| p.to_string_lossy().ends_with(".memory.jsonl"));
    let (journal_line_bytes, journal_bytes) = match journal {
        Some(journal) => {
            let text = std::fs::read_to_string(journal)?;
            let changes: Vec<&str> = text.lines().skip(1).collect();
            let line =
                changes.iter().map(|l| l.len() as u64 + 1).sum::<u64>() / (changes.len() as u64).max(1);
            (line, text.len() as u64)
        }
        None => (0, 0),
    };
    let started = startups(|| super::harness::bench_sync(Command::new(exe), &config, work, &sim.url))?;
    let landed: u64 = edc_qualify::files::under(&work.join("landing"))
        .iter()
        .filter(|p| !p.ends_with("manifest.jsonl"))
        .map(|p| size(p))
        .sum::<anyhow::Result<u64>>()?;
    Ok(FullMemory {
        records_per_page: FULL_PAGE,
        identities,
        line_bytes,
        cursor_bytes: size(cursor)?,
        journal_line_bytes,
        written_per_page: written / pages.max(1),
        cpu_ms_per_page,
        landed_per_page: landed / pages.max(1),
        startup_cpu_ms: started.cpu_ms,
        startup_read_bytes: started.read_bytes,
        journal_bytes,
    })
}

/// One start-up only (`sync --max-pages 0`): its CPU, what it read
/// (`rchar`) and its wall time.
struct Startup {
    cpu_ms: f64,
    read_bytes: u64,
    wall_ms: f64,
}

/// Runs [`STARTUPS`] start-ups only of what `sync` syncs; the median by
/// CPU.
fn startups(sync: impl Fn() -> Command) -> anyhow::Result<Startup> {
    let mut runs = Vec::new();
    for _ in 0..STARTUPS {
        let read_before = reaped_children_io("rchar")?;
        let mut start = sync();
        start.args(["--max-pages", "0"]);
        let t0 = std::time::Instant::now();
        let (ok, usage) = waited(start)?;
        let wall_ms = t0.elapsed().as_secs_f64() * 1000.0;
        if !ok {
            bail!("a start-up (--max-pages 0) at the full memory failed");
        }
        runs.push(Startup {
            cpu_ms: cpu_ms(&usage),
            read_bytes: reaped_children_io("rchar")? - read_before,
            wall_ms,
        });
    }
    runs.sort_by(|a, b| a.cpu_ms.total_cmp(&b.cpu_ms));
    Ok(runs.swap_remove(runs.len() / 2))
}

/// A child's CPU, user and system, in ms.
fn cpu_ms(usage: &libc::rusage) -> f64 {
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    ms(usage.ru_utime) + ms(usage.ru_stime)
}

/// The full-memory sync ([`full_memory`]) with its state in a private
/// PostgreSQL: the WAL it made the server write a page, and its cursor
/// row's size.
fn full_memory_db(exe: &Path, work: &Path, pages: u64) -> anyhow::Result<FullMemoryDb> {
    std::fs::create_dir_all(work)?;
    let pg = edc_testkit::postgres_server::PrivatePostgres::start().map_err(|e| {
        anyhow::anyhow!("{e}; bench scale needs PostgreSQL 15 (sudo apt-get install -y postgresql-15)")
    })?;
    pg.migrate_with(exe).map_err(anyhow::Error::msg)?;
    let sim = SimProcess::start(exe, FULL_PAGE * pages, 0)?;
    let config = work.join("bench-policy.yaml");
    let policy = policy(FULL_PAGE, 1024 * 1024).replace("      seconds: 300\n", "      seconds: 86400\n");
    std::fs::write(&config, policy)?;
    let lsn = || {
        pg.psql("edc", "SELECT pg_current_wal_lsn()")
            .map_err(anyhow::Error::msg)
    };
    let before = lsn()?;
    let t0 = std::time::Instant::now();
    let run_url = pg.run_url();
    let sync = || {
        super::harness::bench_sync_with(
            Command::new(exe),
            &config,
            work,
            &sim.url,
            work.join("landing").as_os_str(),
            std::ffi::OsStr::new(&run_url),
        )
    };
    if !waited(sync())?.0 {
        bail!("the sync of {pages} pages of {FULL_PAGE} records into PostgreSQL failed");
    }
    let wall = t0.elapsed();
    let after = lsn()?;
    let wal: u64 = pg
        .psql(
            "edc",
            &format!("SELECT pg_wal_lsn_diff('{after}', '{before}')::bigint"),
        )
        .map_err(anyhow::Error::msg)?
        .trim()
        .parse()
        .context("reading the WAL written")?;
    let row: u64 = pg
        .psql("edc", "SELECT max(octet_length(state)) FROM edc_sync_cursor")
        .map_err(anyhow::Error::msg)?
        .trim()
        .parse()
        .context("reading the cursor row's size")?;
    let started = startups(sync)?;
    Ok(FullMemoryDb {
        wal_bytes_per_page: wal / pages.max(1),
        cursor_row_bytes: row,
        wall_ms_per_page: wall.as_secs_f64() * 1000.0 / pages.max(1) as f64,
        startup_wall_ms: started.wall_ms,
        startup_cpu_ms: started.cpu_ms,
    })
}

/// The counter `field` of `/proc/self/io` (`wchar`: what this process's
/// reaped children handed to `write`, all told; `rchar`: what `read`
/// gave them), which the kernel adds a child's to when it is waited for.
fn reaped_children_io(field: &str) -> anyhow::Result<u64> {
    let io = std::fs::read_to_string("/proc/self/io").context("reading /proc/self/io")?;
    io.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(": "))
        .and_then(|n| n.trim().parse().ok())
        .with_context(|| format!("no {field} in /proc/self/io"))
}

/// Copies the directory `from` to `to`, whole.
fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Runs of each quiet start-up, in turn with the other's: the median's
/// is reported (one run's wall time moved by half between runs on this
/// machine).
const QUIET_RUNS: usize = 5;

/// The run of median wall time.
fn median(runs: impl Iterator<Item = anyhow::Result<Measured>>) -> anyhow::Result<Measured> {
    let mut runs = runs.collect::<anyhow::Result<Vec<_>>>()?;
    runs.sort_by(|a, b| a.wall_s.total_cmp(&b.wall_s));
    let middle = runs.len() / 2;
    Ok(runs.swap_remove(middle))
}

fn timed(cmd: Command, what: &str) -> anyhow::Result<Measured> {
    let (measured, ok) = Measured::of(cmd)?;
    if !ok {
        bail!("{what} failed");
    }
    Ok(measured)
}

fn size(path: &Path) -> anyhow::Result<u64> {
    Ok(std::fs::metadata(path)
        .with_context(|| format!("reading the size of {}", path.display()))?
        .len())
}

fn line_count(path: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.iter().filter(|b| **b == b'\n').count() as u64)
}

/// Two vendors on two simulators, one trail: `busy` pages one record at a
/// time, `quiet` holds five records in one page. Both keep the default
/// lookback (300 s, as a deployment's cursor stream does), so the busy
/// stream's lines carry its memory, and the quiet stream's run with
/// nothing new is one request (its span re-read in one page): the rest is
/// its start-up.
fn two_vendors() -> String {
    let vendor = |name: &str, url_env: &str, page_size: u64| {
        format!(
            r#"{name}:
  base_url_env: {url_env}
  token_env: EDC_SYNC_BENCH_TOKEN
  sustained_rate_per_sec: 1000000
  burst_capacity: 1000000
  bucket_key: "rl:{name}"
  max_concurrency: 4
{}"#,
            delta_block(page_size)
        )
    };
    format!(
        "{}{}",
        vendor("busy", "EDC_SYNC_BENCH_URL", 1),
        vendor("quiet", "EDC_SYNC_QUIET_URL", 100)
    )
}

/// The figures against their targets, then one JSON line.
pub fn render(f: &Figures) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "trail bytes a one-record page (shipped lookback): {:.0} (target {:.0}, {:.1}x)\n",
        f.trail_bytes_per_page,
        TRAIL_BYTES_TARGET,
        f.trail_bytes_per_page / TRAIL_BYTES_TARGET
    ));
    out.push_str(&format!(
        "trail bytes of a run with nothing new (same lookback): {}\n",
        f.empty_poll_trail_bytes
    ));
    let full = &f.full_memory;
    out.push_str(&format!(
        "a page of {} records at a memory of {} identities: a {}-byte page_committed line, a {}-byte cursor file, a \
         {}-byte journal line\n",
        full.records_per_page, full.identities, full.line_bytes, full.cursor_bytes, full.journal_line_bytes
    ));
    out.push_str(&format!(
        "that sync wrote {} bytes a page, all told, for {} bytes of landed page (floor): {:.2}x; {:.2} ms of CPU a \
         page\n",
        full.written_per_page,
        full.landed_per_page,
        full.written_per_page as f64 / full.landed_per_page.max(1) as f64,
        full.cpu_ms_per_page
    ));
    out.push_str(&format!(
        "a start-up at that memory (--max-pages 0): {:.1} ms of CPU; it read {} bytes for a {}-byte journal (floor: \
         once): {:.2}x\n",
        full.startup_cpu_ms,
        full.startup_read_bytes,
        full.journal_bytes,
        full.startup_read_bytes as f64 / full.journal_bytes.max(1) as f64
    ));
    let db = &f.full_memory_db;
    out.push_str(&format!(
        "the same sync with its state in PostgreSQL: {} bytes of WAL a page, a {}-byte cursor row, {:.2} ms a page; \
         a start-up at that memory: {:.1} ms, {:.1} ms of CPU\n",
        db.wal_bytes_per_page, db.cursor_row_bytes, db.wall_ms_per_page, db.startup_wall_ms, db.startup_cpu_ms
    ));
    out.push_str(&format!(
        "quiet stream's run with nothing new: {:.3} s on its own trail, {:.3} s after {} lines of another stream: \
         {:.2}x (target {QUIET_RATIO_TARGET}x)\n",
        f.quiet_fresh.wall_s, f.quiet_after_busy.wall_s, f.busy_lines, f.quiet_ratio
    ));
    out.push_str(&serde_json::json!({ "bench": "scale", "figures": f }).to_string());
    out
}

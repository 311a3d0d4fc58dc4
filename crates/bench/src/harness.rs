//! What every benchmark stands on: the simulator as a child process, the
//! benchmark policy and the `sync` command that runs it, this process's
//! CPU clock, and the count of script calls in a Redis `INFO`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};

/// User and system CPU time of this process, and its peak RSS in KiB
/// ([`peak_rss_kib`]).
pub fn usage_split() -> (Duration, Duration, u64) {
    // SAFETY: getrusage only writes into the struct we pass it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer is always a valid call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv =
        |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    (
        tv(ru.ru_utime),
        tv(ru.ru_stime),
        peak_rss_kib().unwrap_or(ru.ru_maxrss as u64),
    )
}

/// This process's own peak RSS in KiB: `VmHWM` of `/proc/self/status`, the
/// high-water mark of its address space since its `exec`. Not `ru_maxrss`,
/// which Linux carries across `exec`: a child started by a process holding
/// hundreds of MiB reports its parent's mark (`bench sync`'s large phase
/// reported the small phase's). `None` where there is no such file.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// CPU time (user + system) of this process so far.
pub fn cpu_time() -> Duration {
    let (user, sys, _) = usage_split();
    user + sys
}

/// The shipped `edc-sync` binary the benchmarks run: `EDC_SYNC_BIN`, or
/// the one beside this program (`cargo build --release --workspace`
/// builds both into `target/release/`).
pub fn edc_sync_exe() -> anyhow::Result<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("EDC_SYNC_BIN") {
        return Ok(path.into());
    }
    let me = std::env::current_exe().context("locating the edc-sync-bench executable")?;
    let exe = me.with_file_name("edc-sync");
    if !exe.is_file() {
        bail!(
            "{} is missing: the benchmarks run the edc-sync binary beside them; build both with \
             `cargo build --release --workspace`, or set EDC_SYNC_BIN",
            exe.display()
        );
    }
    Ok(exe)
}

/// The simulator in a child process; killed on drop.
pub struct SimProcess {
    child: Child,
    pub url: String,
}

impl SimProcess {
    pub fn start(exe: &Path, records: u64, padding: usize) -> anyhow::Result<SimProcess> {
        SimProcess::start_with(
            exe,
            &[
                "--records",
                &records.to_string(),
                "--padding",
                &padding.to_string(),
            ],
        )
    }

    /// The simulator with `args` (its profile, dataset and faults).
    pub fn start_with(exe: &Path, args: &[&str]) -> anyhow::Result<SimProcess> {
        let mut child = Command::new(exe)
            .args(["simulate", "--port", "0"])
            .args(args)
            .args(["--token", "bench-token", "--seed", "7"])
            .stdout(Stdio::piped())
            .spawn()
            .context("starting the simulator process")?;
        let stdout = child.stdout.take().context("simulator stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let url = line.split_whitespace().last().unwrap_or_default().to_string();
        if !url.starts_with("http://") {
            bail!("the simulator did not print its URL (got {line:?})");
        }
        Ok(SimProcess { child, url })
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The benchmark stream's path: the policy's `delta.path`, and what a
/// bare GET of its first page asks for.
pub const DELTA_PATH: &str = "/api/v24.1/query/audit_trail";

/// The benchmarks' policy: a Vault-style modified-since stream with the
/// lookback the shipped `config/rate_limits.yaml` gives one (300 s, each
/// record known by its `id` with its cursor value), so that a page costs
/// what it costs a deployment. Without `record_id` a record is known by
/// its whole content, one more SHA-256 pass over every record: the
/// one-pass figures of `bench sync` price that separately.
pub fn policy(page_size: u64, max_body: u64) -> String {
    format!(
        r#"bench:
  base_url_env: EDC_SYNC_BENCH_URL
  token_env: EDC_SYNC_BENCH_TOKEN
  sustained_rate_per_sec: 1000000
  burst_capacity: 1000000
  bucket_key: "rl:bench"
  max_concurrency: 4
  http:
    max_body_bytes: {max_body}
    request_timeout_s: 600
{}    lookback:
      seconds: 300
      record_id: id
"#,
        delta_block(page_size)
    )
}

/// The `delta:` block of a benchmark vendor (the simulator's Vault-style
/// audit trail, `page_size` records a page), indented under its vendor.
pub fn delta_block(page_size: u64) -> String {
    format!(
        r#"  delta:
    path: {DELTA_PATH}
    format: json
    paging: json_next
    records_pointer: /data
    cursor_param: modified_since
    cursor_field: modified_date__v
    page_size_param: limit
    page_size: {page_size}
"#
    )
}

/// `sync` of `vendor`'s study `study` in the policy `config`, its landing
/// and state under `dir`, its trail `trail`, the bench token in the
/// environment and output silenced; the caller adds the pacer's flags and
/// the base URLs.
pub fn sync_command(
    exe: &Path,
    config: &Path,
    vendor: &str,
    study: &str,
    dir: &Path,
    trail: &Path,
) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args(["sync", "--allow-dirty", "--config"])
        .arg(config)
        .args(["--vendor", vendor, "--study", study, "--out"])
        .arg(dir.join("landing"))
        .arg("--state")
        .arg(dir.join("state"))
        .arg("--audit-log")
        .arg(trail)
        .env("EDC_SYNC_BENCH_TOKEN", "bench-token")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// `runner` (the edc-sync executable, or a tracer with it as its last
/// argument) made into `sync` of the bench policy's one stream, with its
/// landing, state and trail under `dir`, output silenced.
pub fn bench_sync(runner: Command, config: &Path, dir: &Path, url: &str) -> Command {
    bench_sync_to(runner, config, dir, url, dir.join("landing").as_os_str())
}

/// [`bench_sync`] landing at `out` (a directory or a bucket's URL).
pub fn bench_sync_to(
    runner: Command,
    config: &Path,
    dir: &Path,
    url: &str,
    out: &std::ffi::OsStr,
) -> Command {
    bench_sync_with(runner, config, dir, url, out, dir.join("state").as_os_str())
}

/// [`bench_sync_to`] keeping its state at `state` (a directory or a
/// database's URL).
pub fn bench_sync_with(
    mut runner: Command,
    config: &Path,
    dir: &Path,
    url: &str,
    out: &std::ffi::OsStr,
    state: &std::ffi::OsStr,
) -> Command {
    runner
        .args(["sync", "--allow-dirty", "--pacer", "local", "--config"])
        .arg(config)
        .args(["--vendor", "bench", "--study", "BENCH", "--out"])
        .arg(out)
        .arg("--state")
        .arg(state)
        .arg("--audit-log")
        .arg(dir.join("audit.jsonl"))
        .env("EDC_SYNC_BENCH_URL", url)
        .env("EDC_SYNC_BENCH_TOKEN", "bench-token")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    runner
}

/// The padding a record of a large page carries: a simulated record is
/// about 200 bytes before padding, and a large page holds 1,000.
pub fn large_padding(page_bytes: u64) -> usize {
    (page_bytes / 1000).saturating_sub(200) as usize
}

/// Zeroes Redis's command statistics: on the one server, or on every node
/// of a cluster (the connection routes CONFIG RESETSTAT to all of them).
pub async fn reset_stats(admin: &mut quota_pacer::Conn) -> anyhow::Result<()> {
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(admin).await?;
    Ok(())
}

/// Script calls counted by Redis since [`reset_stats`]: one server's
/// `INFO commandstats`, or the sum over a cluster's primaries (which the
/// connection asks all, answering one text per node).
pub async fn script_calls_counted(admin: &mut quota_pacer::Conn) -> anyhow::Result<u64> {
    Ok(commandstats(admin).await?.iter().map(|t| script_calls(t)).sum())
}

/// The wake-up pops (`BLPOP`) Redis counted since [`reset_stats`]: a
/// caller the cap turned away is woken by one (docs/pacer.md).
pub async fn wake_pops_counted(admin: &mut quota_pacer::Conn) -> anyhow::Result<u64> {
    Ok(commandstats(admin).await?.iter().map(|t| wake_pops(t)).sum())
}

/// `INFO commandstats`, a text per node.
async fn commandstats(admin: &mut quota_pacer::Conn) -> anyhow::Result<Vec<String>> {
    let info: redis::Value = redis::cmd("INFO").arg("commandstats").query_async(admin).await?;
    Ok(match info {
        redis::Value::Map(nodes) => nodes
            .into_iter()
            .map(|(_, v)| redis::from_redis_value(v))
            .collect::<Result<_, _>>()?,
        one => vec![redis::from_redis_value(one)?],
    })
}

/// The `BLPOP` calls in `INFO commandstats`.
pub fn wake_pops(info: &str) -> u64 {
    counted(info, &["cmdstat_blpop:"])
}

/// Sum of script calls (EVALSHA, EVAL, SCRIPT) in `INFO commandstats`,
/// rejected ones included: each is a round trip.
pub fn script_calls(info: &str) -> u64 {
    counted(info, &["cmdstat_evalsha:", "cmdstat_eval:", "cmdstat_script"])
}

/// The calls (rejected ones included) of the commands whose stat lines
/// start with one of `commands`.
fn counted(info: &str, commands: &[&str]) -> u64 {
    info.lines()
        .filter(|l| commands.iter().any(|c| l.starts_with(c)))
        .flat_map(|l| l.split([':', ',']))
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| *k == "calls" || *k == "rejected_calls")
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum()
}

/// Runs `cmd` to its end and returns whether it exited 0 and its resource
/// usage (`wait4`: its own peak RSS and CPU, which `std` does not give).
pub fn waited(mut cmd: Command) -> anyhow::Result<(bool, libc::rusage)> {
    use anyhow::Context as _;
    let child = cmd.spawn().context("starting a child process")?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: wait4 writes only into the two values we pass; `child` is
    // never waited on by std afterwards (it is forgotten below).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    std::mem::forget(child);
    if waited != pid {
        anyhow::bail!("waiting for a child process: {}", std::io::Error::last_os_error());
    }
    Ok((libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, usage))
}

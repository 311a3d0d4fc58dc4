//! Flags of `edc-sync-bench ...`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// edc-sync's benchmarks: each runs the `edc-sync` binary beside this one
/// (or `EDC_SYNC_BIN`) and prints its figures against their floor, ending
/// with one JSON line.
#[derive(Debug, Parser)]
#[command(name = "edc-sync-bench", version, about, long_about = None)]
pub struct BenchCli {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Contention on one Redis token bucket: round trips per grant,
    /// envelope violations, utilisation, acquire latency.
    ///
    /// Ends with one JSON line of the figures.
    Pacer {
        /// Redis URL.
        #[arg(long, env = "EDC_SYNC_REDIS_URL")]
        redis: String,
        /// Worker processes.
        #[arg(long, default_value_t = 4)]
        procs: u32,
        /// Tasks per worker process.
        #[arg(long, default_value_t = 4)]
        tasks: u32,
        /// Bucket refill rate, tokens per second.
        #[arg(long, default_value_t = 50.0)]
        rate: f64,
        /// Bucket capacity.
        #[arg(long, default_value_t = 20)]
        burst: u32,
        /// Length of the measured window.
        #[arg(long, default_value_t = 20.0)]
        seconds: f64,
        /// Also write every grant time (Redis server microseconds, sorted),
        /// one per line.
        #[arg(long)]
        grants_out: Option<PathBuf>,
    },
    /// What one committed page costs: pages/s and CPU per 64 KiB page, the
    /// durable commit, and peak RSS over 1 GiB in 64 MiB pages.
    ///
    /// Ends with one JSON line of the figures.
    Sync {
        /// Small pages to sync (about --page-kib each).
        #[arg(long, default_value_t = 500)]
        pages: u64,
        /// Size of a small page, KiB.
        #[arg(long, default_value_t = 64)]
        page_kib: u64,
        /// Large pages to sync (about --large-page-mib each).
        #[arg(long, default_value_t = 16)]
        large_pages: u64,
        /// Size of a large page, MiB.
        #[arg(long, default_value_t = 64)]
        large_page_mib: u64,
    },
    /// Start-up against history: a run with nothing new, with an empty
    /// history and with ENTRIES manifest entries and audit lines before it;
    /// wall time and peak RSS of each (`wait4`), and their ratios.
    ///
    /// Ends with one JSON line of the figures.
    Startup {
        /// Pages of history (manifest entries, and audit lines for each).
        #[arg(long, default_value_t = 100_000)]
        entries: u64,
    },
    /// `verify` at landings of N one-record pages (each made by a sync
    /// first) against `sha256sum` over the same page files: wall time,
    /// peak RSS (`wait4`) and the ratio, per size.
    ///
    /// Ends with one JSON line of the figures.
    Verify {
        /// Landing sizes, in pages (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = [3_000u64, 10_000, 30_000])]
        pages: Vec<u64>,
        /// Land in a private S3 bucket (a Garage server the benchmark
        /// starts) and verify `--out s3://…`; the floor is `sha256sum` over
        /// a local copy of the same page objects.
        #[arg(long)]
        bucket: bool,
    },
    /// What the trail costs as a study grows: trail bytes a one-record
    /// page and of a run with nothing new (the shipped lookback), and a
    /// quiet stream's start-up on its own trail and after another stream's
    /// PAGES pages in the same trail, each against its target.
    ///
    /// Ends with one JSON line of the figures.
    Scale {
        /// Pages of each sync.
        #[arg(long, default_value_t = 10_000)]
        pages: u64,
    },
    /// Many streams of one quota in `sync --redis --all-streams` (one
    /// process, or several):
    /// Redis script calls per request (all, and the marginal cost of a
    /// request against its floor of 1.0) and when each stream finished.
    ///
    /// Ends with one JSON line of the figures.
    Streams {
        /// Redis URL.
        #[arg(long, env = "EDC_SYNC_REDIS_URL")]
        redis: String,
        /// Stream counts (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = [1u32, 50, 500])]
        streams: Vec<u32>,
        /// Pages each stream syncs.
        #[arg(long, default_value_t = 4)]
        pages: u64,
        /// The quota's rate, requests per second (its cap is 4 in flight).
        #[arg(long, default_value_t = 50.0)]
        rate: f64,
        /// Sync processes the streams are split between (the cap is
        /// shared across them).
        #[arg(long, default_value_t = 1)]
        procs: u32,
    },
    /// Crash soak: start a sync, SIGKILL it at a seeded random moment (or
    /// fail its Nth fsync with EIO), resume; ROUNDS times, with faults on;
    /// then count rounds with the cursor ahead, duplicates and losses.
    CrashSoak {
        /// Rounds: each a sync killed (or failed) at a seeded instant, then resumed.
        #[arg(long, default_value_t = 200)]
        rounds: u32,
        /// Instead of SIGKILL, fail the Nth fsync-class call of each round's
        /// run with EIO (N seeded, 1 to 6; needs strace): the run must stop
        /// and treat what it could not sync as not durable.
        #[arg(long)]
        fsync_faults: bool,
        /// Land in a private S3 object store on loopback instead of a local
        /// directory: garage (no conditional writes: HEAD first) or s3s-fs
        /// (conditional writes); `scripts/test` installs both.
        #[arg(long, value_name = "SERVER", value_parser = ["garage", "s3s-fs"])]
        object_store: Option<String>,
        /// Records in the simulated study.
        #[arg(long, default_value_t = 400)]
        records: u32,
        /// Seed of the kill instants and faults (the same seed, the same soak).
        #[arg(long, default_value_t = 0x50a4)]
        seed: u64,
    },
    /// What a committed page costs with the state in files and in
    /// PostgreSQL (a private server the benchmark starts), side by side,
    /// and pages per second with 1, 4 and 16 processes on one database.
    /// One JSON line per figure set (docs/benchmarks.md).
    State,
    /// Any host resumes any stream: processes in working directories of
    /// their own share one PostgreSQL state (a private server the soak
    /// starts) and one landing, and SIGKILL each other at seeded instants;
    /// then one clean run. Prints the figures, then one JSON line; exits
    /// non-zero when anything was lost, duplicated, ahead or unfenced.
    HostsSoak {
        /// Rounds of processes killing each other.
        #[arg(long, default_value_t = 200)]
        rounds: u32,
        /// Processes started on the stream each round.
        #[arg(long, default_value_t = 3)]
        hosts: u32,
        /// Records in the simulated study.
        #[arg(long, default_value_t = 3000)]
        records: u32,
        /// The simulator's latency per request: how slowly pages come, so
        /// that kills fall mid-window.
        #[arg(long, default_value_t = 20)]
        latency_ms: u64,
        /// Seed of the kill instants (the same seed, the same soak).
        #[arg(long, default_value_t = 0x50a4)]
        seed: u64,
    },
    /// A page of any size: a REDCap project of ROWS changes, each of its
    /// own record, on the simulator's redcap profile; its log (one page of
    /// ROWS rows) and its records (an id list of ROWS ids, then batches)
    /// each synced twice, then `verify` and `audit verify`: wall, CPU and
    /// peak RSS of each, and the trail's longest line against the 4 MiB a
    /// line may be. Exits non-zero when anything does not exit 0.
    ///
    /// Ends with one JSON line of the figures.
    LargePage {
        /// Changes in the project (log rows, and record ids).
        #[arg(long, default_value_t = 1_000_000)]
        rows: u32,
        /// Records a batch of the records stream asks for (at most 1000;
        /// PHP takes 1000 form fields by default, `max_input_vars`).
        #[arg(long, default_value_t = 500)]
        batch_size: u32,
    },
    /// One phase of `bench sync` in a process of its own (spawned by it).
    #[command(hide = true)]
    SyncPhase {
        #[arg(long)]
        pages: u64,
        #[arg(long)]
        page_bytes: u64,
        #[arg(long)]
        work: PathBuf,
    },
    /// One worker process of `bench pacer` (spawned by it).
    #[command(hide = true)]
    PacerWorker {
        #[arg(long)]
        redis: String,
        #[arg(long)]
        key: String,
        #[arg(long)]
        tasks: u32,
        #[arg(long)]
        rate: f64,
        #[arg(long)]
        burst: u32,
        #[arg(long, allow_negative_numbers = true)]
        start_us: i64,
        #[arg(long, allow_negative_numbers = true)]
        end_us: i64,
    },
}

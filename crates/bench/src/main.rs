//! `edc-sync-bench`: the benchmark programs. Each runs the shipped
//! `edc-sync` binary found beside this one (or `EDC_SYNC_BIN`) and prints
//! its figures against their floor, ending with one JSON line. Not part of
//! the shipped binary: nothing of the product depends on this crate.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use edc_sync_bench::cli::{BenchCli, BenchCommand};
use edc_sync_bench::harness::edc_sync_exe;
use edc_sync_bench::pacer::{self, BenchArgs, WorkerArgs};
use edc_sync_bench::sync;

fn main() -> ExitCode {
    let cli = BenchCli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr().lock(), "edc-sync-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// This program itself, for the worker processes of its own subcommands.
fn this_exe() -> anyhow::Result<std::path::PathBuf> {
    std::env::current_exe().context("locating the edc-sync-bench executable for its workers")
}

/// A small multi-threaded runtime, as the product's.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    let rt = runtime()?;
    match cmd {
        BenchCommand::Pacer {
            redis,
            procs,
            tasks,
            rate,
            burst,
            seconds,
            grants_out,
        } => {
            // A Redis URL the pacer does not take is a configuration
            // mistake (78), as for every command given one.
            if let Err(e) = quota_pacer::RedisPacer::check_url(&redis) {
                let _ = writeln!(std::io::stderr().lock(), "edc-sync-bench: --redis {e}");
                std::process::exit(i32::from(edc_core::exit::Exit::Config.code()));
            }
            let exe = this_exe()?;
            let args = BenchArgs {
                redis,
                procs,
                tasks,
                rate,
                burst,
                seconds,
                grants_out,
            };
            let figures = rt.block_on(pacer::run(args, exe, edc_sync_exe()?))?;
            writeln!(std::io::stdout().lock(), "{}", pacer::render(&figures)).context("writing to stdout")?;
            Ok(())
        }
        BenchCommand::Sync {
            pages,
            page_kib,
            large_pages,
            large_page_mib,
        } => {
            let exe = edc_sync_exe()?;
            let (_scratch, work) = sync::scratch()?;
            let small = edc_sync_bench::side_by_side::measure(
                &rt,
                &exe,
                &work.join("small"),
                pages,
                page_kib * 1024,
            )?;
            let large = edc_sync_bench::phase::rss_phase_in_child(
                &this_exe()?,
                &work.join("large"),
                large_pages,
                large_page_mib,
            )?;
            let peers = edc_sync_bench::peers::measure(&exe, &work.join("peers"), pages, page_kib * 1024)?;
            let one_pass = edc_sync_bench::one_pass::measure(
                large.page_bytes as usize,
                edc_sync_bench::harness::large_padding(large_page_mib * 1024 * 1024),
                page_kib * 1024,
            )?;
            let large_python = edc_sync_bench::peers::python_on_large_pages(
                &exe,
                &work.join("peers-large"),
                large_pages,
                large_page_mib * 1024 * 1024,
            )?;
            let figures = sync::Figures {
                small,
                large,
                peers,
                one_pass,
                large_python,
            };
            writeln!(std::io::stdout().lock(), "{}", sync::render(&figures)).context("writing to stdout")?;
            Ok(())
        }
        BenchCommand::Startup { entries } => {
            let exe = edc_sync_exe()?;
            let (_scratch, work) = sync::scratch()?;
            let figures = edc_sync_bench::startup::run(&exe, &work, entries)?;
            writeln!(
                std::io::stdout().lock(),
                "{}",
                edc_sync_bench::startup::render(&figures)
            )
            .context("writing to stdout")?;
            Ok(())
        }
        BenchCommand::Verify { pages, bucket } => {
            let exe = edc_sync_exe()?;
            let garage = match bucket {
                true => Some(edc_testkit::s3_server::PrivateS3::garage().map_err(anyhow::Error::msg)?),
                false => None,
            };
            let mut all = Vec::new();
            for (i, n) in pages.into_iter().enumerate() {
                let (_scratch, work) = sync::scratch()?;
                let bucket = garage.as_ref().map(|g| (g, format!("bench-{i}")));
                all.push(edc_sync_bench::verify::run(&exe, &work, n, bucket)?);
            }
            writeln!(
                std::io::stdout().lock(),
                "{}",
                edc_sync_bench::verify::render(&all)
            )
            .context("writing to stdout")?;
            Ok(())
        }
        BenchCommand::LargePage { rows, batch_size } => {
            let exe = edc_sync_exe()?;
            let (_scratch, work) = sync::scratch()?;
            let figures = edc_sync_bench::large_page::run(&exe, &work, rows, batch_size)?;
            writeln!(
                std::io::stdout().lock(),
                "{}",
                edc_sync_bench::large_page::render(&figures)
            )
            .context("writing to stdout")?;
            Ok(())
        }
        BenchCommand::Scale { pages } => {
            if pages == 0 {
                anyhow::bail!("--pages must be > 0");
            }
            let exe = edc_sync_exe()?;
            let (_scratch, work) = sync::scratch()?;
            let figures = edc_sync_bench::scale::run(&exe, &work, pages)?;
            writeln!(
                std::io::stdout().lock(),
                "{}",
                edc_sync_bench::scale::render(&figures)
            )
            .context("writing to stdout")?;
            Ok(())
        }
        BenchCommand::Streams {
            redis,
            streams,
            pages,
            rate,
            procs,
        } => {
            if let Err(e) = quota_pacer::RedisPacer::check_url(&redis) {
                let _ = writeln!(std::io::stderr().lock(), "edc-sync-bench: --redis {e}");
                std::process::exit(i32::from(edc_core::exit::Exit::Config.code()));
            }
            if pages == 0 || procs == 0 || !rate.is_finite() || rate <= 0.0 || streams.contains(&0) {
                anyhow::bail!("--streams, --pages, --rate and --procs must be > 0");
            }
            let exe = edc_sync_exe()?;
            let mut all = Vec::new();
            for n in streams {
                let (_scratch, work) = sync::scratch()?;
                let shape = edc_sync_bench::streams::Shape {
                    streams: n,
                    procs: procs.min(n),
                    pages,
                    rate,
                };
                all.push(rt.block_on(edc_sync_bench::streams::run(&exe, &redis, &work, shape))?);
            }
            writeln!(
                std::io::stdout().lock(),
                "{}",
                edc_sync_bench::streams::render(&all)
            )
            .context("writing to stdout")?;
            Ok(())
        }
        BenchCommand::CrashSoak {
            rounds,
            fsync_faults,
            object_store,
            records,
            seed,
        } => {
            let exe = edc_sync_exe()?;
            let (_scratch, work) = sync::scratch()?;
            let mode = match fsync_faults {
                true => edc_sync_bench::soak::Mode::FsyncFaults,
                false => edc_sync_bench::soak::Mode::Kill,
            };
            let figures = rt.block_on(edc_sync_bench::soak::run(
                &exe,
                &work,
                mode,
                rounds,
                records,
                seed,
                object_store.as_deref(),
            ))?;
            writeln!(
                std::io::stdout().lock(),
                "{}",
                edc_sync_bench::soak::render(&figures)
            )
            .context("writing to stdout")?;
            if figures.duplicates > 0
                || figures.lost > 0
                || figures.rounds_with_cursor_ahead > 0
                || !figures.audit_intact
                || !figures.cursor_at_high_water
                || figures.verify_exit_code != Some(0)
            {
                anyhow::bail!("the crash soak found damage (see the figures above)");
            }
            Ok(())
        }
        BenchCommand::State => {
            let exe = edc_sync_exe()?;
            let (_scratch, work) = sync::scratch()?;
            let mut out = std::io::stdout().lock();
            for line in edc_sync_bench::state::run(&exe, &work)? {
                writeln!(out, "{line}").context("writing to stdout")?;
            }
            Ok(())
        }
        BenchCommand::HostsSoak {
            rounds,
            hosts,
            records,
            latency_ms,
            seed,
        } => {
            let exe = edc_sync_exe()?;
            let (_scratch, work) = sync::scratch()?;
            let figures = rt.block_on(edc_sync_bench::hosts::run(
                &exe, &work, rounds, hosts, records, latency_ms, seed,
            ))?;
            writeln!(
                std::io::stdout().lock(),
                "{}",
                edc_sync_bench::hosts::render(&figures)
            )
            .context("writing to stdout")?;
            if figures.duplicates > 0
                || figures.lost > 0
                || figures.rounds_with_cursor_ahead > 0
                || figures.fence_violations > 0
                || figures.audit_verify_exit != Some(0)
                || figures.verify_exit != Some(0)
                || !figures.cursor_at_high_water
            {
                anyhow::bail!("the hosts soak found damage (see the figures above)");
            }
            Ok(())
        }
        BenchCommand::SyncPhase {
            pages,
            page_bytes,
            work,
        } => {
            let exe = edc_sync_exe()?;
            let phase = rt.block_on(edc_sync_bench::phase::phase(&exe, &work, pages, page_bytes))?;
            writeln!(std::io::stdout().lock(), "{}", serde_json::to_string(&phase)?)
                .context("writing to stdout")?;
            Ok(())
        }
        BenchCommand::PacerWorker {
            redis,
            key,
            tasks,
            rate,
            burst,
            start_us,
            end_us,
        } => rt.block_on(pacer::run_worker(WorkerArgs {
            redis,
            tasks,
            rate,
            burst,
            key,
            start_us,
            end_us,
        })),
    }
}

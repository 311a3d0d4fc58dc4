//! `edc-sync bench ...`

use std::io::Write;

use anyhow::Context;

use crate::bench::pacer::{self, BenchArgs, WorkerArgs};
use crate::bench::sync;
use crate::cli::BenchCommand;

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    let rt = super::runtime()?;
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
            let exe = std::env::current_exe().context("locating the edc-sync executable for the workers")?;
            let args = BenchArgs {
                redis,
                procs,
                tasks,
                rate,
                burst,
                seconds,
                grants_out,
            };
            let figures = rt.block_on(pacer::run(args, exe))?;
            writeln!(std::io::stdout().lock(), "{}", pacer::render(&figures)).context("writing to stdout")?;
            Ok(())
        }
        BenchCommand::Sync {
            pages,
            page_kib,
            large_pages,
            large_page_mib,
        } => {
            let exe = std::env::current_exe().context("locating the edc-sync executable")?;
            let (_scratch, work) = sync::scratch()?;
            let small =
                crate::bench::side_by_side::measure(&rt, &exe, &work.join("small"), pages, page_kib * 1024)?;
            let large = crate::bench::phase::rss_phase_in_child(
                &exe,
                &work.join("large"),
                large_pages,
                large_page_mib,
            )?;
            let peers = crate::bench::peers::measure(&exe, &work.join("peers"), pages, page_kib * 1024)?;
            let one_pass = crate::bench::one_pass::measure(
                large.page_bytes as usize,
                crate::bench::harness::large_padding(large_page_mib * 1024 * 1024),
                page_kib * 1024,
            )?;
            let large_python = crate::bench::peers::python_on_large_pages(
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
            let exe = std::env::current_exe().context("locating the edc-sync executable")?;
            let (_scratch, work) = sync::scratch()?;
            let figures = crate::bench::startup::run(&exe, &work, entries)?;
            writeln!(
                std::io::stdout().lock(),
                "{}",
                crate::bench::startup::render(&figures)
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
            let exe = std::env::current_exe().context("locating the edc-sync executable")?;
            let (_scratch, work) = sync::scratch()?;
            let mode = match fsync_faults {
                true => crate::bench::soak::Mode::FsyncFaults,
                false => crate::bench::soak::Mode::Kill,
            };
            let figures = rt.block_on(crate::bench::soak::run(
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
                crate::bench::soak::render(&figures)
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
            let exe = std::env::current_exe().context("locating the edc-sync executable")?;
            let (_scratch, work) = sync::scratch()?;
            let mut out = std::io::stdout().lock();
            for line in crate::bench::state::run(&exe, &work)? {
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
            let exe = std::env::current_exe().context("locating the edc-sync executable")?;
            let (_scratch, work) = sync::scratch()?;
            let figures = rt.block_on(crate::bench::hosts::run(
                &exe, &work, rounds, hosts, records, latency_ms, seed,
            ))?;
            writeln!(
                std::io::stdout().lock(),
                "{}",
                crate::bench::hosts::render(&figures)
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
            let exe = std::env::current_exe().context("locating the edc-sync executable")?;
            let phase = rt.block_on(crate::bench::phase::phase(&exe, &work, pages, page_bytes))?;
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

//! The small pages and the floor of their syscalls, measured side by side.
//!
//! A small page's CPU is mostly the kernel's: fsync, rename and the
//! creation of two files a commit. What that costs depends on the file
//! system's state as much as on the code: ext4's inode allocator steps
//! over every inode deleted in the last seconds, and each commit replaces
//! its cursor file. A floor measured once, minutes after the sync, moved
//! the printed ratio between 1.1x and 2.6x from one run of one build to
//! the next. So each round syncs the pages, then at once writes the floor
//! of the same commit (the bytes its commits wrote), then the same floor
//! with each page first received by a bare GET; the round with the median
//! ratio is the one reported, with every round's figures beside it.

use std::path::Path;

use serde::Serialize;

use super::bare_get::BareGet;
use super::harness::SimProcess;
use super::peers::Floor;
use super::phase::Phase;

/// Rounds of sync-then-floor: an odd number, so one of them is the median.
pub const ROUNDS: usize = 3;

/// A sync of the small pages and the floors measured right after it.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    pub sync: Phase,
    pub floor: Floor,
    /// The floor with each page first received from the simulator by a
    /// bare GET ([`BareGet`]): the syscalls of the whole page.
    pub floor_received: Floor,
}

impl Round {
    pub fn cpu_vs_floor(&self) -> f64 {
        self.sync.cpu_ms_per_page / self.floor.cpu_ms_per_page
    }

    pub fn cpu_vs_floor_received(&self) -> f64 {
        self.sync.cpu_ms_per_page / self.floor_received.cpu_ms_per_page
    }

    /// The round's figures as the JSON line lists them.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "pages": self.sync.pages,
            "cpu_ms_per_page": self.sync.cpu_ms_per_page,
            "user_cpu_ms_per_page": self.sync.user_ms_per_page,
            "floor_wall_ms_per_page": self.floor.wall_ms_per_page,
            "floor_cpu_ms_per_page": self.floor.cpu_ms_per_page,
            "floor_received_wall_ms_per_page": self.floor_received.wall_ms_per_page,
            "floor_received_cpu_ms_per_page": self.floor_received.cpu_ms_per_page,
            "cpu_vs_floor": self.cpu_vs_floor(),
            "cpu_vs_floor_received": self.cpu_vs_floor_received(),
            "audit_line_bytes": self.sync.commit_bytes.audit_line,
        })
    }
}

/// Every round, in the order they ran.
#[derive(Debug, Clone, Serialize)]
pub struct SideBySide {
    pub rounds: Vec<Round>,
}

impl SideBySide {
    /// The round whose sync-to-floor ratio is the median of all rounds':
    /// its sync and its floors are reported together, from one moment.
    pub fn median(&self) -> &Round {
        let mut by_ratio: Vec<&Round> = self.rounds.iter().collect();
        by_ratio.sort_by(|a, b| a.cpu_vs_floor().total_cmp(&b.cpu_vs_floor()));
        by_ratio[by_ratio.len() / 2]
    }
}

/// Runs [`ROUNDS`] rounds of `pages` small pages of about `page_bytes`
/// each, every round in a directory of its own under `work`.
pub fn measure(
    rt: &tokio::runtime::Runtime,
    exe: &Path,
    work: &Path,
    pages: u64,
    page_bytes: u64,
) -> anyhow::Result<SideBySide> {
    let mut rounds = Vec::with_capacity(ROUNDS);
    for n in 0..ROUNDS {
        let dir = work.join(format!("round-{n}"));
        // Started first, so that nothing but the floor runs between the
        // sync and its floors.
        let sim = SimProcess::start(
            exe,
            pages * super::peers::SMALL_PAGE_RECORDS,
            super::peers::small_padding(page_bytes),
        )?;
        let mut receive = BareGet::connect(&sim.url, &super::peers::first_small_page(), "bench-token")?;
        let sync = rt.block_on(super::phase::phase(exe, &dir.join("sync"), pages, page_bytes))?;
        let floor = super::peers::floor(&dir.join("floor"), pages, page_bytes, sync.commit_bytes, None)?;
        let floor_received = super::peers::floor(
            &dir.join("floor-received"),
            pages,
            page_bytes,
            sync.commit_bytes,
            Some(&mut receive),
        )?;
        rounds.push(Round {
            sync,
            floor,
            floor_received,
        });
    }
    Ok(SideBySide { rounds })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit_bytes::CommitBytes;

    fn round(sync_cpu: f64, floor_cpu: f64) -> Round {
        let floor = Floor {
            wall_ms_per_page: 1.0,
            cpu_ms_per_page: floor_cpu,
        };
        Round {
            sync: Phase {
                pages: 1,
                records: 1,
                bytes: 1,
                page_bytes: 1,
                wall_s: 1.0,
                pages_per_s: 1.0,
                cpu_ms_per_page: sync_cpu,
                user_ms_per_page: 0.0,
                durable_commit_ms_per_page: 1.0,
                peak_rss_mib: 1.0,
                commit_bytes: CommitBytes::default(),
            },
            floor,
            floor_received: floor,
        }
    }

    #[test]
    fn the_median_round_is_the_one_reported_whole() {
        let side = SideBySide {
            rounds: vec![round(3.0, 1.0), round(1.0, 1.0), round(4.0, 2.0)],
        };
        let median = side.median();
        assert_eq!(median.cpu_vs_floor(), 2.0);
        assert_eq!(
            median.sync.cpu_ms_per_page, 4.0,
            "its own sync, not another round's"
        );
    }
}

//! The one-pass figures of `bench sync`: what SHA-256
//! alone costs over a page's bytes (the floor a landed page cannot
//! go under), what the streaming payload check adds, fed the same
//! chunks the HTTP client hands over, and what the check costs when it
//! also learns every record's identity for a lookback: by its `id` with
//! its cursor value (the benchmark policy's, and the shipped one's), or by
//! its whole content (a policy naming no `record_id`: a second SHA-256
//! pass, over each record). All are timed on each chunk as the
//! sync sees it: just copied into a fresh 64 KiB buffer, so in cache (a
//! floor measured over a 64 MiB buffer read from main memory would be
//! about 1.4 times slower and flatter the ratio). Measured in this process, on pages
//! built by the simulator's own record generator, in three shapes: the
//! large phase's (records padded to about 64 KiB, mostly one long string),
//! a dense one (about 200-byte records, the worst case for a
//! validator: a key or a value every dozen bytes), and the small phase's
//! page (100 records), over as many of them as make the large page's bytes.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use edc_core::config::CursorKind;
use edc_core::edc::payload::JsonCheck;
use edc_sim::Dataset;

/// The chunk size the check is fed in (hyper reads up to this much).
const CHUNK: usize = 64 * 1024;
/// Each figure is the best of this many passes (the least disturbed).
const PASSES: usize = 3;

/// One page shape's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Shape {
    pub name: String,
    pub page_bytes: u64,
    pub records: u64,
    /// Pages of this shape measured (their bytes add up to about the
    /// large page's); the times are for all of them together.
    pub pages: u64,
    pub sha256_ms: f64,
    pub check_ms: f64,
    /// (SHA-256 + check) / SHA-256 alone: what one pass costs over the floor.
    pub one_pass_vs_sha256: f64,
    /// The check learning every record's identity by its `id` field and
    /// cursor value.
    pub by_id_check_ms: f64,
    /// (SHA-256 + that check) / SHA-256 alone.
    pub by_id_vs_sha256: f64,
    /// The check learning every record's identity by its content.
    pub by_content_check_ms: f64,
    /// (SHA-256 + that check) / SHA-256 alone.
    pub by_content_vs_sha256: f64,
}

/// Which identities the check learns.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Identify {
    No,
    ById,
    ByContent,
}

/// A Vault-style page of `page_bytes` or a little more.
fn page(padding: usize, page_bytes: usize) -> (Vec<u8>, u64) {
    let dataset = Dataset {
        subjects: 50,
        records: u32::MAX,
        seed: 7,
        padding,
    };
    let mut body = br#"{"responseStatus":"SUCCESS","responseDetails":{"next_page":null},"data":["#.to_vec();
    // Records are numbered from 1, as the simulator serves them (record 0
    // underflowed its subject number: a panic in a debug build).
    let mut n = 0u32;
    while body.len() < page_bytes {
        if n > 0 {
            body.push(b',');
        }
        n += 1;
        body.extend_from_slice(dataset.json_record(&dataset.record(n)).as_bytes());
    }
    body.extend_from_slice(b"]}");
    (body, u64::from(n))
}

/// CPU time of the calling thread: unlike the wall clock, not inflated
/// by whatever else the machine does (the kernel writing back the large
/// phase's gigabyte, on two cores).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes into the struct we pass it.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn best(mut pass: impl FnMut() -> Duration) -> Duration {
    (0..PASSES).map(|_| pass()).min().unwrap_or_default()
}

/// Feeds `body` to `work` chunk by chunk, each chunk first copied into a
/// buffer of its own (as a socket read delivers it, in cache), and
/// returns the thread CPU time `work` alone took.
fn per_cached_chunk(body: &[u8], mut work: impl FnMut(&[u8])) -> Duration {
    let mut buf = vec![0u8; CHUNK];
    let mut spent = Duration::ZERO;
    for chunk in body.chunks(CHUNK) {
        let arrived = &mut buf[..chunk.len()];
        arrived.copy_from_slice(chunk);
        let t = thread_cpu();
        work(arrived);
        spent += thread_cpu().saturating_sub(t);
    }
    spent
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The check of one page, from its first chunk to its verdict: its CPU
/// time, and the records it counted.
fn checked(name: &str, body: &[u8], identify: Identify) -> anyhow::Result<(Duration, u64)> {
    // As the sync checks them: every cursor value must be a timestamp (the
    // shipped policy's `cursor_kind`, and its default).
    let mut check = JsonCheck::of_kind(
        "/data",
        Some("/responseDetails/next_page"),
        "modified_date__v",
        CursorKind::Timestamp,
    );
    match identify {
        Identify::No => {}
        Identify::ById => check = check.identifying(Some("id")),
        Identify::ByContent => check = check.identifying(None),
    }
    let spent = per_cached_chunk(body, |chunk| check.feed(chunk));
    let t = thread_cpu();
    let summary = check.finish();
    let spent = spent + thread_cpu().saturating_sub(t);
    let summary = summary.map_err(|e| anyhow::anyhow!("the {name} page was refused: {e}"))?;
    if identify != Identify::No {
        anyhow::ensure!(
            summary
                .keys
                .as_ref()
                .is_some_and(|k| k.as_ref().is_ok_and(|k| k.len() as u64 == summary.records)),
            "the {name} page's records were not all identified"
        );
    }
    Ok((spent, summary.records))
}

/// Measures one shape: `pages` pages of about `page_bytes` each, with
/// `padding` bytes a record.
pub fn shape(name: &str, padding: usize, page_bytes: usize, pages: u64) -> anyhow::Result<Shape> {
    let (body, records) = page(padding, page_bytes);
    let sha = best(|| {
        (0..pages)
            .map(|_| {
                let mut hasher = Sha256::new();
                let spent = per_cached_chunk(&body, |chunk| hasher.update(chunk));
                std::hint::black_box(hasher.finalize());
                spent
            })
            .sum()
    });
    let mut counted = Vec::new();
    let mut check = |identify: Identify| -> anyhow::Result<Duration> {
        let mut each = || -> anyhow::Result<Duration> {
            let mut spent = Duration::ZERO;
            for _ in 0..pages {
                let (took, records) = checked(name, &body, identify)?;
                counted.push(records);
                spent += took;
            }
            Ok(spent)
        };
        let passes = (0..PASSES).map(|_| each()).collect::<anyhow::Result<Vec<_>>>()?;
        Ok(passes.into_iter().min().unwrap_or_default())
    };
    let (plain, by_id, by_content) = (
        check(Identify::No)?,
        check(Identify::ById)?,
        check(Identify::ByContent)?,
    );
    anyhow::ensure!(
        counted.iter().all(|&n| n == records),
        "the {name} page: {counted:?} records counted of {records}"
    );
    Ok(Shape {
        name: name.into(),
        page_bytes: body.len() as u64,
        records,
        pages,
        sha256_ms: ms(sha),
        check_ms: ms(plain),
        one_pass_vs_sha256: (ms(sha) + ms(plain)) / ms(sha),
        by_id_check_ms: ms(by_id),
        by_id_vs_sha256: (ms(sha) + ms(by_id)) / ms(sha),
        by_content_check_ms: ms(by_content),
        by_content_vs_sha256: (ms(sha) + ms(by_content)) / ms(sha),
    })
}

/// The three shapes: a page of `page_bytes` padded like the large
/// phase's (`padding` bytes a record), a dense one of the same size, and
/// small pages like the small phase's (`small_page_bytes`), as many as
/// make `page_bytes`.
pub fn measure(page_bytes: usize, padding: usize, small_page_bytes: u64) -> anyhow::Result<Vec<Shape>> {
    let small_pages = (page_bytes as u64 / small_page_bytes.max(1)).max(1);
    Ok(vec![
        shape("padded", padding, page_bytes, 1)?,
        shape("dense", 0, page_bytes, 1)?,
        shape(
            "small",
            super::peers::small_padding(small_page_bytes),
            small_page_bytes as usize,
            small_pages,
        )?,
    ])
}

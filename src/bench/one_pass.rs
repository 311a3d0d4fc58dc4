//! The one-pass figures of `bench sync`: what SHA-256
//! alone costs over a large page's bytes (the floor a landed page cannot
//! go under), and what the streaming payload check adds, fed the same
//! chunks the HTTP client hands over. Both are timed on each chunk as the
//! sync sees it: just copied into a fresh 64 KiB buffer, so in cache (a
//! floor measured over a 64 MiB buffer read from main memory would be
//! about 1.4 times slower and flatter the ratio). Measured in this process, on pages
//! built by the simulator's own record generator, in two shapes: the
//! large phase's (records padded to about 64 KiB, mostly one long string)
//! and a dense one (about 200-byte records, the worst case for a
//! validator: a key or a value every dozen bytes).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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
    pub sha256_ms: f64,
    pub check_ms: f64,
    /// (SHA-256 + check) / SHA-256 alone: what one pass costs over the floor.
    pub one_pass_vs_sha256: f64,
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

/// Measures one shape.
pub fn shape(name: &str, padding: usize, page_bytes: usize) -> anyhow::Result<Shape> {
    let (body, records) = page(padding, page_bytes);
    let sha = best(|| {
        let mut hasher = Sha256::new();
        let spent = per_cached_chunk(&body, |chunk| hasher.update(chunk));
        std::hint::black_box(hasher.finalize());
        spent
    });
    let mut verdict = Ok(0);
    let check = best(|| {
        let mut check = JsonCheck::new("/data", Some("/responseDetails/next_page"), "modified_date__v");
        let spent = per_cached_chunk(&body, |chunk| check.feed(chunk));
        let t = thread_cpu();
        verdict = check.finish().map(|s| s.records);
        spent + thread_cpu().saturating_sub(t)
    });
    let counted = verdict.map_err(|e| anyhow::anyhow!("the {name} page was refused: {e}"))?;
    anyhow::ensure!(
        counted == records,
        "the {name} page: {counted} records counted of {records}"
    );
    Ok(Shape {
        name: name.into(),
        page_bytes: body.len() as u64,
        records,
        sha256_ms: ms(sha),
        check_ms: ms(check),
        one_pass_vs_sha256: (ms(sha) + ms(check)) / ms(sha),
    })
}

/// Both shapes, for pages of `page_bytes` padded like the large phase's
/// (`padding` bytes a record).
pub fn measure(page_bytes: usize, padding: usize) -> anyhow::Result<Vec<Shape>> {
    Ok(vec![
        shape("padded", padding, page_bytes)?,
        shape("dense", 0, page_bytes)?,
    ])
}

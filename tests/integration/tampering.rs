//! The state-tampering property: between two runs, random damage to the
//! files of the landing, the state directory and the audit trail, and a
//! random server clock; the next run and the verifiers then either refuse
//! with a clear exit naming what they refused, or every record is landed
//! exactly once. A run never exits 0 with a record lost or duplicated
//! while the verifiers call the result clean.
//!
//! 50 cases run in the suite; `EDC_SYNC_TAMPER_CASES=1000` runs more by
//! hand and `EDC_SYNC_TAMPER_SEED=n` replays one case. Each case prints
//! what it did when it fails; `EDC_SYNC_SHOW_REFUSALS=1` prints every
//! refusal too. The harness and the judgement are shared with the insider
//! model (`insider.rs`).

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use edc_core::audit::AuditKey;
use edc_core::run::{AuditOptions, Streams};
use edc_core::sync::SyncOptions;
use edc_sim::{Dataset, SimConfig, Simulator};
use support::runs::{self, Fixture};

/// 300 records in pages of 40: eight pages a stream.
const RECORDS: u32 = 300;

/// splitmix64: a tiny deterministic generator, so a failing case replays
/// from its seed alone.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

pub(crate) async fn simulator(skew_s: i64) -> Simulator {
    let config = SimConfig {
        dataset: Dataset {
            subjects: 3,
            records: RECORDS,
            seed: 1,
            padding: 0,
        },
        clock_skew_s: skew_s,
        ..SimConfig::default()
    };
    Simulator::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// Runs `study` once, at most `max_pages` pages; with the audit key when
/// `keyed`.
pub(crate) async fn run(
    fx: &Fixture,
    sim: &Simulator,
    study: &str,
    max_pages: Option<u64>,
    keyed: bool,
) -> (u8, String) {
    let audit = AuditOptions {
        key: keyed.then(|| AuditKey::new(runs::KEY.as_bytes().to_vec(), "test").unwrap()),
        ..AuditOptions::default()
    };
    let mut spec = fx.spec(sim, audit);
    spec.study = study.into();
    spec.streams = Streams::One("default".into());
    spec.options = SyncOptions {
        max_pages,
        ..SyncOptions::default()
    };
    fx.run_spec(spec).await
}

pub(crate) fn stream_dir(fx: &Fixture, study: &str) -> PathBuf {
    fx.path(&format!("landing/vault_json/-/{study}/-/default"))
}

/// Every regular file and symlink a run left, relative to the fixture.
fn files(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if rel.starts_with(".git") || rel == Path::new("policies.yaml") {
                continue;
            }
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// One random operation on one file, carried out; its description.
fn tamper(rng: &mut Rng, root: &Path) -> String {
    let all = files(root);
    if all.is_empty() {
        return "nothing to tamper with".into();
    }
    let rel = rng.pick(&all).clone();
    let path = root.join(&rel);
    let bytes = std::fs::read(&path).unwrap_or_default();
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    let shown = rel.display();
    match rng.below(8) {
        0 if !bytes.is_empty() => {
            let at = rng.below(bytes.len());
            let mut b = bytes.clone();
            b[at] ^= 1 << rng.below(8);
            std::fs::write(&path, b).unwrap();
            format!("flipped a bit of byte {at} of {shown}")
        }
        1 => {
            let len = rng.below(bytes.len() + 1);
            std::fs::write(&path, &bytes[..len]).unwrap();
            format!("truncated {shown} to {len} of {} bytes", bytes.len())
        }
        2 => {
            std::fs::remove_file(&path).unwrap();
            format!("deleted {shown}")
        }
        3 if !lines.is_empty() => {
            let i = rng.below(lines.len());
            let mut v = lines.clone();
            v.insert(i, lines[i]);
            std::fs::write(&path, v.concat()).unwrap();
            format!("duplicated line {} of {shown}", i + 1)
        }
        4 if lines.len() > 1 => {
            let (i, j) = (rng.below(lines.len()), rng.below(lines.len()));
            let mut v = lines.clone();
            v.swap(i, j);
            std::fs::write(&path, v.concat()).unwrap();
            format!("swapped lines {} and {} of {shown}", i + 1, j + 1)
        }
        5 if !lines.is_empty() => {
            let i = rng.below(lines.len());
            let mut v = lines.clone();
            v.remove(i);
            std::fs::write(&path, v.concat()).unwrap();
            format!("removed line {} of {shown}", i + 1)
        }
        6 => {
            let other = root.join(rng.pick(&all));
            std::fs::remove_file(&path).unwrap();
            std::os::unix::fs::symlink(&other, &path).unwrap();
            format!("replaced {shown} by a symlink to {}", other.display())
        }
        _ => {
            // Another stream's file of the same place, else any other file.
            let text = rel.to_string_lossy();
            let twin = if text.contains("/S1/") {
                text.replace("/S1/", "/S2/")
            } else {
                text.replace("/S2/", "/S1/")
            };
            let from = if root.join(&twin).is_file() {
                root.join(twin)
            } else {
                root.join(rng.pick(&all))
            };
            let content = std::fs::read(&from).unwrap_or_default();
            std::fs::remove_file(&path).unwrap();
            std::fs::write(&path, content).unwrap();
            format!("copied {} over {shown}", from.display())
        }
    }
}

/// A verifier's refusal is clear when it names a file under the fixture.
fn names_a_file(text: &str, root: &Path) -> bool {
    text.contains(&*root.to_string_lossy()) || text.contains(".jsonl") || text.contains(".json")
}

fn verifiers(fx: &Fixture, keyed: bool) -> Vec<(&'static str, support::Outcome)> {
    let (state, trail) = (fx.path("state"), fx.trail());
    let verify = fx.verify_landing();
    let mut audit = support::edc_sync();
    audit
        .args(["audit", "verify"])
        .arg(&trail)
        .arg("--anchors")
        .arg(&state);
    if keyed {
        audit.arg("--key").env("EDC_SYNC_AUDIT_KEY", runs::KEY);
    }
    vec![
        ("verify", verify),
        ("audit verify --anchors", support::run_cmd(&mut audit)),
    ]
}

/// What one case ended as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Ending {
    /// The run refused (65, 74 or 75) naming a file or both clocks.
    RunRefused(u8),
    /// The run exited 0 and a verifier named the damage it cannot repair.
    VerifierRefused,
    /// Everything clean and every record landed exactly once.
    Whole,
}

async fn one_case(seed: u64, expected: &[String]) -> Result<Ending, String> {
    let mut rng = Rng(seed);
    let fx = Fixture::new();
    let root = fx.path("");
    let sim = simulator(0).await;
    let (a, m) = run(&fx, &sim, "S1", Some(1 + rng.below(5) as u64), false).await;
    let (b, n) = run(&fx, &sim, "S2", Some(1 + rng.below(3) as u64), false).await;
    if a != 0 || b != 0 {
        return Err(format!("the runs before any tampering failed: {a} {m} / {b} {n}"));
    }
    let mut done: Vec<String> = (0..1 + rng.below(3)).map(|_| tamper(&mut rng, &root)).collect();
    let skew = *rng.pick(&[0, 0, 0, 0, 7, -7, 600, -600, 7_200, -7_200, 400 * 86_400]);
    done.push(format!("server clock skewed by {skew} s"));
    judge(seed, &fx, skew, &done.join("; "), expected, false).await
}

/// The property, after the damage `story` describes: the next run of S1
/// (against a server `skew` seconds off) refuses naming a file (or both
/// clocks), or the verifiers name what they refuse, or every record is
/// landed exactly once.
pub(crate) async fn judge(
    seed: u64,
    fx: &Fixture,
    skew: i64,
    story: &str,
    expected: &[String],
    keyed: bool,
) -> Result<Ending, String> {
    let root = fx.path("");
    let story = || story.to_string();
    let sim = simulator(skew).await;
    let (code, message) = run(fx, &sim, "S1", None, keyed).await;
    if std::env::var("EDC_SYNC_SHOW_REFUSALS").is_ok() && code != 0 {
        eprintln!("REFUSED seed {seed}: {}: {code}: {message}", story());
    }
    match code {
        0 => {}
        65 | 74 => {
            return if names_a_file(&message, &root) {
                Ok(Ending::RunRefused(code))
            } else {
                Err(format!("{}: exit {code} names no file: {message}", story()))
            };
        }
        75 => {
            return if message.contains("clock") || names_a_file(&message, &root) {
                Ok(Ending::RunRefused(code))
            } else {
                Err(format!("{}: exit 75 without saying why: {message}", story()))
            };
        }
        other => return Err(format!("{}: exit {other}: {message}", story())),
    }
    let mut refused = false;
    for (what, out) in verifiers(fx, keyed) {
        match out.code {
            0 => {}
            65 | 66 | 74 if names_a_file(&format!("{}{}", out.stdout, out.stderr), &root) => refused = true,
            other => {
                return Err(format!(
                    "{}: the run exited 0, then `{what}` exited {other} naming no file:\n{}{}",
                    story(),
                    out.stdout,
                    out.stderr
                ))
            }
        }
    }
    if refused {
        if std::env::var("EDC_SYNC_TAMPER_SHOW").is_ok() {
            let outs: Vec<String> = verifiers(fx, keyed)
                .into_iter()
                .map(|(w, o)| {
                    format!(
                        "[{w} {}] {}{}",
                        o.code,
                        o.stdout
                            .lines()
                            .filter(|l| l.contains("discrep") || l.contains(": "))
                            .take(3)
                            .collect::<Vec<_>>()
                            .join(" | "),
                        o.stderr.lines().next().unwrap_or("")
                    )
                })
                .collect();
            eprintln!("VERIFIER seed {seed}: {} => {}", story(), outs.join(" // "));
        }
        return Ok(Ending::VerifierRefused);
    }
    let mut ids = match edc_qualify::landed::landed_json_record_ids(&stream_dir(fx, "S1")) {
        Ok(ids) => ids,
        Err(e) => {
            return Err(format!(
                "{}: everything exited 0, yet the landing reads as: {e:#}",
                story()
            ))
        }
    };
    ids.sort();
    if ids != expected {
        let mut counts: BTreeMap<&str, i64> = expected.iter().map(|id| (id.as_str(), -1)).collect();
        for id in &ids {
            *counts.entry(id).or_insert(0) += 1;
        }
        let wrong: Vec<_> = counts.iter().filter(|(_, &c)| c != 0).take(5).collect();
        return Err(format!(
            "{}: everything exited 0 with {} records landed for {} (first differences, landed-1: {wrong:?})",
            story(),
            ids.len(),
            expected.len()
        ));
    }
    Ok(Ending::Whole)
}

/// The records of S1, sorted, as one undisturbed run lands them.
pub(crate) async fn expected_records() -> Vec<String> {
    let reference = Fixture::new();
    let sim = simulator(0).await;
    assert_eq!(run(&reference, &sim, "S1", None, false).await.0, 0);
    let mut expected = edc_qualify::landed::landed_json_record_ids(&stream_dir(&reference, "S1")).unwrap();
    expected.sort();
    assert_eq!(expected.len(), RECORDS as usize);
    expected
}

/// Runs the cases of one model: `{PREFIX}_CASES` of them (else
/// `default_cases`), or the one `{PREFIX}_SEED` names; `{PREFIX}_SHOW`
/// prints each ending. Fails listing every case that broke the property.
pub(crate) async fn property<F, Fut>(name: &str, prefix: &str, default_cases: u64, case: F)
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Result<Ending, String>>,
{
    let var = |what: &str| std::env::var(format!("{prefix}_{what}"));
    let seeds: Vec<u64> = match var("SEED") {
        Ok(seed) => vec![seed.parse().unwrap()],
        Err(_) => {
            // `<prefix>_FROM`: a run by hand past the suite's own seeds.
            let from: u64 = var("FROM").map_or(0, |n| n.parse().unwrap());
            (from..from + var("CASES").map_or(default_cases, |n| n.parse().unwrap())).collect()
        }
    };
    let mut endings: BTreeMap<Ending, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let show = var("SHOW").is_ok();
    let started = std::time::Instant::now();
    for seed in seeds {
        let at = std::time::Instant::now();
        let ending = case(seed).await;
        if show {
            eprintln!("seed {seed}: {ending:?} in {:?}", at.elapsed());
        }
        match ending {
            Ok(ending) => *endings.entry(ending).or_default() += 1,
            Err(e) => failures.push(format!("seed {seed}: {e}")),
        }
    }
    eprintln!(
        "{name} endings: {endings:?}, failures: {}, in {:?}",
        failures.len(),
        started.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tampering_between_runs_ends_in_exit_0_with_a_record_lost_or_duplicated() {
    let expected = expected_records().await;
    property("tampering", "EDC_SYNC_TAMPER", 50, |seed| {
        one_case(seed, &expected)
    })
    .await;
}

//! Helpers shared by the integration tests: run the real binary, make real
//! git repositories. Each test binary uses a subset.
#![allow(dead_code)]

pub mod counting;
pub mod postgres;
pub mod redis;
pub mod runs;

use std::path::Path;
use std::process::Command;

/// What a run of the binary did.
#[derive(Debug)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The `edc-sync` binary built for this test run.
pub fn edc_sync() -> Command {
    Command::new(env!("CARGO_BIN_EXE_edc-sync"))
}

/// The benchmark program, `edc-sync-bench`, built beside `edc-sync` (its
/// crate's own test makes `cargo test --workspace` build it; the test
/// command builds every binary first).
pub fn edc_sync_bench() -> Command {
    let exe = Path::new(env!("CARGO_BIN_EXE_edc-sync")).with_file_name("edc-sync-bench");
    assert!(
        exe.is_file(),
        "{} is missing: build it with `cargo build --workspace --bins`",
        exe.display()
    );
    Command::new(exe)
}

/// Runs the benchmark program with `args` and collects what it did.
pub fn bench(args: &[&str]) -> Outcome {
    run_cmd(edc_sync_bench().args(args))
}

/// Runs the binary with `args` and collects what it did.
pub fn run(args: &[&str]) -> Outcome {
    run_cmd(edc_sync().args(args))
}

pub fn run_cmd(cmd: &mut Command) -> Outcome {
    let out = cmd.output().expect("the edc-sync binary runs");
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Every line of the audit trail at `path`, as JSON; none when the file
/// does not exist (fixtures that require it assert that first).
pub fn audit_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("every audit line is JSON"))
        .collect()
}

/// The lines of one event in the audit trail at `path`.
pub fn audit_events(path: &Path, event: &str) -> Vec<serde_json::Value> {
    audit_lines(path)
        .into_iter()
        .filter(|l| l["event"] == event)
        .collect()
}

/// `git init` in `dir`.
pub fn git_init(dir: &Path) -> git2::Repository {
    git2::Repository::init(dir).expect("git init")
}

/// A temporary directory holding a git repository with the simulator's
/// policies committed as `policies.yaml`, pages of 5 records.
pub fn small_page_policy_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let repo = git_init(dir.path());
    std::fs::write(
        dir.path().join("policies.yaml"),
        SIM_POLICIES.replace("page_size: 40", "page_size: 5"),
    )
    .unwrap();
    git_commit_all(&repo, "policies");
    dir
}

/// Stages every file in the work tree and commits; returns the commit id.
pub fn git_commit_all(repo: &git2::Repository, message: &str) -> git2::Oid {
    let mut index = repo.index().expect("index");
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .expect("git add");
    index.write().expect("write index");
    let tree = repo
        .find_tree(index.write_tree().expect("write tree"))
        .expect("tree");
    let sig = git2::Signature::now("OQ Tester", "oq@example.invalid").expect("signature");
    let parents: Vec<git2::Commit> = repo
        .head()
        .ok()
        .and_then(|h| h.peel_to_commit().ok())
        .into_iter()
        .collect();
    let parent_refs: Vec<&git2::Commit> = parents.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parent_refs)
        .expect("commit")
}

/// The repository's example policy file, which every test may start from.
pub fn example_config() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/rate_limits.yaml"))
        .expect("config/rate_limits.yaml is readable")
}

/// Policies for the simulator's three shapes: Vault JSON with body paging,
/// Vault JSON with Link paging, and Rave ODM audit records.
pub const SIM_POLICIES: &str = include_str!("../../../config/fixtures/simulator-policies.yaml");

/// The validated [`SIM_POLICIES`].
pub fn sim_policies() -> edc_core::config::Config {
    edc_core::config::parse(Path::new("sim_policies.yaml"), SIM_POLICIES)
        .expect("the test policies are valid")
}

/// Splits a command line as sh would for the quoting the docs and examples use.
pub fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut started = false;
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (_, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

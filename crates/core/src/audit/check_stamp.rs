//! `edc-sync config check-stamp`: proves, against the policy repository,
//! that every commit an audit trail's run headers name holds the blob they
//! name at the path they name.
//!
//! A run header records the policy's commit and blob (from the repository
//! the run found, or from a stamp shipped beside the policy). A stamp is a
//! file anyone who could write the policy could write too: without an audit
//! key its commit and blob are claims. This check turns each claim into a
//! fact a reviewer can see, at any time later, from a clone of the policy
//! repository: the commit exists and its tree holds exactly that blob at
//! that path.

use std::collections::BTreeMap;
use std::path::Path;

/// One claim of the trail's run headers, and how many runs made it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Claim {
    commit: String,
    path: String,
    blob: String,
}

/// What the check found: a line per claim.
#[derive(Debug)]
pub struct StampReport {
    /// One line per distinct (commit, path, blob), in order.
    pub lines: Vec<String>,
    /// How many claims did not hold.
    pub failed: usize,
}

/// A claim did not hold (65): the report's lines say which.
#[derive(Debug, thiserror::Error)]
#[error("{failed} of the trail's recorded policy commits do not hold the recorded blob:\n{}", lines.join("\n"))]
pub struct StampNotHeld {
    pub failed: usize,
    pub lines: Vec<String>,
}

/// The trail or the repository could not be read (66).
#[derive(Debug, thiserror::Error)]
#[error("{what}: {detail}")]
pub struct StampUnreadable {
    pub what: String,
    pub detail: String,
}

/// Checks every run header of `trail` that names a commit and a blob
/// against the repository at `repo`.
pub fn check_stamps(repo: &Path, trail: &Path) -> Result<StampReport, StampUnreadable> {
    let unreadable = |what: String| move |detail: String| StampUnreadable { what, detail };
    crate::no_follow::read(trail)
        .map_err(|e| unreadable(format!("audit trail {}", trail.display()))(e.to_string()))?;
    let repository = git2::Repository::open(repo)
        .map_err(|e| unreadable(format!("policy repository {}", repo.display()))(e.message().to_string()))?;
    let mut claims: BTreeMap<Claim, (u64, u64)> = BTreeMap::new();
    super::each_event(trail, "run_started", |n, header| {
        let field = |k: &str| header[k].as_str().map(str::to_string);
        if let (Some(commit), Some(path), Some(blob)) = (
            field("config_git_commit"),
            field("config_path"),
            field("config_git_blob"),
        ) {
            let runs = claims.entry(Claim { commit, path, blob }).or_insert((n, 0));
            runs.1 += 1;
        }
    })
    .map_err(|e| unreadable(format!("audit trail {}", trail.display()))(e.to_string()))?;
    let mut report = StampReport {
        lines: Vec::new(),
        failed: 0,
    };
    for (claim, (first_line, runs)) in claims {
        let verdict = holds(&repository, &claim);
        if verdict.is_err() {
            report.failed += 1;
        }
        report.lines.push(
            format!(
                "commit {} {} {} as blob {} ({runs} run(s), the first at audit line {first_line})",
                claim.commit,
                match &verdict {
                    Ok(()) => "holds",
                    Err(_) => "does NOT hold",
                },
                claim.path,
                claim.blob,
            ) + &verdict.err().map(|why| format!(": {why}")).unwrap_or_default(),
        );
    }
    Ok(report)
}

/// Whether `claim.commit`'s tree holds `claim.blob` at `claim.path`.
fn holds(repo: &git2::Repository, claim: &Claim) -> Result<(), String> {
    let oid = git2::Oid::from_str(&claim.commit).map_err(|_| "not a commit id".to_string())?;
    let commit = repo
        .find_commit(oid)
        .map_err(|_| "the repository has no such commit".to_string())?;
    let tree = commit.tree().map_err(|e| e.message().to_string())?;
    let entry = tree
        .get_path(Path::new(&claim.path))
        .map_err(|_| "the commit has no file at that path".to_string())?;
    match entry.id().to_string() == claim.blob {
        true => Ok(()),
        false => Err(format!("the commit holds blob {} there", entry.id())),
    }
}

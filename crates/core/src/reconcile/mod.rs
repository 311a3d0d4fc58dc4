//! `edc-sync verify`: re-proves landed data against the manifests, the
//! audit trail and the cursors, and names every discrepancy.
//!
//! Four ledgers describe each committed page: the landed file (named by its
//! SHA-256), its manifest line, its `page_committed` audit line, and the
//! cursor the page left. Each is checked against the others:
//!
//! - every landed file hashes to its name and is listed in its manifest;
//! - every manifest entry's file exists, and a `page_committed` line with
//!   the same SHA-256, bytes and records exists for it;
//! - every `page_committed` line that landed a file is listed in the
//!   manifest of its landing directory (a zero-record poll lands nothing);
//! - every cursor equals what the last committed page of its stream left,
//!   and every stream the trail holds commits of has its cursor.
//!
//! The audit trail's own chain is verified too (on a thread of its own,
//! while the commits are read): reconciling against a trail that was
//! edited would prove nothing, and its finding is reported first.
//!
//! Nothing is held per page but 16 bytes of each directory's index of
//! listed files (`lockstep`): the trail, the manifests and the pages are
//! each read once, so a year of a busy study verifies in the memory of a
//! day's.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

mod cursors;
mod db;
mod lockstep;
mod progress;
mod retention;
mod scope;
mod verify;
mod view;

use crate::store::owner::StateKind;
pub use db::{reconcile_db, DbLanding, DbUnreadable};
pub use progress::Progress;
pub use retention::Retained;
pub use scope::Scope;
pub use verify::{verify, Unverifiable};
use view::LandingView;

/// One way two ledgers disagree, naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discrepancy {
    pub path: PathBuf,
    pub what: String,
}

impl fmt::Display for Discrepancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.what)
    }
}

/// What was reconciled.
#[derive(Debug, Default)]
pub struct Summary {
    pub landing_dirs: usize,
    pub files: usize,
    pub entries: usize,
    pub commits: usize,
    pub cursors: usize,
    pub discrepancies: Vec<Discrepancy>,
    /// Cursors behind the trail: equal to an earlier commit of their
    /// stream, with later commits the trail has. Not damage: the cursor file
    /// is not fsynced per page (docs/commit.md), and the next run rolls it
    /// forward before fetching anything.
    pub behind: Vec<Discrepancy>,
    /// An S3 landing's pages and their retention (Object Lock), when any
    /// page has one.
    pub retention: Option<Retained>,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} landing directories, {} landed files, {} manifest entries, {} page_committed lines, {} cursors \
             reconciled: {}",
            self.landing_dirs,
            self.files,
            self.entries,
            self.commits,
            self.cursors,
            match self.discrepancies.len() {
                0 => "no discrepancy".to_string(),
                1 => "1 discrepancy".to_string(),
                n => format!("{n} discrepancies"),
            }
        )?;
        if let Some(retained) = &self.retention {
            write!(f, "; {retained}")?;
        }
        match self.behind.len() {
            0 => Ok(()),
            n => write!(f, "; {n} cursor(s) behind the trail, caught up by the next run"),
        }
    }
}

/// Some ledgers disagree (exit 65); each discrepancy was printed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Discrepancies(pub String);

/// A directory or file named on the command line cannot be read (exit 66).
#[derive(Debug, thiserror::Error)]
#[error("cannot read {}: {error}", path.display())]
pub struct Unreadable {
    pub path: PathBuf,
    pub error: std::io::Error,
}

fn unreadable(path: &Path) -> impl FnOnce(std::io::Error) -> Unreadable + '_ {
    move |error| Unreadable {
        path: path.to_path_buf(),
        error,
    }
}

/// The digest a cursor's lookback memory (`null` when it keeps none) is
/// compared by: its seal's, whether it is whole (a cursor file, a line of
/// a version before seals) or sealed (a line).
pub(super) fn lookback_digest(memory: &Value) -> String {
    let sealed = crate::store::sealed(serde_json::json!({ "lookback": memory }));
    crate::digest::sha256_hex(sealed["lookback"].to_string().as_bytes())
}

/// Reconciles the landing under `out`, the cursors under `state` and the
/// audit trail at `audit`, within `scope`.
/// Reconciles a landing directory with a state directory and a trail file.
pub fn reconcile(
    out: &Path,
    state: &Path,
    audit: Proving<'_>,
    scope: &Scope,
    progress: &Progress,
) -> Result<Summary, Unreadable> {
    let (out, views, links) = local_views(out, progress)?;
    let mut summary = reconcile_views(
        &out,
        &views,
        (state, StateKind::Directory),
        audit,
        scope,
        progress,
    )?;
    note_links(&mut summary, links);
    Ok(summary)
}

/// The landing directories under `out` (resolved), and the symbolic links
/// found among them.
fn local_views(
    out: &Path,
    progress: &Progress,
) -> Result<(PathBuf, Vec<LandingView>, Vec<PathBuf>), Unreadable> {
    let out = std::fs::canonicalize(out).map_err(unreadable(out))?;
    let mut dirs = Vec::new();
    let mut links = Vec::new();
    progress.phase("finding the landing directories");
    find_landing_dirs(&out, true, &mut dirs, &mut links).map_err(unreadable(&out))?;
    let views = dirs
        .iter()
        .map(|dir| LandingView::of_dir(dir, relative_to(dir, &out)))
        .collect();
    Ok((out, views, links))
}

/// Each symbolic link inside the landing is a discrepancy.
fn note_links(summary: &mut Summary, links: Vec<PathBuf>) {
    for link in links {
        summary.discrepancies.push(Discrepancy {
            path: link,
            what: "a symbolic link inside the landing, which is never followed: what it points to is not verified, \
                   and a run refuses to land through it"
                .into(),
        });
    }
}

/// Reconciles the landing in an object store (every page object read back
/// whole and hashed: the server's checksum proved the bytes on arrival,
/// not that nobody with write access replaced them since), the cursors
/// under `state` and the audit trail at `audit`.
pub async fn reconcile_object(
    landing: &crate::store::object::ObjectLanding,
    state: &Path,
    audit: Proving<'_>,
    scope: &Scope,
    progress: &Progress,
) -> Result<Summary, ObjectUnreadable> {
    // The listing's manifests and page hashes, spooled while it is walked
    // (a local temporary directory, removed when verify ends).
    let spool = tempfile::Builder::new()
        .prefix("edc-sync-verify-")
        .tempdir()
        .map_err(|error| Unreadable {
            path: std::env::temp_dir(),
            error,
        })?;
    let (root, views) = LandingView::of_bucket(landing, progress, spool.path()).await?;
    Ok(reconcile_views(
        &root,
        &views,
        (state, StateKind::Directory),
        audit,
        scope,
        progress,
    )?)
}

/// An object-store landing that could not be read, or a local file.
#[derive(Debug, thiserror::Error)]
pub enum ObjectUnreadable {
    #[error(transparent)]
    Object(#[from] crate::store::object::ObjectError),
    #[error(transparent)]
    Local(#[from] Unreadable),
}

/// The trail `verify` proves, and the audit key it proves the trail's seals
/// and checkpoints with (`verify --key`): without one, the chain alone.
#[derive(Clone, Copy)]
pub struct Proving<'a> {
    pub trail: &'a Path,
    pub key: Option<&'a crate::audit::AuditKey>,
}

/// Reconciles the landing directories `views` (of the landing at `out`),
/// the cursors under `state` and the audit trail at `audit`: those of
/// them `scope` covers (the trail's chain is always verified whole).
fn reconcile_views(
    out: &Path,
    views: &[LandingView],
    state: (&Path, StateKind),
    proving: Proving<'_>,
    scope: &Scope,
    progress: &Progress,
) -> Result<Summary, Unreadable> {
    let (state, kind) = state;
    let audit = proving.trail;
    let checks = crate::audit::verify::Checks {
        anchors: Vec::new(),
        key: proving.key.cloned(),
    };
    let views: Vec<&LandingView> = views.iter().filter(|v| scope.covers(&v.rel)).collect();
    let mut summary = Summary::default();
    // The chain is checked on a thread of its own while the commits are
    // read beside the manifests: two reads of the trail, one core each.
    progress.phase("checking the audit trail's chain and reading its commits beside the manifests");
    let (chain, walked) = std::thread::scope(|s| {
        let chain = s.spawn(|| crate::audit::verify::verify_with(audit, &checks));
        let walked = walk_commits(audit, out, &views);
        (chain.join(), walked)
    });
    let chain = chain
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        .map_err(|e| Unreadable {
            path: e.path,
            error: e.error,
        })?;
    if let Some(finding) = &chain.finding {
        summary.discrepancies.push(Discrepancy {
            path: audit.to_path_buf(),
            what: format!(
                "line {}: {}: {}; the audit trail cannot vouch for the landing",
                finding.line, finding.damage, finding.detail
            ),
        });
    }
    std::fs::metadata(state).map_err(unreadable(state))?;
    let Walked {
        mut walks,
        mut commits,
        unplaced,
        mut problems,
    } = walked?;
    summary.discrepancies.append(&mut problems);
    if let Some(first) = unplaced.first {
        summary.discrepancies.push(Discrepancy {
            path: audit.to_path_buf(),
            what: format!(
                "{} page_committed line(s), the first at line {first}, do not name their landing directory \
                 (written by a version before landing_dir was recorded, or not a landing directory) or are not \
                 of their fields' types, and cannot be reconciled",
                unplaced.count
            ),
        });
    }
    progress.phase("comparing the landing, the manifests and the cursors with them");
    commits.retain(|rel, _| scope.covers(rel));
    summary.commits = commits.values().map(|d| d.commits).sum();
    summary.landing_dirs = views.len();
    // Each state directory's id, read once: the root's, and a backfill's
    // nested at the place its landing is (STATE/backfill/SINCE..UNTIL).
    let mut ids: BTreeMap<PathBuf, Option<String>> = BTreeMap::new();
    let mut leftovers = Vec::new();
    for view in views.iter().copied() {
        // (A state database keeps one id for both: then the root's.)
        let state_dir = match view.rel.strip_prefix("backfill/").and_then(|r| r.split_once('/')) {
            Some((label, _)) if state.join("backfill").join(label).join(".state-id").exists() => {
                state.join("backfill").join(label)
            }
            _ => state.to_path_buf(),
        };
        let state_id = match ids.get(&state_dir) {
            Some(id) => id.clone(),
            None => {
                let id = crate::store::owner::existing_state_id(&state_dir).map_err(|e| Unreadable {
                    path: state_dir.join(".state-id"),
                    error: std::io::Error::other(e.to_string()),
                })?;
                ids.insert(state_dir, id.clone());
                id
            }
        };
        if let Err(why) = &view.owner {
            summary.discrepancies.push(Discrepancy {
                path: view.path.join(crate::store::owner::OWNER_FILE),
                what: why.clone(),
            });
        }
        if let (Ok(Some(owner)), Some(id)) = (&view.owner, &state_id) {
            if owner != id {
                summary.discrepancies.push(Discrepancy {
                    path: view.path.join(crate::store::owner::OWNER_FILE),
                    what: format!(
                        "this landing directory belongs to the state with id {owner}, not to the {} given \
                         (id {id}): its cursors are not the ones that describe it",
                        kind.noun()
                    ),
                });
            }
        }
        let Some(walk) = walks.remove(&view.rel) else {
            continue;
        };
        leftovers.push(
            walk.finish(progress, &mut summary)
                .map_err(unreadable(&view.path))?,
        );
    }
    lockstep::judge_leftovers(audit, out, leftovers, &mut summary.discrepancies)
        .map_err(unreadable(audit))?;
    for (rel, trail) in &commits {
        if !trail.elsewhere && trail.landed > 0 && !views.iter().any(|v| &v.rel == rel) {
            summary.discrepancies.push(Discrepancy {
                path: out.join(rel),
                what: format!(
                    "the audit trail records {} landed page(s) here (first at line {}) but the directory is gone",
                    trail.landed, trail.first_line
                ),
            });
        }
    }
    cursors::check(state, out, audit, &commits, scope, &mut summary).map_err(unreadable(state))?;
    Ok(summary)
}

/// The trail's commits, read once beside the manifests.
struct Walked<'v> {
    /// Each landing directory's walk, to be finished.
    walks: HashMap<String, lockstep::DirWalk<'v>>,
    /// What the trail says of every directory.
    commits: lockstep::ByDir,
    unplaced: lockstep::Unplaced,
    /// What the walk found.
    problems: Vec<Discrepancy>,
}

/// Reads the trail's commits once beside the manifests of `views`.
fn walk_commits<'v>(audit: &Path, out: &Path, views: &[&'v LandingView]) -> Result<Walked<'v>, Unreadable> {
    let mut walks = HashMap::new();
    for view in views {
        let walk = lockstep::DirWalk::new(view).map_err(unreadable(&view.manifest_path()))?;
        walks.insert(view.rel.clone(), walk);
    }
    let mut problems = Vec::new();
    let (commits, unplaced) = lockstep::walk(audit, out, &mut walks, &mut problems)?;
    Ok(Walked {
        walks,
        commits,
        unplaced,
        problems,
    })
}

/// A landing directory found under `out`, as audit lines name it.
fn relative_to(dir: &Path, out: &Path) -> String {
    dir.strip_prefix(out)
        .unwrap_or(dir)
        .to_string_lossy()
        .into_owned()
}

/// Lists `dir`: the operator's root may be a link (a mount point), what is
/// below it never is.
pub(super) fn list_dir(dir: &Path, root: bool) -> std::io::Result<std::fs::ReadDir> {
    match root {
        true => crate::no_follow::read_root_dir(dir),
        false => crate::no_follow::read_dir(dir),
    }
}

/// Directories holding a manifest or a `pages/` directory, without
/// following symbolic links; the links met on the way go to `links`.
fn find_landing_dirs(
    dir: &Path,
    root: bool,
    found: &mut Vec<PathBuf>,
    links: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    let mut is_landing = false;
    let mut subdirs = Vec::new();
    for entry in list_dir(dir, root)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let name = entry.file_name();
        if name == "manifest.jsonl" || (name == "pages" && kind.is_dir()) {
            is_landing = true;
        } else if kind.is_symlink() && name != "manifest.jsonl" {
            links.push(entry.path());
        } else if kind.is_dir() && name != "quarantine" && name != ".tmp" {
            subdirs.push(entry.path());
        }
    }
    if is_landing {
        found.push(dir.to_path_buf());
        return Ok(());
    }
    subdirs.sort();
    for sub in subdirs {
        find_landing_dirs(&sub, false, found, links)?;
    }
    Ok(())
}

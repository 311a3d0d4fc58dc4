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
//! The audit trail's own chain is verified first: reconciling against a
//! trail that was edited would prove nothing.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

mod cursors;
mod db;
mod progress;
mod retention;
mod scope;
mod verify;
mod view;

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

/// A `page_committed` line, as far as reconciling needs it.
#[derive(Debug, Clone)]
pub(super) struct Commit {
    line: u64,
    sha256: String,
    file: Option<String>,
    bytes: u64,
    records: u64,
    dry_run: bool,
    cursor_after: Value,
    /// The cursor's lookback memory after the page, kept for the last
    /// commit of each landing directory that was not a dry run only (the
    /// one a cursor is held to): `Null` on every other, whose memory
    /// (kilobytes a line) is dropped as the next is read.
    lookback: Value,
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
    audit: &Path,
    scope: &Scope,
    progress: &Progress,
) -> Result<Summary, Unreadable> {
    let (out, views, links) = local_views(out, progress)?;
    let mut summary = reconcile_views(&out, &views, state, audit, scope, progress)?;
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
    find_landing_dirs(&out, true, &mut dirs, &mut links).map_err(unreadable(&out))?;
    let mut views = Vec::new();
    for dir in &dirs {
        views.push(LandingView::of_dir(dir, relative_to(dir, &out), progress).map_err(unreadable(dir))?);
    }
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
    audit: &Path,
    scope: &Scope,
    progress: &Progress,
) -> Result<Summary, ObjectUnreadable> {
    let (root, views) = LandingView::of_bucket(landing, progress).await?;
    Ok(reconcile_views(&root, &views, state, audit, scope, progress)?)
}

/// An object-store landing that could not be read, or a local file.
#[derive(Debug, thiserror::Error)]
pub enum ObjectUnreadable {
    #[error(transparent)]
    Object(#[from] crate::store::object::ObjectError),
    #[error(transparent)]
    Local(#[from] Unreadable),
}

/// Reconciles the landing directories `views` (of the landing at `out`),
/// the cursors under `state` and the audit trail at `audit`: those of
/// them `scope` covers (the trail's chain is always verified whole).
fn reconcile_views(
    out: &Path,
    views: &[LandingView],
    state: &Path,
    audit: &Path,
    scope: &Scope,
    progress: &Progress,
) -> Result<Summary, Unreadable> {
    let views: Vec<&LandingView> = views.iter().filter(|v| scope.covers(&v.rel)).collect();
    let mut summary = Summary::default();
    progress.phase("checking the audit trail's chain");
    let chain = crate::audit::verify(audit).map_err(|e| Unreadable {
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
    progress.phase("reading the audit trail's commits");
    let mut commits = read_commits(audit, out, &mut summary)?;
    progress.phase("comparing the landing, the manifests and the cursors with them");
    commits.retain(|rel, _| scope.covers(rel));
    summary.commits = commits.values().map(|(list, _)| list.len()).sum();
    summary.landing_dirs = views.len();
    // Each state directory's id, read once: the root's, and a backfill's
    // nested at the place its landing is (STATE/backfill/SINCE..UNTIL).
    let mut ids: BTreeMap<PathBuf, Option<String>> = BTreeMap::new();
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
                        "this landing directory belongs to the state directory with id {owner}, not to the one \
                         given (id {id}): its cursors are not the ones that describe it"
                    ),
                });
            }
        }
        let empty = Vec::new();
        let here = commits.get(&view.rel).map_or(&empty, |(list, _)| list);
        check_landing_dir(view, here, &mut summary);
    }
    for (rel, (list, elsewhere)) in &commits {
        if !elsewhere && !views.iter().any(|v| &v.rel == rel) && list.iter().any(|c| c.file.is_some()) {
            summary.discrepancies.push(Discrepancy {
                path: out.join(rel),
                what: format!(
                    "the audit trail records {} landed page(s) here (first at line {}) but the directory is gone",
                    list.iter().filter(|c| c.file.is_some()).count(),
                    list[0].line
                ),
            });
        }
    }
    cursors::check(state, out, &commits, scope, &mut summary).map_err(unreadable(state))?;
    Ok(summary)
}

/// A landing directory found under `out`, as audit lines name it.
fn relative_to(dir: &Path, out: &Path) -> String {
    dir.strip_prefix(out)
        .unwrap_or(dir)
        .to_string_lossy()
        .into_owned()
}

/// Commits into one landing directory, in file order, and whether every one
/// of them names it by an absolute path outside `out` (an older version's
/// line about another landing root: not expected here).
pub(super) type ByDir = BTreeMap<String, (Vec<Commit>, bool)>;

/// Every `page_committed` line, by landing directory relative to the
/// landing root (a line of an older version names it absolutely: read
/// relative, see [`crate::stream::relative_landing_dir`]), in file order.
fn read_commits(audit: &Path, out: &Path, summary: &mut Summary) -> Result<ByDir, Unreadable> {
    let mut by_dir = ByDir::new();
    let mut unplaced = 0u64;
    crate::audit::read::each_event(audit, "page_committed", |line, mut v| {
        let Some(recorded) = v["landing_dir"].as_str() else {
            unplaced += 1;
            return;
        };
        let Some(dir) = crate::stream::relative_landing_dir(recorded) else {
            unplaced += 1;
            return;
        };
        // A backfill with a state directory landed below its own root.
        let dir = match v["landing_root"].as_str() {
            Some(root) => std::borrow::Cow::Owned(format!("{root}/{dir}")),
            None => dir,
        };
        let elsewhere = Path::new(recorded).is_absolute() && !Path::new(recorded).starts_with(out);
        let (list, all_elsewhere) = by_dir.entry(dir.into_owned()).or_insert((Vec::new(), true));
        *all_elsewhere &= elsewhere;
        // The cursor is held to the last commit that was not a dry run.
        let dry_run = v["dry_run"] == true;
        if !dry_run {
            if let Some(previous) = list.iter_mut().rev().find(|c| !c.dry_run) {
                previous.lookback = Value::Null;
            }
        }
        list.push(Commit {
            line,
            sha256: v["payload_sha256"].as_str().unwrap_or_default().to_string(),
            file: v["landing_file"].as_str().map(str::to_string),
            bytes: v["bytes"].as_u64().unwrap_or(0),
            records: v["records"].as_u64().unwrap_or(0),
            dry_run,
            cursor_after: v["cursor_after"].take(),
            lookback: match dry_run {
                true => Value::Null,
                false => v["cursor_state"]["lookback"].take(),
            },
        });
    })
    .map_err(unreadable(audit))?;
    if unplaced > 0 {
        summary.discrepancies.push(Discrepancy {
            path: audit.to_path_buf(),
            what: format!(
                "{unplaced} page_committed line(s) do not name their landing directory (written by a version \
                 before landing_dir was recorded, or not a landing directory) and cannot be reconciled"
            ),
        });
    }
    Ok(by_dir)
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

fn check_landing_dir(view: &LandingView, commits: &[Commit], summary: &mut Summary) {
    let mut problem = |path: PathBuf, what: String| summary.discrepancies.push(Discrepancy { path, what });
    // The manifest: (file) -> (line number, entry).
    let manifest_path = view.manifest_path();
    let mut listed: HashMap<String, (usize, crate::store::ManifestEntry)> = HashMap::new();
    let text = &view.manifest;
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    if !body.is_empty() {
        for (i, line) in body.split(|b| *b == b'\n').enumerate() {
            match serde_json::from_slice::<crate::store::ManifestEntry>(line) {
                Ok(entry) => {
                    // A landed page listed again, under any page key: a
                    // reader of the manifest counts every entry, so its
                    // records would be counted twice (unless the entry marks
                    // every one of them as landed before).
                    let counted = entry.records.saturating_sub(entry.repeated.len() as u64);
                    if let Some((first, earlier)) = listed.get(&entry.file).filter(|_| counted > 0) {
                        problem(
                            manifest_path.clone(),
                            format!(
                                "line {} lists the page {} ({}) again, first at line {first} (as {}): {counted} of \
                                 its records would be counted twice",
                                i + 1,
                                entry.page_key,
                                entry.file,
                                earlier.page_key,
                            ),
                        );
                        continue;
                    }
                    listed.insert(entry.file.clone(), (i + 1, entry));
                }
                Err(e) => problem(
                    manifest_path.clone(),
                    format!("line {} is not a manifest entry ({e})", i + 1),
                ),
            }
        }
    }
    // Indexes, built once: a lookup per entry, not a scan of every file
    // and every commit (which made verify quadratic in a directory's pages).
    let regular: std::collections::HashSet<&str> = view
        .files
        .iter()
        .filter(|f| f.regular)
        .map(|f| f.rel.as_str())
        .collect();
    let mut committed: HashMap<(&str, &str), &Commit> = HashMap::new();
    for c in commits {
        if let Some(file) = c.file.as_deref() {
            committed.entry((file, c.sha256.as_str())).or_insert(c);
        }
    }
    let mut entries: Vec<_> = listed.values().collect();
    entries.sort_by_key(|(n, _)| *n);
    for (n, entry) in entries {
        if !regular.contains(entry.file.as_str()) {
            problem(
                manifest_path.clone(),
                format!("line {n} lists {} but the file is missing", entry.file),
            );
        }
        match committed.get(&(entry.file.as_str(), entry.sha256.as_str())) {
            None => problem(
                manifest_path.clone(),
                format!(
                    "line {n} lists {} (sha256 {}) but no page_committed line in the audit trail records it",
                    entry.file, entry.sha256
                ),
            ),
            Some(c) if c.bytes != entry.bytes || c.records != entry.records => problem(
                manifest_path.clone(),
                format!(
                    "line {n} says {} bytes and {} records; audit line {} says {} bytes and {} records",
                    entry.bytes, entry.records, c.line, c.bytes, c.records
                ),
            ),
            Some(_) => {}
        }
    }
    // The landed files.
    for file in &view.files {
        if !file.regular {
            problem(
                file.path.clone(),
                "not a regular file (a landed page is one)".into(),
            );
            continue;
        }
        let named = file
            .rel
            .trim_start_matches("pages/")
            .split('.')
            .next()
            .unwrap_or_default()
            .to_string();
        if file.sha256 != named {
            problem(
                file.path.clone(),
                format!(
                    "modified after landing: its SHA-256 is {}, its name says {named}",
                    file.sha256
                ),
            );
        }
        if !listed.contains_key(&file.rel) {
            problem(file.path.clone(), "landed but not listed in the manifest".into());
        }
    }
    // The audit trail's commits into this directory.
    for c in commits {
        let Some(file) = &c.file else { continue };
        if !listed.contains_key(file) {
            problem(
                manifest_path.clone(),
                format!(
                    "does not list {file}, which page_committed at audit line {} landed here",
                    c.line
                ),
            );
        }
    }
    summary.files += view.files.len();
    summary.entries += listed.len();
}

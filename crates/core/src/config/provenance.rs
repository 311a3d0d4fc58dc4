//! Where the loaded policy came from, in terms an auditor can check:
//! the SHA-256 of the exact bytes, and their identity in git.
//!
//! The check compares the git blob id of the bytes *actually loaded* with
//! the blob at `HEAD`, so what ran is provably what was reviewed, even if
//! the file changes on disk a moment later.

use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository, Status};
use serde::Serialize;

/// How the loaded bytes relate to the repository's `HEAD`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "detail")]
pub enum ChangeState {
    /// The bytes loaded are exactly the blob committed at `HEAD`.
    Committed,
    /// The file is in `HEAD` but the bytes loaded differ from it.
    Modified,
    /// The file is not in `HEAD` (untracked, ignored, or only staged).
    NotCommitted(String),
    /// The file is not inside any git working tree.
    OutsideRepository,
    /// git could not answer (corrupt repository, unborn `HEAD`, ...).
    Unknown(String),
    /// git will not read the repository at this path: it belongs to another
    /// user than the one running (git's `safe.directory` check), which says
    /// nothing about whether the file is committed.
    NotOwned(String),
    /// No repository, but a stamp beside the file (`config stamp`), whose
    /// blob id and SHA-256 the bytes loaded match: the stamp's file name.
    Stamped(String),
    /// No repository, and the bytes loaded are not the ones the stamp
    /// beside the file names (or the stamp cannot be read): why.
    StampDiffers(String),
}

/// The provenance stamped into every run's audit header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Provenance {
    /// Absolute path of the file loaded.
    pub config_path: PathBuf,
    /// Its path inside the repository (what `config_git_commit` and
    /// `config_git_blob` identify), when it is inside one: how the audit
    /// header names it, so that the trail says nothing about where the
    /// checkout happened to be.
    pub config_repo_path: Option<String>,
    /// Lowercase hex SHA-256 of the bytes loaded.
    pub config_sha256: String,
    /// `HEAD` commit id of the repository holding the file, if any.
    pub config_git_commit: Option<String>,
    /// The file's blob id at `HEAD`, if it is committed there.
    pub config_git_blob: Option<String>,
    pub state: ChangeState,
    /// The stamp the provenance came from, whole (its MAC a run holding the
    /// audit key checks), when it came from one.
    #[serde(skip)]
    pub stamp_record: Option<super::stamp::Stamp>,
}

impl Provenance {
    /// The file as the audit header names it: its path in the repository,
    /// or, outside one (a dirty run), its absolute path.
    pub fn recorded_path(&self) -> String {
        self.config_repo_path
            .clone()
            .unwrap_or_else(|| self.config_path.display().to_string())
    }

    /// True unless the bytes loaded are exactly the committed blob (in the
    /// repository, or as its stamp names it).
    pub fn dirty(&self) -> bool {
        !matches!(self.state, ChangeState::Committed | ChangeState::Stamped(_))
    }

    /// The stamp `config stamp` writes for this policy: only one committed,
    /// unchanged, at its repository's `HEAD`.
    pub fn stamp_to_write(&self) -> Option<super::stamp::Stamp> {
        if self.state != ChangeState::Committed {
            return None;
        }
        Some(super::stamp::Stamp::new(
            &self.config_path,
            self.config_repo_path.clone()?,
            self.config_git_commit.clone()?,
            self.config_git_blob.clone()?,
            self.config_sha256.clone(),
        ))
    }

    /// The stamp the provenance came from, when it came from one (the
    /// stamp's file name, beside the policy).
    pub fn stamp(&self) -> Option<&str> {
        match &self.state {
            ChangeState::Stamped(name) => Some(name),
            _ => None,
        }
    }

    /// What to do about [`Provenance::why_uncontrolled`].
    pub fn remedy(&self) -> String {
        match &self.state {
            ChangeState::NotOwned(repo) => format!(
                "run edc-sync as the repository's owner, or trust the repository for every account (a \
                 service account may have no home for a --global setting), as root: git config --file \
                 /etc/gitconfig --add safe.directory {repo}"
            ),
            ChangeState::OutsideRepository | ChangeState::StampDiffers(_) => {
                "run it from its repository, or ship it with the stamp `edc-sync config stamp` writes in the \
                 repository, or pass --allow-dirty to run anyway (recorded in the audit header)"
                    .into()
            }
            _ => "commit it, or pass --allow-dirty to run anyway (recorded in the audit header)".into(),
        }
    }

    /// A one-line reason the config is not under change control, if it is not.
    pub fn why_uncontrolled(&self) -> Option<String> {
        let path = self.config_path.display();
        match &self.state {
            ChangeState::Committed | ChangeState::Stamped(_) => None,
            ChangeState::StampDiffers(why) => {
                Some(format!("{path} is not inside a git repository, and {why}"))
            }
            ChangeState::Modified => Some(format!(
                "{path} differs from the version committed at HEAD {} (blob {})",
                short(self.config_git_commit.as_deref()),
                short(self.config_git_blob.as_deref())
            )),
            ChangeState::NotCommitted(why) => Some(format!("{path} is not committed at HEAD ({why})")),
            ChangeState::OutsideRepository => Some(format!("{path} is not inside a git repository")),
            ChangeState::Unknown(why) => Some(format!("{path}: cannot read its git state: {why}")),
            ChangeState::NotOwned(repo) => Some(format!(
                "{path}: git will not read the repository {repo}: it is owned by another user than the one \
                 running edc-sync (git's safe.directory check), so whether the file is committed cannot be \
                 proven"
            )),
        }
    }
}

fn short(id: Option<&str>) -> &str {
    id.map_or("none", |s| &s[..s.len().min(12)])
}

/// Works out the provenance of `bytes`, which were read from `path`.
pub(crate) fn of(path: &Path, bytes: &[u8], sha256: String) -> Provenance {
    let config_path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let mut p = Provenance {
        config_path,
        config_repo_path: None,
        config_sha256: sha256,
        config_git_commit: None,
        config_git_blob: None,
        state: ChangeState::OutsideRepository,
        stamp_record: None,
    };
    let dir = p.config_path.parent().unwrap_or(Path::new("."));
    let repo = match Repository::discover(dir) {
        Ok(r) => r,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return stamped(p, path, bytes),
        Err(e) if e.code() == git2::ErrorCode::Owner => {
            let top = dir.ancestors().find(|d| d.join(".git").exists()).unwrap_or(dir);
            p.state = ChangeState::NotOwned(top.display().to_string());
            return p;
        }
        Err(e) => {
            p.state = ChangeState::Unknown(e.message().to_string());
            return p;
        }
    };
    p.config_repo_path = repo.workdir().and_then(|w| w.canonicalize().ok()).and_then(|w| {
        p.config_path
            .strip_prefix(w)
            .ok()
            .map(|r| r.to_string_lossy().into_owned())
    });
    p.state = match inspect(
        &repo,
        &p.config_path,
        bytes,
        &mut p.config_git_commit,
        &mut p.config_git_blob,
    ) {
        Ok(state) => state,
        Err(e) => ChangeState::Unknown(e.message().to_string()),
    };
    p
}

/// Outside any repository: the provenance the stamp beside the file
/// gives, when the bytes loaded are the ones it names.
fn stamped(mut p: Provenance, path: &Path, bytes: &[u8]) -> Provenance {
    let stamp = match super::stamp::Stamp::read(path) {
        Ok(None) => return p,
        Ok(Some(stamp)) => stamp,
        Err(why) => {
            p.state = ChangeState::StampDiffers(why);
            return p;
        }
    };
    let name = super::stamp::path_for(path);
    let name = name
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let loaded = Oid::hash_object(ObjectType::Blob, bytes).map(|id| id.to_string());
    if loaded.as_deref().ok() != Some(stamp.blob.as_str()) || p.config_sha256 != stamp.sha256 {
        p.state = ChangeState::StampDiffers(format!(
            "its bytes (blob {}) are not the ones its stamp {name} names (blob {} of {} at commit {})",
            short(loaded.as_deref().ok()),
            short(Some(&stamp.blob)),
            stamp.path,
            short(Some(&stamp.commit))
        ));
        return p;
    }
    p.config_repo_path = Some(stamp.path.clone());
    p.config_git_commit = Some(stamp.commit.clone());
    p.config_git_blob = Some(stamp.blob.clone());
    p.stamp_record = Some(stamp);
    p.state = ChangeState::Stamped(name);
    p
}

fn inspect(
    repo: &Repository,
    path: &Path,
    bytes: &[u8],
    commit_out: &mut Option<String>,
    blob_out: &mut Option<String>,
) -> Result<ChangeState, git2::Error> {
    let Some(workdir) = repo.workdir() else {
        return Ok(ChangeState::Unknown("the repository is bare".into()));
    };
    let workdir: PathBuf = workdir.canonicalize().unwrap_or_else(|_| workdir.to_path_buf());
    let Ok(rel) = path.strip_prefix(&workdir) else {
        return Ok(ChangeState::OutsideRepository);
    };
    let head = match repo.head() {
        Ok(h) => h,
        Err(e) if e.code() == git2::ErrorCode::UnbornBranch => {
            return Ok(ChangeState::NotCommitted("the repository has no commits".into()))
        }
        Err(e) => return Err(e),
    };
    let commit = head.peel_to_commit()?;
    *commit_out = Some(commit.id().to_string());
    let entry = match commit.tree()?.get_path(rel) {
        Ok(entry) if entry.kind() == Some(ObjectType::Blob) => entry,
        Ok(_) => {
            return Ok(ChangeState::NotCommitted(
                "HEAD has something other than a file there".into(),
            ))
        }
        Err(e) if e.code() == git2::ErrorCode::NotFound => {
            let status = repo.status_file(rel).unwrap_or(Status::empty());
            let why = if status.contains(Status::IGNORED) {
                "ignored by git"
            } else if status.contains(Status::INDEX_NEW) {
                "staged but not committed"
            } else {
                "untracked"
            };
            return Ok(ChangeState::NotCommitted(why.into()));
        }
        Err(e) => return Err(e),
    };
    *blob_out = Some(entry.id().to_string());
    let loaded = Oid::hash_object(ObjectType::Blob, bytes)?;
    Ok(if loaded == entry.id() {
        ChangeState::Committed
    } else {
        ChangeState::Modified
    })
}

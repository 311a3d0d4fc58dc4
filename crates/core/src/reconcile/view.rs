//! What `edc-sync verify` reads of a landing, whatever holds it: each
//! landing directory's manifest, its pages with the SHA-256 they hash to
//! now, and its `.owner`, from a local directory or from an object store
//! (every page object read back whole and hashed). The reconciliation in
//! the parent module judges views; it never touches a file or a bucket.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::digest::sha256_file;
use crate::store::object::{ObjectError, ObjectLanding};

/// One landing directory as verify reads it: its manifest and its pages.
pub(super) struct LandingView {
    /// Where it is, for messages.
    pub(super) path: PathBuf,
    /// Relative to the landing root, as audit lines name it.
    pub(super) rel: String,
    pub(super) manifest: Vec<u8>,
    pub(super) files: Vec<FileView>,
    /// The id its `.owner` names, when it has one; `Err` says why it
    /// names none (a link, or content that is no id, never repeated).
    pub(super) owner: Result<Option<String>, String>,
}

/// One file of `pages/`.
pub(super) struct FileView {
    pub(super) path: PathBuf,
    /// `pages/<name>`.
    pub(super) rel: String,
    pub(super) regular: bool,
    /// Its SHA-256 as read now (empty for what is not a regular file).
    pub(super) sha256: String,
}

impl LandingView {
    /// Every landing directory of the object store `landing`, and the
    /// root its paths are shown under (the `--out` URL).
    pub(super) async fn of_bucket(
        landing: &ObjectLanding,
        progress: &super::Progress,
    ) -> Result<(PathBuf, Vec<LandingView>), ObjectError> {
        let names = landing.list("").await?;
        let mut dirs: BTreeMap<String, (Vec<u8>, Vec<String>)> = BTreeMap::new();
        for name in &names {
            if let Some((dir, _)) = name.rsplit_once("/manifest/") {
                let bytes = landing.read(name).await?.unwrap_or_default();
                dirs.entry(dir.to_string())
                    .or_default()
                    .0
                    .extend_from_slice(&bytes);
            } else if let Some((dir, page)) = name.rsplit_once("/pages/") {
                dirs.entry(dir.to_string()).or_default().1.push(page.to_string());
            }
        }
        let root = PathBuf::from(landing.url());
        let mut views = Vec::new();
        for (dir, (manifest, pages)) in dirs {
            let mut files = Vec::new();
            for page in pages {
                let rel = format!("pages/{page}");
                let sha256 = landing.sha256(&format!("{dir}/{rel}")).await?.map(|(sha, _)| sha);
                progress.page();
                files.push(FileView {
                    path: root.join(&dir).join(&rel),
                    rel,
                    regular: true,
                    sha256: sha256.unwrap_or_default(),
                });
            }
            let owner = match landing
                .read(&format!("{dir}/{}", crate::store::owner::OWNER_FILE))
                .await?
            {
                None => Ok(None),
                Some(t) => crate::store::owner::parse_id(&String::from_utf8_lossy(&t))
                    .map(Some)
                    .ok_or_else(|| {
                        "it does not hold a state directory id (hex digits; what it holds is not shown)"
                            .into()
                    }),
            };
            views.push(LandingView {
                path: root.join(&dir),
                rel: dir,
                manifest,
                files,
                owner,
            });
        }
        Ok((root, views))
    }

    /// The landing directory `dir`, named `rel` under its root.
    pub(super) fn of_dir(
        dir: &Path,
        rel: String,
        progress: &super::Progress,
    ) -> std::io::Result<LandingView> {
        let manifest = match crate::no_follow::read_bytes(dir.join("manifest.jsonl")) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut names: Vec<PathBuf> = match crate::no_follow::read_dir(dir.join("pages")) {
            Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        let mut files = Vec::new();
        for path in names {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let regular = std::fs::symlink_metadata(&path)?.is_file();
            let sha256 = if regular {
                progress.page();
                sha256_file(&path)?
            } else {
                String::new()
            };
            files.push(FileView {
                path,
                rel: format!("pages/{name}"),
                regular,
                sha256,
            });
        }
        let owner = crate::store::owner::read_owner(&dir.join(crate::store::owner::OWNER_FILE));
        Ok(LandingView {
            path: dir.to_path_buf(),
            rel,
            manifest,
            files,
            owner,
        })
    }

    pub(super) fn manifest_path(&self) -> PathBuf {
        self.path.join("manifest.jsonl")
    }
}

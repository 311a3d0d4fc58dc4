//! What `edc-sync verify` reads of a landing, whatever holds it: each
//! landing directory's manifest, its pages with the SHA-256 they hash to
//! now, and its `.owner`, from a local directory or from an object store
//! (every page object read back whole and hashed). The reconciliation in
//! the parent module judges views; it never touches a file or a bucket.
//!
//! A local directory is read as the judge asks, never held: its manifest
//! line by line and its pages one at a time (a directory of a million
//! pages would otherwise be a million names and hashes in memory).

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::digest::sha256_file_through;
use crate::store::object::{ObjectError, ObjectLanding};

/// One landing directory as verify reads it: its manifest and its pages.
pub(super) struct LandingView {
    /// Where it is, for messages.
    pub(super) path: PathBuf,
    /// Relative to the landing root, as audit lines name it.
    pub(super) rel: String,
    pub(super) manifest: Manifest,
    pub(super) files: Pages,
    /// The id its `.owner` names, when it has one; `Err` says why it
    /// names none (a link, or content that is no id, never repeated).
    pub(super) owner: Result<Option<String>, String>,
}

/// Where a landing directory's manifest is read from.
pub(super) enum Manifest {
    /// A file, read line by line each time it is asked for.
    File(PathBuf),
    /// Bytes already read (an object store's manifest objects, a state
    /// database's rows).
    Bytes(Vec<u8>),
}

impl Manifest {
    /// The manifest from its start, or `None` when there is none.
    pub(super) fn open(&self) -> std::io::Result<Option<Box<dyn BufRead + '_>>> {
        match self {
            Manifest::Bytes(bytes) => Ok(Some(Box::new(bytes.as_slice()))),
            Manifest::File(path) => match crate::no_follow::read(path) {
                Ok(file) => Ok(Some(Box::new(std::io::BufReader::with_capacity(
                    256 * 1024,
                    file,
                )))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            },
        }
    }
}

/// Where a landing directory's pages are read from.
pub(super) enum Pages {
    /// The `pages/` directory, each file hashed as it is met.
    Dir(PathBuf),
    /// Pages hashed already (an object store's page objects).
    Hashed(Vec<FileView>),
}

impl Pages {
    /// Calls `f` with every page, hashed now, in no particular order.
    pub(super) fn each(
        &self,
        progress: &super::Progress,
        mut f: impl FnMut(&FileView),
    ) -> std::io::Result<()> {
        let dir = match self {
            Pages::Hashed(files) => {
                files.iter().for_each(f);
                return Ok(());
            }
            Pages::Dir(dir) => dir,
        };
        let entries = match crate::no_follow::read_dir(dir) {
            Ok(rd) => rd,
            Err(_) => return Ok(()),
        };
        // One buffer for every page: a fresh 256 KiB allocation per file
        // is a map and an unmap per page.
        let mut buf = vec![0u8; 256 * 1024];
        for entry in entries {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let regular = entry.file_type()?.is_file();
            let sha256 = if regular {
                progress.page();
                sha256_file_through(&path, &mut buf)?
            } else {
                String::new()
            };
            f(&FileView {
                path,
                rel: format!("pages/{name}"),
                regular,
                sha256,
            });
        }
        Ok(())
    }
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
                manifest: Manifest::Bytes(manifest),
                files: Pages::Hashed(files),
                owner,
            });
        }
        Ok((root, views))
    }

    /// The landing directory `dir`, named `rel` under its root: nothing
    /// of it is read but its `.owner` until the judge asks.
    pub(super) fn of_dir(dir: &Path, rel: String) -> LandingView {
        let owner = crate::store::owner::read_owner(&dir.join(crate::store::owner::OWNER_FILE));
        LandingView {
            path: dir.to_path_buf(),
            rel,
            manifest: Manifest::File(dir.join("manifest.jsonl")),
            files: Pages::Dir(dir.join("pages")),
            owner,
        }
    }

    pub(super) fn manifest_path(&self) -> PathBuf {
        self.path.join("manifest.jsonl")
    }
}

//! What `edc-sync verify` reads of a landing, whatever holds it: each
//! landing directory's manifest, its pages with the SHA-256 they hash to
//! now, and its `.owner`, from a local directory or from an object store
//! (every page object read back whole and hashed). The reconciliation in
//! the parent module judges views; it never touches a file or a bucket.
//!
//! A local directory is read as the judge asks, never held: its manifest
//! line by line and its pages one at a time (a directory of a million
//! pages would otherwise be a million names and hashes in memory). An
//! object store is walked once, in key order, as it lists: each landing
//! directory's manifest objects and its pages' hashes are spooled to local
//! files as they come, and the judge reads those files as it reads a
//! directory's. Nothing grows with the pages in memory.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::digest::sha256_file_through;
use crate::store::object::ObjectLanding;

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
    /// Pages hashed already (an object store's page objects): a spool file
    /// of `<sha256> <name as a JSON string>` lines, and where the pages
    /// are, for messages.
    Hashed { spool: PathBuf, dir: PathBuf },
}

impl Pages {
    /// Calls `f` with every page, hashed now, in no particular order.
    pub(super) fn each(
        &self,
        progress: &super::Progress,
        mut f: impl FnMut(&FileView),
    ) -> std::io::Result<()> {
        let dir = match self {
            Pages::Hashed { spool, dir } => {
                let lines = std::io::BufReader::new(crate::no_follow::read(spool)?);
                for line in lines.lines() {
                    let line = line?;
                    let (sha256, name) = line.split_once(' ').unwrap_or_default();
                    let name: String = serde_json::from_str(name).map_err(std::io::Error::other)?;
                    let rel = format!("pages/{name}");
                    f(&FileView {
                        path: dir.join(&rel),
                        rel,
                        regular: true,
                        sha256: sha256.to_string(),
                    });
                }
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
    /// root its paths are shown under (the `--out` URL): one walk over the
    /// listing, in key order, each directory's manifest and page hashes
    /// spooled to files in `spool` as they come. A directory's objects all
    /// begin with its name and a slash, so in key order they come together
    /// (or, for a directory nested in another, within its run): one that
    /// the listing has passed is finished and never met again.
    pub(super) async fn of_bucket(
        landing: &ObjectLanding,
        progress: &super::Progress,
        spool: &Path,
    ) -> Result<(PathBuf, Vec<LandingView>), super::ObjectUnreadable> {
        use futures_util::StreamExt;
        use std::io::Write;
        let root = PathBuf::from(landing.url());
        let local = |path: &Path| {
            let path = path.to_path_buf();
            move |error| super::Unreadable { path, error }
        };
        let mut open: BTreeMap<String, Spooling> = BTreeMap::new();
        let mut views = Vec::new();
        let mut last: Option<String> = None;
        // Objects are fetched a few at a time ahead of the walk, and met
        // in the listing's order.
        let fetched = landing
            .names("")
            .map(|name| async move {
                let name = name?;
                let got = match (name.rsplit_once("/manifest/"), name.rsplit_once("/pages/")) {
                    (Some((dir, _)), _) => Fetched::Manifest {
                        dir: dir.to_string(),
                        bytes: landing.read(&name).await?.unwrap_or_default(),
                    },
                    (None, Some((dir, page))) => Fetched::Page {
                        dir: dir.to_string(),
                        page: page.to_string(),
                        sha256: landing.sha256(&name).await?.map(|(sha, _)| sha),
                    },
                    (None, None) => Fetched::Other,
                };
                Ok::<_, crate::store::object::ObjectError>((name, got))
            })
            .buffered(FETCHES_AHEAD);
        let mut fetched = std::pin::pin!(fetched);
        while let Some(next) = fetched.next().await {
            let (name, got) = next?;
            if last.as_ref().is_some_and(|last| *last >= name) {
                return Err(super::Unreadable {
                    path: root.clone(),
                    error: std::io::Error::other(format!(
                        "the object store listed {name} after {}: not in key order, which verify reads a bucket in",
                        last.unwrap_or_default()
                    )),
                }
                .into());
            }
            let passed: Vec<String> = open
                .keys()
                .filter(|dir| !name.starts_with(&format!("{dir}/")))
                .cloned()
                .collect();
            for dir in passed {
                if let Some(done) = open.remove(&dir) {
                    views.push(done.finish(landing, &root).await?);
                }
            }
            let dir = match &got {
                Fetched::Manifest { dir, .. } | Fetched::Page { dir, .. } => dir.clone(),
                Fetched::Other => {
                    last = Some(name);
                    continue;
                }
            };
            let n = views.len() + open.len();
            let spooling = match open.entry(dir) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    let spooling = Spooling::new(e.key(), spool, n).map_err(local(spool))?;
                    e.insert(spooling)
                }
            };
            match got {
                Fetched::Manifest { bytes, .. } => spooling
                    .manifest
                    .write_all(&bytes)
                    .map_err(local(&spooling.manifest_path))?,
                Fetched::Page { page, sha256, .. } => {
                    progress.page();
                    // The name as a JSON string: an object's key may hold
                    // any character, a newline too.
                    let page = serde_json::Value::from(page);
                    writeln!(spooling.pages, "{} {page}", sha256.unwrap_or_default())
                        .map_err(local(&spooling.pages_path))?;
                }
                Fetched::Other => {}
            }
            last = Some(name);
        }
        for (_, done) in open {
            views.push(done.finish(landing, &root).await?);
        }
        views.sort_by(|a, b| a.rel.cmp(&b.rel));
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

/// How many objects verify reads ahead of its walk over a bucket: each a
/// round trip, so a few at once, and never more than that many pages held.
const FETCHES_AHEAD: usize = 16;

/// What was read of one listed object, by where its name puts it.
enum Fetched {
    /// A manifest object of landing directory `dir`: its bytes.
    Manifest { dir: String, bytes: bytes::Bytes },
    /// Page `page` of landing directory `dir`: its SHA-256 (`None`: gone
    /// since it was listed).
    Page {
        dir: String,
        page: String,
        sha256: Option<String>,
    },
    /// Neither (a `.owner`, a probe): nothing read.
    Other,
}

/// One landing directory of an object store while the listing walks it.
struct Spooling {
    dir: String,
    manifest_path: PathBuf,
    manifest: std::io::BufWriter<std::fs::File>,
    pages_path: PathBuf,
    pages: std::io::BufWriter<std::fs::File>,
}

impl Spooling {
    /// The `n`th directory met, `dir`, spooled into `spool`.
    fn new(dir: &str, spool: &Path, n: usize) -> std::io::Result<Spooling> {
        let manifest_path = spool.join(format!("{n}.manifest"));
        let pages_path = spool.join(format!("{n}.pages"));
        Ok(Spooling {
            dir: dir.to_string(),
            manifest: std::io::BufWriter::new(std::fs::File::create_new(&manifest_path)?),
            manifest_path,
            pages: std::io::BufWriter::new(std::fs::File::create_new(&pages_path)?),
            pages_path,
        })
    }

    /// The directory's view, its spool files written out, its `.owner`
    /// read.
    async fn finish(
        self,
        landing: &ObjectLanding,
        root: &Path,
    ) -> Result<LandingView, super::ObjectUnreadable> {
        use std::io::Write;
        let Spooling {
            dir,
            manifest_path,
            mut manifest,
            pages_path,
            mut pages,
        } = self;
        manifest.flush().map_err(|error| super::Unreadable {
            path: manifest_path.clone(),
            error,
        })?;
        pages.flush().map_err(|error| super::Unreadable {
            path: pages_path.clone(),
            error,
        })?;
        let owner = match landing
            .read(&format!("{dir}/{}", crate::store::owner::OWNER_FILE))
            .await?
        {
            None => Ok(None),
            Some(t) => crate::store::owner::parse_id(&String::from_utf8_lossy(&t))
                .map(Some)
                .ok_or_else(|| "it does not hold a state id (hex digits; what it holds is not shown)".into()),
        };
        Ok(LandingView {
            path: root.join(&dir),
            files: Pages::Hashed {
                spool: pages_path,
                dir: root.join(&dir),
            },
            rel: dir,
            manifest: Manifest::File(manifest_path),
            owner,
        })
    }
}

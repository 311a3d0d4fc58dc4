//! The landing store: page bytes in content-addressed files, each fsynced,
//! and `manifest.jsonl` listing every page once.
//!
//! A page is written to a temp file while it streams in, then fsynced and
//! renamed to `pages/<sha256>.<ext>`; the directory is fsynced too. The
//! manifest line is appended without an fsync: the page's `page_committed`
//! audit line holds every field of it, and a run relists what a crash took
//! (`sync::roll_forward`, `sync::recover`). Landing
//! the same bytes again (a replay after a crash) finds the file already
//! there and the manifest entry already listed: nothing is duplicated.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::manifest_entry::ManifestEntry;
use super::object::ObjectLanding;
use super::StoreError;
use crate::durable::sync_parent_dir;
use crate::no_follow::Mode;
use std::sync::Arc;

/// For an object-store landing, the index's publication watermark (see
/// [`LandingStore::published_watermark`]).
const PUBLISHED: &str = "manifest.published";

/// A page's manifest line new in its commit: the line (one JSON object),
/// and the page key and SHA-256 a database's manifest row is found by.
#[derive(Debug, Clone)]
pub(crate) struct ListedLine {
    pub line: String,
    pub page_key: String,
    pub sha256: String,
}

/// Where one stream's pages land.
pub(crate) struct LandingStore {
    dir: PathBuf,
    /// `dir` relative to the landing root (the stream's directory name):
    /// how the audit trail names it, so that a landing moved elsewhere is
    /// still the one its trail describes.
    rel: String,
    /// Bytes of a torn final manifest line dropped at open: the caller
    /// relists from the audit trail any committed page it described.
    torn_tail: Option<u64>,
    ext: &'static str,
    /// (page_key, sha256) of every page the manifest lists after the point
    /// the cursor recorded: the only pages a replay can meet. Normally
    /// none or one; the whole manifest when the cursor is gone (the
    /// documented recovery) or belongs to another state directory, so a
    /// replay relists nothing. Pages this run lists are not added: the
    /// cursor moves past each, and none is fetched twice in a run, so the
    /// set does not grow with the run either.
    listed: HashSet<(String, String)>,
    /// The manifest's length in bytes (the cursor records it).
    manifest_len: u64,
    /// The manifest, open for appending once it exists.
    manifest: Option<File>,
    /// The object store pages land in, when `--out` names one: this
    /// directory then holds the manifest index and the page being
    /// received, and a page lives in the bucket once acknowledged.
    remote: Option<Arc<ObjectLanding>>,
}

/// A page being received. It is validated as it streams in
/// (`payload::PageCheck`); only a delta with a lookback reads it back
/// once, to tell its records apart ([`LandingTemp::read_back`]).
///
/// It removes its file when dropped, unless the file became a landed page
/// ([`LandingStore::commit`], [`LandingStore::take`]) or was moved aside
/// ([`LandingTemp::quarantine`]): every way a page is not committed leaves
/// nothing behind without being said (and the next run's `begin` clears
/// what a crash left).
pub(crate) struct LandingTemp {
    path: PathBuf,
    writer: BufWriter<File>,
    /// The file is still the temp file's own, to remove on drop.
    owned: bool,
}

impl Drop for LandingTemp {
    fn drop(&mut self) {
        if self.owned {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Write for LandingTemp {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.writer.flush()
    }
}

impl LandingTemp {
    /// The bytes received so far, to be read again from the start of the
    /// temp file as a stream (opened read-only; the writer is flushed).
    pub(crate) fn read_back(&mut self) -> Result<File, StoreError> {
        self.writer
            .flush()
            .map_err(|e| StoreError::io(&self.path, "flush", e))?;
        crate::no_follow::read(&self.path).map_err(|e| StoreError::io(&self.path, "read back", e))
    }

    /// Moves an invalid page aside for investigation, never as data.
    pub(crate) fn quarantine(mut self, dir: &Path, name: &str) -> Result<PathBuf, StoreError> {
        self.writer
            .flush()
            .map_err(|e| StoreError::io(&self.path, "flush", e))?;
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, "create", e))?;
        let target = dir.join(name);
        std::fs::rename(&self.path, &target).map_err(|e| StoreError::io(&target, "quarantine", e))?;
        self.owned = false;
        Ok(target)
    }
}

/// A page that is on disk for good: the receipt only the landing store
/// makes, which the cursor store asks for before it moves a cursor past a
/// page with records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LandedPage {
    file: String,
    sha256: String,
    /// A file of that name was there but its bytes no longer hashed to
    /// its name: it was replaced by the page just received.
    replaced_damaged: bool,
}

impl LandedPage {
    /// Relative to the stream's landing directory: `pages/<sha256>.<ext>`.
    pub(crate) fn file(&self) -> &str {
        &self.file
    }

    /// The SHA-256 of the landed bytes (the file's name).
    pub(crate) fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The file was there but modified, and was replaced.
    pub(crate) fn replaced_damaged(&self) -> bool {
        self.replaced_damaged
    }
}

impl LandingStore {
    /// Opens the landing directory `dir` for pages with extension `ext`,
    /// clearing temp files a crash left and reading the manifest from
    /// `from` (the length the stream's cursor recorded; from the start
    /// without one, or when it is not a line boundary). Lines before it are
    /// history nothing can replay: they are not read, and
    /// `edc-sync verify` is what re-proves them.
    pub(super) fn open(
        dir: &Path,
        rel: String,
        ext: &'static str,
        from: Option<u64>,
    ) -> Result<LandingStore, StoreError> {
        for sub in ["pages", ".tmp"] {
            let d = dir.join(sub);
            crate::no_follow::dirs_below(dir, Path::new(sub)).map_err(|e| StoreError::io(&d, "create", e))?;
        }
        let tmp = dir.join(".tmp");
        if let Ok(entries) = crate::no_follow::read_dir(&tmp) {
            for entry in entries.flatten() {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        let mut listed = HashSet::new();
        let manifest = dir.join("manifest.jsonl");
        let torn_tail = drop_torn_tail(&manifest)?;
        let mut manifest_len = 0;
        if let Some(file) = open_manifest(&manifest, Mode::Read)? {
            let read = |e| StoreError::io(&manifest, "read", e);
            manifest_len = file.metadata().map_err(read)?.len();
            let start = from
                .filter(|&at| at_line_start(&file, at, manifest_len))
                .unwrap_or(0);
            let mut reader = BufReader::new(file);
            std::io::Seek::seek(&mut reader, std::io::SeekFrom::Start(start)).map_err(read)?;
            for (i, line) in reader.split(b'\n').enumerate() {
                let line = line.map_err(read)?;
                // Every line was written whole by this tool: anything else
                // is damage, and listing more pages on top of it would
                // hide it (65, naming the line).
                let entry =
                    serde_json::from_slice::<ManifestEntry>(&line).map_err(|e| StoreError::Corrupt {
                        path: manifest.clone(),
                        detail: match start {
                            0 => format!("line {} is not a manifest entry ({e})", i + 1),
                            _ => format!("line {} after byte {start} is not a manifest entry ({e})", i + 1),
                        },
                    })?;
                listed.insert((entry.page_key, entry.sha256));
            }
        }
        Ok(LandingStore {
            dir: dir.to_path_buf(),
            rel,
            torn_tail,
            ext,
            listed,
            manifest_len,
            manifest: None,
            remote: None,
        })
    }

    /// The landing directory `rel` below `out_dir` (made if missing), for
    /// a stream whose manifest is kept elsewhere (a state database's rows,
    /// through its run lock: `DbStream::open_landing`).
    pub(crate) fn open_below(
        out_dir: &Path,
        rel: &str,
        ext: &'static str,
    ) -> Result<LandingStore, StoreError> {
        let dir = crate::no_follow::dirs_below(out_dir, Path::new(rel))
            .map_err(|e| StoreError::io(&out_dir.join(rel), "create", e))?;
        LandingStore::open(&dir, rel.to_string(), ext, None)
    }

    /// Pages land in `remote` (an object store) instead of this directory.
    pub(crate) fn with_remote(mut self, remote: Option<Arc<ObjectLanding>>) -> LandingStore {
        self.remote = remote;
        self
    }

    /// The object store pages land in, if any.
    pub(crate) fn remote(&self) -> Option<&Arc<ObjectLanding>> {
        self.remote.as_ref()
    }

    /// The SHA-256 and size of the landed page `file` (relative to this
    /// directory), `None` when it is missing. For an object store the
    /// object is read whole, blocking this thread for the request (a
    /// start-up check, on a multi-threaded runtime).
    pub(crate) fn landed_sha256(&self, file: &str) -> Result<Option<(String, u64)>, StoreError> {
        if let Some(remote) = &self.remote {
            let rel = self.recorded(file);
            return block_on(remote.sha256(&rel)).map_err(StoreError::Object);
        }
        let path = self.dir.join(file);
        match crate::no_follow::read(&path) {
            Ok(f) => {
                let len = f.metadata().map_err(|e| StoreError::io(&path, "stat", e))?.len();
                let sha = crate::digest::sha256_file(&path).map_err(|e| StoreError::io(&path, "read", e))?;
                Ok(Some((sha, len)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::io(&path, "open", e)),
        }
    }

    /// What is wrong with the landed page `file` of `bytes` bytes, if
    /// anything: missing, not a regular file, or another size. For an
    /// object store, one HEAD (blocking this thread, as above).
    pub(crate) fn landed_problem(&self, file: &str, bytes: u64) -> Result<Option<&'static str>, StoreError> {
        let size = match &self.remote {
            Some(remote) => block_on(remote.size(&self.recorded(file))).map_err(StoreError::Object)?,
            None => match std::fs::symlink_metadata(self.dir.join(file)) {
                Err(_) => None,
                Ok(m) if !m.is_file() => return Ok(Some("not a regular file")),
                Ok(m) => Some(m.len()),
            },
        };
        Ok(match size {
            None => Some("missing"),
            Some(len) if len != bytes => Some("modified (its size differs from the page_committed line's)"),
            Some(_) => None,
        })
    }

    /// The manifest's length in bytes.
    pub(crate) fn manifest_len(&self) -> u64 {
        self.manifest_len
    }

    /// Bytes of the torn manifest line dropped at open, if there was one.
    pub(crate) fn torn_tail(&self) -> Option<u64> {
        self.torn_tail
    }

    /// Whether a page is listed already.
    pub(crate) fn is_listed(&self, page_key: &str, sha256: &str) -> bool {
        self.listed.contains(&(page_key.to_string(), sha256.to_string()))
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory relative to the landing root, as audit lines name it.
    pub(crate) fn recorded_dir(&self) -> &str {
        &self.rel
    }

    /// `file` (relative to this directory) as audit lines name it:
    /// relative to the landing root.
    pub(crate) fn recorded(&self, file: &str) -> String {
        format!("{}/{file}", self.rel)
    }

    /// For an object-store landing: the length of the manifest index whose
    /// every line has its object in the bucket, as last recorded; `None`
    /// when none is (or it cannot be read: the whole index is checked).
    pub(crate) fn published_watermark(&self) -> Option<u64> {
        crate::no_follow::read_string(self.dir.join(PUBLISHED))
            .ok()
            .and_then(|t| t.trim().parse().ok())
    }

    /// Records that every line of the index up to byte `len` has its object.
    pub(crate) fn set_published_watermark(&self, len: u64) -> Result<(), StoreError> {
        let path = self.dir.join(PUBLISHED);
        let tmp = self.dir.join(".tmp").join(PUBLISHED);
        crate::durable::replace_durably(&path, &tmp, format!("{len}\n").as_bytes())
            .map_err(|e| StoreError::io(&path, "replace", e))
    }

    pub(crate) fn manifest_path(&self) -> PathBuf {
        self.dir.join("manifest.jsonl")
    }

    /// Starts receiving a page.
    pub(crate) fn begin(&self, name: &str) -> Result<LandingTemp, StoreError> {
        let path = self.dir.join(".tmp").join(format!("{name}.part"));
        let file = crate::no_follow::create(&path).map_err(|e| StoreError::io(&path, "create", e))?;
        Ok(LandingTemp {
            path,
            writer: BufWriter::with_capacity(256 * 1024, file),
            owned: true,
        })
    }

    /// Makes a received page durable under its content address.
    pub(crate) fn commit(&self, mut temp: LandingTemp, sha256: &str) -> Result<LandedPage, StoreError> {
        let path = temp.path.clone();
        temp.writer
            .flush()
            .map_err(|e| StoreError::io(&path, "flush", e))?;
        let name = format!("pages/{sha256}.{}", self.ext);
        let target = self.dir.join(&name);
        // A file already there is trusted only once its bytes hash to its
        // name: a landed page modified since is replaced by the bytes just
        // received (which do), and the caller audits that it was.
        let mut replaced_damaged = false;
        if target.exists() {
            match crate::digest::sha256_file(&target) {
                Ok(existing) if existing == sha256 => {
                    // The temp file goes with `temp`.
                    return Ok(LandedPage {
                        file: name,
                        sha256: sha256.to_string(),
                        replaced_damaged: false,
                    });
                }
                _ => replaced_damaged = true,
            }
        }
        temp.writer
            .get_ref()
            .sync_all()
            .map_err(|e| StoreError::io(&path, "fsync", e))?;
        std::fs::rename(&path, &target).map_err(|e| StoreError::io(&target, "rename into place", e))?;
        temp.owned = false;
        sync_parent_dir(&target).map_err(|e| StoreError::io(&target, "fsync the directory of", e))?;
        Ok(LandedPage {
            file: name,
            sha256: sha256.to_string(),
            replaced_damaged,
        })
    }

    /// For an object-store landing: the received page's bytes, taken out of
    /// its temp file, and the name it lands under. Nothing is fsynced or
    /// renamed here: the page is durable once the store acknowledges it,
    /// and a crash before that leaves nothing committed (the page is
    /// fetched again).
    pub(crate) fn take(
        &self,
        mut temp: LandingTemp,
        sha256: &str,
    ) -> Result<(LandedPage, Vec<u8>), StoreError> {
        let path = temp.path.clone();
        temp.writer
            .flush()
            .map_err(|e| StoreError::io(&path, "flush", e))?;
        let bytes = crate::no_follow::read_bytes(&path).map_err(|e| StoreError::io(&path, "read back", e))?;
        temp.owned = false;
        std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, "remove", e))?;
        let page = LandedPage {
            file: format!("pages/{sha256}.{}", self.ext),
            sha256: sha256.to_string(),
            replaced_damaged: false,
        };
        Ok((page, bytes))
    }

    /// Replaces the whole manifest by `entries` (a deliberate repair from
    /// the audit trail): written to a temp file, fsynced, renamed over the
    /// old one (a link there is replaced, never followed), the directory
    /// fsynced. Returns the new manifest's length.
    pub(crate) fn replace_manifest(&mut self, entries: &[ManifestEntry]) -> Result<u64, StoreError> {
        let path = self.manifest_path();
        let tmp = self.dir.join(".tmp").join("manifest.jsonl.rebuilt");
        let mut text = Vec::new();
        for entry in entries {
            serde_json::to_writer(&mut text, entry).map_err(|e| StoreError::io(&tmp, "encode", e.into()))?;
            text.push(b'\n');
        }
        crate::durable::replace_durably(&path, &tmp, &text)
            .map_err(|e| StoreError::io(&path, "replace", e))?;
        // The lines moved: an object-store landing republishes them all.
        let published = self.dir.join(PUBLISHED);
        if let Err(e) = std::fs::remove_file(&published) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(StoreError::io(&published, "remove", e));
            }
        }
        self.listed = entries
            .iter()
            .map(|e| (e.page_key.clone(), e.sha256.clone()))
            .collect();
        self.manifest = None;
        self.manifest_len = text.len() as u64;
        Ok(self.manifest_len)
    }

    /// Cuts the manifest back to byte `at` (a line start: where the
    /// cursor points), durably, forgetting the pages the lines after it
    /// listed (`removed`), so that a page among them landed again is
    /// listed again. The caller has named each line in the trail first.
    pub(crate) fn cut_manifest(&mut self, at: u64, removed: &[&ManifestEntry]) -> Result<(), StoreError> {
        let path = self.manifest_path();
        self.manifest = None;
        let file = open_manifest(&path, Mode::ReadWrite)?
            .ok_or_else(|| StoreError::io(&path, "open", std::io::ErrorKind::NotFound.into()))?;
        file.set_len(at)
            .map_err(|e| StoreError::io(&path, "truncate", e))?;
        file.sync_all().map_err(|e| StoreError::io(&path, "fsync", e))?;
        for entry in removed {
            self.listed
                .remove(&(entry.page_key.clone(), entry.sha256.clone()));
        }
        self.manifest_len = at;
        Ok(())
    }

    /// Lists a landed page in the manifest, unless it is listed already.
    /// Returns whether a line was written.
    pub(crate) fn list(&mut self, entry: &ManifestEntry) -> Result<bool, StoreError> {
        self.list_line(entry).map(|line| line.is_some())
    }

    /// [`Self::list`], returning the line written and where it starts.
    pub(crate) fn list_line(&mut self, entry: &ManifestEntry) -> Result<Option<(u64, String)>, StoreError> {
        let key = (entry.page_key.clone(), entry.sha256.clone());
        if self.listed.contains(&key) {
            return Ok(None);
        }
        let at = self.manifest_len;
        let path = self.manifest_path();
        let file = match &mut self.manifest {
            Some(file) => file,
            None => {
                let existed = path.exists();
                let file = open_manifest(&path, Mode::Append)?
                    .ok_or_else(|| StoreError::io(&path, "open", std::io::ErrorKind::NotFound.into()))?;
                if !existed {
                    sync_parent_dir(&path).map_err(|e| StoreError::io(&path, "fsync the directory of", e))?;
                }
                self.manifest.insert(file)
            }
        };
        let mut line = serde_json::to_string(entry).map_err(|e| StoreError::io(&path, "encode", e.into()))?;
        line.push('\n');
        // Not fsynced: the manifest is derived from the `page_committed`
        // lines, which are, and a run relists what a crash took from it
        // (`sync::roll_forward`, `sync::recover`).
        file.write_all(line.as_bytes())
            .map_err(|e| StoreError::io(&path, "append", e))?;
        self.manifest_len = file
            .metadata()
            .map_err(|e| StoreError::io(&path, "stat", e))?
            .len();
        Ok(Some((at, line)))
    }
}

/// Runs an object-store request from synchronous start-up code: the
/// thread is handed over to the request (the runtime moves its other tasks
/// elsewhere), which a multi-threaded runtime allows.
fn block_on<T>(request: impl std::future::Future<Output = T>) -> T {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(request))
}

/// True when byte `at` of `file` (of length `len`) starts a line.
fn at_line_start(file: &File, at: u64, len: u64) -> bool {
    at <= len && crate::durable::is_line_start(file, at).unwrap_or(false)
}

/// Opens the manifest never through a symlink and only as a regular file
/// (as root, a link would let a run write anywhere); `None` when absent.
fn open_manifest(path: &Path, mode: Mode) -> Result<Option<File>, StoreError> {
    match crate::no_follow::open(path, mode) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io(path, "open", e)),
    }
}

/// A crash mid-append can leave the manifest's last line without its
/// newline. The torn bytes are cut off so the next line starts clean, and
/// their length is returned: the caller relists from the audit trail any
/// page that was committed (a page that was not is replayed and listed).
fn drop_torn_tail(manifest: &Path) -> Result<Option<u64>, StoreError> {
    use std::os::unix::fs::FileExt;
    let Some(file) = open_manifest(manifest, Mode::ReadWrite)? else {
        return Ok(None);
    };
    let read = |e| StoreError::io(manifest, "read", e);
    let len = file.metadata().map_err(read)?.len();
    if len == 0 {
        return Ok(None);
    }
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, len - 1).map_err(read)?;
    if last[0] == b'\n' {
        return Ok(None);
    }
    // Back from the end to the last newline: the torn line only, never the
    // whole history.
    let keep = crate::durable::line_start(&file, len, u64::MAX)
        .map_err(read)?
        .unwrap_or(0);
    let torn = len - keep;
    file.set_len(keep)
        .map_err(|e| StoreError::io(manifest, "truncate", e))?;
    file.sync_all()
        .map_err(|e| StoreError::io(manifest, "fsync", e))?;
    Ok(Some(torn))
}

//! One concept: the trail's `page_committed` lines and each landing
//! directory's manifest, walked together in one pass.
//!
//! A run lists a page in its directory's manifest just before it writes
//! the page's commit line, so in an intact landing a directory's manifest
//! entries are its commits in trail order. Verify therefore reads the
//! trail once and, at each commit that landed a file, the next entry of
//! that directory's manifest: what it holds is each directory's position,
//! never its history. An entry and a commit that do not meet in order (an
//! entry removed, added or moved; a replayed page committed twice and
//! listed once) wait in side tables until their partner comes, so what
//! is held grows with the damage, not with the pages. What is left over
//! at the end is judged against the directory's index of listed files and,
//! on damage only, one more read of the trail.
//!
//! Each directory's index is the first 128 bits of the SHA-256 of every
//! listed file's name, 16 bytes an entry (two names sharing one with a
//! probability of about n² / 2¹²⁹, no risk a landing can meet): what
//! tells a landed file that is listed from one that is not, and a page
//! listed twice.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io::BufRead;
use std::path::Path;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::view::LandingView;
use super::{Discrepancy, Unreadable};

/// A `page_committed` line, as far as matching it to an entry needs it.
#[derive(Debug)]
struct Commit {
    line: u64,
    sha256: String,
    file: String,
    bytes: u64,
    records: u64,
}

/// The last commit of a directory that was not a dry run: the one its
/// cursor is held to.
#[derive(Debug)]
pub(super) struct Last {
    pub(super) line: u64,
    pub(super) sha256: String,
    pub(super) cursor_after: Value,
    /// The cursor's lookback memory after the page (whole, or sealed).
    pub(super) lookback: Value,
}

/// What the trail says of one landing directory: counts and its last
/// commit, whatever the length of its history.
#[derive(Debug)]
pub(super) struct DirTrail {
    /// Its first commit line.
    pub(super) first_line: u64,
    /// Its commit lines.
    pub(super) commits: usize,
    /// Those that landed a file.
    pub(super) landed: usize,
    /// Those that were not dry runs.
    pub(super) committed: usize,
    pub(super) last: Option<Last>,
    /// Whether every one of them names it by an absolute path outside the
    /// landing root (an older version's line about another landing).
    pub(super) elsewhere: bool,
}

/// The trail's commits, by landing directory relative to the landing root.
pub(super) type ByDir = BTreeMap<String, DirTrail>;

/// A manifest entry, as far as verify judges it.
#[derive(Debug)]
struct Entry {
    line: usize,
    file: String,
    page_key: String,
    sha256: String,
    bytes: u64,
    records: u64,
    /// Its records a reader counts (those not marked as landed before).
    counted: u64,
}

impl Entry {
    /// The manifest's line `line`, read as `e`.
    fn of(line: usize, e: crate::store::ManifestEntry) -> Entry {
        Entry {
            line,
            counted: e.records.saturating_sub(e.repeated.len() as u64),
            file: e.file,
            page_key: e.page_key,
            sha256: e.sha256,
            bytes: e.bytes,
            records: e.records,
        }
    }
}

/// An entry whose commit line (`line`) says other bytes or records.
fn disagrees(entry: &Entry, line: u64, bytes: u64, records: u64) -> String {
    format!(
        "line {} says {} bytes and {} records; audit line {line} says {bytes} bytes and {records} records",
        entry.line, entry.bytes, entry.records
    )
}

/// Whether `file` is named as a run names a page: `pages/<sha256>.<ext>`,
/// nothing before it (`./`) and no other directory. A manifest reader takes
/// the name as written, so another spelling of an existing file is its own
/// discrepancy, not a missing file.
fn named_as_a_run_names_it(file: &str) -> bool {
    let Some((sha, ext)) = file.strip_prefix("pages/").and_then(|n| n.split_once('.')) else {
        return false;
    };
    sha.len() == 64
        && sha.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && !ext.is_empty()
        && ext.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// The index key of a listed or landed file (`pages/<name>`).
fn file_key(rel: &str) -> [u8; 16] {
    let digest = Sha256::digest(rel.as_bytes());
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

/// The fields of a `page_committed` line verify reads, borrowed from the
/// line where they can be; the rest of it (most of its bytes) is skipped
/// unparsed. A field that is absent or null reads as empty, 0 or false,
/// as a line that lands no file has its `landing_file` null.
#[derive(Debug, serde::Deserialize)]
pub(super) struct CommitFields<'a> {
    #[serde(borrow)]
    event: Cow<'a, str>,
    #[serde(borrow, default, deserialize_with = "text")]
    landing_dir: Cow<'a, str>,
    #[serde(borrow, default, deserialize_with = "text")]
    landing_root: Cow<'a, str>,
    #[serde(borrow, default, deserialize_with = "text")]
    pub(super) landing_file: Cow<'a, str>,
    #[serde(borrow, default, deserialize_with = "text")]
    pub(super) payload_sha256: Cow<'a, str>,
    #[serde(default, deserialize_with = "or_default")]
    pub(super) bytes: u64,
    #[serde(default, deserialize_with = "or_default")]
    pub(super) records: u64,
    #[serde(default, deserialize_with = "or_default")]
    pub(super) dry_run: bool,
    #[serde(borrow, default)]
    pub(super) cursor_after: Option<&'a RawValue>,
    #[serde(borrow, default)]
    cursor_state: Option<CursorFields<'a>>,
}

/// A text field, borrowed when it has no escapes; null reads as empty.
fn text<'de: 'a, 'a, D: serde::Deserializer<'de>>(d: D) -> Result<Cow<'a, str>, D::Error> {
    #[derive(serde::Deserialize)]
    struct Text<'a>(#[serde(borrow)] Cow<'a, str>);
    Ok(Option::<Text>::deserialize(d)?.map(|t| t.0).unwrap_or_default())
}

/// A number or a flag; null reads as 0 or false.
fn or_default<'de, D: serde::Deserializer<'de>, T: serde::Deserialize<'de> + Default>(
    d: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, serde::Deserialize)]
struct CursorFields<'a> {
    #[serde(borrow, default)]
    lookback: Option<&'a RawValue>,
}

impl CommitFields<'_> {
    /// The file it landed, if it landed one.
    pub(super) fn file(&self) -> Option<&str> {
        Some(self.landing_file.as_ref()).filter(|f| !f.is_empty())
    }

    /// Its `cursor_after`, parsed.
    pub(super) fn cursor_after(&self) -> Value {
        self.cursor_after
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or(Value::Null)
    }
}

/// Commit lines verify cannot place: how many, and the first.
#[derive(Debug, Default)]
pub(super) struct Unplaced {
    pub(super) count: u64,
    pub(super) first: Option<u64>,
}

impl Unplaced {
    fn add(&mut self, line: u64) {
        self.count += 1;
        self.first.get_or_insert(line);
    }
}

/// Calls `f` with every `page_committed` line of `audit` that names its
/// landing directory: the directory (relative to `out`), whether the line
/// names it absolutely outside `out`, the line's number and its fields.
/// Returns the commit lines that name no directory, or whose fields are
/// not of their types (a line edited so is also the chain's finding).
pub(super) fn each_commit(
    audit: &Path,
    out: &Path,
    mut f: impl FnMut(&str, bool, u64, &CommitFields<'_>),
) -> std::io::Result<Unplaced> {
    let mut unplaced = Unplaced::default();
    crate::audit::read::each_event_line(audit, "page_committed", |line, bytes| {
        let v = match serde_json::from_slice::<CommitFields>(bytes) {
            Ok(v) if v.event == "page_committed" => v,
            // Another event whose text holds the words, or a torn line.
            Ok(_) => return,
            Err(_) if serde_json::from_slice::<Value>(bytes).is_err() => return,
            Err(_) => return unplaced.add(line),
        };
        let Some(dir) = crate::stream::relative_landing_dir(&v.landing_dir) else {
            return unplaced.add(line);
        };
        // A backfill with a state directory landed below its own root.
        let dir = match v.landing_root.as_ref() {
            "" => dir,
            root => Cow::Owned(format!("{root}/{dir}")),
        };
        let recorded = Path::new(v.landing_dir.as_ref());
        let elsewhere = recorded.is_absolute() && !recorded.starts_with(out);
        f(&dir, elsewhere, line, &v);
    })?;
    Ok(unplaced)
}

/// One landing directory's manifest, read as its commits come.
pub(super) struct DirWalk<'v> {
    view: &'v LandingView,
    lines: Option<std::io::Split<Box<dyn BufRead + 'v>>>,
    read: usize,
    /// The index key of every entry read, in manifest order until
    /// [`DirWalk::finish`] sorts it.
    listed: Vec<[u8; 16]>,
    waiting_entries: HashMap<String, VecDeque<Entry>>,
    waiting_commits: HashMap<String, VecDeque<Commit>>,
    /// Entries whose SHA-256 differs from their commit's: judged against
    /// every commit of the trail at the end.
    unmatched: Vec<Entry>,
    /// The most entries and commits that waited at once.
    #[cfg(test)]
    peak: usize,
}

/// A directory's walk, finished: what is left to judge against the trail.
pub(super) struct Leftover {
    rel: String,
    manifest: std::path::PathBuf,
    entries: Vec<Entry>,
}

impl<'v> DirWalk<'v> {
    pub(super) fn new(view: &'v LandingView) -> std::io::Result<DirWalk<'v>> {
        Ok(DirWalk {
            view,
            lines: view.manifest.open()?.map(|r| r.split(b'\n')),
            read: 0,
            listed: Vec::new(),
            waiting_entries: HashMap::new(),
            waiting_commits: HashMap::new(),
            unmatched: Vec::new(),
            #[cfg(test)]
            peak: 0,
        })
    }

    /// The next entry of the manifest (a line that is not one is a
    /// discrepancy, and skipped).
    fn next_entry(&mut self, problems: &mut Vec<Discrepancy>) -> std::io::Result<Option<Entry>> {
        let Some(lines) = self.lines.as_mut() else {
            return Ok(None);
        };
        for line in lines.by_ref() {
            let line = line?;
            self.read += 1;
            match serde_json::from_slice::<crate::store::ManifestEntry>(&line) {
                Ok(e) => {
                    if !named_as_a_run_names_it(&e.file) {
                        problems.push(Discrepancy {
                            path: self.view.manifest_path(),
                            what: format!(
                                "line {} names its file {:?}, not as a run names a page \
                                 (pages/<sha256>.<ext>): a reader of the manifest would not find it by that name",
                                self.read, e.file
                            ),
                        });
                    }
                    self.listed.push(file_key(&e.file));
                    return Ok(Some(Entry::of(self.read, e)));
                }
                Err(e) => problems.push(Discrepancy {
                    path: self.view.manifest_path(),
                    what: format!("line {} is not a manifest entry ({e})", self.read),
                }),
            }
        }
        self.lines = None;
        Ok(None)
    }

    /// A commit line of this directory that landed `file`.
    fn commit(
        &mut self,
        line: u64,
        v: &CommitFields<'_>,
        file: &str,
        problems: &mut Vec<Discrepancy>,
    ) -> std::io::Result<()> {
        let commit = Commit {
            line,
            sha256: v.payload_sha256.to_string(),
            file: file.to_string(),
            bytes: v.bytes,
            records: v.records,
        };
        if let Some(entry) = pop(&mut self.waiting_entries, file) {
            self.judge(entry, &commit, problems);
            return Ok(());
        }
        // Read one entry ahead at most (besides entries that meet a
        // commit already waiting): a commit whose entry is gone must not
        // pull the rest of the manifest into memory.
        loop {
            match self.next_entry(problems)? {
                None => break,
                Some(entry) if entry.file == commit.file => {
                    self.judge(entry, &commit, problems);
                    return Ok(());
                }
                Some(entry) => match pop(&mut self.waiting_commits, &entry.file) {
                    Some(earlier) => self.judge(entry, &earlier, problems),
                    None => {
                        push(&mut self.waiting_entries, entry);
                        break;
                    }
                },
            }
        }
        push(&mut self.waiting_commits, commit);
        #[cfg(test)]
        {
            let now = self.waiting_commits.values().map(VecDeque::len).sum::<usize>()
                + self.waiting_entries.values().map(VecDeque::len).sum::<usize>();
            self.peak = self.peak.max(now);
        }
        Ok(())
    }

    /// An entry and the commit of its file, met in order.
    fn judge(&mut self, entry: Entry, commit: &Commit, problems: &mut Vec<Discrepancy>) {
        if entry.sha256 != commit.sha256 {
            self.unmatched.push(entry);
        } else if entry.bytes != commit.bytes || entry.records != commit.records {
            problems.push(Discrepancy {
                path: self.view.manifest_path(),
                what: disagrees(&entry, commit.line, commit.bytes, commit.records),
            });
        }
    }

    /// The rest of the manifest, the landed files against the index, and
    /// what waits: the entries left to judge against the whole trail.
    pub(super) fn finish(
        mut self,
        progress: &super::Progress,
        summary: &mut super::Summary,
    ) -> std::io::Result<Leftover> {
        let problems = &mut summary.discrepancies;
        while let Some(entry) = self.next_entry(problems)? {
            match pop(&mut self.waiting_commits, &entry.file) {
                Some(commit) => self.judge(entry, &commit, problems),
                None => push(&mut self.waiting_entries, entry),
            }
        }
        let manifest = self.view.manifest_path();
        let mut listed = std::mem::take(&mut self.listed);
        listed.sort_unstable();
        // A page listed twice: a reader counts its records twice (unless
        // the later entry marks every one of them as landed before).
        let twice: HashSet<[u8; 16]> = listed.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
        let mut again = HashSet::new();
        if !twice.is_empty() {
            let mut first: HashMap<[u8; 16], (usize, String)> = HashMap::new();
            self.each_entry(|entry| {
                let key = file_key(&entry.file);
                if !twice.contains(&key) {
                    return;
                }
                match first.get(&key) {
                    None => {
                        first.insert(key, (entry.line, entry.page_key.clone()));
                    }
                    Some((line, page_key)) if entry.counted > 0 => {
                        again.insert(entry.line);
                        problems.push(Discrepancy {
                            path: manifest.clone(),
                            what: format!(
                                "line {} lists the page {} ({}) again, first at line {line} (as {page_key}): {} of \
                                 its records would be counted twice",
                                entry.line, entry.page_key, entry.file, entry.counted,
                            ),
                        });
                    }
                    Some(_) => {}
                }
            })?;
        }
        listed.dedup();
        // The landed files, each against the index.
        progress.phase("hashing the landed pages");
        progress.pages_ahead(listed.len() as u64);
        let mut found = vec![false; listed.len()];
        let mut files = 0;
        self.view.files.each(progress, |file| {
            files += 1;
            if !file.regular {
                problems.push(Discrepancy {
                    path: file.path.clone(),
                    what: "not a regular file (a landed page is one)".into(),
                });
                return;
            }
            let named = file
                .rel
                .trim_start_matches("pages/")
                .split('.')
                .next()
                .unwrap_or_default();
            if file.sha256 != named {
                problems.push(Discrepancy {
                    path: file.path.clone(),
                    what: format!(
                        "modified after landing: its SHA-256 is {}, its name says {named}",
                        file.sha256
                    ),
                });
            }
            match listed.binary_search(&file_key(&file.rel)) {
                Ok(i) => found[i] = true,
                Err(_) => problems.push(Discrepancy {
                    path: file.path.clone(),
                    what: "landed but not listed in the manifest".into(),
                }),
            }
        })?;
        // Listed files that are not there, named by their first entry.
        let missing: HashSet<[u8; 16]> = listed
            .iter()
            .zip(&found)
            .filter(|(_, found)| !**found)
            .map(|(key, _)| *key)
            .collect();
        if !missing.is_empty() {
            let mut named = HashSet::new();
            self.each_entry(|entry| {
                let key = file_key(&entry.file);
                // A name not in a run's form is named as such above.
                if missing.contains(&key) && named.insert(key) && named_as_a_run_names_it(&entry.file) {
                    problems.push(Discrepancy {
                        path: manifest.clone(),
                        what: format!("line {} lists {} but the file is missing", entry.line, entry.file),
                    });
                }
            })?;
        }
        // Commits that met no entry: their file must be listed somewhere.
        let mut waiting: Vec<Commit> = self.waiting_commits.drain().flat_map(|(_, c)| c).collect();
        waiting.sort_by_key(|c| c.line);
        for commit in waiting {
            if listed.binary_search(&file_key(&commit.file)).is_err() {
                problems.push(Discrepancy {
                    path: manifest.clone(),
                    what: format!(
                        "does not list {}, which page_committed at audit line {} landed here",
                        commit.file, commit.line
                    ),
                });
            }
        }
        summary.files += files;
        summary.entries += listed.len();
        // Entries that met no commit of their file and SHA-256 in order.
        let mut entries: Vec<Entry> = self.waiting_entries.drain().flat_map(|(_, e)| e).collect();
        entries.append(&mut self.unmatched);
        entries.retain(|e| !again.contains(&e.line));
        entries.sort_by_key(|e| e.line);
        Ok(Leftover {
            rel: self.view.rel.clone(),
            manifest,
            entries,
        })
    }

    /// Every entry of the manifest from its start (read again, on damage
    /// only; lines that are not entries were reported by the first read).
    fn each_entry(&self, mut f: impl FnMut(&Entry)) -> std::io::Result<()> {
        let Some(reader) = self.view.manifest.open()? else {
            return Ok(());
        };
        for (i, line) in reader.split(b'\n').enumerate() {
            if let Ok(e) = serde_json::from_slice::<crate::store::ManifestEntry>(&line?) {
                f(&Entry::of(i + 1, e));
            }
        }
        Ok(())
    }
}

/// Walks the trail's commits once, against the manifests of `walks` (by
/// their directory): what the trail says of every directory, and the
/// commit lines it cannot place; or the trail or manifest that could not
/// be read.
pub(super) fn walk(
    audit: &Path,
    out: &Path,
    walks: &mut HashMap<String, DirWalk<'_>>,
    problems: &mut Vec<Discrepancy>,
) -> Result<(ByDir, Unplaced), Unreadable> {
    let mut by_dir = ByDir::new();
    // Each directory's last commit that was not a dry run, kept as text
    // (its buffers reused line after line) and parsed once at the end.
    let mut last: HashMap<String, (u64, String, String, String)> = HashMap::new();
    let mut failed = None;
    let unplaced = each_commit(audit, out, |dir, elsewhere, line, v| {
        let trail = by_dir.entry(dir.to_string()).or_insert(DirTrail {
            first_line: line,
            commits: 0,
            landed: 0,
            committed: 0,
            last: None,
            elsewhere: true,
        });
        trail.commits += 1;
        trail.elsewhere &= elsewhere;
        if !v.dry_run {
            trail.committed += 1;
            let (at, sha, cursor, lookback) = last.entry(dir.to_string()).or_default();
            *at = line;
            let keep = |kept: &mut String, raw: Option<&str>| {
                kept.clear();
                kept.push_str(raw.unwrap_or("null"));
            };
            keep(sha, Some(&v.payload_sha256));
            keep(cursor, v.cursor_after.map(RawValue::get));
            keep(
                lookback,
                v.cursor_state
                    .as_ref()
                    .and_then(|c| c.lookback)
                    .map(RawValue::get),
            );
        }
        let Some(file) = v.file() else {
            return;
        };
        trail.landed += 1;
        if failed.is_some() {
            return;
        }
        if let Some(walk) = walks.get_mut(dir) {
            if let Err(e) = walk.commit(line, v, file, problems) {
                failed = Some((walk.view.manifest_path(), e));
            }
        }
    })
    .map_err(|error| Unreadable {
        path: audit.to_path_buf(),
        error,
    })?;
    if let Some((path, error)) = failed {
        return Err(Unreadable { path, error });
    }
    for (dir, (line, sha256, cursor_after, lookback)) in last {
        if let Some(trail) = by_dir.get_mut(&dir) {
            let parse = |text: &str| serde_json::from_str(text).unwrap_or(Value::Null);
            trail.last = Some(Last {
                line,
                sha256,
                cursor_after: parse(&cursor_after),
                lookback: parse(&lookback),
            });
        }
    }
    Ok((by_dir, unplaced))
}

/// Judges the entries no commit met in order against every commit of the
/// trail (one more read of it, only when there are any).
pub(super) fn judge_leftovers(
    audit: &Path,
    out: &Path,
    leftovers: Vec<Leftover>,
    problems: &mut Vec<Discrepancy>,
) -> std::io::Result<()> {
    if leftovers.iter().all(|l| l.entries.is_empty()) {
        return Ok(());
    }
    let wanted: HashSet<(&str, &str, &str)> = leftovers
        .iter()
        .flat_map(|l| {
            l.entries
                .iter()
                .map(|e| (l.rel.as_str(), e.file.as_str(), e.sha256.as_str()))
        })
        .collect();
    let mut committed: HashMap<(String, String, String), (u64, u64, u64)> = HashMap::new();
    each_commit(audit, out, |dir, _, line, v| {
        let Some(file) = v.file() else {
            return;
        };
        let sha = v.payload_sha256.as_ref();
        if wanted.contains(&(dir, file, sha)) {
            committed
                .entry((dir.to_string(), file.to_string(), sha.to_string()))
                .or_insert((line, v.bytes, v.records));
        }
    })?;
    for leftover in leftovers {
        for entry in leftover.entries {
            let key = (leftover.rel.clone(), entry.file.clone(), entry.sha256.clone());
            let what = match committed.get(&key) {
                None => format!(
                    "line {} lists {} (sha256 {}) but no page_committed line in the audit trail records it",
                    entry.line, entry.file, entry.sha256
                ),
                Some(&(line, bytes, records)) if bytes != entry.bytes || records != entry.records => {
                    disagrees(&entry, line, bytes, records)
                }
                Some(_) => continue,
            };
            problems.push(Discrepancy {
                path: leftover.manifest.clone(),
                what,
            });
        }
    }
    Ok(())
}

/// The last commit of `rel` that was not a dry run and left `cursor` with
/// the page `sha256`, and how many such commits follow it: what a cursor
/// behind the trail reflects (one more read of the trail, only for a
/// cursor that is not the last commit's).
pub(super) fn reflected(
    audit: &Path,
    out: &Path,
    rel: &str,
    cursor: &Value,
    sha256: Option<&str>,
) -> std::io::Result<Option<(u64, usize)>> {
    let mut found: Option<(u64, usize)> = None;
    each_commit(audit, out, |dir, _, line, v| {
        if dir != rel || v.dry_run {
            return;
        }
        if Some(v.payload_sha256.as_ref()) == sha256 && v.cursor_after() == *cursor {
            found = Some((line, 0));
        } else if let Some((_, later)) = found.as_mut() {
            *later += 1;
        }
    })?;
    Ok(found)
}

fn pop<T>(waiting: &mut HashMap<String, VecDeque<T>>, file: &str) -> Option<T> {
    let queue = waiting.get_mut(file)?;
    let first = queue.pop_front();
    if queue.is_empty() {
        waiting.remove(file);
    }
    first
}

fn push<T: HasFile>(waiting: &mut HashMap<String, VecDeque<T>>, item: T) {
    waiting
        .entry(item.file().to_string())
        .or_default()
        .push_back(item);
}

trait HasFile {
    fn file(&self) -> &str;
}

impl HasFile for Entry {
    fn file(&self) -> &str {
        &self.file
    }
}

impl HasFile for Commit {
    fn file(&self) -> &str {
        &self.file
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::io::Write;

    use super::super::view::{LandingView, Manifest, Pages};
    use super::super::{Progress, Summary};
    use super::{judge_leftovers, walk, DirWalk};

    const DIR: &str = "bench/-/S1/-/default";

    /// Page `i`: its file, SHA-256 and manifest line.
    fn page(i: usize) -> (String, String) {
        let sha = crate::digest::sha256_hex(format!("page {i}").as_bytes());
        (format!("pages/{sha}.json"), sha)
    }

    fn entry(i: usize, page_key: &str) -> String {
        let (file, sha) = page(i);
        serde_json::json!({
            "stream": "default", "page_key": page_key, "cursor_before": {}, "cursor_after": {},
            "sha256": sha, "bytes": 10, "records": 1, "run_id": "r", "file": file, "landed_at": "t",
        })
        .to_string()
    }

    fn commit(i: usize) -> String {
        let (file, sha) = page(i);
        serde_json::json!({
            "event": "page_committed", "landing_dir": DIR, "landing_file": file, "payload_sha256": sha,
            "bytes": 10, "records": 1, "cursor_after": {"next_page": i},
        })
        .to_string()
    }

    /// Verify's problems for a manifest of `entries`, a trail of `commits`
    /// and the landed pages `files`, and the most that waited at once.
    fn judged(entries: &[String], commits: &[String], files: &[usize]) -> (Vec<String>, usize) {
        let dir = tempfile::tempdir().unwrap();
        let audit = dir.path().join("audit.jsonl");
        let mut trail = std::fs::File::create(&audit).unwrap();
        for line in commits {
            writeln!(trail, "{line}").unwrap();
        }
        let mut manifest = entries.join("\n").into_bytes();
        manifest.push(b'\n');
        // The pages as an object store's walk spools them.
        let spool = dir.path().join("pages.spool");
        let mut spooled = std::fs::File::create(&spool).unwrap();
        for &i in files {
            let (rel, sha256) = page(i);
            let name = serde_json::Value::from(rel.strip_prefix("pages/").unwrap());
            writeln!(spooled, "{sha256} {name}").unwrap();
        }
        let view = LandingView {
            path: dir.path().join(DIR),
            rel: DIR.into(),
            manifest: Manifest::Bytes(manifest),
            files: Pages::Hashed {
                spool,
                dir: dir.path().to_path_buf(),
            },
            owner: Ok(None),
        };
        let mut summary = Summary::default();
        let mut walks = HashMap::from([(DIR.to_string(), DirWalk::new(&view).unwrap())]);
        walk(&audit, dir.path(), &mut walks, &mut summary.discrepancies).unwrap();
        let walk = walks.remove(DIR).unwrap();
        let peak = walk.peak;
        let leftover = walk.finish(&Progress::default(), &mut summary).unwrap();
        judge_leftovers(&audit, dir.path(), vec![leftover], &mut summary.discrepancies).unwrap();
        (summary.discrepancies.into_iter().map(|d| d.what).collect(), peak)
    }

    fn all(n: usize) -> (Vec<String>, Vec<String>, Vec<usize>) {
        let entries = (0..n).map(|i| entry(i, &format!("/p?{i}"))).collect();
        let commits = (0..n).map(commit).collect();
        (entries, commits, (0..n).collect())
    }

    #[test]
    fn an_intact_landing_holds_nothing_while_it_is_walked() {
        let (entries, commits, files) = all(1000);
        assert_eq!(judged(&entries, &commits, &files), (vec![], 0));
    }

    #[test]
    fn a_removed_entry_is_named_and_the_walk_does_not_fall_behind() {
        let (mut entries, commits, files) = all(1000);
        entries.remove(10);
        let (problems, peak) = judged(&entries, &commits, &files);
        let (file, _) = page(10);
        assert_eq!(
            problems,
            [
                "landed but not listed in the manifest".to_string(),
                format!("does not list {file}, which page_committed at audit line 11 landed here"),
            ]
        );
        assert!(peak <= 2, "{peak} waited at once");
    }

    #[test]
    fn an_added_or_moved_entry_does_not_make_the_rest_wait() {
        let (mut entries, commits, mut files) = all(1000);
        let moved = entries.remove(3);
        entries.push(moved);
        entries.insert(500, entry(5000, "/forged"));
        files.push(5000);
        let (problems, peak) = judged(&entries, &commits, &files);
        let (file, sha) = page(5000);
        assert_eq!(
            problems,
            [format!(
                "line 501 lists {file} (sha256 {sha}) but no page_committed line in the audit trail records it"
            )]
        );
        // What waits is one item a damage, and one in passing.
        assert!(peak <= 3, "{peak} waited at once");
    }

    #[test]
    fn a_commit_that_landed_nothing_is_counted_and_not_matched() {
        let (entries, mut commits, files) = all(10);
        commits.push(
            serde_json::json!({
                "event": "page_committed", "landing_dir": DIR, "landing_file": null, "payload_sha256": "e3b0",
                "bytes": 0, "records": 0, "dry_run": null, "cursor_after": {"next_page": 10},
                "cursor_state": {"lookback": null},
            })
            .to_string(),
        );
        let dir = tempfile::tempdir().unwrap();
        let audit = dir.path().join("audit.jsonl");
        std::fs::write(&audit, commits.join("\n") + "\n").unwrap();
        let (by_dir, unplaced) = walk(&audit, dir.path(), &mut HashMap::new(), &mut Vec::new()).unwrap();
        assert_eq!(
            (unplaced.count, by_dir[DIR].commits, by_dir[DIR].landed),
            (0, 11, 10)
        );
        assert_eq!(
            by_dir[DIR].last.as_ref().unwrap().cursor_after,
            serde_json::json!({"next_page": 10})
        );
        assert_eq!(judged(&entries, &commits, &files), (vec![], 0));
    }

    #[test]
    fn a_page_listed_again_under_another_key_is_counted_twice() {
        let (mut entries, commits, files) = all(100);
        entries.push(entry(5, "/another-key"));
        let (problems, _) = judged(&entries, &commits, &files);
        let (file, _) = page(5);
        assert_eq!(
            problems,
            [format!(
                "line 101 lists the page /another-key ({file}) again, first at line 6 (as /p?5): 1 of its records \
                 would be counted twice"
            )]
        );
    }

    #[test]
    fn a_page_committed_twice_and_listed_once_is_no_discrepancy() {
        let (entries, mut commits, files) = all(100);
        commits.insert(8, commit(7));
        let (problems, peak) = judged(&entries, &commits, &files);
        assert!(problems.is_empty(), "{problems:?}");
        assert!(peak <= 2, "{peak} waited at once");
    }

    #[test]
    fn a_missing_file_and_an_entry_that_disagrees_with_its_commit_are_named() {
        let (mut entries, commits, mut files) = all(100);
        files.retain(|&i| i != 42);
        entries[7] = entries[7].replace("\"bytes\":10", "\"bytes\":11");
        let (problems, _) = judged(&entries, &commits, &files);
        let (file, _) = page(42);
        assert_eq!(
            problems,
            [
                "line 8 says 11 bytes and 1 records; audit line 8 says 10 bytes and 1 records".to_string(),
                format!("line 43 lists {file} but the file is missing"),
            ]
        );
    }
}

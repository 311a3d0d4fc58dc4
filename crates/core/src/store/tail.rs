//! Start-up, in a state directory: the manifest's tail proven against the
//! audit trail, and the last landed page found for the ledger's proof
//! (`crate::ledger`, which checks it is in place on every backend).
//!
//! A stream continues from its cursor, so what it finds at the cursor's
//! point must be what the trail says is there: the manifest line the
//! cursor recorded (`manifest_bytes`) must list the page of the stream's
//! last landed `page_committed` line at or before the cursor's receipt,
//! and that page's file must be in place with the SHA-256 the line
//! records. Otherwise a manifest deleted, truncated or copied from another
//! stream, or a landed page removed, would be continued as if whole, and
//! only a later `edc-sync verify` could tell. A difference stops the run
//! with 65 before any request, naming the file and both values.
//!
//! Only the tail is proven: one manifest line and one page, so the cost
//! does not grow with the stream's history (`verify` re-proves all of
//! it). A stream without a receipt (new, or its cursor file removed to
//! replay every page, the documented recovery) has nothing to continue
//! from and is not checked: its replay relists nothing and lands any
//! missing page again.
//!
//! `--repair-state` rebuilds a manifest that disagrees from the trail's
//! `page_committed` lines of the stream; a landed page cannot be rebuilt
//! from the trail (it holds the hash, not the bytes), so that stays a
//! refusal that says how to fetch the pages again.

use std::collections::HashSet;
use std::path::Path;

use super::{CursorStore, LandingStore, ManifestEntry, StoreError};
use crate::audit::commit::{commit_at, last_commit, CommitLine, CommitsOf};

/// What the start-up proof found beyond agreement.
#[derive(Debug, Default)]
pub(crate) struct Proven {
    /// The manifest disagreed and was rebuilt (`--repair-state`).
    pub rebuilt: Option<ManifestRebuilt>,
    /// The stream's last landed `page_committed` line names its landing
    /// directory absolutely (an older version's line): what it recorded,
    /// read relative to the landing root.
    pub absolute_landing_dir: Option<String>,
    /// The cursor's receipt names its trail by an absolute path (an older
    /// version's): what it recorded, and the offset of its line.
    pub absolute_receipt: Option<(String, u64)>,
    /// The page the stream's last landed `page_committed` line landed,
    /// and where that line is, for the ledger's check that it is in place.
    pub last_landed: Option<(ManifestEntry, String)>,
    /// Manifest lines after the cursor's point whose run this trail does
    /// not record, and that point: the landing is newer than the state and
    /// the trail (restored from an older backup). The ledger decides.
    pub unrecorded: Option<(u64, Vec<ManifestEntry>)>,
    /// Manifest lines after the cursor's point of runs this trail does
    /// record, and that point. Start-up has rolled the cursor forward over
    /// every commit the trail holds, so no `page_committed` line stands
    /// for them: a stopped run's line it never committed, or one put there
    /// by hand (a page listed again under another page key). A reader of
    /// the manifest would count their pages; the ledger removes them,
    /// naming each in the trail first.
    pub uncommitted: Option<(u64, Vec<PastLine>)>,
}

/// A manifest line past the cursor's point, as the trail names it before
/// it is removed: where it started, its SHA-256 and length (newline
/// included: what its object holds on a bucket), and what it listed.
#[derive(Debug)]
pub(crate) struct PastLine {
    pub at: u64,
    pub sha256: String,
    pub bytes: u64,
    pub entry: ManifestEntry,
}

/// A manifest that disagreed with the trail, rebuilt from it on request.
#[derive(Debug)]
pub(crate) struct ManifestRebuilt {
    /// Where the stream's last landed `page_committed` line starts.
    pub audit_offset: u64,
    /// What the manifest held at the cursor's point.
    pub file_said: String,
    /// The page that line landed.
    pub trail_says: String,
    /// Pages the rebuilt manifest lists.
    pub listed: u64,
}

/// Proves the manifest's tail and the last landed page of `stream` against
/// `trail`; with `repair`, rebuilds a manifest that disagrees.
pub(crate) fn prove(
    cursors: &CursorStore,
    landing: &mut LandingStore,
    trail: &Path,
    stream: &str,
    repair: bool,
) -> Result<Proven, StoreError> {
    let cursor = cursors.load()?;
    let Some(receipt) = cursor.receipt().cloned() else {
        return Ok(Proven::default());
    };
    let unproven = Proven {
        absolute_receipt: receipt
            .names_trail_absolutely()
            .then(|| (receipt.audit_log().to_string(), receipt.offset())),
        ..Proven::default()
    };
    if !receipt
        .is_in(trail)
        .map_err(|e| StoreError::io(trail, "read back", e))?
    {
        return Ok(unproven);
    }
    let dir = landing.recorded_dir().to_string();
    let upto = receipt.offset();
    let wanted = |l: &CommitLine| {
        l.receipt().offset() <= upto && l.is_commit_of(stream, &dir) && l.get("landed") == true
    };
    let last = last_commit(trail, &CommitsOf::new(stream, &dir), wanted)
        .map_err(|e| StoreError::io(trail, "read back", e))?;
    let Some((last, entry)) = last.and_then(|l| ManifestEntry::of_commit(l.line(), stream).map(|e| (l, e)))
    else {
        return Ok(unproven);
    };
    let absolute_landing_dir = last
        .names_landing_absolutely()
        .then(|| last.get("landing_dir").as_str().unwrap_or_default().to_string());
    let where_ = format!(
        "the stream's last landed page_committed line (byte {} of {})",
        last.receipt().offset(),
        trail.display()
    );
    let mut rebuilt = None;
    let mut unrecorded = None;
    let mut uncommitted = None;
    if let Some(recorded) = cursor.manifest_bytes() {
        let past = past_the_point(landing, recorded, trail)?;
        unrecorded = (!past.unrecorded.is_empty()).then_some((recorded, past.unrecorded));
        uncommitted = (!past.of_recorded_runs.is_empty()).then_some((recorded, past.of_recorded_runs));
        if let Some(said) = manifest_disagrees(landing, recorded, &entry)? {
            let trail_says = format!("{} (sha256 {}, run {})", entry.file, entry.sha256, entry.run_id);
            if !repair {
                return Err(StoreError::Corrupt {
                    path: landing.manifest_path(),
                    detail: format!(
                        "{said}, but {where_} landed {trail_says}; nothing was fetched. Run again with \
                         --repair-state to rebuild the manifest from the trail (recorded in a \
                         manifest_repaired line)"
                    ),
                });
            }
            let listed = rebuild(cursors, landing, trail, stream, &receipt)?;
            rebuilt = Some(ManifestRebuilt {
                audit_offset: last.receipt().offset(),
                file_said: said,
                trail_says,
                listed,
            });
        }
    }
    Ok(Proven {
        rebuilt,
        absolute_landing_dir,
        last_landed: Some((entry, where_)),
        unrecorded,
        uncommitted,
        ..unproven
    })
}

/// The manifest lines after the cursor's point, by whether the trail
/// records their run.
#[derive(Default)]
struct PastThePoint {
    unrecorded: Vec<ManifestEntry>,
    of_recorded_runs: Vec<PastLine>,
}

/// The manifest lines after byte `recorded` (where the cursor points),
/// split by their run. A run stopped between a page's manifest line and
/// its commit line leaves one such line of its own, and its `run_started`
/// is in the trail; a line of a run the trail never heard of was written
/// while the trail held lines it has lost. Each run is looked for from the
/// trail's end back (normally the last run).
fn past_the_point(landing: &LandingStore, recorded: u64, trail: &Path) -> Result<PastThePoint, StoreError> {
    use std::io::{Read, Seek};
    let path = landing.manifest_path();
    let mut file = match crate::no_follow::read(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PastThePoint::default()),
        Err(e) => return Err(StoreError::io(&path, "open", e)),
    };
    let read = |e| StoreError::io(&path, "read", e);
    if file.metadata().map_err(read)?.len() <= recorded {
        return Ok(PastThePoint::default());
    }
    let mut after = Vec::new();
    file.seek(std::io::SeekFrom::Start(recorded)).map_err(read)?;
    file.read_to_end(&mut after).map_err(read)?;
    let mut known = std::collections::HashMap::new();
    let mut found = PastThePoint::default();
    let mut at = recorded;
    for bytes in after.split_inclusive(|b| *b == b'\n') {
        let line_at = at;
        at += bytes.len() as u64;
        let Ok(entry) = serde_json::from_slice::<ManifestEntry>(bytes.trim_ascii_end()) else {
            continue;
        };
        let recorded_run = match known.get(&entry.run_id) {
            Some(&k) => k,
            None => {
                let k = crate::audit::read::holds_run(trail, &entry.run_id)
                    .map_err(|e| StoreError::io(trail, "read back", e))?;
                known.insert(entry.run_id.clone(), k);
                k
            }
        };
        if recorded_run {
            found.of_recorded_runs.push(PastLine {
                at: line_at,
                sha256: crate::digest::sha256_hex(bytes),
                bytes: bytes.len() as u64,
                entry,
            });
        } else {
            found.unrecorded.push(entry);
        }
    }
    Ok(found)
}

/// What the manifest holds at byte `recorded` when that is not the line
/// of `entry` (and `entry` is not listed after it either: a page landed
/// again after a crash, before its commit line, is listed there).
fn manifest_disagrees(
    landing: &LandingStore,
    recorded: u64,
    entry: &ManifestEntry,
) -> Result<Option<String>, StoreError> {
    use std::os::unix::fs::FileExt;
    let path = landing.manifest_path();
    let file = match crate::no_follow::read(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Some(format!(
                "it is missing where the cursor recorded {recorded} bytes"
            )))
        }
        Err(e) => return Err(StoreError::io(&path, "open", e)),
    };
    let read = |e| StoreError::io(&path, "read", e);
    let len = file.metadata().map_err(read)?.len();
    if recorded == 0 || len < recorded {
        return Ok(Some(format!(
            "it has {len} bytes where the cursor recorded {recorded}"
        )));
    }
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, recorded - 1).map_err(read)?;
    let line = match last[0] {
        b'\n' => match crate::durable::line_start(&file, recorded - 1, 1 << 20).map_err(read)? {
            Some(start) => {
                let mut bytes = vec![0u8; (recorded - 1 - start) as usize];
                file.read_exact_at(&mut bytes, start).map_err(read)?;
                serde_json::from_slice::<ManifestEntry>(&bytes).ok()
            }
            None => None,
        },
        _ => None,
    };
    // Not the run id: a page listed by a run killed before its commit line
    // is replayed by the next run, whose line commits the same listing.
    let same = |l: &ManifestEntry| {
        (&l.stream, &l.file, &l.sha256, l.bytes, l.records)
            == (
                &entry.stream,
                &entry.file,
                &entry.sha256,
                entry.bytes,
                entry.records,
            )
    };
    // Lines after the cursor's point are pages listed by a run that was
    // stopped before their commit line (normally none or one): each is a
    // page of this landing, whose file was landed before it was listed.
    let mut after = vec![0u8; (len - recorded) as usize];
    file.read_exact_at(&mut after, recorded).map_err(read)?;
    for (i, bytes) in after.split(|b| *b == b'\n').enumerate() {
        let Ok(listed) = serde_json::from_slice::<ManifestEntry>(bytes) else {
            continue;
        };
        if let Some(problem) = landing.landed_problem(&listed.file, listed.bytes)? {
            return Ok(Some(format!(
                "its line {} after byte {recorded} (where the cursor points) lists {}, which is {problem} in this \
                 landing",
                i + 1,
                listed.file
            )));
        }
    }
    Ok(match line {
        Some(l) if same(&l) => None,
        _ if landing.is_listed(&entry.page_key, &entry.sha256) => None,
        Some(l) => Some(format!(
            "its line ending at byte {recorded} (where the cursor points) lists {} (sha256 {}, run {})",
            l.file, l.sha256, l.run_id
        )),
        None => Some(format!(
            "byte {recorded} (where the cursor points) does not end a manifest entry"
        )),
    })
}

/// Writes the manifest the trail's landed commits of `stream` stand for,
/// in their order, each page once, and records its length in the cursor.
fn rebuild(
    cursors: &CursorStore,
    landing: &mut LandingStore,
    trail: &Path,
    stream: &str,
    receipt: &super::Receipt,
) -> Result<u64, StoreError> {
    let dir = landing.recorded_dir().to_string();
    let mut seen = HashSet::new();
    let mut entries = Vec::new();
    crate::audit::read::each_event(trail, "page_committed", |_, line| {
        if !crate::audit::commit::is_commit_of(&line, stream, &dir) || line["landed"] != true {
            return;
        }
        if let Some(entry) = ManifestEntry::of_commit(&line, stream) {
            if seen.insert((entry.page_key.clone(), entry.sha256.clone())) {
                entries.push(entry);
            }
        }
    })
    .map_err(|e| StoreError::io(trail, "read back", e))?;
    let bytes = landing.replace_manifest(&entries)?;
    let named = commit_at(trail, receipt.offset(), receipt.sha256())
        .map_err(|e| StoreError::io(trail, "read back", e))?
        .ok_or_else(|| StoreError::Unproven {
            path: cursors.path().to_path_buf(),
            detail: "the audit line the cursor names is not where it was".into(),
        })?;
    // The cursor agrees with the line it names: its memory is the line's.
    let memory = cursors.load()?.lookback_memory().cloned();
    cursors.roll_forward(&named, memory, bytes)?;
    Ok(entries.len() as u64)
}

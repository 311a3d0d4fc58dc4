//! `edc-sync verify --state postgres://…`: the same four ledgers, with the
//! manifests, the cursors and the trail read from the state database.
//!
//! The database's ledgers are laid out as the files a state directory and
//! a trail file would hold (the trail exactly as `audit export` writes it,
//! each cursor row as its cursor file, each stream's manifest rows as its
//! manifest) in a private temporary directory, and judged by the same
//! reconciliation as files; a discrepancy is then named by the row it
//! came from, never by the temporary file.

use std::path::{Path, PathBuf};

use super::{local_views, note_links, reconcile_views, Discrepancy, Scope, Summary, Unreadable};
use crate::state_db::{DbError, ExportError, StateDb};

/// The database or the landing could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DbUnreadable {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error(transparent)]
    Local(#[from] Unreadable),
    #[error(transparent)]
    Object(#[from] crate::store::object::ObjectError),
}

impl DbUnreadable {
    /// Its exit code: the database's, the export's, the object store's
    /// own, or 66 for a local path.
    pub fn exit(&self) -> crate::exit::Exit {
        match self {
            DbUnreadable::Db(e) => e.exit(),
            DbUnreadable::Export(e) => e.exit(),
            DbUnreadable::Local(u) if crate::no_follow::is_link_refusal(&u.error) => crate::exit::Exit::IoErr,
            DbUnreadable::Local(_) => crate::exit::Exit::NoInput,
            DbUnreadable::Object(o) => o.exit(),
        }
    }
}

/// Where the pages of a state database's streams landed.
#[derive(Clone, Copy)]
pub enum DbLanding<'a> {
    /// A landing directory (`--out DIR`).
    Dir(&'a Path),
    /// An object store (`--out s3://…`): every page object read back.
    Bucket(&'a crate::store::object::ObjectLanding),
}

/// Reconciles the landing with the manifests, cursors and trail `trail`
/// kept in `db`.
pub async fn reconcile_db(
    landing: DbLanding<'_>,
    db: &StateDb,
    trail: (&str, Option<&crate::audit::AuditKey>),
    scope: &Scope,
    progress: &super::Progress,
) -> Result<Summary, DbUnreadable> {
    let (trail, key) = trail;
    let scratch = tempfile::tempdir().map_err(|e| Unreadable {
        path: std::env::temp_dir(),
        error: e,
    })?;
    let write = |path: &Path, bytes: &[u8]| {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        crate::no_follow::write(path, bytes)
    };
    let local = |path: PathBuf| move |error| Unreadable { path, error };
    let trail_file = scratch.path().join("trail").join(trail);
    std::fs::create_dir_all(scratch.path().join("trail")).map_err(local(scratch.path().into()))?;
    // Every row is written even where its recorded byte offset does not add
    // up, so the chain's verifier names a line removed or moved by its line
    // and its damage; the offset is reported only when nothing else is.
    let (_, gap) = crate::state_db::export_for_verify(db, trail, &trail_file).await?;
    let state = scratch.path().join("state");
    write(&state.join(".state-id"), db.state_id().as_bytes()).map_err(local(state.clone()))?;
    for (key, cursor, memory) in crate::state_db::all_cursors(db).await? {
        let file = state.join(format!("{key}.cursor.json"));
        write(&file, cursor.as_bytes()).map_err(local(file.clone()))?;
        // Its lookback memory's rows, as the journal beside a cursor file.
        if !memory.is_empty() {
            let journal = crate::store::journal_of(&file);
            let lines: String = memory.iter().map(|l| format!("{l}\n")).collect();
            write(&journal, lines.as_bytes()).map_err(local(journal.clone()))?;
        }
    }
    // Each stream's manifest rows, written out as its manifest file would
    // be: verify reads them line by line, never whole.
    let manifests = scratch.path().join("manifests");
    let mut written: std::collections::BTreeMap<String, PathBuf> = Default::default();
    let mut open: Option<(String, std::io::BufWriter<std::fs::File>)> = None;
    crate::state_db::each_manifest_line(db, &mut |stream, line| {
        use std::io::Write;
        let (_, file) = match open.take() {
            Some((key, file)) if key == stream => open.insert((key, file)),
            previous => {
                if let Some((_, mut file)) = previous {
                    file.flush()?;
                }
                let path = manifests.join(format!("{}.jsonl", written.len()));
                std::fs::create_dir_all(&manifests)?;
                let file = std::io::BufWriter::new(crate::no_follow::create(&path)?);
                written.insert(stream.to_string(), path);
                open.insert((stream.to_string(), file))
            }
        };
        file.write_all(line.as_bytes())?;
        file.write_all(b"\n")
    })
    .await?;
    if let Some((_, mut file)) = open.take() {
        std::io::Write::flush(&mut file).map_err(local(manifests.clone()))?;
    }
    let (out, mut views, links) = match landing {
        DbLanding::Dir(out) => local_views(out, progress)?,
        DbLanding::Bucket(bucket) => {
            let spool = scratch.path().join("bucket");
            std::fs::create_dir_all(&spool).map_err(local(spool.clone()))?;
            let (root, views) = super::view::LandingView::of_bucket(bucket, progress, &spool)
                .await
                .map_err(|e| match e {
                    super::ObjectUnreadable::Object(e) => DbUnreadable::Object(e),
                    super::ObjectUnreadable::Local(e) => DbUnreadable::Local(e),
                })?;
            (root, views, Vec::new())
        }
    };
    for view in &mut views {
        view.manifest = match written.remove(&view.rel) {
            Some(path) => super::view::Manifest::File(path),
            None => super::view::Manifest::Bytes(Vec::new()),
        };
    }
    let mut summary = reconcile_views(
        &out,
        &views,
        (&state, crate::store::owner::StateKind::Database),
        super::Proving {
            trail: &trail_file,
            key,
        },
        scope,
        progress,
    )?;
    note_links(&mut summary, links);
    heads_against_the_trail(landing, &out, &views, &trail_file, &mut summary).await?;
    if let Some(gap) = gap.filter(|_| !summary.discrepancies.iter().any(|d| d.path == trail_file)) {
        summary.discrepancies.push(Discrepancy {
            path: trail_file.clone(),
            what: gap,
        });
    }
    let shown = db.url().shown().to_string();
    let name = |d: &mut Discrepancy| {
        if let Ok(rel) = d.path.strip_prefix(&state) {
            let rel = rel.to_string_lossy();
            d.path = match rel.strip_suffix(".memory.jsonl") {
                Some(key) => format!("{shown} edc_sync_memory rows of {key:?}").into(),
                None => {
                    let key = rel.trim_end_matches(".cursor.json");
                    format!("{shown} edc_sync_cursor row {key:?}").into()
                }
            };
        } else if d.path == trail_file {
            d.path = format!("{shown} trail {trail:?}").into();
        } else if d.path.file_name().is_some_and(|n| n == "manifest.jsonl") {
            let rel = d.path.parent().and_then(|p| p.strip_prefix(&out).ok());
            let key = rel.map(|r| r.to_string_lossy().into_owned()).unwrap_or_default();
            d.path = format!("{shown} edc_sync_manifest rows of {key:?}").into();
        }
    };
    summary.discrepancies.iter_mut().for_each(name);
    summary.behind.iter_mut().for_each(name);
    Ok(summary)
}

/// Each landing's head (`ledger-head.json`) against the last head the
/// database recorded publishing for it (`landing_head_published`): one
/// missing, or naming an earlier commit, is a discrepancy naming the head,
/// as a start refuses it.
async fn heads_against_the_trail(
    landing: DbLanding<'_>,
    out: &Path,
    views: &[super::view::LandingView],
    trail_file: &Path,
    summary: &mut Summary,
) -> Result<(), DbUnreadable> {
    use crate::ledger::LANDING_HEAD_FILE as HEAD;
    let mut published: std::collections::HashMap<String, (u64, i64)> = Default::default();
    crate::audit::each_event(trail_file, "landing_head_published", |n, line| {
        if let (Some(at), Some(head)) = (line["landing"].as_str(), line["line"].as_i64()) {
            published.insert(at.to_string(), (n, head));
        }
    })
    .map_err(|error| Unreadable {
        path: trail_file.to_path_buf(),
        error,
    })?;
    for view in views {
        let name = format!("{}/{HEAD}", view.rel);
        let Some((n, line)) = published.get(&name).copied() else {
            continue;
        };
        let (path, text): (PathBuf, Option<Vec<u8>>) = match landing {
            DbLanding::Dir(_) => {
                let path = out.join(&name);
                match crate::no_follow::read(&path) {
                    Ok(mut f) => {
                        let mut text = Vec::new();
                        std::io::Read::read_to_end(&mut f, &mut text).map_err(|error| Unreadable {
                            path: path.clone(),
                            error,
                        })?;
                        (path, Some(text))
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => (path, None),
                    Err(error) => return Err(Unreadable { path, error }.into()),
                }
            }
            DbLanding::Bucket(bucket) => (
                Path::new(bucket.url()).join(&name),
                bucket.read(&name).await?.map(|b| b.to_vec()),
            ),
        };
        let named = text
            .as_deref()
            .and_then(|t| serde_json::from_slice::<serde_json::Value>(t).ok())
            .and_then(|v| v["line"].as_i64());
        let what = match (text.is_some(), named) {
            (false, _) => format!(
                "missing, while the database recorded publishing it naming line {line} at audit line {n}: the \
                 head was deleted"
            ),
            (true, Some(at)) if at < line => format!(
                "names line {at}, older than line {line}, which the database recorded publishing at audit line \
                 {n}: the head was put back from an older copy"
            ),
            _ => continue,
        };
        summary.discrepancies.push(Discrepancy { path, what });
    }
    Ok(())
}

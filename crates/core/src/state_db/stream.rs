//! One stream's state in the database: its run lock with a fencing token,
//! its cursor, and the proof at start that the cursor and the manifest are
//! what the trail says.
//!
//! The run lock is a session advisory lock on the run's connection: held
//! for as long as the connection lives, released by the server when the
//! process dies (its connection with it), so a killed run never leaves a
//! stream locked and needs no TTL. Taking it bumps the stream's fence in
//! `edc_sync_run_lock`; every page commit checks, inside its transaction,
//! that the fence is still this run's, so a run whose lock passed to
//! another (its connection lost and the lock taken) can never move the
//! cursor.

use serde_json::Value;

use super::StateDb;
use crate::audit::commit::COMMIT_EVENT;
use crate::db_error::DbError;
use crate::store::{Cursor, LandingStore, LockError, StoreError, StreamLocked};
use crate::stream::StreamIdentity;

/// The cursor of `identity` in `db`, read without its lock (`cursor
/// show`); `None` for a stream never synced.
pub async fn cursor_of(db: &StateDb, identity: &StreamIdentity) -> Result<Option<Cursor>, StoreError> {
    let key = crate::store::stream_dir_name(identity);
    let client = db.client().await;
    let Some(text) = cursor_row(&client, db, &key).await? else {
        return Ok(None);
    };
    let memory = memory_rows(&client, db, &key).await?;
    Cursor::from_row(Some(&text), &memory, identity, None)
        .map(Some)
        .map_err(|detail| damaged(db, format!("edc_sync_cursor row {key:?}: {detail}")))
}

/// Stream `key`'s lookback memory rows (`memory.rs`), in order.
async fn memory_rows(
    client: &tokio_postgres::Client,
    db: &StateDb,
    key: &str,
) -> Result<Vec<String>, StoreError> {
    super::memory::read(client, key)
        .await
        .map_err(|e| StoreError::Db(super::error::classify(db.url(), "read the lookback memory in", e)))
}

/// The text of stream `key`'s cursor row, if it has one.
async fn cursor_row(
    client: &tokio_postgres::Client,
    db: &StateDb,
    key: &str,
) -> Result<Option<String>, StoreError> {
    client
        .query_opt("SELECT state FROM edc_sync_cursor WHERE stream = $1", &[&key])
        .await
        .map(|row| row.map(|r| r.get(0)))
        .map_err(|e| StoreError::Db(super::error::classify(db.url(), "read the cursor in", e)))
}

/// What a state database holds that disagrees with its trail (65).
fn damaged(db: &StateDb, detail: String) -> StoreError {
    StoreError::Db(DbError::Damaged {
        url: db.url().shown().to_string(),
        detail,
    })
}

/// Every stream's cursor row (key, the cursor's JSON) and its lookback
/// memory rows, for `verify`.
pub(crate) async fn all_cursors(db: &StateDb) -> Result<Vec<(String, String, Vec<String>)>, DbError> {
    let client = db.client().await;
    let rows = client
        .query("SELECT stream, state FROM edc_sync_cursor ORDER BY stream", &[])
        .await
        .map_err(|e| super::error::classify(db.url(), "read the cursors in", e))?;
    let mut all = Vec::with_capacity(rows.len());
    for row in rows {
        let key: String = row.get(0);
        let memory = super::memory::read(&*client, &key)
            .await
            .map_err(|e| super::error::classify(db.url(), "read the lookback memory in", e))?;
        all.push((key, row.get(1), memory));
    }
    Ok(all)
}

/// Calls `each` with every stream's manifest rows (stream key, line), in
/// stream and line order, for `verify`: read a thousand rows at a time,
/// so no manifest is ever held whole.
pub(crate) async fn each_manifest_line(
    db: &StateDb,
    each: &mut dyn FnMut(&str, &str) -> std::io::Result<()>,
) -> Result<(), DbError> {
    const BATCH: i64 = 1000;
    let url = db.url();
    let (mut stream, mut n) = (String::new(), 0i64);
    loop {
        let rows = {
            let client = db.client().await;
            client
                .query(
                    "SELECT stream, n, line FROM edc_sync_manifest WHERE (stream, n) > ($1, $2) \
                     ORDER BY stream, n LIMIT $3",
                    &[&stream, &n, &BATCH],
                )
                .await
                .map_err(|e| super::error::classify(url, "read the manifests in", e))?
        };
        let got = rows.len() as i64;
        for r in rows {
            stream = r.get(0);
            n = r.get(1);
            each(&stream, r.get(2)).map_err(|e| DbError::Write {
                url: url.shown().to_string(),
                op: "hand on a manifest row read from",
                detail: e.to_string(),
            })?;
        }
        if got < BATCH {
            return Ok(());
        }
    }
}

/// A stream held by this run in the state database.
#[derive(Debug)]
pub(crate) struct DbStream {
    db: StateDb,
    key: String,
    identity: StreamIdentity,
    fence: i64,
    /// The holder the lock had before this run took it, if any.
    previous: Option<String>,
    trail: String,
    initial_start: Option<String>,
    /// Its lookback memory's rows as this run knows them.
    memory: super::memory::MemoryRows,
    /// The cursor as the start-up proof read it or this run's last commit
    /// wrote it (`store/cursor/known.rs`).
    known: crate::store::KnownCursor,
}

/// What the database holds of a stream at start, for the ledger's
/// start-up proof to judge (`ledger/proof.rs`, the same rules as a state
/// directory's). The cursor row is read again by the page loop under the
/// same held lock.
#[derive(Debug)]
pub(crate) struct StreamFacts {
    /// The cursor row: its state (the file's JSON), the trail it was
    /// committed with, and the line number of its commit there.
    pub row: Option<(String, String, i64)>,
    /// The stream's lookback memory rows (`memory.rs`).
    pub memory: Vec<String>,
    /// The trail's last `page_committed` line of the stream: its number,
    /// byte offset, SHA-256 and text.
    pub last_commit: Option<(i64, i64, String, String)>,
    /// How many pages the manifest lists, the commit line its last row
    /// was committed with, and that row's entry.
    pub pages_listed: i64,
    pub listed_at: Option<i64>,
    pub last_listed: Option<String>,
    /// The trail's last commit of the stream that landed a page (not a
    /// replay): the line the manifest's last row must come from.
    pub last_landed_commit: Option<i64>,
}

impl DbStream {
    /// Takes `identity`'s run lock for the run appending to `trail`, or
    /// says who holds it (75). `namespace` keeps a backfill's cursor and
    /// manifest apart from the incremental ones.
    pub(crate) async fn lock(
        db: &StateDb,
        identity: &StreamIdentity,
        namespace: Option<&str>,
        holder: &str,
        trail: &str,
    ) -> Result<DbStream, LockError> {
        let key = match namespace {
            Some(ns) => format!("{ns}/{}", crate::store::stream_dir_name(identity)),
            None => crate::store::stream_dir_name(identity),
        };
        let url = db.url();
        let fail = |op| move |e| LockError::Store(StoreError::Db(super::error::classify(url, op, e)));
        let client = db.client().await;
        let got: bool = client
            .query_one(
                "SELECT pg_try_advisory_lock(hashtextextended('edc-sync:stream:' || $1, 0))",
                &[&key],
            )
            .await
            .map_err(fail("take the run lock in"))?
            .get(0);
        let previous: Option<String> = client
            .query_opt("SELECT holder FROM edc_sync_run_lock WHERE stream = $1", &[&key])
            .await
            .map_err(fail("read the run lock in"))?
            .map(|r| r.get(0));
        if !got {
            return Err(LockError::Locked(StreamLocked {
                stream: key,
                holder: previous.unwrap_or_else(|| "holder unknown".into()),
            }));
        }
        let fence: i64 = client
            .query_one(
                "INSERT INTO edc_sync_run_lock (stream, fence, holder) VALUES ($1, 1, $2) \
                 ON CONFLICT (stream) DO UPDATE SET fence = edc_sync_run_lock.fence + 1, \
                 holder = EXCLUDED.holder, taken_at = now() RETURNING fence",
                &[&key, &holder],
            )
            .await
            .map_err(fail("record the run lock in"))?
            .get(0);
        drop(client);
        Ok(DbStream {
            db: db.clone(),
            key,
            identity: identity.clone(),
            fence,
            previous,
            trail: trail.to_string(),
            initial_start: None,
            memory: Default::default(),
            known: Default::default(),
        })
    }

    /// A stream never synced starts at `start` (`backfill --since`).
    pub(crate) fn starting_at(mut self, start: Option<String>) -> DbStream {
        self.initial_start = start;
        self
    }

    /// The stream's key in the database: its landing directory's name,
    /// under the run's namespace (a backfill's) if any.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    pub(crate) fn identity(&self) -> &StreamIdentity {
        &self.identity
    }

    /// The database, as messages name it (no credentials).
    pub(crate) fn shown_db(&self) -> &str {
        self.db.url().shown()
    }

    /// This run's fencing token.
    pub(crate) fn fence(&self) -> i64 {
        self.fence
    }

    /// Who held the lock before (a finished or killed run).
    pub(crate) fn previous_holder(&self) -> Option<&str> {
        self.previous.as_deref()
    }

    /// The stream's landing store under `out_dir`, reachable through this
    /// held lock: only its pages are written there. Its directory is the
    /// key (under a backfill's namespace), so the trail, the manifest rows
    /// and the directory name the same place below one landing root.
    pub(crate) fn open_landing(
        &self,
        out_dir: &std::path::Path,
        ext: &'static str,
    ) -> Result<LandingStore, StoreError> {
        LandingStore::open_below(out_dir, &self.key, ext)
    }

    /// Where the cursor is kept, as audit lines and messages name it.
    pub(crate) fn recorded_cursor(&self) -> String {
        format!("edc_sync_cursor row {:?}", self.key)
    }

    /// The cursor now (the initial one for a stream never synced).
    pub(crate) async fn load(&self) -> Result<Cursor, StoreError> {
        if let Some(cursor) = self.known.get() {
            return Ok(cursor);
        }
        let client = self.db.client().await;
        let text = cursor_row(&client, &self.db, &self.key).await?;
        let memory = memory_rows(&client, &self.db, &self.key).await?;
        let cursor = Cursor::from_row(
            text.as_deref(),
            &memory,
            &self.identity,
            self.initial_start.clone(),
        )
        .map_err(|detail| self.damaged(format!("{}: {detail}", self.recorded_cursor())))?;
        self.proven(&cursor, &memory);
        Ok(cursor)
    }

    /// `cursor`, read from the cursor row and the memory rows `memory`
    /// under the held lock and proven, is the stream's until this run
    /// commits.
    pub(crate) fn proven(&self, cursor: &Cursor, memory: &[String]) {
        self.memory.read(memory, cursor);
        self.known.set(cursor);
    }

    /// This run's commit made `cursor` the stream's.
    pub(crate) fn committed(&self, cursor: &Cursor) {
        self.known.set(cursor);
    }

    /// What committing `cursor` (after `change` to the memory) writes to
    /// the stream's lookback memory rows.
    pub(crate) fn memory_write(
        &self,
        cursor: &Cursor,
        change: Option<&crate::store::MemoryChange>,
    ) -> Result<Option<super::memory::MemoryWrite>, StoreError> {
        self.memory
            .write_for(cursor, change)
            .map_err(|detail| self.damaged(format!("{}: {detail}", self.recorded_cursor())))
    }

    /// A commit did not go through: the cursor and the memory rows are
    /// read again before they are added to.
    pub(crate) fn memory_unknown(&self) {
        self.known.forget();
        self.memory.forget();
    }

    /// Whether the manifest lists the page `page_key` with these bytes
    /// (a replay of a page already landed).
    pub(crate) async fn is_listed(&self, page_key: &str, sha256: &str) -> Result<bool, StoreError> {
        let client = self.db.client().await;
        client
            .query_opt(&self.db.statements().is_listed, &[&self.key, &page_key, &sha256])
            .await
            .map(|r| r.is_some())
            .map_err(|e| self.db_error("read the manifest in", e))
    }

    /// What the database holds of the stream and what its trail says of
    /// it, read under the held lock, before a page is fetched.
    pub(crate) async fn facts(&self) -> Result<StreamFacts, StoreError> {
        let client = self.db.client().await;
        let fail = |op| move |e| self.db_error(op, e);
        let row = client
            .query_opt(
                "SELECT state, trail, audit_n FROM edc_sync_cursor WHERE stream = $1",
                &[&self.key],
            )
            .await
            .map_err(fail("read the cursor in"))?
            .map(|r| (r.get(0), r.get(1), r.get(2)));
        let memory = memory_rows(&client, &self.db, &self.key).await?;
        let last_commit = self
            .last_commit(&client)
            .await?
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)));
        let manifest = client
            .query_one(
                "SELECT count(*), max(audit_n), (SELECT line FROM edc_sync_manifest WHERE stream = $1 \
                 ORDER BY n DESC LIMIT 1) FROM edc_sync_manifest WHERE stream = $1",
                &[&self.key],
            )
            .await
            .map_err(fail("read the manifest in"))?;
        let last_landed_commit: Option<i64> = client
            .query_opt(
                "SELECT n FROM edc_sync_audit_line WHERE trail = $1 AND stream = $2 AND event = $3 \
                 AND (line::json ->> 'landed') = 'true' AND (line::json ->> 'replayed') = 'false' \
                 ORDER BY n DESC LIMIT 1",
                &[&self.trail, &self.key, &COMMIT_EVENT],
            )
            .await
            .map_err(fail("read the trail in"))?
            .map(|r| r.get(0));
        Ok(StreamFacts {
            row,
            memory,
            last_commit,
            pages_listed: manifest.get(0),
            listed_at: manifest.get(1),
            last_listed: manifest.get(2),
            last_landed_commit,
        })
    }

    /// The trail this run appends to, by its name.
    pub(crate) fn trail_name(&self) -> &str {
        &self.trail
    }

    /// A refusal of what the database holds (65), naming the database.
    pub(crate) fn refused(&self, detail: String) -> StoreError {
        self.damaged(detail)
    }

    /// `--repair-state`: the cursor row made the state the trail's last
    /// commit of the stream records (with that line as its receipt).
    /// Returns the line's byte offset and what the row said before (`None`:
    /// there is no commit to take, and nothing was changed). The manifest
    /// is never repaired: its rows are evidence, append-only.
    pub(crate) async fn repair_cursor(&self) -> Result<Option<(u64, Value)>, StoreError> {
        self.known.forget();
        let mut client = self.db.client().await;
        let Some(line) = self.last_commit(&client).await? else {
            return Ok(None);
        };
        let (n, offset, sha256, text): (i64, i64, String, String) =
            (line.get(0), line.get(1), line.get(2), line.get(3));
        let said = cursor_row(&client, &self.db, &self.key).await?;
        let line: Value = serde_json::from_str(&text).unwrap_or_default();
        // The line holds the lookback memory by its seal: the memory is
        // replayed from the stream's commits up to it.
        let mut replay = crate::store::Replay::default();
        for row in client
            .query(
                "SELECT n, line FROM edc_sync_audit_line \
                 WHERE trail = $1 AND stream = $2 AND event = $3 AND n <= $4 ORDER BY n",
                &[&self.trail, &self.key, &COMMIT_EVENT, &n],
            )
            .await
            .map_err(|e| self.db_error("read the trail in", e))?
        {
            let (at, text): (i64, String) = (row.get(0), row.get(1));
            if let Some(line) = self.whole(&client, at, &text).await? {
                replay.line(&line);
            }
        }
        let receipt = crate::audit::CommitReceipt::in_db(self.trail.clone().into(), offset as u64, sha256);
        let cursor = Cursor::from_line(&line, replay.memory(), &self.identity)
            .map_err(|d| self.damaged(format!("line {n} of trail {}: its cursor_state: {d}", self.trail)))?
            .with_receipt(&receipt);
        // The page commit's own statements: the row as a commit writes it,
        // its memory rows written anew, in one transaction.
        self.memory.forget();
        let memory = self.memory_write(&cursor, None)?;
        let repaired = async {
            let tx = client.transaction().await?;
            if let Some(write) = &memory {
                super::memory::write(&tx, &self.key, write).await?;
            }
            tx.execute(
                &self.db.statements().upsert_cursor,
                &[&self.key, &cursor.to_row(), &self.trail, &n],
            )
            .await?;
            tx.commit().await
        }
        .await;
        if let Err(e) = repaired {
            self.memory.forget();
            return Err(self.db_error("repair the cursor in", e));
        }
        let said = said
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .map(|mut v| {
                if let Some(o) = v.as_object_mut() {
                    o.remove("receipt");
                }
                v
            })
            .unwrap_or(Value::Null);
        Ok(Some((offset as u64, said)))
    }

    /// Releases the run lock (the end of the stream's run; a killed
    /// process releases it with its connection).
    pub(crate) async fn unlock(&self) {
        let client = self.db.client().await;
        let _ = client
            .execute(
                "SELECT pg_advisory_unlock(hashtextextended('edc-sync:stream:' || $1, 0))",
                &[&self.key],
            )
            .await;
    }

    /// The line number and SHA-256 of the stream's last commit in the
    /// trail, if it has one.
    pub(crate) async fn last_commit_line(&self) -> Result<Option<(i64, String)>, StoreError> {
        let client = self.db.client().await;
        Ok(self
            .last_commit(&client)
            .await?
            .map(|row| (row.get(0), row.get(2))))
    }

    /// The last landing head the database recorded publishing for the
    /// landing whose head is `head_file` (its recorded path): the audit
    /// line's number, and the commit line and SHA-256 the head named.
    pub(crate) async fn last_published_head(
        &self,
        head_file: &str,
    ) -> Result<Option<(i64, i64, String)>, StoreError> {
        let needle = format!("\"landing\":{}", Value::from(head_file));
        let client = self.db.client().await;
        let row = client
            .query_opt(
                "SELECT n, line FROM edc_sync_audit_line WHERE trail = $1 AND event = 'landing_head_published' \
                 AND strpos(line, $2) > 0 ORDER BY n DESC LIMIT 1",
                &[&self.trail, &needle],
            )
            .await
            .map_err(|e| self.db_error("read the trail in", e))?;
        Ok(row.and_then(|row| {
            let (n, text): (i64, String) = (row.get(0), row.get(1));
            let line: Value = serde_json::from_str(&text).ok()?;
            Some((n, line["line"].as_i64()?, line["sha256"].as_str()?.to_string()))
        }))
    }

    /// The SHA-256 of line `n` of the trail when it is a commit of this
    /// stream; `None` when the trail holds no such line.
    pub(crate) async fn commit_sha256_at(&self, n: i64) -> Result<Option<String>, StoreError> {
        let client = self.db.client().await;
        let row = client
            .query_opt(
                "SELECT sha256 FROM edc_sync_audit_line WHERE trail = $1 AND n = $2 AND stream = $3 AND event = $4",
                &[&self.trail, &n, &self.key, &COMMIT_EVENT],
            )
            .await
            .map_err(|e| self.db_error("read the trail in", e))?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Commit line `n` of the trail, `text`, whole: the fields it spilled
    /// joined back from the part rows right before it (`audit/spill.rs`);
    /// `None` when they do not join (the chain's verifier names it), as
    /// for a line that is not JSON.
    async fn whole(
        &self,
        client: &tokio_postgres::Client,
        n: i64,
        text: &str,
    ) -> Result<Option<Value>, StoreError> {
        let Ok(mut line) = serde_json::from_str::<Value>(text) else {
            return Ok(None);
        };
        let Ok(count) = crate::audit::spill::parts_before(&line) else {
            return Ok(None);
        };
        if count == 0 {
            return Ok(Some(line));
        }
        let parts: Vec<Value> = client
            .query(
                "SELECT line FROM edc_sync_audit_line WHERE trail = $1 AND n >= $2 AND n < $3 ORDER BY n",
                &[&self.trail, &(n - count as i64), &n],
            )
            .await
            .map_err(|e| self.db_error("read the trail in", e))?
            .iter()
            .map(|row| serde_json::from_str(row.get::<_, &str>(0)).unwrap_or_default())
            .collect();
        Ok(crate::audit::spill::join(&mut line, &parts)
            .is_ok()
            .then_some(line))
    }

    fn db_error(&self, op: &'static str, e: tokio_postgres::Error) -> StoreError {
        StoreError::Db(super::error::classify(self.db.url(), op, e))
    }

    fn damaged(&self, detail: String) -> StoreError {
        damaged(&self.db, detail)
    }

    /// The trail's last `page_committed` line of this stream: its number,
    /// byte offset, SHA-256 and text.
    async fn last_commit(
        &self,
        client: &tokio_postgres::Client,
    ) -> Result<Option<tokio_postgres::Row>, StoreError> {
        client
            .query_opt(
                "SELECT n, byte_offset, sha256, line FROM edc_sync_audit_line \
                 WHERE trail = $1 AND stream = $2 AND event = $3 ORDER BY n DESC LIMIT 1",
                &[&self.trail, &self.key, &COMMIT_EVENT],
            )
            .await
            .map_err(|e| self.db_error("read the trail in", e))
    }
}

//! The audit trail as rows: one row a line, the same bytes and chain as
//! the file (docs/audit-trail.md). Each row keeps the byte offset the line
//! has in the exported file, so a receipt (`offset`, `sha256`) means the
//! same in the database and in `audit export`'s file, and the exported
//! file verifies with the same `audit verify`.
//!
//! An append is one transaction under a transaction-scoped advisory lock
//! on the trail: read the last row, compose the next line chained to it,
//! insert it. A page commit adds, in the same transaction, the fence
//! check, the manifest row and the new cursor ([`DbTrail::commit_page`]).
//!
//! One concept: the database's trail writer (lock, chain to the last row,
//! seal, append, and the proofs a run makes of the rows before it adds
//! one), as `audit/log.rs` is the file's.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::{Map, Value};

use super::StateDb;
use crate::audit::{Appended, AuditError, AuditEvent, AuditKey, CommitReceipt, RunId};
use crate::db_error::DbError;
use crate::digest::{sha256_hex, ZERO_SHA256};
use crate::store::Cursor;

/// How many times a transaction that hit a serialization failure or a
/// deadlock is run again before the run stops (75).
const ATTEMPTS: u32 = 5;

/// The rows a page commit adds beside its `page_committed` line.
pub(crate) struct PageRows {
    /// The stream's key ([`crate::store::stream_dir_name`]).
    pub stream: String,
    /// The run's fencing token: the commit happens only while it is the
    /// stream's current one.
    pub fence: i64,
    /// The manifest entry, for a page that landed and was not listed
    /// before.
    pub manifest: Option<crate::store::ListedLine>,
    /// What the page changes in the stream's lookback memory rows
    /// (`memory.rs`).
    pub memory: Option<super::memory::MemoryWrite>,
}

/// A page commit's rows, and how to make its cursor from the receipt of
/// its line.
type PageCommit<'a> = (
    &'a PageRows,
    &'a (dyn Fn(&CommitReceipt) -> Result<Cursor, String> + Sync),
);

/// One line of a trail as stored.
#[derive(Debug, Clone)]
pub(crate) struct TrailLine {
    pub n: i64,
    pub byte_offset: i64,
    pub line: String,
    pub sha256: String,
}

/// The audit trail of one run, in the state database.
pub(crate) struct DbTrail {
    db: StateDb,
    name: String,
    run_id: RunId,
    next_seq: AtomicU64,
    masker: Option<crate::mask::Masker>,
    key: Option<AuditKey>,
    /// `--adopt-unsealed-trail`: a trail with no sealed line is taken
    /// under the key ([`AuditError::NeverSealed`] otherwise).
    adopt: bool,
    /// What the append function asks of each line when the database
    /// requires the audit key ([`super::gate`]).
    gate: Option<super::gate::GateKey>,
}

impl std::fmt::Debug for DbTrail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DbTrail({} in {})", self.name, self.db.url())
    }
}

impl DbTrail {
    /// The trail `name` of `db`, for the run `run_id`.
    pub(crate) fn new(db: StateDb, name: String, run_id: RunId) -> DbTrail {
        DbTrail {
            db,
            name,
            run_id,
            next_seq: AtomicU64::new(1),
            masker: None,
            key: None,
            adopt: false,
            gate: None,
        }
    }

    /// `--adopt-unsealed-trail`: take a trail no line of which is sealed.
    pub(crate) fn with_adopt_unsealed(mut self, adopt: bool) -> Self {
        self.adopt = adopt;
        self
    }

    /// Masks identifiers in every line (before it is hashed).
    pub(crate) fn with_masker(mut self, masker: Option<crate::mask::Masker>) -> Self {
        self.masker = masker;
        self
    }

    /// Seals every line and signs every checkpoint with `key`, and passes
    /// the database's append gate with it.
    pub(crate) fn with_key(mut self, key: Option<AuditKey>) -> Self {
        self.gate = key.as_ref().map(super::gate::GateKey::of);
        self.key = key;
        self
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// `value` as a line of this trail would record it.
    pub(crate) fn as_recorded(&self, mut value: Value) -> Value {
        if let Some(m) = &self.masker {
            m.json(&mut value);
        }
        value
    }

    /// Appends `event` once its transaction committed.
    pub(crate) async fn record<E: AuditEvent>(&self, event: &E) -> Result<Appended, AuditError> {
        let fields = self.fields(E::NAME, event)?;
        self.append(E::NAME, fields, E::CHECKPOINT, None, None)
            .await
            .map(|(a, _)| a)
    }

    /// A dry run's `page_committed` line: recorded, and the commit of no
    /// stream (its `stream` column stays empty, the cursor unmoved).
    pub(crate) async fn record_dry_commit<C: crate::audit::CommitRecord>(
        &self,
        record: &C,
    ) -> Result<Appended, AuditError> {
        let fields = self.fields(crate::audit::commit::COMMIT_EVENT, record)?;
        self.append(crate::audit::commit::COMMIT_EVENT, fields, false, None, None)
            .await
            .map(|(a, _)| a)
    }

    /// Appends a page's `page_committed` line, its manifest row and its
    /// cursor in one transaction, with the run's fence checked inside it.
    /// `cursor` makes the new cursor from the line's receipt (the proof
    /// it asks for); the cursor committed is returned.
    pub(crate) async fn commit_page<C: crate::audit::CommitRecord>(
        &self,
        record: &C,
        rows: PageRows,
        cursor: impl Fn(&CommitReceipt) -> Result<Cursor, String> + Sync,
    ) -> Result<Cursor, AuditError> {
        let fields = self.fields(crate::audit::commit::COMMIT_EVENT, record)?;
        let stream = Some(rows.stream.clone());
        let (_, committed) = self
            .append(
                crate::audit::commit::COMMIT_EVENT,
                fields,
                false,
                stream,
                Some((&rows, &cursor)),
            )
            .await?;
        committed.ok_or_else(|| {
            self.error(DbError::Damaged {
                url: self.db.url().shown().to_string(),
                detail: "a page commit produced no receipt".into(),
            })
        })
    }

    /// The last line, for an anchor (`None`: an empty trail).
    pub(crate) async fn head(&self) -> Result<Option<TrailLine>, AuditError> {
        let client = self.db.client().await;
        let row = client
            .query_opt(
                "SELECT n, byte_offset, line, sha256 FROM edc_sync_audit_line WHERE trail = $1 ORDER BY n DESC LIMIT 1",
                &[&self.name],
            )
            .await
            .map_err(|e| self.error(super::error::classify(self.db.url(), "read the trail's head in", e)))?;
        Ok(row.map(|r| TrailLine {
            n: r.get(0),
            byte_offset: r.get(1),
            line: r.get(2),
            sha256: r.get(3),
        }))
    }

    /// Records the head in `edc_sync_anchor` (insert-only for the run
    /// role): a later rewrite of any line up to it by someone who can
    /// bypass the triggers shows as a row that no longer matches.
    pub(crate) async fn anchor(&self) -> Result<Option<TrailLine>, AuditError> {
        let Some(head) = self.head().await? else {
            return Ok(None);
        };
        let client = self.db.client().await;
        client
            .execute(
                "SELECT edc_sync_append_anchor($1, $2, $3)",
                &[&self.name, &head.n, &head.sha256],
            )
            .await
            .map_err(|e| self.error(super::error::classify(self.db.url(), "anchor the trail in", e)))?;
        Ok(Some(head))
    }

    /// Checks the trail's latest anchor against its line: the run refuses
    /// (65) a trail rewritten below it.
    /// With the key and `--adopt-unsealed-trail`, a trail with no sealed
    /// line is taken: how many lines, for the `audit_key_adopted` line.
    pub(crate) async fn check_anchors(&self) -> Result<Option<u64>, AuditError> {
        self.check_gate().await?;
        check_anchors(&self.db, &self.name).await?;
        self.check_last_checkpoint().await
    }

    /// A database that requires an audit key ([`super::gate`]) is appended
    /// to only by a run holding that key: 78 naming both before anything
    /// is appended or fetched.
    async fn check_gate(&self) -> Result<(), AuditError> {
        let required = super::gate::required(&*self.db.client().await)
            .await
            .map_err(|e| {
                self.error(super::error::classify(
                    self.db.url(),
                    "read the required audit key in",
                    e,
                ))
            })?;
        super::gate::admits(self.db.url(), required.as_deref(), self.key.as_ref()).map_err(|e| self.error(e))
    }

    /// With the audit key: the trail's last keyed checkpoint verifies
    /// before the run adds to it, as a file trail's does (the same rule:
    /// [`AuditKey::last_checkpoint_problem`]); 65 naming the line when it
    /// does not.
    /// A trail with no sealed line is refused ([`AuditError::NeverSealed`])
    /// unless adopted: then how many unsealed lines were taken.
    async fn check_last_checkpoint(&self) -> Result<Option<u64>, AuditError> {
        let Some(key) = &self.key else {
            return self.check_not_sealed().await.map(|()| None);
        };
        let client = self.db.client().await;
        let row = client
            .query_opt(
                "SELECT n, line FROM edc_sync_audit_line WHERE trail = $1 AND event = 'run_finished' \
                 ORDER BY n DESC LIMIT 1",
                &[&self.name],
            )
            .await
            .map_err(|e| self.error(super::error::classify(self.db.url(), "read the trail in", e)))?;
        let last_checkpoint = row.and_then(|row| {
            let (n, text): (i64, String) = (row.get(0), row.get(1));
            let line: Value = serde_json::from_str(&text).unwrap_or_default();
            key.last_checkpoint_problem(&line, &format!("on line {n}"))
        });
        drop(client);
        let mut walk = crate::audit::checkpoint::SealWalk::new(key);
        let problem = match last_checkpoint {
            Some(problem) => Some(problem),
            None => {
                let client = self.db.client().await;
                self.walk_seals(&*client, &mut walk, 0..i64::MAX)
                    .await
                    .map_err(|e| self.error(super::error::classify(self.db.url(), "read the trail in", e)))?
            }
        };
        match problem {
            // The file trail's rule: a trail with lines and no sealed one
            // is taken under the key only when adopted.
            None if walk.never_sealed() && !self.adopt => Err(AuditError::NeverSealed {
                path: self.label(),
                key_id: key.id(),
                lines: walk.lines(),
            }),
            None if walk.never_sealed() => Ok(Some(walk.lines())),
            None => Ok(None),
            Some(problem) => Err(AuditError::Damaged {
                path: self.label(),
                problems: vec![problem],
            }),
        }
    }

    /// Without the key: no line of the trail carries a seal, not only its
    /// last (the file trail's rule: [`AuditError::KeyNeeded`]): lines
    /// chained to a sealed trail's end by someone without the key would
    /// hide it. One scan of the rows, by a substring test, then the seal's
    /// own reading.
    async fn check_not_sealed(&self) -> Result<(), AuditError> {
        let row = self
            .db
            .client()
            .await
            .query_opt(
                "SELECT n, line FROM edc_sync_audit_line WHERE trail = $1 \
                 AND strpos(line, ',\"line_mac\":\"') > 0 ORDER BY n LIMIT 1",
                &[&self.name],
            )
            .await
            .map_err(|e| self.error(super::error::classify(self.db.url(), "read the trail in", e)))?;
        match row {
            Some(row) if crate::audit::checkpoint::unseal(row.get::<_, String>(1).as_bytes()).is_some() => {
                Err(AuditError::KeyNeeded {
                    path: self.label(),
                    place: format!("line {}", row.get::<_, i64>(0)),
                })
            }
            _ => Ok(()),
        }
    }

    /// The file trail's rule, on rows: every line after the last checkpoint
    /// that verifies is sealed with the key
    /// ([`crate::audit::checkpoint::SealWalk`]), read back from the last
    /// row a thousand at a time (normally one is read). Only rows whose
    /// number is in `rows` are read (`None`: every one of them is sealed
    /// and no checkpoint among them ends the walk). Through `client`: the
    /// connection, or an append's own transaction under its lock.
    async fn unsealed_tail(
        &self,
        client: &impl tokio_postgres::GenericClient,
        key: &AuditKey,
        rows: std::ops::Range<i64>,
    ) -> Result<Option<String>, tokio_postgres::Error> {
        let mut walk = crate::audit::checkpoint::SealWalk::new(key);
        self.walk_seals(client, &mut walk, rows).await
    }

    /// [`Self::unsealed_tail`] with the caller's walk, which then tells
    /// whether a trail read to its first row had any sealed line.
    async fn walk_seals(
        &self,
        client: &impl tokio_postgres::GenericClient,
        walk: &mut crate::audit::checkpoint::SealWalk<'_>,
        rows: std::ops::Range<i64>,
    ) -> Result<Option<String>, tokio_postgres::Error> {
        use crate::audit::checkpoint::Walked;
        let mut below = rows.end;
        loop {
            let rows = client
                .query(
                    "SELECT n, line FROM edc_sync_audit_line WHERE trail = $1 AND n >= $2 AND n < $3 \
                     ORDER BY n DESC LIMIT 1000",
                    &[&self.name, &rows.start, &below],
                )
                .await?;
            if rows.is_empty() {
                return Ok(None);
            }
            for row in &rows {
                let (n, text): (i64, String) = (row.get(0), row.get(1));
                below = n;
                let place = format!("line {n} of trail {}", self.name);
                if let Walked::Done(verdict) = walk.visit(&place, text.as_bytes()) {
                    return Ok(verdict);
                }
            }
        }
    }

    /// The head as a file trail's anchor says it ([`ChainHead`]): the
    /// exported file's line count, length, last line and first line (the
    /// trail's identity, the same as its export's). For the copy kept in
    /// Redis, outside the reach of whoever can write the database.
    pub(crate) async fn chain_head(&self) -> Result<Option<crate::audit::ChainHead>, AuditError> {
        let Some(last) = self.head().await? else {
            return Ok(None);
        };
        let client = self.db.client().await;
        let first: String = client
            .query_one(
                "SELECT sha256 FROM edc_sync_audit_line WHERE trail = $1 AND n = 1",
                &[&self.name],
            )
            .await
            .map_err(|e| {
                self.error(super::error::classify(
                    self.db.url(),
                    "read the trail's first line in",
                    e,
                ))
            })?
            .get(0);
        Ok(Some(crate::audit::ChainHead {
            audit_log: PathBuf::from(&self.name),
            lines: last.n as u64,
            bytes: (last.byte_offset as u64) + last.line.len() as u64 + 1,
            last_line_offset: last.byte_offset as u64,
            last_sha256: last.sha256,
            run_id: self.run_id.to_string(),
            first_sha256: Some(first),
        }))
    }

    /// Checks the trail against `head` (an anchor kept outside the
    /// database): its line `head.lines` must still be the anchored one, at
    /// its offset. 65 naming `source` when it is not.
    pub(crate) async fn check_head(
        &self,
        source: &str,
        head: &crate::audit::ChainHead,
    ) -> Result<(), AuditError> {
        let client = self.db.client().await;
        let row = client
            .query_opt(
                "SELECT byte_offset, sha256 FROM edc_sync_audit_line WHERE trail = $1 AND n = $2",
                &[&self.name, &(head.lines as i64)],
            )
            .await
            .map_err(|e| self.error(super::error::classify(self.db.url(), "read the trail in", e)))?;
        let now = row.map(|r| (r.get::<_, i64>(0) as u64, r.get::<_, String>(1)));
        if now.as_ref() == Some(&(head.last_line_offset, head.last_sha256.clone())) {
            return Ok(());
        }
        Err(AuditError::Damaged {
            path: self.label(),
            problems: vec![format!(
                "{source}: line {} (at byte {}) anchored by run {} (sha256 {}) is {}: the trail was cut short \
                 or rewritten in the database",
                head.lines,
                head.last_line_offset,
                head.run_id,
                head.last_sha256,
                match now {
                    Some((at, sha)) => format!("at byte {at} with sha256 {sha}"),
                    None => "missing".into(),
                }
            )],
        })
    }

    /// A label for messages: the database and the trail's name.
    pub(crate) fn label(&self) -> PathBuf {
        PathBuf::from(format!("{} (trail {})", self.db.url(), self.name))
    }

    fn error(&self, e: DbError) -> AuditError {
        AuditError::Db(e)
    }

    fn fields(&self, name: &'static str, event: &impl Serialize) -> Result<Map<String, Value>, AuditError> {
        let encode = |detail: String| AuditError::Encode {
            path: self.label(),
            error: crate::audit::EncodeError::NotAnObject { event: name, detail },
        };
        match serde_json::to_value(event).map(|v| self.as_recorded(v)) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(Value::Null) => Ok(Map::new()),
            Ok(other) => Err(encode(format!("got {other}"))),
            Err(e) => Err(encode(e.to_string())),
        }
    }

    /// One append transaction, retried whole on a serialization failure or
    /// deadlock. Returns the line's receipt and, for a page commit, the
    /// commit receipt.
    async fn append(
        &self,
        event: &'static str,
        fields: Map<String, Value>,
        checkpoint: bool,
        stream: Option<String>,
        page: Option<PageCommit<'_>>,
    ) -> Result<(Appended, Option<Cursor>), AuditError> {
        let url = self.db.url();
        let mut client = self.db.client().await;
        let mut attempt = 1;
        loop {
            let result = self
                .append_once(
                    &mut client,
                    event,
                    fields.clone(),
                    checkpoint,
                    stream.as_deref(),
                    page,
                )
                .await;
            match result {
                Err(Failed::Db(e)) if super::error::is_retryable(&e) && attempt < ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(10 * u64::from(attempt))).await;
                }
                Err(Failed::Db(e)) if super::error::is_retryable(&e) => {
                    return Err(self.error(DbError::Contended {
                        url: url.shown().to_string(),
                        op: "append to the audit trail",
                        detail: e.to_string(),
                        attempts: attempt,
                    }))
                }
                Err(Failed::Db(e)) => {
                    return Err(self.error(super::error::classify(url, "append to the audit trail in", e)))
                }
                Err(Failed::Refused(e)) => return Err(self.error(e)),
                Err(Failed::Audit(e)) => return Err(e),
                Ok((appended, committed, lines)) => {
                    self.next_seq.fetch_add(lines, Ordering::Relaxed);
                    return Ok((appended, committed));
                }
            }
        }
    }

    async fn append_once(
        &self,
        client: &mut tokio_postgres::Client,
        event: &'static str,
        mut fields: Map<String, Value>,
        checkpoint: bool,
        stream: Option<&str>,
        page: Option<PageCommit<'_>>,
    ) -> Result<(Appended, Option<Cursor>, u64), Failed> {
        let st = self.db.statements();
        // A checkpoint signs every row before it, so the rows since the last
        // one are proven first (every one sealed with the key): those there
        // now before the lock, so other hosts' appends do not wait on the
        // read, and those added since under it.
        let sign = match (checkpoint, &self.key) {
            (true, Some(key)) => {
                let head: i64 = client
                    .query_one(
                        "SELECT coalesce(max(n), 0) FROM edc_sync_audit_line WHERE trail = $1",
                        &[&self.name],
                    )
                    .await?
                    .get(0);
                let proven = self.unsealed_tail(&*client, key, 1..head + 1).await?.is_none();
                Some((key, head, proven))
            }
            _ => None,
        };
        let tx = client.transaction().await?;
        // The lock, the trail's end and the stream's fence in one round
        // trip: the server runs them in order, the reads after the lock.
        let fence_of = page.map(|(rows, _)| rows.stream.as_str());
        let (_, last, fence) = futures_util::try_join!(
            async { tx.execute(&st.trail_lock, &[&self.name]).await },
            async { tx.query_opt(&st.last_line, &[&self.name]).await },
            async {
                match fence_of {
                    Some(stream) => tx.query_opt(&st.fence, &[&stream]).await,
                    None => Ok(None),
                }
            },
        )?;
        let (n, offset, prev): (i64, i64, String) = match last {
            Some(r) => (r.get::<_, i64>(0) + 1, r.get(1), r.get(2)),
            None => (1, 0, ZERO_SHA256.to_string()),
        };
        if let Some((rows, _)) = page {
            let fence: Option<i64> = fence.map(|r| r.get(0));
            if fence != Some(rows.fence) {
                return Err(Failed::Refused(DbError::Fenced {
                    url: self.db.url().shown().to_string(),
                    stream: rows.stream.clone(),
                    ours: rows.fence,
                    now: fence,
                }));
            }
        }
        let seq = self.next_seq.load(Ordering::Relaxed);
        // A row chained by someone without the key while this run went on
        // is left unsigned, for the next keyed run to find and refuse (the
        // file trail's rule, `AuditLog::sign`).
        if let Some((key, head, proven)) = sign {
            if proven && self.unsealed_tail(&tx, key, head + 1..i64::MAX).await?.is_none() {
                let mark = key.checkpoint(self.run_id.as_str(), seq, &prev);
                fields.insert(
                    "checkpoint".into(),
                    serde_json::to_value(mark).unwrap_or(Value::Null),
                );
            } else {
                tracing::warn!(
                    trail = %self.label().display(),
                    "a line since the last keyed checkpoint is not sealed with the audit key: this line carries no \
                     checkpoint, and the next run holding the key refuses the trail"
                );
            }
        }
        let ts = crate::audit::now_rfc3339();
        let first_seq = seq;
        let (mut seq, mut n, mut offset, mut prev) = (seq, n, offset, prev);
        // A commit line whose page grew it past a few kilobytes carries its
        // growing fields in part rows before it, in this transaction
        // (`audit/spill.rs`).
        let composed = self.compose(seq, &ts, event, &fields, &prev);
        let long = event == crate::audit::commit::COMMIT_EVENT
            && match &composed {
                Ok(text) => text.len() > crate::audit::spill::SPILL_ABOVE,
                Err(Failed::Audit(e)) => e.is_too_long(),
                Err(_) => false,
            };
        let mut text = match long {
            true => String::new(),
            false => composed?,
        };
        if long {
            for part in crate::audit::spill::split(&mut fields) {
                let part = self.compose(seq, &ts, crate::audit::spill::PART_EVENT, &part, &prev)?;
                let sha256 = sha256_hex(part.as_bytes());
                let gate_mac = self.gate.as_ref().map(|gate| gate.mac(&sha256));
                tx.execute(
                    &st.insert_line,
                    &[
                        &self.name,
                        &n,
                        &offset,
                        &part,
                        &sha256,
                        &crate::audit::spill::PART_EVENT,
                        &stream,
                        &gate_mac,
                    ],
                )
                .await?;
                (seq, n, offset, prev) = (seq + 1, n + 1, offset + part.len() as i64 + 1, sha256);
            }
            text = self.compose(seq, &ts, event, &fields, &prev)?;
        }
        let lines = seq + 1 - first_seq;
        let sha256 = sha256_hex(text.as_bytes());
        let gate_mac = self.gate.as_ref().map(|gate| gate.mac(&sha256));
        let appended = Appended::in_db(seq, offset as u64, PathBuf::from(&self.name), sha256.clone(), ts);
        let line = async {
            tx.execute(
                &st.insert_line,
                &[
                    &self.name, &n, &offset, &text, &sha256, &event, &stream, &gate_mac,
                ],
            )
            .await
        };
        let Some((rows, cursor)) = page else {
            line.await?;
            tx.commit().await?;
            return Ok((appended, None, lines));
        };
        let commit = CommitReceipt::in_db(PathBuf::from(&self.name), offset as u64, sha256.clone());
        let committed = cursor(&commit).map_err(|detail| {
            Failed::Refused(DbError::Damaged {
                url: self.db.url().shown().to_string(),
                detail: format!("stream {}: the cursor was not committed: {detail}", rows.stream),
            })
        })?;
        let state = committed.to_row();
        // The line, the manifest row and the cursor in one round trip, in
        // that order (the manifest row's foreign key needs the line).
        futures_util::try_join!(
            line,
            async {
                match &rows.manifest {
                    Some(listed) => {
                        tx.execute(
                            &st.insert_manifest,
                            &[
                                &rows.stream,
                                &listed.line,
                                &listed.page_key,
                                &listed.sha256,
                                &self.name,
                                &n,
                            ],
                        )
                        .await
                    }
                    None => Ok(0),
                }
            },
            async {
                if let Some(write) = &rows.memory {
                    super::memory::write(&tx, &rows.stream, write).await?;
                }
                tx.execute(&st.upsert_cursor, &[&rows.stream, &state, &self.name, &n])
                    .await
            },
        )?;
        tx.commit().await?;
        Ok((appended, Some(committed), lines))
    }

    /// Line `seq` of this run, sealed when the run holds the key.
    fn compose(
        &self,
        seq: u64,
        ts: &str,
        event: &'static str,
        fields: &Map<String, Value>,
        prev: &str,
    ) -> Result<String, Failed> {
        let text = crate::audit::line::compose_with(seq, ts, self.run_id.as_str(), event, fields, None, prev)
            .map_err(|e| {
                Failed::Audit(AuditError::Encode {
                    path: self.label(),
                    error: e.into(),
                })
            })?;
        Ok(match &self.key {
            Some(key) => key.seal(text),
            None => text,
        })
    }
}

/// Why one append transaction did not commit.
enum Failed {
    Db(tokio_postgres::Error),
    Refused(DbError),
    Audit(AuditError),
}

impl From<tokio_postgres::Error> for Failed {
    fn from(e: tokio_postgres::Error) -> Self {
        Failed::Db(e)
    }
}

/// Checks trail `name`'s latest anchor in `db` against the line it names
/// (65 when they differ: the trail was rewritten below it).
pub async fn check_anchors(db: &StateDb, name: &str) -> Result<(), AuditError> {
    match anchor_problem(db, name).await? {
        None => Ok(()),
        Some(problem) => Err(AuditError::Damaged {
            path: format!("{} (trail {name})", db.url()).into(),
            problems: vec![problem],
        }),
    }
}

/// What [`check_anchors`] refuses, said rather than refused: `audit verify`
/// reports it after the chain's own findings (a removed or reordered line
/// is named as such first).
pub async fn anchor_problem(db: &StateDb, name: &str) -> Result<Option<String>, AuditError> {
    let client = db.client().await;
    let row = client
        .query_opt(
            "SELECT a.n, a.sha256, l.sha256 FROM edc_sync_anchor a \
             LEFT JOIN edc_sync_audit_line l ON l.trail = a.trail AND l.n = a.n \
             WHERE a.trail = $1 ORDER BY a.n DESC LIMIT 1",
            &[&name],
        )
        .await
        .map_err(|e| AuditError::Db(super::error::classify(db.url(), "read the trail's anchors in", e)))?;
    if let Some(r) = row {
        let (n, anchored, now): (i64, String, Option<String>) = (r.get(0), r.get(1), r.get(2));
        if now.as_deref() != Some(anchored.as_str()) {
            return Ok(Some(format!(
                "the anchor of line {n} (edc_sync_anchor) says SHA-256 {anchored}, the line now is {}",
                now.as_deref().unwrap_or("missing")
            )));
        }
    }
    Ok(None)
}

/// Reads trail `name`'s lines from `from` on, in batches, into `each`.
pub(super) async fn read_lines(
    db: &StateDb,
    name: &str,
    from: i64,
    each: &mut dyn FnMut(TrailLine) -> std::io::Result<()>,
) -> Result<u64, DbError> {
    const BATCH: i64 = 1000;
    let url = db.url();
    let mut next = from.max(1);
    let mut count = 0;
    loop {
        let rows = {
            let client = db.client().await;
            client
                .query(
                    "SELECT n, byte_offset, line, sha256 FROM edc_sync_audit_line \
                     WHERE trail = $1 AND n >= $2 ORDER BY n LIMIT $3",
                    &[&name, &next, &BATCH],
                )
                .await
                .map_err(|e| super::error::classify(url, "read the audit trail in", e))?
        };
        let got = rows.len() as i64;
        for r in rows {
            let line = TrailLine {
                n: r.get(0),
                byte_offset: r.get(1),
                line: r.get(2),
                sha256: r.get(3),
            };
            next = line.n + 1;
            each(line).map_err(|e| DbError::Write {
                url: url.shown().to_string(),
                op: "hand on a line read from",
                detail: e.to_string(),
            })?;
            count += 1;
        }
        if got < BATCH {
            return Ok(count);
        }
    }
}

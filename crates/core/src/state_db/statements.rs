//! The statements of the page path, prepared once per connection: a
//! statement given as text costs a round trip to prepare before the one
//! that runs it, on every call. Prepared, a page commit is four round
//! trips (BEGIN; lock and reads; writes; COMMIT), the statements of each
//! sent together.

use tokio_postgres::{Client, Statement};

/// The prepared statements of one connection.
pub(crate) struct Statements {
    /// The trail's append lock, for the transaction.
    pub trail_lock: Statement,
    /// The trail's last line: next number, next byte offset, its SHA-256.
    pub last_line: Statement,
    /// The stream's fence, locked until the transaction ends.
    pub fence: Statement,
    /// A trail line, through the schema's append function (the run role
    /// has no INSERT; with an audit key required, the gate's MAC with it).
    pub insert_line: Statement,
    /// A manifest row, through the append function that takes it only
    /// with its `page_committed` line in the same transaction.
    pub insert_manifest: Statement,
    pub upsert_cursor: Statement,
    /// Whether the manifest lists a page with these bytes.
    pub is_listed: Statement,
}

impl Statements {
    pub(crate) async fn prepare(client: &Client) -> Result<Statements, tokio_postgres::Error> {
        Ok(Statements {
            trail_lock: client
                .prepare("SELECT pg_advisory_xact_lock(hashtextextended('edc-sync:trail:' || $1, 0))")
                .await?,
            last_line: client
                .prepare(
                    "SELECT n, byte_offset + octet_length(line) + 1, sha256 FROM edc_sync_audit_line \
                     WHERE trail = $1 ORDER BY n DESC LIMIT 1",
                )
                .await?,
            fence: client
                .prepare("SELECT fence FROM edc_sync_run_lock WHERE stream = $1 FOR UPDATE")
                .await?,
            insert_line: client
                .prepare("SELECT edc_sync_append_line($1, $2, $3, $4, $5, $6, $7, $8)")
                .await?,
            insert_manifest: client
                .prepare("SELECT edc_sync_append_manifest($1, $2, $3, $4, $5, $6)")
                .await?,
            upsert_cursor: client
                .prepare(
                    "INSERT INTO edc_sync_cursor (stream, state, trail, audit_n) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (stream) DO UPDATE SET state = EXCLUDED.state, trail = EXCLUDED.trail, \
                     audit_n = EXCLUDED.audit_n",
                )
                .await?,
            is_listed: client
                .prepare(
                    "SELECT 1 FROM edc_sync_manifest WHERE stream = $1 AND page_key = $2 AND sha256 = $3",
                )
                .await?,
        })
    }
}

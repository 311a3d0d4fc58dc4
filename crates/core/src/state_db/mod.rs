//! State and audit trail in PostgreSQL (`--state postgres://…`): any host
//! resumes any stream, and a page commit is one transaction.
//!
//! What the database holds, per stream: the cursor, the manifest index of
//! landed pages, the run lock with its fencing token, and the audit trail
//! (the same JSON lines and hash chain as the file, one row a line). The
//! landed pages themselves stay where `--out` says (a directory or an
//! object store) and are written first. docs/operations.md "Running on
//! several hosts" is the operator's side of it.
//!
//! One connection per process carries every statement of the run: the
//! session advisory locks that are the streams' run locks live as long as
//! it does (a killed process releases them with its connection), and the
//! appends are serialised on it, as the file's lock serialises them.

mod error;
mod export;
mod gate;
mod memory;
pub mod schema;
mod statements;
mod stream;
mod tls;
mod trail;

use std::sync::Arc;

use tokio::sync::Mutex;

pub use crate::db_error::DbError;
pub use export::{export, export_for_verify, ExportError, Exported};
pub use gate::require_audit_key;
pub use stream::cursor_of;
pub use trail::{anchor_problem, check_anchors};

pub(crate) use stream::{all_cursors, each_manifest_line, DbStream, StreamFacts};
pub(crate) use trail::{DbTrail, PageRows};

/// The schemes `--state` takes as a database.
pub(crate) const SCHEMES: [&str; 2] = ["postgres", "postgresql"];

/// A PostgreSQL URL as given, checked, with its password never shown.
#[derive(Clone)]
pub struct DbUrl {
    config: tokio_postgres::Config,
    /// Made once, when the URL is parsed, and used by every connection:
    /// the system's trust store is read once a process, not once a
    /// connection. `None` with `sslmode=disable`.
    connector: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    shown: String,
}

impl std::fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl std::fmt::Display for DbUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl DbUrl {
    /// Parses a `postgres://` URL; the error names `flag` and the URL
    /// without its credentials (78).
    pub fn parse(flag: &str, text: &str) -> Result<DbUrl, String> {
        let shown = without_query_password(&crate::redact::without_userinfo(text));
        let (rest, tls) = tls::Tls::take(text).map_err(|e| format!("{flag} {shown}: {e}"))?;
        let mut config: tokio_postgres::Config = rest
            .parse()
            .map_err(|e| format!("{flag} {shown}: not a PostgreSQL URL ({e})"))?;
        config.ssl_mode(match tls.mode {
            tls::Mode::Disable => tokio_postgres::config::SslMode::Disable,
            tls::Mode::Prefer => tokio_postgres::config::SslMode::Prefer,
            tls::Mode::Require => tokio_postgres::config::SslMode::Require,
        });
        // As libpq does: a URL without a password takes PGPASSWORD, so the
        // password need not be on a command line (or in a unit file).
        if config.get_password().is_none() {
            if let Some(p) = std::env::var_os("PGPASSWORD") {
                config.password(p.as_encoded_bytes());
            }
        }
        if let Some(p) = config.get_password() {
            if let Ok(p) = std::str::from_utf8(p) {
                crate::redact::register_secret(p);
            }
        }
        if config.get_dbname().is_none() {
            return Err(format!(
                "{flag} {shown}: names no database (postgres://user@host:port/DATABASE)"
            ));
        }
        // The connector is made now: a CA or client file that is not PEM
        // is a configuration error, found before a run starts.
        let connector = match tls.mode {
            tls::Mode::Disable => None,
            _ => Some(tls.connector().map_err(|e| format!("{flag} {shown}: {e}"))?),
        };
        Ok(DbUrl {
            config,
            connector,
            shown,
        })
    }

    /// The URL without its credentials, for messages and audit lines.
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

/// `url` with the value of a `password` query parameter replaced by `***`.
fn without_query_password(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_string();
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some(("password", _)) => "password=***".to_string(),
            _ => pair.to_string(),
        })
        .collect();
    format!("{base}?{}", pairs.join("&"))
}

/// A connection to the state database, shared by the tasks of a run.
#[derive(Clone)]
pub struct StateDb {
    client: Arc<Mutex<tokio_postgres::Client>>,
    /// The page path's statements, prepared on that connection.
    statements: Arc<statements::Statements>,
    url: DbUrl,
    /// The database's identity (made by the first migration): what a
    /// landing's owner file names, like a state directory's id.
    state_id: String,
    /// The schema version found (and required) at connect.
    schema_version: i32,
}

impl std::fmt::Debug for StateDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateDb({})", self.url)
    }
}

impl StateDb {
    /// Connects (10 s at most) without looking at the schema: for
    /// `state migrate`. Unreachable is 69; refused credentials 77; a
    /// database that does not exist 78.
    pub async fn connect_raw(url: &DbUrl) -> Result<tokio_postgres::Client, DbError> {
        let mut config = url.config.clone();
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        config.application_name("edc-sync");
        let fail = |e| error::classify(url, "connect to", e);
        // Each connection task ends when the client is dropped or the
        // server goes away; the next statement then fails and says so.
        let Some(connector) = url.connector.clone() else {
            let (client, connection) = config.connect(tokio_postgres::NoTls).await.map_err(fail)?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            return Ok(client);
        };
        let (client, connection) = config.connect(connector).await.map_err(fail)?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Connects for a run or a reader: refuses a read-only server (a
    /// replica given by mistake) and a schema this binary does not
    /// understand (78, naming both versions).
    pub async fn connect(url: &DbUrl) -> Result<StateDb, DbError> {
        let client = Self::connect_raw(url).await?;
        let row = client
            .query_one(
                "SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only')",
                &[],
            )
            .await
            .map_err(|e| error::classify(url, "read the server's role from", e))?;
        let recovery: bool = row.get(0);
        let read_only: String = row.get(1);
        if recovery || read_only == "on" {
            return Err(DbError::Config {
                url: url.shown.clone(),
                detail: format!(
                    "the server is read-only ({}): a replica or a read-only database was given where the \
                     primary is needed; nothing was written",
                    if recovery {
                        "in recovery: a standby"
                    } else {
                        "default_transaction_read_only is on"
                    }
                ),
            });
        }
        // A commit is the page's durable record (an audit line is durable
        // before the run acts on it): whatever the server's or database's
        // default, this session's commits wait for their WAL flush.
        client
            .batch_execute("SET synchronous_commit TO on")
            .await
            .map_err(|e| error::classify(url, "set synchronous_commit on", e))?;
        let schema_version = schema::require_current(&client, url).await?;
        let state_id = schema::state_id(&client, url).await?;
        let statements = statements::Statements::prepare(&client)
            .await
            .map_err(|e| error::classify(url, "prepare the page path's statements in", e))?;
        Ok(StateDb {
            client: Arc::new(Mutex::new(client)),
            statements: Arc::new(statements),
            url: url.clone(),
            state_id,
            schema_version,
        })
    }

    pub fn url(&self) -> &DbUrl {
        &self.url
    }

    /// The schema version of the database (stamped in each run header).
    pub fn schema_version(&self) -> i32 {
        self.schema_version
    }

    /// The database's identity, as a landing's owner file names it.
    pub fn state_id(&self) -> &str {
        &self.state_id
    }

    /// The page path's prepared statements.
    pub(crate) fn statements(&self) -> &statements::Statements {
        &self.statements
    }

    /// The one connection, for one statement or transaction at a time.
    pub(crate) async fn client(&self) -> tokio::sync::MutexGuard<'_, tokio_postgres::Client> {
        self.client.lock().await
    }
}

/// Runs `f` to completion from synchronous code inside the run's runtime
/// (the page loop's few synchronous audit calls): the worker thread is
/// handed over while it blocks, as for a file append's fsync.
pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let handle = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| handle.block_on(f))
}

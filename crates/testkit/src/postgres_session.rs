//! A connection to a private PostgreSQL kept open between statements, for
//! a test that runs many small statements (the database insider property
//! runs a dozen a case, tens of thousands of cases by hand). Starting
//! `psql` for each costs a process, its dynamic linking, a connection's
//! SCRAM handshake and a server backend's start, about as much as the
//! product's own run it is testing around.
//!
//! It answers as `psql -X -q -t -A -v ON_ERROR_STOP=1 -c` does on
//! PostgreSQL 15: the statements are sent as one simple query (one
//! implicit transaction unless they open their own), every result's rows
//! are printed, columns joined by `|`, a NULL as nothing. After an error
//! the session rolls back what the failed string left open, as `psql`'s
//! exit would.
//!
//! The connection lives on a thread of its own with its own runtime, so
//! a blocking caller (a test's helper, inside or outside an async test)
//! can use it as it would run `psql`.

use std::sync::mpsc as reply;
use std::thread::JoinHandle;

use tokio::sync::mpsc;
use tokio_postgres::SimpleQueryMessage;

/// What the session's thread answers: the output, the server's refusal,
/// or `None` when the connection is gone (the server stopped).
type Answer = Option<Result<String, String>>;

pub(crate) struct Session {
    requests: Option<mpsc::UnboundedSender<(String, reply::Sender<Answer>)>>,
    thread: Option<JoinHandle<()>>,
}

impl Session {
    /// Connects as `user` (password `password`) to `db` on loopback `port`.
    pub(crate) fn open(port: u16, user: &str, password: &str, db: &str) -> Result<Session, String> {
        let mut config = tokio_postgres::Config::new();
        config
            .host("127.0.0.1")
            .port(port)
            .user(user)
            .password(password)
            .dbname(db);
        let who = format!("{user}@127.0.0.1:{port}/{db}");
        let (requests, mut incoming) = mpsc::unbounded_channel::<(String, reply::Sender<Answer>)>();
        let (ready, connected) = reply::channel::<Result<(), String>>();
        let thread = std::thread::Builder::new()
            .name(format!("psql {who}"))
            .spawn({
                let who = who.clone();
                move || {
                    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                        Ok(runtime) => runtime,
                        Err(e) => {
                            let _ = ready.send(Err(format!("cannot start a runtime: {e}")));
                            return;
                        }
                    };
                    runtime.block_on(async move {
                        let client = match config.connect(tokio_postgres::NoTls).await {
                            Ok((client, connection)) => {
                                tokio::spawn(connection);
                                let _ = ready.send(Ok(()));
                                client
                            }
                            Err(e) => {
                                let _ = ready.send(Err(format!("cannot connect as {who}: {e}")));
                                return;
                            }
                        };
                        while let Some((sql, answer)) = incoming.recv().await {
                            let _ = answer.send(run(&client, &sql).await);
                        }
                    });
                }
            })
            .map_err(|e| format!("cannot start a thread for {who}: {e}"))?;
        connected
            .recv()
            .map_err(|_| "the session's thread ended before it connected".to_string())??;
        Ok(Session {
            requests: Some(requests),
            thread: Some(thread),
        })
    }

    /// Runs `sql`; `None` when the connection is gone (open another).
    pub(crate) fn run(&self, sql: &str) -> Answer {
        let (answer, answered) = reply::channel();
        self.requests.as_ref()?.send((sql.to_string(), answer)).ok()?;
        answered.recv().ok()?
    }
}

/// `sql` as one simple query, printed as `psql -t -A` prints it.
async fn run(client: &tokio_postgres::Client, sql: &str) -> Answer {
    if client.is_closed() {
        return None;
    }
    match client.simple_query(sql).await {
        Ok(messages) => Some(Ok(messages
            .iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(row) => Some(
                    (0..row.len())
                        .map(|i| row.get(i).unwrap_or(""))
                        .collect::<Vec<_>>()
                        .join("|"),
                ),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
            .trim()
            .to_string())),
        Err(_) if client.is_closed() => None,
        Err(e) => {
            // What the failed string opened is rolled back, as when psql exits.
            let _ = client.simple_query("ROLLBACK").await;
            let said = match e.as_db_error() {
                Some(db) => format!("{}:  {}", db.severity(), db.message()),
                None => e.to_string(),
            };
            Some(Err(format!("psql {sql:?}: {said}")))
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop and the connection.
        self.requests.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::postgres_server::PrivatePostgres;

    #[test]
    fn a_kept_session_answers_as_psql_does() {
        let mut pg = PrivatePostgres::start().unwrap();
        let statements = [
            "SELECT 1",
            "SELECT 1 AS a, NULL AS b, 'x|y' AS c UNION ALL SELECT 2, 'z', ''",
            "CREATE TABLE t (n int); INSERT INTO t VALUES (1), (2); SELECT n FROM t ORDER BY n; SELECT count(*) FROM t",
            "UPDATE t SET n = n + 1",
            "BEGIN; SET LOCAL session_replication_role = replica; DELETE FROM t WHERE n = 2; COMMIT;",
            "SELECT n FROM t; SHOW session_replication_role",
            "DROP TABLE t",
        ];
        let by_psql: Vec<_> = statements.iter().map(|s| pg.psql("edc", s)).collect();
        pg.keep_sessions();
        let kept: Vec<_> = statements.iter().map(|s| pg.psql("edc", s)).collect();
        assert_eq!(kept, by_psql);
        assert_eq!(kept[2].as_deref(), Ok("1\n2\n2"));

        // A failed string commits nothing and leaves the session usable.
        let failed = "BEGIN; CREATE TABLE u (n int); SELECT 1/0; COMMIT;";
        let said = pg.psql("edc", failed).unwrap_err();
        assert!(said.contains("ERROR:  division by zero"), "{said}");
        assert_eq!(
            pg.psql("edc", "SELECT to_regclass('u') IS NULL").as_deref(),
            Ok("t")
        );
        // Each role has its own session, with its own rights.
        let refused = pg
            .psql_as("edc_run", "edc", "CREATE TABLE v (n int)")
            .unwrap_err();
        assert!(refused.contains("permission denied"), "{refused}");
        assert_eq!(
            pg.psql_as("edc_run", "edc", "SELECT current_user").as_deref(),
            Ok("edc_run")
        );
    }

    #[test]
    fn a_kept_session_is_opened_again_after_the_server_restarts() {
        let mut pg = PrivatePostgres::start().unwrap();
        pg.keep_sessions();
        assert_eq!(pg.psql("edc", "SELECT 1").as_deref(), Ok("1"));
        pg.stop();
        pg.restart().unwrap();
        assert_eq!(pg.psql("edc", "SELECT 2").as_deref(), Ok("2"));
    }
}

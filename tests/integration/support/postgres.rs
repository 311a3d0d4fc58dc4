//! A real PostgreSQL (the machine image's PostgreSQL 15: initdb and pg_ctl
//! on a temporary directory, a free port) for one test; stopped when
//! dropped. A test that needs it and cannot start it fails with how to
//! install it; it never skips.

pub use edc_testkit::postgres_server::PrivatePostgres as Postgres;

/// The test roles' password, to check it is never shown.
pub const PASSWORD_TEXT: &str = edc_testkit::postgres_server::PASSWORD;

/// Starts a server, or fails the test with how to install one.
pub fn start() -> Postgres {
    Postgres::start().unwrap_or_else(|why| {
        panic!(
            "{why}; the PostgreSQL state tests need a real server.\n\
             Install it with: sudo apt-get install -y postgresql-15"
        )
    })
}

/// Starts a server and creates the schema with `edc-sync state migrate`
/// as its owner, granting the run role what runs need.
pub fn start_migrated() -> Postgres {
    let pg = start();
    pg.migrate_with(std::path::Path::new(env!("CARGO_BIN_EXE_edc-sync")))
        .unwrap_or_else(|e| panic!("{e}"));
    pg
}

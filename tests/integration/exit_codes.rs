//! Every way a command can fail, held to the README's exit-code table.
//!
//! The exit code is decided by the error's type (`edc_core::Error::exit`
//! and each wrapped type's `exit()`), not by searching its causes. Here one
//! value of every variant is made, at every level a command can end with,
//! and its code is checked against the code the README documents for that
//! kind of failure. The `exhaustive_*` functions below match every variant
//! with no wildcard: a new variant does not compile here until it has an
//! example, and so a code the table says.

use std::path::PathBuf;

use edc_core::audit::{AuditError, KeyError, NotIntact, ReadError, RedisAnchorError, Report};
use edc_core::config::{ConfigError, MissingEnv};
use edc_core::edc::AuthError;
use edc_core::exit::{Exit, NotQualified};
use edc_core::reconcile::{DbUnreadable, Discrepancies, Unreadable, Unverifiable};
use edc_core::state_db::{DbError, ExportError};
use edc_core::store::{Failure, ObjectError, StoreError, StreamLocked};
use edc_core::sync::SyncError;
use edc_core::Error;
use quota_pacer::PacerError;

fn io() -> std::io::Error {
    std::io::Error::other("example")
}

fn path() -> PathBuf {
    PathBuf::from("/srv/edc/state/example")
}

fn db(code: u8) -> DbError {
    let (url, op, detail) = (
        "postgres://db.example/edc".to_string(),
        "read",
        "example".to_string(),
    );
    match code {
        69 => DbError::Unavailable { url, op, detail },
        77 => DbError::Permission { url, op, detail },
        78 => DbError::Config { url, detail },
        65 => DbError::Damaged { url, detail },
        74 => DbError::Write { url, op, detail },
        _ => DbError::Fenced {
            url,
            stream: "s".into(),
            ours: 1,
            now: Some(2),
        },
    }
}

fn object(failure: Failure) -> ObjectError {
    ObjectError {
        url: "s3://bucket".into(),
        op: "put",
        key: "k".into(),
        failure,
        detail: "example".into(),
    }
}

fn sync(e: SyncError) -> Error {
    Error::Sync(e)
}

fn auth(error: AuthError) -> Error {
    sync(SyncError::Credential {
        stream: "s".into(),
        hint: "set the variables".into(),
        error,
    })
}

fn report() -> Report {
    edc_core::audit::verify(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("README.md")
            .as_path(),
    )
    .expect("a README is read as a trail and is not one")
}

/// One value of every variant a command can end with, and the code the
/// README's table documents for that kind of failure.
fn examples() -> Vec<(&'static str, Error, u8)> {
    let stream = || "s".to_string();
    vec![
        (
            "the policy file cannot be read",
            ConfigError::Read {
                path: path(),
                error: io(),
            }
            .into(),
            66,
        ),
        (
            "an invalid policy",
            ConfigError::Invalid {
                path: path(),
                problems: vec![],
            }
            .into(),
            78,
        ),
        (
            "an uncommitted policy",
            ConfigError::NotUnderChangeControl {
                reason: "dirty".into(),
                remedy: "commit".into(),
            }
            .into(),
            78,
        ),
        (
            "a missing environment variable",
            ConfigError::MissingEnv(MissingEnv {
                name: "X".into(),
                key: "k".into(),
                not_unicode: false,
            })
            .into(),
            78,
        ),
        (
            "missing environment variables",
            ConfigError::MissingEnvs(vec![]).into(),
            78,
        ),
        (
            "an unknown vendor",
            ConfigError::UnknownVendor {
                vendor: "v".into(),
                path: path(),
                known: String::new(),
            }
            .into(),
            78,
        ),
        (
            "an unknown stream",
            ConfigError::UnknownStream {
                vendor: "v".into(),
                stream: stream(),
                known: String::new(),
            }
            .into(),
            78,
        ),
        (
            "a URL edc-sync does not take there",
            ConfigError::Identity("--out ftp://".into()).into(),
            78,
        ),
        (
            "a vendor without a delta endpoint",
            ConfigError::NoDelta {
                vendor: "v".into(),
                path: path(),
            }
            .into(),
            78,
        ),
        (
            "the retry budget spent",
            sync(SyncError::Exhausted {
                stream: stream(),
                reason: "r".into(),
            }),
            75,
        ),
        (
            "the EDC unreachable",
            sync(SyncError::Unreachable {
                stream: stream(),
                attempts: 5,
                detail: "d".into(),
            }),
            69,
        ),
        (
            "the EDC refused the credential",
            sync(SyncError::Permission {
                stream: stream(),
                detail: "401".into(),
                hint: "h".into(),
            }),
            77,
        ),
        (
            "a refused login",
            auth(AuthError::Refused {
                code: "c".into(),
                detail: "d".into(),
            }),
            77,
        ),
        (
            "a failed credential helper",
            auth(AuthError::Helper {
                program: "p".into(),
                detail: "d".into(),
            }),
            77,
        ),
        (
            "the login endpoint unreachable",
            auth(AuthError::Unavailable {
                url: "u".into(),
                detail: "d".into(),
            }),
            69,
        ),
        (
            "a login off the origin",
            auth(AuthError::OffOrigin {
                url: "u".into(),
                detail: "d".into(),
            }),
            65,
        ),
        (
            "a login answer that is not one",
            auth(AuthError::Protocol {
                url: "u".into(),
                detail: "d".into(),
            }),
            65,
        ),
        (
            "a session of another Vault",
            auth(AuthError::WrongVault {
                expected: "a".into(),
                got: "b".into(),
            }),
            77,
        ),
        (
            "an invalid payload",
            sync(SyncError::Rejected {
                stream: stream(),
                reason: "r".into(),
            }),
            65,
        ),
        (
            "Redis unavailable mid-run",
            sync(SyncError::Pacer(PacerError::Unavailable {
                endpoint: "redis".into(),
                attempts: 3,
                detail: "d".into(),
            })),
            69,
        ),
        (
            "a stream locked by another run",
            sync(SyncError::Locked(StreamLocked {
                stream: stream(),
                holder: "h".into(),
            })),
            75,
        ),
        (
            "the run lock taken over",
            sync(SyncError::LockLost {
                stream: stream(),
                fence: 1,
                now: "n".into(),
            }),
            75,
        ),
        (
            "interrupted",
            sync(SyncError::Interrupted { stream: stream() }),
            75,
        ),
        (
            "a collection that changed under every pass",
            sync(SyncError::Unsettled {
                stream: stream(),
                detail: "changed".into(),
            }),
            75,
        ),
        (
            "the server does not offer what the policy asks",
            sync(SyncError::Unsupported {
                stream: stream(),
                detail: "REDCap 10.7.9 has no Export Logging".into(),
            }),
            78,
        ),
        (
            "the EDC banned this host's address",
            sync(SyncError::Banned {
                stream: stream(),
                detail: "banned".into(),
            }),
            76,
        ),
        (
            "a stream's audit append failing",
            sync(SyncError::Audit(AuditError::Io {
                path: path(),
                op: "append",
                error: io(),
            })),
            74,
        ),
        (
            "a stream's landing damaged",
            sync(SyncError::Store(StoreError::Corrupt {
                path: path(),
                detail: "d".into(),
            })),
            65,
        ),
        (
            "the audit trail unwritable",
            AuditError::Io {
                path: path(),
                op: "append",
                error: io(),
            }
            .into(),
            74,
        ),
        (
            "an audit line that cannot be encoded",
            AuditError::Encode {
                path: path(),
                error: edc_core::audit::EncodeError::NotAnObject {
                    event: "e",
                    detail: "d".into(),
                },
            }
            .into(),
            74,
        ),
        (
            "an audit trail whose end does not verify",
            AuditError::Damaged {
                path: path(),
                problems: vec![],
            }
            .into(),
            65,
        ),
        (
            "a trail in a state database out of disk",
            AuditError::Db(db(74)).into(),
            74,
        ),
        (
            "state unwritable",
            StoreError::Io {
                path: path(),
                op: "write",
                error: io(),
            }
            .into(),
            74,
        ),
        (
            "a state file unreadable",
            StoreError::Unreadable {
                path: path(),
                detail: "d".into(),
            }
            .into(),
            74,
        ),
        (
            "a commit without its proof",
            StoreError::Unproven {
                path: path(),
                detail: "d".into(),
            }
            .into(),
            74,
        ),
        (
            "state that disagrees with the trail",
            StoreError::Corrupt {
                path: path(),
                detail: "d".into(),
            }
            .into(),
            65,
        ),
        (
            "the object store unreachable",
            StoreError::Object(object(Failure::Unavailable)).into(),
            69,
        ),
        (
            "the object store throttling",
            StoreError::Object(object(Failure::Throttled)).into(),
            75,
        ),
        (
            "the object store refused the credentials",
            StoreError::Object(object(Failure::Refused)).into(),
            77,
        ),
        (
            "other bytes than the SHA-256 sent",
            StoreError::Object(object(Failure::Checksum)).into(),
            74,
        ),
        (
            "the landing's profile missing",
            StoreError::Object(object(Failure::Config)).into(),
            78,
        ),
        (
            "a refused object request",
            StoreError::Object(object(Failure::Other)).into(),
            74,
        ),
        ("a state database in state", StoreError::Db(db(65)).into(), 65),
        ("the state database unreachable", db(69).into(), 69),
        ("the state database refused the role", db(77).into(), 77),
        ("a state database of another schema version", db(78).into(), 78),
        (
            "a state database that disagrees with its trail",
            db(65).into(),
            65,
        ),
        ("a state database out of disk", db(74).into(), 74),
        ("the database run lock taken over", db(75).into(), 75),
        (
            "a deadlock that outlasted its retries",
            DbError::Contended {
                url: "u".into(),
                op: "o",
                detail: "d".into(),
                attempts: 5,
            }
            .into(),
            75,
        ),
        ("the audit key cannot be had", KeyError("k".into()).into(), 78),
        (
            "a run without the audit key over a sealed trail",
            AuditError::KeyNeeded {
                path: path(),
                place: "byte 0".into(),
            }
            .into(),
            78,
        ),
        (
            "Redis cannot answer about the anchor",
            RedisAnchorError {
                key: "k".into(),
                detail: "d".into(),
            }
            .into(),
            69,
        ),
        (
            "a Redis URL the pacer does not take",
            PacerError::InvalidUrl {
                url: "u".into(),
                detail: "d".into(),
            }
            .into(),
            78,
        ),
        (
            "Redis refusing the password in the URL",
            PacerError::Refused {
                endpoint: "e".into(),
                detail: "d".into(),
            }
            .into(),
            77,
        ),
        (
            "Redis answering what it should not",
            PacerError::Protocol {
                endpoint: "e".into(),
                script: "s",
                detail: "d".into(),
            }
            .into(),
            69,
        ),
        ("a broken audit chain", NotIntact(report()).into(), 65),
        (
            "audit verify of a file that cannot be read",
            ReadError {
                path: path(),
                error: io(),
            }
            .into(),
            66,
        ),
        (
            "audit verify of a trail that is a symbolic link",
            ReadError {
                path: path(),
                error: std::io::Error::other(edc_core::no_follow::LinkRefused(None)),
            }
            .into(),
            74,
        ),
        ("verify discrepancies", Discrepancies("d".into()).into(), 65),
        (
            "verify of a path that cannot be read",
            Unverifiable::Local(Unreadable {
                path: path(),
                error: io(),
            })
            .into(),
            66,
        ),
        (
            "verify of a file that is a symbolic link",
            Unverifiable::Local(Unreadable {
                path: path(),
                error: std::io::Error::other(edc_core::no_follow::LinkRefused(None)),
            })
            .into(),
            74,
        ),
        (
            "verify with an --out URL it does not take",
            Unverifiable::Config(ConfigError::Identity("--out ftp://".into())).into(),
            78,
        ),
        (
            "verify of an unreachable bucket",
            Unverifiable::Object(object(Failure::Unavailable)).into(),
            69,
        ),
        (
            "verify of an unreachable state database",
            Unverifiable::Db(db(69)).into(),
            69,
        ),
        (
            "verify of a state database whose ledger cannot be read",
            Unverifiable::DbLedger(DbUnreadable::Db(db(77))).into(),
            77,
        ),
        (
            "verify of a database whose trail cannot be exported",
            Unverifiable::DbLedger(DbUnreadable::Export(ExportError::Io {
                path: path(),
                op: "write",
                error: io(),
            }))
            .into(),
            74,
        ),
        (
            "verify of a database with an unreadable landing",
            Unverifiable::DbLedger(DbUnreadable::Local(Unreadable {
                path: path(),
                error: io(),
            }))
            .into(),
            66,
        ),
        (
            "verify of a database with a refused bucket",
            Unverifiable::DbLedger(DbUnreadable::Object(object(Failure::Refused))).into(),
            77,
        ),
        (
            "audit export from an unreachable database",
            ExportError::Db(db(69)).into(),
            69,
        ),
        (
            "audit export over an existing file",
            ExportError::Refused {
                path: path(),
                detail: "d".into(),
            }
            .into(),
            78,
        ),
        (
            "audit export that cannot write",
            ExportError::Io {
                path: path(),
                op: "write",
                error: io(),
            }
            .into(),
            74,
        ),
        (
            "a qualification check that did not pass",
            NotQualified {
                kind: "OQ".into(),
                failed: 1,
                executed: 2,
                report: "r".into(),
            }
            .into(),
            70,
        ),
        (
            "a file named on the command line unreadable",
            Error::input("reading --key-file", io()),
            66,
        ),
        ("writing a result", Error::io("writing to stdout", io()), 74),
        (
            "a failure with what was being done",
            Error::from(db(77)).context("reading the cursor"),
            77,
        ),
    ]
}

/// Every code the README documents for a failure.
fn documented() -> std::collections::BTreeSet<u8> {
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let table = readme.split("## Exit codes").nth(1).unwrap();
    table
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("| ")?.split(' ').next()?.parse().ok())
        .collect()
}

#[test]
fn every_failure_exits_with_the_code_the_readme_documents_for_it() {
    let documented = documented();
    assert!(
        documented.contains(&65) && documented.contains(&78),
        "{documented:?}"
    );
    let mut reached = std::collections::BTreeSet::new();
    for (what, error, code) in examples() {
        exhaustive(&error);
        assert!(
            documented.contains(&code),
            "{what}: {code} is not in the README's table"
        );
        assert_eq!(error.exit().code(), code, "{what}: {error}");
        reached.insert(code);
    }
    // Every documented failure code is reached by some failure; 0, 2
    // (clap) and 130 (the signal handler's abort) are not failures of a
    // command's work.
    let failures: std::collections::BTreeSet<u8> = documented
        .iter()
        .copied()
        .filter(|c| ![0, 2, 130].contains(c))
        .collect();
    assert_eq!(reached, failures);
    assert_eq!(
        Exit::ALL
            .iter()
            .map(|d| d.code)
            .collect::<std::collections::BTreeSet<_>>(),
        documented,
        "Exit::ALL and the README's table list the same codes"
    );
}

#[test]
fn a_closed_stdout_ends_quietly_and_nothing_else_does() {
    let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
    assert!(Error::io("writing to stdout", pipe)
        .context("printing")
        .is_broken_pipe());
    assert!(!Error::io("writing to stdout", io()).is_broken_pipe());
    assert!(!Error::from(db(74)).is_broken_pipe());
}

/// Every variant of every error a command can end with: adding one breaks
/// this build until `examples` has a value of it.
fn exhaustive(e: &Error) {
    match e {
        Error::Config(c) => match c {
            ConfigError::Read { .. }
            | ConfigError::Invalid { .. }
            | ConfigError::NotUnderChangeControl { .. }
            | ConfigError::MissingEnv(_)
            | ConfigError::MissingEnvs(_)
            | ConfigError::UnknownVendor { .. }
            | ConfigError::UnknownStream { .. }
            | ConfigError::Identity(_)
            | ConfigError::NoDelta { .. } => {}
        },
        Error::Sync(s) => exhaustive_sync(s),
        Error::Audit(a) => exhaustive_audit(a),
        Error::Store(s) => exhaustive_store(s),
        Error::Db(d) => exhaustive_db(d),
        Error::Pacer(p) => match p {
            PacerError::InvalidUrl { .. }
            | PacerError::Unavailable { .. }
            | PacerError::Refused { .. }
            | PacerError::Protocol { .. } => {}
        },
        Error::Unverifiable(u) => match u {
            Unverifiable::Config(_) | Unverifiable::Local(_) => {}
            Unverifiable::Object(o) => exhaustive_object(o),
            Unverifiable::Db(d) => exhaustive_db(d),
            Unverifiable::DbLedger(d) => match d {
                DbUnreadable::Db(d) => exhaustive_db(d),
                DbUnreadable::Export(e) => exhaustive_export(e),
                DbUnreadable::Local(_) => {}
                DbUnreadable::Object(o) => exhaustive_object(o),
            },
        },
        Error::Export(e) => exhaustive_export(e),
        Error::Context { source, .. } => exhaustive(source),
        Error::Key(_)
        | Error::RedisAnchor(_)
        | Error::NotIntact(_)
        | Error::AuditUnreadable(_)
        | Error::Discrepancies(_)
        | Error::NotQualified(_)
        | Error::StampNotHeld(_)
        | Error::StampUnreadable(_)
        | Error::Input { .. }
        | Error::Io { .. } => {}
    }
}

fn exhaustive_sync(s: &SyncError) {
    match s {
        SyncError::Credential { error, .. } => match error {
            // A throttled login is waited out and retried like a 429; it
            // ends a run only as the retry budget spent (Exhausted).
            AuthError::Throttled { .. } => panic!("a throttled login never ends a run"),
            AuthError::Refused { .. }
            | AuthError::Helper { .. }
            | AuthError::Unavailable { .. }
            | AuthError::OffOrigin { .. }
            | AuthError::Protocol { .. }
            | AuthError::WrongVault { .. } => {}
        },
        SyncError::Audit(a) => exhaustive_audit(a),
        SyncError::Store(s) => exhaustive_store(s),
        SyncError::Pacer(_)
        | SyncError::Exhausted { .. }
        | SyncError::Unreachable { .. }
        | SyncError::Permission { .. }
        | SyncError::Banned { .. }
        | SyncError::Unsupported { .. }
        | SyncError::Rejected { .. }
        | SyncError::Locked(_)
        | SyncError::LockLost { .. }
        | SyncError::Unsettled { .. }
        | SyncError::Interrupted { .. } => {}
    }
}

fn exhaustive_audit(a: &AuditError) {
    match a {
        AuditError::Db(d) => exhaustive_db(d),
        AuditError::Io { .. }
        | AuditError::Encode { .. }
        | AuditError::Damaged { .. }
        | AuditError::KeyNeeded { .. }
        | AuditError::NeverSealed { .. } => {}
    }
}

fn exhaustive_store(s: &StoreError) {
    match s {
        StoreError::Object(o) => exhaustive_object(o),
        StoreError::Db(d) => exhaustive_db(d),
        StoreError::Io { .. }
        | StoreError::Unreadable { .. }
        | StoreError::Unproven { .. }
        | StoreError::Corrupt { .. } => {}
    }
}

fn exhaustive_db(d: &DbError) {
    match d {
        DbError::Unavailable { .. }
        | DbError::Permission { .. }
        | DbError::Config { .. }
        | DbError::Damaged { .. }
        | DbError::Write { .. }
        | DbError::Fenced { .. }
        | DbError::Contended { .. } => {}
    }
}

fn exhaustive_object(o: &ObjectError) {
    match o.failure {
        Failure::Unavailable
        | Failure::Throttled
        | Failure::Refused
        | Failure::Checksum
        | Failure::Config
        | Failure::Other => {}
    }
}

fn exhaustive_export(e: &ExportError) {
    match e {
        ExportError::Db(d) => exhaustive_db(d),
        ExportError::Refused { .. } | ExportError::Io { .. } => {}
    }
}

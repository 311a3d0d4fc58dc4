//! `edc-sync state ...`: the PostgreSQL state database's schema.

use std::io::Write;

use crate::cli::StateCommand;
use edc_core::audit::{AuditKey, KEY_ENV};
use edc_core::config::ConfigError;
use edc_core::error::IoContext;
use edc_core::ledger::StateLocation;
use edc_core::state_db::{self, schema, DbUrl, StateDb};
use edc_core::Error;

pub fn run(cmd: StateCommand) -> Result<(), Error> {
    match cmd {
        StateCommand::Migrate {
            state,
            grant_to,
            require_audit_key,
            audit_key_file,
        } => {
            let url = db_url(&state)?;
            // The key is read (and refused, 78) before anything is applied.
            let key = match (require_audit_key, &audit_key_file) {
                (false, _) => None,
                (true, Some(path)) => Some(AuditKey::from_file(path)?),
                (true, None) => Some(AuditKey::from_env()?.ok_or_else(|| {
                    ConfigError::Identity(format!(
                        "--require-audit-key: no audit key; set {KEY_ENV} or --audit-key-file to the key runs hold"
                    ))
                })?),
            };
            let (applied, required) = super::runtime()?.block_on(async {
                let mut client = StateDb::connect_raw(&url).await?;
                let applied = schema::migrate(&mut client, &url, grant_to.as_deref()).await?;
                let required = match &key {
                    Some(key) => Some(state_db::require_audit_key(&client, &url, key).await?),
                    None => None,
                };
                Ok::<_, edc_core::state_db::DbError>((applied, required))
            })?;
            let mut out = std::io::stdout().lock();
            for m in &applied {
                writeln!(out, "applied schema version {}: {}", m.version, m.description)
                    .io(|| "writing to stdout".into())?;
            }
            if let Some(role) = &grant_to {
                writeln!(
                    out,
                    "granted role {role:?} what runs need (no UPDATE or DELETE on evidence)"
                )
                .io(|| "writing to stdout".into())?;
            }
            if let Some(id) = &required {
                writeln!(
                    out,
                    "every trail line now needs audit key {id} (the database keeps a key derived from it, never the key)"
                )
                .io(|| "writing to stdout".into())?;
            }
            writeln!(out, "{url}: schema version {} (current)", schema::CURRENT)
                .io(|| "writing to stdout".into())?;
            Ok(())
        }
    }
}

/// `--state`'s value as a database URL; anything else is 78 naming it.
pub(super) fn db_url(text: &str) -> Result<DbUrl, Error> {
    match StateLocation::parse("--state", std::path::Path::new(text))? {
        StateLocation::Db(url) => Ok(*url),
        StateLocation::Dir(_) => Err(ConfigError::Identity(format!(
            "--state {}: not a postgres:// URL; this command works on a PostgreSQL state database",
            edc_core::redact::redact_arg(text)
        ))
        .into()),
    }
}

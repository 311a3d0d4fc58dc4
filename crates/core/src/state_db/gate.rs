//! The database's append gate: with an audit key required (`state migrate
//! --require-audit-key`), the schema's append function
//! (`edc_sync_append_line`, schema version 4) takes a trail line only with
//! a MAC of the line's SHA-256 under a key derived from the audit key:
//!
//! ```text
//! gate_key = HMAC-SHA256(audit key, "edc-sync-database-append-gate-v1")
//! gate_mac = HMAC-SHA256(gate_key, the line's SHA-256 in lowercase hex)
//! ```
//!
//! Why a derived key: the database must hold what it checks with, and
//! whoever can read the database's tables (its owner, a backup) must still
//! not be able to seal a line or sign a checkpoint, which take the audit
//! key itself. The run role cannot read the gate's table at all, so the
//! credentials every host holds no longer let anyone chain a line of their
//! own to the trail: only a holder of the audit key can.
//!
//! The MAC travels as an argument of the function and is not stored: the
//! line's own seal and the keyed checkpoints stay what proves the trail.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::DbUrl;
use crate::audit::AuditKey;
use crate::db_error::DbError;

const GATE_DOMAIN: &str = "edc-sync-database-append-gate-v1";

/// The key the database checks appends with, derived from the audit key.
#[derive(Clone)]
pub(crate) struct GateKey([u8; 32]);

impl std::fmt::Debug for GateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GateKey(..)")
    }
}

impl GateKey {
    pub(crate) fn of(key: &AuditKey) -> GateKey {
        GateKey(key.derive(GATE_DOMAIN))
    }

    /// The MAC the append function asks of the line whose SHA-256 is
    /// `line_sha256` (lowercase hex).
    pub(crate) fn mac(&self, line_sha256: &str) -> String {
        // HMAC takes a key of any length; this cannot fail.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!());
        mac.update(line_sha256.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

/// Makes the database take trail lines only from a holder of `key` (a
/// later call with another key rotates it: the latest one is required).
/// Run as the schema's owner, after the migrations. Returns the key's id.
pub async fn require_audit_key(
    client: &tokio_postgres::Client,
    url: &DbUrl,
    key: &AuditKey,
) -> Result<String, DbError> {
    let id = key.id();
    let gate = GateKey::of(key);
    client
        .execute(
            "INSERT INTO edc_sync_append_gate (key_id, gate_key) VALUES ($1, $2)",
            &[&id, &gate.0.as_slice()],
        )
        .await
        .map_err(|e| super::error::classify(url, "require the audit key in", e))?;
    Ok(id)
}

/// The id of the audit key the database requires of appends, if any.
pub(crate) async fn required(
    client: &impl tokio_postgres::GenericClient,
) -> Result<Option<String>, tokio_postgres::Error> {
    Ok(client
        .query_one("SELECT edc_sync_gate_key_id()", &[])
        .await?
        .get(0))
}

/// Whether a run holding `ours` may append where `required` is asked: a
/// run without the key, or with another, is stopped (78) naming the
/// variable and both ids before it appends anything.
pub(crate) fn admits(url: &DbUrl, required: Option<&str>, ours: Option<&AuditKey>) -> Result<(), DbError> {
    let Some(required) = required else {
        return Ok(());
    };
    let ours = ours.map(AuditKey::id);
    if ours.as_deref() == Some(required) {
        return Ok(());
    }
    let given = match ours {
        None => "this run holds no audit key".to_string(),
        Some(id) => format!("this run's key is {id}"),
    };
    Err(DbError::Config {
        url: url.shown().to_string(),
        detail: format!(
            "takes trail lines only from a holder of audit key {required} (state migrate --require-audit-key), and \
             {given}; set {} or --audit-key-file to that key (nothing was appended)",
            crate::audit::KEY_ENV
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The derivation and MAC written out in the module's words, by a
    /// second implementation (the one the database runs is SQL).
    #[test]
    fn the_gate_mac_is_an_hmac_under_a_key_derived_from_the_audit_key() {
        let key = AuditKey::new(b"an audit key of at least thirty-two bytes".to_vec(), "test").unwrap();
        let hmac = |k: &[u8], m: &[u8]| {
            let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(k).unwrap();
            mac.update(m);
            mac.finalize().into_bytes().to_vec()
        };
        let derived = hmac(
            b"an audit key of at least thirty-two bytes",
            GATE_DOMAIN.as_bytes(),
        );
        let sha = "ab".repeat(32);
        assert_eq!(
            GateKey::of(&key).mac(&sha),
            hex::encode(hmac(&derived, sha.as_bytes()))
        );
        assert_ne!(
            derived.as_slice(),
            b"an audit key of at least thirty-two bytes".as_slice()
        );
    }

    #[test]
    fn a_run_without_the_required_key_or_with_another_is_told_both_ids() {
        let url = DbUrl::parse("--state", "postgres://u@h/db").unwrap();
        let key = AuditKey::new(vec![7; 32], "test").unwrap();
        let other = AuditKey::new(vec![8; 32], "test").unwrap();
        assert!(admits(&url, None, None).is_ok());
        assert!(admits(&url, Some(&key.id()), Some(&key)).is_ok());
        let none = admits(&url, Some(&key.id()), None).unwrap_err().to_string();
        assert!(
            none.contains(&key.id()) && none.contains("EDC_SYNC_AUDIT_KEY"),
            "{none}"
        );
        let wrong = admits(&url, Some(&key.id()), Some(&other))
            .unwrap_err()
            .to_string();
        assert!(
            wrong.contains(&key.id()) && wrong.contains(&other.id()),
            "{wrong}"
        );
    }
}

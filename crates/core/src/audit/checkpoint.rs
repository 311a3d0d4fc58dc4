//! Keyed checkpoints: what a hash chain alone cannot prove.
//!
//! Anyone can recompute a SHA-256 chain, so a person who rewrites the whole
//! file leaves a trail that verifies. With an audit key set
//! (`EDC_SYNC_AUDIT_KEY` or `--audit-key-file`), every `run_finished` line
//! carries an HMAC-SHA256 over the chain head it is appended to:
//!
//! ```text
//! mac = HMAC-SHA256(key, "edc-sync-audit-checkpoint-v1\n" + run_id + "\n" + seq + "\n" + prev_sha256)
//! ```
//!
//! `run_id`, `seq` and `prev_sha256` are the line's own fields (`seq` in
//! decimal), so the MAC covers every line before it through the chain.
//! Someone without the key can neither recompute a MAC after rewriting an
//! earlier line nor forge one for a line they add.
//!
//! A checkpoint proves what came before it; a line appended after the last
//! one (a forged `page_committed` moving a stream on) would be signed over
//! by the next run's. So with a key every line is also sealed: it ends with
//! a `line_mac`, the HMAC of the line's bytes without it:
//!
//! ```text
//! line_mac = HMAC-SHA256(key, "edc-sync-audit-line-v1\n" + the line up to "prev_sha256":"…" and its closing "}")
//! ```
//!
//! A keyed run proves, before it appends, that every line after the last
//! checkpoint that verifies is sealed with the key ([`SealWalk`]); `audit
//! verify --key` proves every line from the first sealed one on.
//! `docs/audit-trail.md` gives both checks in a few lines of Python.

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::digest::sha256_hex;

/// The variable that holds the audit key.
pub const KEY_ENV: &str = "EDC_SYNC_AUDIT_KEY";

/// Shorter keys are refused: the MAC is only as strong as the key.
pub(crate) const MIN_KEY_BYTES: usize = 32;

/// The algorithm name written into every checkpoint.
pub(crate) const ALGORITHM: &str = "HMAC-SHA256";

const DOMAIN: &str = "edc-sync-audit-checkpoint-v1";
const LINE_DOMAIN: &str = "edc-sync-audit-line-v1";
/// What a policy stamp's MAC covers starts with this (`config stamp`).
const STAMP_DOMAIN: &str = "edc-sync-config-stamp-v1";

pub use super::line::LINE_MAC;

/// `,"line_mac":"` before the 64 hex digits, and `"}` after them.
const SEAL_HEAD: &[u8] = b",\"line_mac\":\"";
const SEAL_LEN: usize = SEAL_HEAD.len() + 64 + 2;

/// A line's bytes without its seal, and the seal's MAC, when it has one.
pub(crate) fn unseal(line: &[u8]) -> Option<(Vec<u8>, &str)> {
    let at = line.len().checked_sub(SEAL_LEN)?;
    let (body, seal) = line.split_at(at);
    let mac = seal.strip_prefix(SEAL_HEAD)?.strip_suffix(b"\"}")?;
    if !mac.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut unsealed = body.to_vec();
    unsealed.push(b'}');
    Some((unsealed, std::str::from_utf8(mac).ok()?))
}

/// What a line's seal says under a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seal {
    /// No `line_mac`: written without a key (or by a version before seals).
    Absent,
    /// Sealed with this key.
    Verifies,
    /// A `line_mac` that this key did not make.
    Fails,
}

/// The audit key: secret bytes, never printed.
#[derive(Clone)]
pub struct AuditKey {
    bytes: Vec<u8>,
}

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuditKey(id {})", self.id())
    }
}

/// The key could not be had; the message names the variable or file.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(pub String);

impl AuditKey {
    /// A key from its bytes (at least `MIN_KEY_BYTES`); `source` names
    /// where it came from for the error.
    pub fn new(bytes: Vec<u8>, source: &str) -> Result<AuditKey, KeyError> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(KeyError(format!(
                "{source}: the audit key is {} bytes; at least {MIN_KEY_BYTES} are needed",
                bytes.len()
            )));
        }
        if let Ok(text) = std::str::from_utf8(&bytes) {
            crate::redact::register_secret(text);
        }
        Ok(AuditKey { bytes })
    }

    /// The key in `EDC_SYNC_AUDIT_KEY` (its UTF-8 bytes), if set.
    pub fn from_env() -> Result<Option<AuditKey>, KeyError> {
        match std::env::var_os(KEY_ENV) {
            None => Ok(None),
            Some(v) if v.is_empty() => Err(KeyError(format!("{KEY_ENV} is set but empty"))),
            Some(v) => {
                use std::os::unix::ffi::OsStrExt;
                AuditKey::new(v.as_bytes().to_vec(), KEY_ENV).map(Some)
            }
        }
    }

    /// The key in a file: its bytes, without one trailing newline.
    pub fn from_file(path: &std::path::Path) -> Result<AuditKey, KeyError> {
        let mut bytes = crate::no_follow::operator_input(path)
            .map_err(|e| KeyError(format!("audit key file {}: cannot read it: {e}", path.display())))?;
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
        }
        AuditKey::new(bytes, &format!("audit key file {}", path.display()))
    }

    /// The key's public identifier: the first 16 hex digits of its SHA-256,
    /// so a reviewer can tell which key a checkpoint claims.
    pub fn id(&self) -> String {
        sha256_hex(&self.bytes)[..16].to_string()
    }

    /// `line` (composed, without a seal) sealed: its `line_mac` added as
    /// its last key.
    pub(crate) fn seal(&self, mut line: String) -> String {
        let mut mac = self.hmac();
        mac.update(LINE_DOMAIN.as_bytes());
        mac.update(b"\n");
        mac.update(line.as_bytes());
        let mac = hex::encode(mac.finalize().into_bytes());
        line.pop();
        line.push_str(&format!(",\"{LINE_MAC}\":\"{mac}\"}}"));
        line
    }

    /// What the seal of `line` (its bytes, without the newline) says.
    pub(crate) fn seal_of(&self, line: &[u8]) -> Seal {
        let Some((unsealed, claimed)) = unseal(line) else {
            return Seal::Absent;
        };
        let Ok(claimed) = hex::decode(claimed) else {
            return Seal::Fails;
        };
        let mut mac = self.hmac();
        mac.update(LINE_DOMAIN.as_bytes());
        mac.update(b"\n");
        mac.update(&unsealed);
        match mac.verify_slice(&claimed) {
            Ok(()) => Seal::Verifies,
            Err(_) => Seal::Fails,
        }
    }

    /// The MAC of a policy stamp's content (`Stamp::signed_content`),
    /// lowercase hex: what `config stamp` writes when a key is configured.
    pub fn stamp_mac(&self, content: &str) -> String {
        let mut mac = self.hmac();
        mac.update(STAMP_DOMAIN.as_bytes());
        mac.update(b"\n");
        mac.update(content.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// Whether `claimed` is the MAC of a stamp's content with this key.
    pub fn stamp_verifies(&self, content: &str, claimed: &str) -> bool {
        let Ok(claimed) = hex::decode(claimed) else {
            return false;
        };
        let mut mac = self.hmac();
        mac.update(STAMP_DOMAIN.as_bytes());
        mac.update(b"\n");
        mac.update(content.as_bytes());
        mac.verify_slice(&claimed).is_ok()
    }

    /// The MAC of a chain head, lowercase hex.
    pub fn mac(&self, run_id: &str, seq: u64, prev_sha256: &str) -> String {
        let mut mac = self.hmac();
        mac.update(message(run_id, seq, prev_sha256).as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// Whether the trail's last keyed checkpoint, `line` (its last
    /// `run_finished` line, or a later `trail_heads` line that carries one;
    /// `at` saying where it is), was made with this key: `None` when it
    /// verifies or was signed with another key (whose holder this run
    /// cannot speak for); otherwise the problem, worded once for every
    /// backend. A run holding the key refuses to add to a trail whose chain
    /// was rewritten and recomputed without it.
    pub(crate) fn last_checkpoint_problem(&self, line: &serde_json::Value, at: &str) -> Option<String> {
        if line["checkpoint"]["key_id"] != self.id().as_str() || self.checkpoint_verifies(line) {
            return None;
        }
        Some(format!(
            "the last keyed checkpoint (the {} line {at}) does not verify with this key: the trail was rewritten \
             and its chain recomputed by someone without it",
            line["event"].as_str().unwrap_or("run_finished")
        ))
    }

    /// Whether `line` carries a checkpoint of this key that verifies over
    /// the chain head it follows.
    pub(crate) fn checkpoint_verifies(&self, line: &serde_json::Value) -> bool {
        let mark = &line["checkpoint"];
        mark["key_id"] == self.id().as_str()
            && self.verifies(
                line["run_id"].as_str().unwrap_or_default(),
                line["seq"].as_u64().unwrap_or_default(),
                line["prev_sha256"].as_str().unwrap_or_default(),
                mark["mac"].as_str().unwrap_or_default(),
            )
    }

    /// Whether `mac_hex` is this key's MAC of the head (constant time).
    pub fn verifies(&self, run_id: &str, seq: u64, prev_sha256: &str, mac_hex: &str) -> bool {
        let Ok(claimed) = hex::decode(mac_hex) else {
            return false;
        };
        let mut mac = self.hmac();
        mac.update(message(run_id, seq, prev_sha256).as_bytes());
        mac.verify_slice(&claimed).is_ok()
    }

    /// A checkpoint for the line about to be written.
    pub fn checkpoint(&self, run_id: &str, seq: u64, prev_sha256: &str) -> Checkpoint {
        Checkpoint {
            alg: ALGORITHM.into(),
            key_id: self.id(),
            mac: self.mac(run_id, seq, prev_sha256),
        }
    }

    /// A key for one other purpose, `HMAC-SHA256(key, purpose)`: whoever
    /// holds it cannot go back to this key (the database's append gate).
    pub(crate) fn derive(&self, purpose: &str) -> [u8; 32] {
        let mut mac = self.hmac();
        mac.update(purpose.as_bytes());
        mac.finalize().into_bytes().into()
    }

    fn hmac(&self) -> Hmac<Sha256> {
        // HMAC takes a key of any length; this cannot fail.
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.bytes).unwrap_or_else(|_| unreachable!())
    }
}

fn message(run_id: &str, seq: u64, prev_sha256: &str) -> String {
    format!("{DOMAIN}\n{run_id}\n{seq}\n{prev_sha256}")
}

/// The number of the first line of `path` sealed with an audit key (it
/// ends with a `line_mac`), read from the start: what a run without the key
/// looks for before it writes, since lines chained to a sealed trail's end
/// by someone without the key hide its seals from a look at the end alone.
/// About a gigabyte a second: the filter is one substring search a line.
pub(crate) fn first_sealed_line(path: &std::path::Path) -> std::io::Result<Option<u64>> {
    let finder = memchr::memmem::Finder::new(b",\"line_mac\":\"");
    super::read::first_line_where(path, |_, bytes| {
        finder.find(bytes).is_some() && unseal(bytes).is_some()
    })
}

/// The proof a keyed run makes before it appends: the trail's lines read
/// from the end back ([`SealWalk::visit`]), every one sealed with the key
/// until a line whose checkpoint verifies ([`is_checkpoint_line`]: what is
/// before it that checkpoint proves). A line whose seal fails, or an unsealed
/// line after a sealed one, was added by someone without the key. A trail
/// with no sealed line at all ([`SealWalk::never_sealed`]) proves nothing
/// of who wrote it: one written before the key, or one replaced wholesale by
/// someone without it, look alike, so a keyed run takes it only when told
/// to adopt it (`--adopt-unsealed-trail`). The cost is the lines since the last
/// run finished or since the last heads line a keyed run wrote, whichever
/// is later: on a file trail, about what lies between two heads lines.
pub(crate) struct SealWalk<'k> {
    key: &'k AuditKey,
    /// The earliest (so far) unsealed line met, by where it is.
    unsealed: Option<String>,
    /// Whether a line sealed with the key was met.
    sealed_seen: bool,
    /// The audit lines (not torn tails) met.
    lines: u64,
}

/// What the walk says after a line. A walk that reaches the trail's first
/// line without a `Done` met no sealed line after an unsealed one: the
/// trail was never sealed, and is proven as far as seals go.
#[derive(Debug, PartialEq)]
pub(crate) enum Walked {
    /// Read the line before.
    Continue,
    /// Proven (`None`) or refused (the problem, naming the line).
    Done(Option<String>),
}

impl<'k> SealWalk<'k> {
    pub(crate) fn new(key: &'k AuditKey) -> SealWalk<'k> {
        SealWalk {
            key,
            unsealed: None,
            sealed_seen: false,
            lines: 0,
        }
    }

    /// After a walk that reached the trail's first line without a `Done`:
    /// whether the trail has audit lines and not one of them is sealed.
    pub(crate) fn never_sealed(&self) -> bool {
        !self.sealed_seen && self.lines > 0
    }

    /// The audit lines met so far.
    pub(crate) fn lines(&self) -> u64 {
        self.lines
    }

    /// The line `bytes` (without its newline), found at `place` (`byte N
    /// of FILE`, `line N of trail T`), the next one back from the end.
    pub(crate) fn visit(&mut self, place: &str, bytes: &[u8]) -> Walked {
        match self.key.seal_of(bytes) {
            Seal::Fails => Walked::Done(Some(format!(
                "the line at {place} carries a line MAC that does not verify with key {}: it was added or \
                 changed by someone without the key",
                self.key.id()
            ))),
            // A torn line a crash left is not an audit line: the chain's
            // own checks judge it.
            Seal::Absent if serde_json::from_slice::<serde_json::Value>(bytes).is_err() => Walked::Continue,
            Seal::Absent => {
                self.lines += 1;
                self.unsealed = Some(place.to_string());
                Walked::Continue
            }
            Seal::Verifies => {
                self.lines += 1;
                self.sealed_seen = true;
                if let Some(unsealed) = self.unsealed.take() {
                    return Walked::Done(Some(format!(
                        "the line at {unsealed} carries no line MAC although the lines before it are sealed with \
                         key {}: it was added by someone without the key (or by a run without it)",
                        self.key.id()
                    )));
                }
                let line: serde_json::Value = serde_json::from_slice(bytes).unwrap_or_default();
                match is_checkpoint_line(&line) && self.key.checkpoint_verifies(&line) {
                    true => Walked::Done(None),
                    false => Walked::Continue,
                }
            }
        }
    }
}

/// Whether `line` is one a keyed checkpoint may be on: a `run_finished`
/// line, or a `trail_heads` line that carries one (a keyed writer of a
/// heads line proves the lines since the last checkpoint first, so that a
/// run's proof reads back to the last heads line while another stream's
/// run is still going, not to that run's start).
pub(crate) fn is_checkpoint_line(line: &serde_json::Value) -> bool {
    line["event"] == "run_finished"
        || (line["event"] == super::heads::HEADS_EVENT && !line["checkpoint"].is_null())
}

/// The `checkpoint` field of a `run_finished` line (or a `trail_heads`
/// line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub alg: String,
    pub key_id: String,
    pub mac: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mac_verifies_only_with_its_key_and_its_head() {
        let key = AuditKey::new(vec![7u8; 32], "test").unwrap();
        let other = AuditKey::new(vec![8u8; 32], "test").unwrap();
        let head = "ab".repeat(32);
        let mac = key.mac("run", 9, &head);
        assert!(key.verifies("run", 9, &head, &mac));
        assert!(!other.verifies("run", 9, &head, &mac));
        assert!(!key.verifies("run", 10, &head, &mac));
        assert!(!key.verifies("run", 9, &"cd".repeat(32), &mac));
        assert!(!key.verifies("run", 9, &head, "zz"));
    }

    #[test]
    fn a_short_key_is_refused_naming_its_source() {
        let err = AuditKey::new(b"short".to_vec(), KEY_ENV).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("EDC_SYNC_AUDIT_KEY: the audit key is 5 bytes"));
    }
}

//! Where a trail's anchors are kept: a file in the anchoring state
//! directory and, with Redis, a key beside the pacing keys.
//!
//! The file names the trail by its identity, never by where it is: the
//! SHA-256 of its first line, which no copy, move, rename or restore on
//! another host changes. A trail whose identity has no anchor (emptied or
//! deleted, so without a first line; or another trail put in its place) is
//! checked against the anchor of a trail of the same file name, if the
//! state directory keeps one: it is refused, not started anew. Anchors an
//! older version wrote under the trail's absolute path are still read where
//! the trail still is, and the run says so in a `paths_reinterpreted` line;
//! the next anchor is written under the current name and the older file
//! removed.
//!
//! Redis keeps the head twice: under the trail's identity (found wherever
//! the trail and state directory are moved) and under this host and the
//! trail's absolute path (found when an insider empties or replaces the
//! trail and its state directory in place, where nothing of the trail's
//! identity is left to look it up by). Those keys are Redis's own, never
//! written into the evidence.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::anchor::{redis_copy, ChainHead, DIR};
use super::AuditEvent;
use quota_pacer::RedisPacer;

/// An anchor that was found, and where.
#[derive(Debug, Clone)]
pub struct Found {
    pub head: ChainHead,
    /// Where it was read from (the file, or `Redis anchor KEY`).
    pub source: String,
    /// It was read from where an older version kept it.
    pub legacy: bool,
}

/// The places of one trail's anchors.
#[derive(Debug, Clone)]
pub struct Anchors {
    root: PathBuf,
    /// The trail's file name.
    name: PathBuf,
    /// The trail's identity, once it has a first line.
    first_sha256: Option<String>,
    legacy_file: PathBuf,
    location_redis_key: String,
    legacy_redis_key: String,
}

impl Anchors {
    /// The anchors kept by the state directory `root` of the trail at
    /// `trail` (resolved: `canonical`), whose first line hashes to
    /// `first_sha256` (`None` while it has none).
    pub fn of(root: &Path, trail: &Path, canonical: &Path, first_sha256: Option<String>) -> Anchors {
        Anchors {
            root: root.to_path_buf(),
            name: PathBuf::from(trail.file_name().unwrap_or(trail.as_os_str())),
            first_sha256,
            legacy_file: ChainHead::legacy_file_in(root, canonical),
            location_redis_key: ChainHead::location_redis_key(canonical),
            legacy_redis_key: ChainHead::legacy_redis_key(canonical),
        }
    }

    /// The same places, for the trail once its first line is written.
    pub fn with_first_line(mut self, first_sha256: Option<String>) -> Anchors {
        self.first_sha256 = first_sha256.or(self.first_sha256);
        self
    }

    /// The anchor file, once the trail has an identity.
    pub fn file(&self) -> Option<PathBuf> {
        self.first_sha256
            .as_deref()
            .map(|id| ChainHead::file_in(&self.root, id))
    }

    /// The anchor in the state directory, if there is one. The anchors
    /// directory is never reached through a symbolic link: anchoring
    /// through one would read and write where it points, so a copy put
    /// back there could vouch for a trail cut short.
    pub fn load_file(&self) -> Result<Option<Found>, String> {
        let dir = self.root.join(DIR);
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(format!(
                "audit anchors {}: it is a symbolic link, which is never followed; replace it by the directory \
                 it stood for",
                dir.display()
            ));
        }
        let Some(current) = self.file() else {
            return self.load_by_name();
        };
        for (path, legacy) in [(&current, false), (&self.legacy_file, true)] {
            if let Some(head) = ChainHead::load(path)? {
                let source = format!("anchor {}", path.display());
                return Ok(Some(Found { head, source, legacy }));
            }
        }
        self.load_by_name()
    }

    /// For a trail whose identity has no anchor (no first line yet, or a
    /// trail put in the place of another): the anchor (the longest) of a
    /// trail of the same file name, if the state directory keeps one. The
    /// check against it then says how the trail differs.
    fn load_by_name(&self) -> Result<Option<Found>, String> {
        let dir = self.root.join(DIR);
        let entries = match crate::no_follow::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("audit anchors {}: cannot list them: {e}", dir.display())),
        };
        let mut best: Option<Found> = None;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let Some(head) = ChainHead::load(&path)? else {
                continue;
            };
            if head.audit_log.file_name() != Some(self.name.as_os_str()) {
                continue;
            }
            if best.as_ref().is_none_or(|b| b.head.bytes < head.bytes) {
                let legacy = head.first_sha256.is_none();
                let source = format!(
                    "anchor {} (of a trail named {})",
                    path.display(),
                    self.name.display()
                );
                best = Some(Found { head, source, legacy });
            }
        }
        Ok(best)
    }

    /// Writes `head` to the state directory; then an anchor an older
    /// version left is no longer needed and is removed.
    pub fn store_file(&self, head: &ChainHead) -> std::io::Result<()> {
        let Some(id) = head.first_sha256.as_deref() else {
            return Err(std::io::Error::other(
                "the trail has no complete first line to name it by",
            ));
        };
        head.store(&ChainHead::file_in(&self.root, id))?;
        match std::fs::remove_file(&self.legacy_file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// The Redis at `url`, reached as runs reach it, for reading the
    /// anchors they keep there (`audit verify --redis`).
    pub async fn connect_redis(url: &str) -> Result<RedisPacer, quota_pacer::PacerError> {
        RedisPacer::connect(url, crate::REDIS_KEY_PREFIX).await
    }

    /// The anchor Redis keeps, if any: under the trail's identity, or else
    /// under this host and the trail's path (or where an older version kept
    /// it).
    pub async fn load_redis(
        &self,
        redis: &RedisPacer,
    ) -> Result<Option<Found>, redis_copy::RedisAnchorError> {
        let by_identity = self.first_sha256.as_deref().map(ChainHead::redis_key);
        let keys = by_identity
            .iter()
            .map(|k| (k, false))
            .chain([(&self.location_redis_key, false), (&self.legacy_redis_key, true)]);
        for (key, legacy) in keys {
            if let Some(head) = redis_copy::load(redis, key).await? {
                let source = format!("Redis anchor {key}");
                return Ok(Some(Found { head, source, legacy }));
            }
        }
        Ok(None)
    }

    /// Writes `head` to Redis, under both keys in one round trip.
    pub async fn store_redis(
        &self,
        redis: &RedisPacer,
        head: &ChainHead,
    ) -> Result<(), redis_copy::RedisAnchorError> {
        let by_identity = head.first_sha256.as_deref().map(ChainHead::redis_key);
        let keys: Vec<String> = by_identity
            .into_iter()
            .chain([self.location_redis_key.clone()])
            .collect();
        redis_copy::store(redis, &keys, head).await
    }

    /// Removes every key Redis keeps for the trail at `trail`: under its
    /// identity (if it has a first line), this host and its path, and where
    /// an older version kept it. For the one owner of a trail that it is
    /// about to throw away (the OQ, whose scenario trails each rerun starts
    /// anew): anywhere else the anchor is the evidence that the trail was
    /// not replaced. Returns how many keys there were.
    pub async fn forget_redis(redis: &RedisPacer, trail: &Path) -> Result<u64, redis_copy::RedisAnchorError> {
        let canonical = match trail.parent().map(std::fs::canonicalize) {
            Some(Ok(dir)) => dir.join(trail.file_name().unwrap_or(trail.as_os_str())),
            _ => trail.to_path_buf(),
        };
        let first = super::anchor::first_line_sha256(trail).ok().flatten();
        let keys: Vec<String> = first
            .as_deref()
            .map(ChainHead::redis_key)
            .into_iter()
            .chain([
                ChainHead::location_redis_key(&canonical),
                ChainHead::legacy_redis_key(&canonical),
            ])
            .collect();
        redis_copy::forget(redis, &keys).await
    }

    /// The line a run writes when it read an anchor where an older version
    /// kept it.
    pub fn reinterpreted(&self, found: &Found) -> PathsReinterpreted {
        let read_as = match (found.source.starts_with("Redis"), self.first_sha256.as_deref()) {
            (true, Some(id)) => format!("Redis anchor {}", ChainHead::redis_key(id)),
            (true, None) => format!("Redis anchor {}", self.location_redis_key),
            (false, Some(id)) => format!("anchor {}", ChainHead::file_in(&self.root, id).display()),
            (false, None) => "the trail's anchor, named by its first line once it has one".into(),
        };
        PathsReinterpreted {
            stream: None,
            what: "audit anchor".into(),
            recorded: found.source.clone(),
            read_as,
        }
    }
}

/// State or trail lines written before paths were recorded relative to
/// their roots were read as relative: what was recorded, and how it was
/// read. Written by the run that meets them; lines and files it writes
/// itself are relative.
#[derive(Debug, Clone, Serialize)]
pub struct PathsReinterpreted {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// What named a path absolutely (`audit anchor`, `cursor receipt`,
    /// `page_committed landing_dir`).
    pub what: String,
    pub recorded: String,
    pub read_as: String,
}

impl AuditEvent for PathsReinterpreted {
    const NAME: &'static str = "paths_reinterpreted";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(audit_log: &str, bytes: u64, first: Option<&str>) -> ChainHead {
        ChainHead {
            audit_log: audit_log.into(),
            lines: 1,
            bytes,
            last_line_offset: 0,
            last_sha256: "0".repeat(64),
            run_id: "r".into(),
            first_sha256: first.map(str::to_string),
        }
    }

    const ID: &str = "ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12";

    #[test]
    fn an_anchor_is_found_by_the_trails_first_line_wherever_both_are_moved_or_renamed() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let trail = Path::new("/x/audit.jsonl");
        let here = Anchors::of(&a.path().join("state"), trail, trail, Some(ID.into()));
        here.store_file(&head("audit.jsonl", 10, Some(ID))).unwrap();
        std::fs::rename(a.path().join("state"), b.path().join("moved")).unwrap();
        let renamed = Path::new("/y/study-7-audit.jsonl");
        let there = Anchors::of(&b.path().join("moved"), renamed, renamed, Some(ID.into()));
        let found = there.load_file().unwrap().unwrap();
        assert!(!found.legacy);
        assert_eq!(found.head.bytes, 10);
    }

    #[test]
    fn an_empty_trail_is_checked_against_the_anchor_of_a_trail_of_its_name() {
        let a = tempfile::tempdir().unwrap();
        let root = a.path().join("state");
        let trail = Path::new("/x/audit.jsonl");
        Anchors::of(&root, trail, trail, Some(ID.into()))
            .store_file(&head("audit.jsonl", 10, Some(ID)))
            .unwrap();
        let emptied = Anchors::of(&root, trail, trail, None);
        assert_eq!(emptied.load_file().unwrap().unwrap().head.bytes, 10);
        let other = Path::new("/x/other.jsonl");
        assert!(Anchors::of(&root, other, other, None)
            .load_file()
            .unwrap()
            .is_none());
    }

    #[test]
    fn an_anchor_an_older_version_wrote_is_read_then_replaced() {
        let a = tempfile::tempdir().unwrap();
        let root = a.path().join("state");
        let trail = Path::new("/srv/trails/audit.jsonl");
        let legacy = ChainHead::legacy_file_in(&root, trail);
        head("/srv/trails/audit.jsonl", 10, None).store(&legacy).unwrap();
        let anchors = Anchors::of(&root, trail, trail, Some(ID.into()));
        let found = anchors.load_file().unwrap().unwrap();
        assert!(found.legacy);
        let line = serde_json::to_value(anchors.reinterpreted(&found)).unwrap();
        assert_eq!(line["what"], "audit anchor");
        assert!(line["recorded"]
            .as_str()
            .unwrap()
            .contains(&legacy.display().to_string()));
        anchors.store_file(&head("audit.jsonl", 20, Some(ID))).unwrap();
        assert!(
            !legacy.exists(),
            "the older anchor is removed once the current one is written"
        );
        let found = anchors.load_file().unwrap().unwrap();
        assert!(!found.legacy);
        assert_eq!(found.head.bytes, 20);
    }
}

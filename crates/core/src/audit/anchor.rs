//! Chain-head anchors: the end of the trail, remembered outside the file.
//!
//! A hash chain shows that lines were not changed *inside* the file; it
//! cannot show that the file was not deleted, emptied, cut short or swapped
//! for another one. At the end of every run the chain head (line count,
//! byte length, offset and SHA-256 of the last line) is written to the state
//! directory and, when the run uses Redis, to Redis. Before appending, a run
//! checks the trail against the anchors it finds: the anchored last line
//! must still be where it was, byte for byte. A trail only grows, so any
//! later state of an honest trail passes, and a trail that is shorter or
//! diverges does not.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::digest::sha256_hex;

/// The state directory's subdirectory for anchors.
pub const DIR: &str = "audit-anchors";

/// The end of a trail at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainHead {
    /// The trail's file name: anchors name their trail, never locate it,
    /// so that trail and state directory verify wherever they are moved.
    /// (An older version wrote the absolute path; such an anchor is still
    /// read, see [`ChainHead::legacy_file_in`].)
    pub audit_log: PathBuf,
    /// Complete lines in the file.
    pub lines: u64,
    /// Length of the file up to and including the last line's newline.
    pub bytes: u64,
    /// Where the last line starts.
    pub last_line_offset: u64,
    /// SHA-256 of the last line (the next line's `prev_sha256`).
    pub last_sha256: String,
    /// The run that wrote the anchor.
    pub run_id: String,
    /// SHA-256 of the trail's first line: the trail's identity, which no
    /// copy, move or rename changes (absent in anchors of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_sha256: Option<String>,
}

/// SHA-256 of the first complete line of the trail at `path`; `None` for a
/// trail that is missing or holds no complete line yet.
pub fn first_line_sha256(path: &Path) -> std::io::Result<Option<String>> {
    match crate::no_follow::read(path) {
        Ok(file) => first_line_of(&file),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl ChainHead {
    /// Where the anchor of the trail whose first line hashes to
    /// `first_sha256` lives in `state_dir`: named by the trail's identity,
    /// so that a state directory and a trail copied, restored or renamed
    /// anywhere still find each other.
    pub fn file_in(state_dir: &Path, first_sha256: &str) -> PathBuf {
        state_dir
            .join(DIR)
            .join(format!("{}.json", &first_sha256[..first_sha256.len().min(16)]))
    }

    /// Where an older version anchored the trail now at `canonical`: a
    /// name made from its absolute path. Read when there is no current
    /// anchor, so that state written before anchors named their trail by
    /// its identity still protects it where it was.
    pub fn legacy_file_in(state_dir: &Path, canonical: &Path) -> PathBuf {
        let name = sha256_hex(canonical.as_os_str().as_encoded_bytes());
        state_dir.join(DIR).join(format!("{}.json", &name[..16]))
    }

    /// Checks that `file` still holds this head: at least as long, and the
    /// anchored last line unchanged at its offset. The error says how it
    /// differs, for an operator.
    pub fn check(&self, file: &File) -> std::io::Result<Result<(), String>> {
        let len = file.metadata()?.len();
        if let Some(first) = &self.first_sha256 {
            let now = first_line_of(file)?;
            if len >= self.bytes && now.as_deref() != Some(first.as_str()) {
                return Ok(Err(format!(
                    "its first line is not the first line of the trail anchored by run {} (sha256 {first}): \
                     it was replaced",
                    self.run_id
                )));
            }
        }
        if len < self.bytes {
            return Ok(Err(format!(
                "it is {len} bytes, shorter than the {} bytes ({} lines) anchored by run {}: it was \
                 truncated, emptied or replaced",
                self.bytes, self.lines, self.run_id
            )));
        }
        let Some(line_len) = self.bytes.checked_sub(self.last_line_offset + 1) else {
            return Ok(Err(
                "the anchor is inconsistent (its last line ends before it starts)".into(),
            ));
        };
        let mut bytes = vec![0u8; line_len as usize + 1];
        file.read_exact_at(&mut bytes, self.last_line_offset)?;
        let newline = bytes.pop() == Some(b'\n');
        if !newline || sha256_hex(&bytes) != self.last_sha256 {
            return Ok(Err(format!(
                "line {} (at byte {}) is not the line anchored by run {} (sha256 {}): the trail was \
                 rewritten or replaced",
                self.lines, self.last_line_offset, self.run_id, self.last_sha256
            )));
        }
        Ok(Ok(()))
    }

    /// The head of `file` (the trail at `audit_log`, of which only the file
    /// name is kept) now. `known` is an earlier head of the same file that
    /// was checked: lines are then counted only after it.
    pub fn of(
        file: &File,
        audit_log: &Path,
        run_id: &str,
        known: Option<&ChainHead>,
    ) -> std::io::Result<ChainHead> {
        let len = file.metadata()?.len();
        // The head is the last complete line; a torn tail is not part of it.
        let (mut lines, mut from) = known.map_or((0, 0), |k| (k.lines, k.bytes));
        let mut end = from;
        let mut last_line_offset = known.map_or(0, |k| k.last_line_offset);
        let mut chunk = vec![0u8; 64 * 1024];
        while from < len {
            let n = chunk.len().min((len - from) as usize);
            file.read_exact_at(&mut chunk[..n], from)?;
            for i in memchr::memchr_iter(b'\n', &chunk[..n]) {
                last_line_offset = end;
                end = from + i as u64 + 1;
                lines += 1;
            }
            from += n as u64;
        }
        let mut last = vec![0u8; end.saturating_sub(last_line_offset + 1) as usize];
        file.read_exact_at(&mut last, last_line_offset)?;
        let first_sha256 = match known.and_then(|k| k.first_sha256.clone()) {
            Some(first) => Some(first),
            None => first_line_of(file)?,
        };
        Ok(ChainHead {
            first_sha256,
            audit_log: PathBuf::from(audit_log.file_name().unwrap_or(audit_log.as_os_str())),
            lines,
            bytes: end,
            last_line_offset,
            last_sha256: sha256_hex(&last),
            run_id: run_id.to_string(),
        })
    }

    /// Reads the anchor at `path`; `None` when there is none.
    pub fn load(path: &Path) -> Result<Option<ChainHead>, String> {
        let file = crate::no_follow::read(path);
        let file = match file {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("audit anchor {}: cannot open it: {e}", path.display())),
        };
        serde_json::from_reader(std::io::BufReader::new(file))
            .map(Some)
            .map_err(|e| format!("audit anchor {}: not a valid anchor: {e}", path.display()))
    }

    /// Writes this head to `path` atomically, unless the anchor there is
    /// already further along (another run finished later).
    pub fn store(&self, path: &Path) -> std::io::Result<()> {
        if let Ok(Some(existing)) = ChainHead::load(path) {
            if existing.first_sha256 == self.first_sha256 && existing.bytes > self.bytes {
                return Ok(());
            }
        }
        if let (Some(dir), Some(root)) = (path.parent(), path.parent().and_then(Path::parent)) {
            let name = dir.file_name().map(Path::new).unwrap_or(Path::new(""));
            crate::no_follow::dirs_below(root, name)?;
        }
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        let mut text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        text.push('\n');
        crate::durable::replace_durably(path, &tmp, text.as_bytes())
    }

    /// The Redis key for the anchor of the trail whose first line hashes
    /// to `first_sha256`: the trail's identity, the same on every host.
    /// Every anchor key shares one hash tag, so that a Redis Cluster keeps
    /// them in one slot and one script writes a head under two keys.
    pub fn redis_key(first_sha256: &str) -> String {
        format!("edc-sync:{{audit-anchor}}:{first_sha256}")
    }

    /// The Redis key for the anchor of the trail at `canonical` on this
    /// host: found when the trail was emptied or replaced in place, with
    /// nothing of its identity left.
    pub fn location_redis_key(canonical: &Path) -> String {
        format!(
            "edc-sync:{{audit-anchor}}:{}:{}",
            crate::host::name(),
            canonical.display()
        )
    }

    /// The key an older version kept the anchor under (host and path,
    /// without the hash tag): read, never written.
    pub fn legacy_redis_key(canonical: &Path) -> String {
        format!(
            "edc-sync:audit-anchor:{}:{}",
            crate::host::name(),
            canonical.display()
        )
    }
}

/// SHA-256 of the first complete line of `file`.
fn first_line_of(file: &File) -> std::io::Result<Option<String>> {
    let len = file.metadata()?.len();
    let mut line = Vec::new();
    let mut chunk = vec![0u8; 4096];
    let mut at = 0;
    while at < len {
        let n = chunk.len().min((len - at) as usize);
        file.read_exact_at(&mut chunk[..n], at)?;
        if let Some(end) = chunk[..n].iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&chunk[..end]);
            return Ok(Some(sha256_hex(&line)));
        }
        line.extend_from_slice(&chunk[..n]);
        at += n as u64;
    }
    Ok(None)
}

/// The anchor kept in Redis, beside the pacing keys: a second copy that an
/// insider who can rewrite the state directory may still not reach.
pub(crate) mod redis_copy {
    use std::time::Duration;

    use super::ChainHead;
    use quota_pacer::RedisPacer;

    const TIMEOUT: Duration = Duration::from_secs(2);

    /// Why Redis could not answer about the anchor.
    #[derive(Debug, thiserror::Error)]
    #[error("the audit anchor in Redis ({key}): {detail}")]
    pub struct RedisAnchorError {
        pub key: String,
        pub detail: String,
    }

    /// The anchor Redis keeps under `key`, if any.
    pub(crate) async fn load(redis: &RedisPacer, key: &str) -> Result<Option<ChainHead>, RedisAnchorError> {
        let key = key.to_string();
        let err = |detail: String| RedisAnchorError {
            key: key.clone(),
            detail,
        };
        let mut conn = redis.connection();
        let text: Option<String> =
            tokio::time::timeout(TIMEOUT, redis::cmd("GET").arg(&key).query_async(&mut conn))
                .await
                .map_err(|_| err(format!("no answer within {} s", TIMEOUT.as_secs_f64())))?
                .map_err(|e| err(e.to_string()))?;
        text.map(|t| serde_json::from_str(&t))
            .transpose()
            .map_err(|e| err(format!("not an anchor: {e}")))
    }

    /// Keeps the head under each key unless the anchor there is further
    /// along.
    static SCRIPT: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
        redis::Script::new(
            "for _, key in ipairs(KEYS) do \
               local cur = redis.call('GET', key) \
               local further = false \
               if cur then local ok, c = pcall(cjson.decode, cur) \
                 if ok and tonumber(c['bytes']) and tonumber(c['bytes']) > tonumber(ARGV[2]) then further = true end end \
               if not further then redis.call('SET', key, ARGV[1]) end \
             end return 1",
        )
    });

    /// Loads the anchor script into Redis (as a measurement does for every
    /// script, so that no call meets NOSCRIPT).
    pub async fn load_script(redis: &RedisPacer) -> Result<String, RedisAnchorError> {
        let mut conn = redis.connection();
        SCRIPT
            .prepare_invoke()
            .load_async(&mut conn)
            .await
            .map_err(|e| RedisAnchorError {
                key: "the anchor script".into(),
                detail: e.to_string(),
            })
    }

    /// Stores `head` under each of `keys` unless the anchor there is
    /// already further along, in one script (one round trip however many
    /// keys), so that two runs finishing together keep the later head.
    pub(crate) async fn store(
        redis: &RedisPacer,
        keys: &[String],
        head: &ChainHead,
    ) -> Result<(), RedisAnchorError> {
        let key = keys.join(", ");
        let err = |detail: String| RedisAnchorError {
            key: key.clone(),
            detail,
        };
        let json = serde_json::to_string(head).map_err(|e| err(e.to_string()))?;
        let mut conn = redis.connection();
        let mut invocation = SCRIPT.prepare_invoke();
        for key in keys {
            invocation.key(key);
        }
        invocation.arg(json).arg(head.bytes);
        tokio::time::timeout(TIMEOUT, invocation.invoke_async::<i64>(&mut conn))
            .await
            .map_err(|_| err(format!("no answer within {} s", TIMEOUT.as_secs_f64())))?
            .map(|_| ())
            .map_err(|e| err(e.to_string()))
    }

    /// Deletes `keys` (one hash tag: one slot, one call); how many there were.
    pub(crate) async fn forget(redis: &RedisPacer, keys: &[String]) -> Result<u64, RedisAnchorError> {
        let err = |detail: String| RedisAnchorError {
            key: keys.join(", "),
            detail,
        };
        let mut conn = redis.connection();
        tokio::time::timeout(TIMEOUT, redis::cmd("DEL").arg(keys).query_async(&mut conn))
            .await
            .map_err(|_| err(format!("no answer within {} s", TIMEOUT.as_secs_f64())))?
            .map_err(|e| err(e.to_string()))
    }
}

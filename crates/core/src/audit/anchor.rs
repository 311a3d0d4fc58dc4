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
    /// The trail's canonical path.
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
}

impl ChainHead {
    /// Where this head's anchor file lives in `state_dir`.
    pub fn file_in(state_dir: &Path, audit_log: &Path) -> PathBuf {
        let name = sha256_hex(audit_log.as_os_str().as_encoded_bytes());
        state_dir.join(DIR).join(format!("{}.json", &name[..16]))
    }

    /// Checks that `file` still holds this head: at least as long, and the
    /// anchored last line unchanged at its offset. The error says how it
    /// differs, for an operator.
    pub fn check(&self, file: &File) -> std::io::Result<Result<(), String>> {
        let len = file.metadata()?.len();
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

    /// The head of `file` now. `known` is an earlier head of the same file
    /// that was checked: lines are then counted only after it.
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
            for (i, b) in chunk[..n].iter().enumerate() {
                if *b == b'\n' {
                    last_line_offset = end;
                    end = from + i as u64 + 1;
                    lines += 1;
                }
            }
            from += n as u64;
        }
        let mut last = vec![0u8; end.saturating_sub(last_line_offset + 1) as usize];
        file.read_exact_at(&mut last, last_line_offset)?;
        Ok(ChainHead {
            audit_log: audit_log.to_path_buf(),
            lines,
            bytes: end,
            last_line_offset,
            last_sha256: sha256_hex(&last),
            run_id: run_id.to_string(),
        })
    }

    /// Reads the anchor at `path`; `None` when there is none.
    pub fn load(path: &Path) -> Result<Option<ChainHead>, String> {
        let file = crate::durable::read_no_follow(path);
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
            if existing.audit_log == self.audit_log && existing.bytes > self.bytes {
                return Ok(());
            }
        }
        if let (Some(dir), Some(root)) = (path.parent(), path.parent().and_then(Path::parent)) {
            let name = dir.file_name().map(Path::new).unwrap_or(Path::new(""));
            crate::durable::dirs_below(root, name)?;
        }
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        let mut text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        text.push('\n');
        crate::durable::replace_durably(path, &tmp, text.as_bytes())
    }

    /// The Redis key for this trail's anchor: host and path, because two
    /// hosts may each keep a trail at the same path.
    pub fn redis_key(audit_log: &Path) -> String {
        format!(
            "edc-sync:audit-anchor:{}:{}",
            crate::host::name(),
            audit_log.display()
        )
    }
}

/// The anchor kept in Redis, beside the pacing keys: a second copy that an
/// insider who can rewrite the state directory may still not reach.
pub mod redis_copy {
    use std::path::Path;
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

    /// The anchor for the trail at `audit_log`, if Redis has one.
    pub async fn load(redis: &RedisPacer, audit_log: &Path) -> Result<Option<ChainHead>, RedisAnchorError> {
        let key = ChainHead::redis_key(audit_log);
        let err = |detail: String| RedisAnchorError {
            key: key.clone(),
            detail,
        };
        let mut conn = redis.connection();
        let text: Option<String> =
            tokio::time::timeout(TIMEOUT, redis::cmd("GET").arg(&key).query_async(&mut conn))
                .await
                .map_err(|_| err(format!("no answer within {TIMEOUT:?}")))?
                .map_err(|e| err(e.to_string()))?;
        text.map(|t| serde_json::from_str(&t))
            .transpose()
            .map_err(|e| err(format!("not an anchor: {e}")))
    }

    /// Stores `head` unless the anchor there is already further along, in
    /// one script so that two runs finishing together keep the later head.
    pub async fn store(redis: &RedisPacer, head: &ChainHead) -> Result<(), RedisAnchorError> {
        static SCRIPT: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
            redis::Script::new(
                "local cur = redis.call('GET', KEYS[1]) \
                 if cur then local ok, c = pcall(cjson.decode, cur) \
                   if ok and tonumber(c['bytes']) and tonumber(c['bytes']) > tonumber(ARGV[2]) then return 0 end end \
                 redis.call('SET', KEYS[1], ARGV[1]) return 1",
            )
        });
        let key = ChainHead::redis_key(&head.audit_log);
        let err = |detail: String| RedisAnchorError {
            key: key.clone(),
            detail,
        };
        let json = serde_json::to_string(head).map_err(|e| err(e.to_string()))?;
        let mut conn = redis.connection();
        let mut invocation = SCRIPT.prepare_invoke();
        invocation.key(&key).arg(json).arg(head.bytes);
        tokio::time::timeout(TIMEOUT, invocation.invoke_async::<i64>(&mut conn))
            .await
            .map_err(|_| err(format!("no answer within {TIMEOUT:?}")))?
            .map(|_| ())
            .map_err(|e| err(e.to_string()))
    }
}

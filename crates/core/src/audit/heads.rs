//! The trail's heads: a line in the chain, every so often, that says where
//! each stream's last commit is, so that a stream's start reads the trail
//! back only to the last such line, not to its own last commit.
//!
//! A stream's start must know the stream's last `page_committed` line (the
//! cursor is proven against it) and every one after the cursor's receipt
//! (the roll-forward). In a trail shared with busier streams, nearly all
//! the lines after a quiet stream's last commit are theirs: reading them
//! made a quiet stream's start-up grow with everyone else's history.
//!
//! So once the trail has grown [`EVERY`] bytes past its last `trail_heads`
//! line (more when that line is long: [`spacing`]), the writer appends one (under the trail's lock, right after its
//! own line and in the same write and fsync): for each stream and landing directory, the byte offset and
//! SHA-256 of its last commit line so far. A reader walking back from the
//! end that meets one jumps to the line it names ([`super::commit`]), or
//! learns the stream has no commit before it. The line is part of the
//! chain like any other, so forging one means rewriting the chain after
//! it, which the anchors and keyed checkpoints catch, as they catch lines
//! removed; and `audit verify` recomputes every `trail_heads` line from
//! the commits before it and reports one that differs as edited.
//!
//! A trail shorter than [`EVERY`] gets none (a reader walks all of it
//! anyway). A trail written before heads lines gets its first at the first
//! append that finds none within [`EVERY`] bytes of its end; building it
//! reads the whole trail once. A heads line longer than [`MAX_HEADS_LINE`]
//! (several thousand streams in one trail) is not written: readers then
//! walk as they did before.

use std::collections::BTreeMap;
use std::io::{BufRead, Seek, SeekFrom};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::read::{walk_backwards, Walk};
use crate::digest::sha256_hex;

/// The event of a heads line.
pub(crate) const HEADS_EVENT: &str = "trail_heads";

/// How a heads line's event field is written (lines are compact).
const HEADS_NEEDLE: &[u8] = b"\"event\":\"trail_heads\"";

/// Trail bytes after which the next append writes a heads line: what a
/// stream's start reads back at most, beyond its own lines, whatever the
/// trail's size (a quarter of a millisecond of reading). A trail of many
/// streams, whose heads line is long, writes one only every eight times
/// its length ([`spacing`]), so heads lines stay within an eighth of it.
pub(crate) const EVERY: u64 = 256 * 1024;

/// Where a heads line starts, and how far past it the next is due.
pub(crate) type Placed = (u64, u64);

/// The bytes a trail grows between two heads lines, the last one
/// `line_len` bytes long.
pub(crate) fn spacing(line_len: usize) -> u64 {
    EVERY.max(8 * line_len as u64)
}

/// The longest heads line written: well within the line a backward walk
/// takes (`line::MAX_LINE`), and read back often.
const MAX_HEADS_LINE: usize = 512 * 1024;

/// A stream and landing directory (relative), as commit lines name them.
pub(crate) type StreamKey = (String, String);

/// Where a commit line is: its byte offset and SHA-256.
pub(crate) type At = (u64, String);

/// The last commit of each stream and landing directory.
pub(crate) type Heads = BTreeMap<StreamKey, At>;

/// One stream's entry in a heads line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Head {
    pub stream: String,
    pub landing_dir: String,
    pub offset: u64,
    pub sha256: String,
}

/// A `trail_heads` line: every stream's last commit so far, in order.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct TrailHeads {
    pub heads: Vec<Head>,
}

impl TrailHeads {
    pub(crate) fn of(heads: &Heads) -> TrailHeads {
        TrailHeads {
            heads: heads
                .iter()
                .map(|((stream, landing_dir), (offset, sha256))| Head {
                    stream: stream.clone(),
                    landing_dir: landing_dir.clone(),
                    offset: *offset,
                    sha256: sha256.clone(),
                })
                .collect(),
        }
    }

    fn map(self) -> Heads {
        self.heads
            .into_iter()
            .map(|h| ((h.stream, h.landing_dir), (h.offset, h.sha256)))
            .collect()
    }
}

/// The heads a heads line lists; `None` if it is not one. Most lines
/// are other events: their bytes are searched before any is parsed.
pub(crate) fn parse(bytes: &[u8]) -> Option<Heads> {
    memchr::memmem::find(bytes, HEADS_NEEDLE)?;
    #[derive(Deserialize)]
    struct Line {
        event: String,
        heads: Vec<Head>,
    }
    let line: Line = serde_json::from_slice(bytes).ok()?;
    (line.event == HEADS_EVENT).then(|| TrailHeads { heads: line.heads }.map())
}

/// Whether a writer is to append a heads line, the trail being `end`
/// bytes long.
pub(crate) enum Due {
    /// The trail is shorter than [`EVERY`]: a reader walks all of it.
    Short,
    /// The last heads line starts at this byte, and the next is due once
    /// the trail has grown this many bytes past it ([`spacing`]).
    NotYet(u64, u64),
    /// None lies within [`EVERY`] of the end: one is due, with these
    /// heads (as of the file's end now).
    Write(Heads),
}

/// What a line commits to: the stream and landing directory of a
/// `page_committed` line (`commit.rs` knows them), `None` for any other.
pub(crate) type KeyOf = fn(&[u8]) -> Option<StreamKey>;

/// Whether a heads line is due once the trail is `end` bytes long (the
/// lines about to be written included), and if so the heads the file
/// holds now: those of its last heads line (found walking back from its
/// end) and of the commits after it (`key_of` tells them), or all the
/// trail's when it has none.
pub(crate) fn due(path: &Path, end: u64, key_of: KeyOf) -> std::io::Result<Due> {
    if end < EVERY {
        return Ok(Due::Short);
    }
    let last = walk_backwards(path, |start, bytes| match parse(bytes) {
        Some(heads) => Walk::Found((start, spacing(bytes.len()), heads)),
        None => Walk::Next,
    })?;
    let (from, mut heads) = match last {
        Some((start, every, _)) if end - start < every => return Ok(Due::NotYet(start, every)),
        Some((start, _, heads)) => (start, heads),
        None => (0, Heads::new()),
    };
    for_commits_after(path, from, key_of, |start, key, sha256| {
        heads.insert(key, (start, sha256));
    })?;
    let size: usize = heads
        .keys()
        .map(|(stream, dir)| stream.len() + dir.len() + 140)
        .sum();
    Ok(match size <= MAX_HEADS_LINE {
        true => Due::Write(heads),
        // Too many streams for one line: readers walk as before.
        false => Due::Short,
    })
}

/// Calls `f` with every commit line from byte `from` on (its start, key
/// and SHA-256), in file order.
fn for_commits_after(
    path: &Path,
    from: u64,
    key_of: KeyOf,
    mut f: impl FnMut(u64, StreamKey, String),
) -> std::io::Result<()> {
    let mut file = crate::no_follow::read(path)?;
    file.seek(SeekFrom::Start(from))?;
    let mut at = from;
    for line in std::io::BufReader::with_capacity(256 * 1024, file).split(b'\n') {
        let bytes = line?;
        let start = at;
        at += bytes.len() as u64 + 1;
        if let Some(key) = key_of(&bytes) {
            f(start, key, sha256_hex(&bytes));
        }
    }
    Ok(())
}

/// `audit verify`'s check of the heads lines: each must list exactly the
/// last commits before it, as the chain has them.
#[derive(Debug, Default)]
pub(crate) struct HeadsCheck {
    heads: Heads,
}

impl HeadsCheck {
    /// Takes the line starting at `offset` (its bytes and hash, and what
    /// it commits to, if it is a commit line); what is wrong with it when
    /// it is a heads line that lists other heads.
    pub(crate) fn line(
        &mut self,
        offset: u64,
        bytes: &[u8],
        sha256: &str,
        commits: Option<StreamKey>,
    ) -> Option<String> {
        if let Some(key) = commits {
            self.heads.insert(key, (offset, sha256.to_string()));
            return None;
        }
        let listed = parse(bytes)?;
        let (stream, dir) = self
            .heads
            .keys()
            .chain(listed.keys())
            .find(|key| self.heads.get(*key) != listed.get(*key))?
            .clone();
        let key = (stream, dir);
        Some(format!(
            "a trail_heads line that does not list the last commits before it (stream {} in {}: it names {}, the \
             trail has {}); it was edited, or written over a trail that was",
            key.0,
            key.1,
            describe(listed.get(&key)),
            describe(self.heads.get(&key)),
        ))
    }
}

fn describe(at: Option<&At>) -> String {
    match at {
        Some((offset, _)) => format!("the line at byte {offset}"),
        None => "no commit".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::commit::{commit_key, commits_after, last_commit, CommitRecord, CommitsOf};
    use crate::audit::read::WALKED;
    use crate::audit::{AuditLog, RunId};

    #[derive(Serialize)]
    struct Page {
        stream: &'static str,
        landing_dir: &'static str,
        cursor_state: u32,
        filler: String,
    }

    impl CommitRecord for Page {}

    const QUIET: &str = "quiet/-/S/-/default";
    const BUSY: &str = "busy/-/S/-/default";

    fn page(landing_dir: &'static str, n: u32) -> Page {
        Page {
            stream: "default",
            landing_dir,
            cursor_state: n,
            // About the line of a busy stream's one-record page.
            filler: "x".repeat(1800),
        }
    }

    /// Bytes the backward walks of `f` read.
    fn walked<T>(f: impl FnOnce() -> T) -> (T, u64) {
        WALKED.with(|w| w.set(0));
        let out = f();
        (out, WALKED.with(|w| w.get()))
    }

    fn test_key() -> crate::audit::AuditKey {
        crate::audit::AuditKey::new(vec![7u8; 32], "test").unwrap()
    }

    /// A new run's log of `trail`, holding `key`.
    fn keyed(trail: &std::path::Path, key: &crate::audit::AuditKey) -> AuditLog {
        AuditLog::open(trail, RunId::new())
            .unwrap()
            .with_key(Some(key.clone()))
    }

    /// Chains an unsealed `page_committed` line of a run that never was to
    /// the end of `trail`, as someone without the audit key would.
    fn forge(trail: &std::path::Path) {
        let last = std::fs::read_to_string(trail).unwrap();
        let prev = sha256_hex(last.lines().last().unwrap().as_bytes());
        let fields = serde_json::to_value(page(QUIET, 99)).unwrap();
        let serde_json::Value::Object(fields) = fields else {
            unreachable!()
        };
        let forged = crate::audit::line::compose_with(
            1,
            "2026-12-06T00:00:00Z",
            "forger",
            "page_committed",
            &fields,
            None,
            &prev,
        )
        .unwrap();
        let mut file = std::fs::OpenOptions::new().append(true).open(trail).unwrap();
        std::io::Write::write_all(&mut file, format!("{forged}\n").as_bytes()).unwrap();
    }

    /// A walk reads what lies after the trail's last heads line and a block
    /// or two around each line it jumps to.
    const BOUND: u64 = EVERY + 4 * 64 * 1024;

    #[test]
    fn a_quiet_streams_commits_are_found_without_reading_a_busy_streams_history() {
        let dir = tempfile::tempdir().unwrap();
        let trail = dir.path().join("audit.jsonl");
        let mut log = AuditLog::open(&trail, RunId::new()).unwrap();
        let quiet = log.record_commit(page(QUIET, 1)).unwrap();
        for n in 0..2_000 {
            log.record_commit(page(BUSY, n)).unwrap();
        }
        let busy_last = log.record_commit(page(BUSY, 2_000)).unwrap();
        let size = std::fs::metadata(&trail).unwrap().len();
        assert!(size > 10 * EVERY, "{size}");
        let of = CommitsOf::new("default", QUIET);
        let (last, read) = walked(|| last_commit(&trail, &of, |_| true).unwrap().unwrap());
        assert_eq!(last.receipt(), &quiet);
        assert!(
            read < BOUND,
            "the last commit cost {read} bytes of a {size}-byte trail"
        );
        let (found, read) =
            walked(|| commits_after(&trail, quiet.offset(), quiet.sha256(), Some(&of)).unwrap());
        let (named, after) = found.unwrap();
        assert_eq!(named.receipt(), &quiet);
        assert!(after.is_empty(), "no commit of the quiet stream follows");
        assert!(read < BOUND, "the commits after it cost {read} bytes");
        let never = CommitsOf::new("never", QUIET);
        let (none, read) = walked(|| last_commit(&trail, &never, |_| true).unwrap());
        assert!(none.is_none());
        assert!(read < BOUND, "a stream with no commit cost {read} bytes");
        let busy = CommitsOf::new("default", BUSY);
        assert_eq!(
            last_commit(&trail, &busy, |_| true).unwrap().unwrap().receipt(),
            &busy_last
        );
        let report = crate::audit::verify::verify(&trail).unwrap();
        assert!(report.intact(), "{report}");
        let mut lines = 0;
        crate::audit::read::each_event(&trail, HEADS_EVENT, |_, _| lines += 1).unwrap();
        assert!(
            lines >= (size / EVERY) as usize - 1,
            "{lines} heads lines in {size} bytes"
        );
    }

    /// With an audit key, a run's first append proves every line since the
    /// last keyed checkpoint; while another stream's run goes on (no
    /// `run_finished` yet), the heads lines that run writes carry that
    /// checkpoint, so the proof reads back to the last of them, not to the
    /// start of the other run.
    #[test]
    fn a_keyed_runs_first_append_reads_back_to_the_last_heads_line_not_to_the_last_run_finished() {
        let (key, dir) = (test_key(), tempfile::tempdir().unwrap());
        let trail = dir.path().join("audit.jsonl");
        let mut busy = keyed(&trail, &key);
        for n in 0..2_000 {
            busy.record_commit(page(BUSY, n)).unwrap();
        }
        let size = std::fs::metadata(&trail).unwrap().len();
        assert!(size > 10 * EVERY, "{size}");
        let mut quiet = keyed(&trail, &key);
        let (_, read) = walked(|| quiet.record_commit(page(QUIET, 1)).unwrap());
        assert!(
            read < 2 * BOUND,
            "the keyed proof before the first append cost {read} bytes of a {size}-byte trail"
        );
        let checks = crate::audit::verify::Checks {
            anchors: Vec::new(),
            key: Some(key),
        };
        let report = crate::audit::verify::verify_with(&trail, &checks).unwrap();
        assert!(report.intact(), "{report}");
        assert!(
            report.checkpoints >= size / EVERY - 1,
            "{} checkpoints in {size} bytes",
            report.checkpoints
        );
    }

    /// A line chained to the end by someone without the key, while a keyed
    /// run goes on: the heads lines written after it carry no checkpoint
    /// (their writer found it), so the next keyed run still reads back to
    /// it and refuses the trail.
    #[test]
    fn a_forged_line_is_never_covered_by_a_heads_checkpoint() {
        let (key, dir) = (test_key(), tempfile::tempdir().unwrap());
        let trail = dir.path().join("audit.jsonl");
        let mut busy = keyed(&trail, &key);
        for n in 0..300 {
            busy.record_commit(page(BUSY, n)).unwrap();
        }
        forge(&trail);
        for n in 300..1_500 {
            busy.record_commit(page(BUSY, n)).unwrap();
        }
        let mut quiet = keyed(&trail, &key);
        let refused = quiet.record_commit(page(QUIET, 1)).unwrap_err().to_string();
        assert!(refused.contains("carries no line MAC"), "{refused}");
    }

    /// A line chained to the end by someone without the key while a keyed
    /// run goes on, and then that run's `run_finished`: the run proves the
    /// lines since the last checkpoint before it signs, finds the forged
    /// one and signs nothing, so the next keyed run reads back to the
    /// forged line and refuses the trail.
    #[test]
    fn a_forged_line_chained_during_a_keyed_run_is_not_signed_over_by_its_run_finished() {
        #[derive(Serialize)]
        struct Finished {
            exit_code: i32,
        }
        impl crate::audit::AuditEvent for Finished {
            const NAME: &'static str = "run_finished";
            const CHECKPOINT: bool = true;
        }
        let (key, dir) = (test_key(), tempfile::tempdir().unwrap());
        let trail = dir.path().join("audit.jsonl");
        let mut run = keyed(&trail, &key);
        for n in 0..3 {
            run.record_commit(page(BUSY, n)).unwrap();
        }
        forge(&trail);
        run.record_commit(page(BUSY, 3)).unwrap();
        run.record(&Finished { exit_code: 0 }).unwrap();
        let mut next = keyed(&trail, &key);
        let refused = next.record_commit(page(QUIET, 1)).unwrap_err().to_string();
        assert!(refused.contains("carries no line MAC"), "{refused}");
    }

    /// The quiet stream's later commit, or a heads line that names a
    /// commit after the receipt (a run that crashed before its cursor
    /// moved), is found as before.
    #[test]
    fn commits_after_a_receipt_are_all_found_whatever_the_heads_lines_name() {
        let dir = tempfile::tempdir().unwrap();
        let trail = dir.path().join("audit.jsonl");
        let mut log = AuditLog::open(&trail, RunId::new()).unwrap();
        let first = log.record_commit(page(QUIET, 1)).unwrap();
        let second = log.record_commit(page(QUIET, 2)).unwrap();
        for n in 0..600 {
            log.record_commit(page(BUSY, n)).unwrap();
        }
        let third = log.record_commit(page(QUIET, 3)).unwrap();
        for n in 0..10 {
            log.record_commit(page(BUSY, n)).unwrap();
        }
        let of = CommitsOf::new("default", QUIET);
        let (named, after) = commits_after(&trail, first.offset(), first.sha256(), Some(&of))
            .unwrap()
            .unwrap();
        assert_eq!(named.receipt(), &first);
        let found: Vec<_> = after.iter().map(|l| l.receipt().clone()).collect();
        assert_eq!(found, [second.clone(), third.clone()]);
        let (_, after) = commits_after(&trail, second.offset(), second.sha256(), Some(&of))
            .unwrap()
            .unwrap();
        assert_eq!(after.len(), 1);
        let older = last_commit(&trail, &of, |l| l.get("cursor_state") == 1)
            .unwrap()
            .unwrap();
        assert_eq!(
            older.receipt(),
            &first,
            "a walk that jumps goes on from the line it jumped to"
        );
    }

    /// An audit line of `event` with `fields` between its own.
    fn line_of(event: &str, fields: &str) -> String {
        format!(
            r#"{{"seq":1,"ts":"2026-12-06T00:00:00.000Z","run_id":"r","event":"{event}",{fields},"prev_sha256":"{}"}}"#,
            "0".repeat(64)
        )
    }

    #[test]
    fn a_heads_line_that_does_not_list_the_last_commits_is_reported() {
        let commit = |n: u32| {
            line_of(
                "page_committed",
                &format!(r#""stream":"s","landing_dir":"v/S/s","cursor_state":{n}"#),
            )
        };
        let mut check = HeadsCheck::default();
        let first = commit(1);
        assert!(check
            .line(0, first.as_bytes(), "a", commit_key(first.as_bytes()))
            .is_none());
        let second = commit(2);
        assert!(check
            .line(100, second.as_bytes(), "b", commit_key(second.as_bytes()))
            .is_none());
        let stale = r#"{"seq":3,"event":"trail_heads","heads":[{"stream":"s","landing_dir":"v/S/s","offset":0,"sha256":"a"}]}"#;
        let detail = check.line(200, stale.as_bytes(), "c", None).unwrap();
        assert!(
            detail.contains("it names the line at byte 0, the trail has the line at byte 100"),
            "{detail}"
        );
        let right = r#"{"seq":3,"event":"trail_heads","heads":[{"stream":"s","landing_dir":"v/S/s","offset":100,"sha256":"b"}]}"#;
        assert!(check.line(200, right.as_bytes(), "c", None).is_none());
        let hiding = r#"{"seq":4,"event":"trail_heads","heads":[]}"#;
        assert!(check
            .line(300, hiding.as_bytes(), "d", None)
            .unwrap()
            .contains("it names no commit"));
    }

    /// Heads lines stay within an eighth of a trail of many streams.
    #[test]
    fn a_long_heads_line_is_written_less_often() {
        assert_eq!(spacing(300), EVERY);
        assert_eq!(spacing(100_000), 800_000);
    }

    #[test]
    fn a_commit_line_is_keyed_by_its_stream_and_relative_landing_dir() {
        let line = line_of("page_committed", r#""stream":"s","landing_dir":"v/S1/s""#);
        assert_eq!(commit_key(line.as_bytes()), Some(("s".into(), "v/S1/s".into())));
        let old = line_of(
            "page_committed",
            r#""stream":"s","landing_dir":"/srv/landing/v/-/S1/-/s""#,
        );
        assert_eq!(
            commit_key(old.as_bytes()),
            Some(("s".into(), "v/-/S1/-/s".into()))
        );
        let dry = line_of(
            "page_committed",
            r#""stream":"s","landing_dir":"v/S1/s","dry_run":true"#,
        );
        assert_eq!(commit_key(dry.as_bytes()), None, "a dry run commits nothing");
        let other = line_of("run_started", r#""stream":"s","landing_dir":"v/S1/s""#);
        assert_eq!(commit_key(other.as_bytes()), None);
    }
}

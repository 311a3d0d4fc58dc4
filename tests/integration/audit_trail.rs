//! The hash-chained audit trail: written by the library, verified by the
//! binary, and checked independently by the published rule.

use crate::support;

use std::path::{Path, PathBuf};

use edc_core::audit::{verify, AuditEvent, AuditLog, Damage, RunId, RunStarted, StreamIdentity};
use serde::Serialize;
use sha2::{Digest, Sha256};
use support::run;

#[derive(Serialize)]
struct Note {
    n: u64,
    text: String,
}

impl AuditEvent for Note {
    const NAME: &'static str = "test_note";
}

/// Writes one run of `lines` notes (after a header) to `path`.
fn write_run(path: &Path, lines: u64) -> RunId {
    let run_id = RunId::new();
    let mut log = AuditLog::open(path, run_id.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(&cfg, support::example_config()).unwrap();
    let loaded = edc_core::config::load(&cfg).unwrap();
    let stream = StreamIdentity {
        vendor: "veeva_vault".into(),
        study: Some("S1".into()),
        ..Default::default()
    };
    log.record(&RunStarted::new(&loaded.provenance, true, Some(stream)))
        .unwrap();
    for n in 1..=lines {
        log.record(&Note {
            n,
            text: format!("note {n} with \"quotes\" and ünïcode"),
        })
        .unwrap();
    }
    run_id
}

fn trail(lines: u64) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    write_run(&path, lines);
    (dir, path)
}

fn verify_cli(path: &Path) -> support::Outcome {
    run(&["audit", "verify", path.to_str().unwrap()])
}

/// The published rule (docs/audit-trail.md), implemented independently of
/// the crate: each line's prev_sha256 is the SHA-256 of the previous line's
/// bytes without the newline; the first is 64 zeros.
fn verify_by_published_rule(bytes: &[u8]) -> bool {
    if !bytes.ends_with(b"\n") {
        return false;
    }
    let mut prev = "0".repeat(64);
    for line in bytes[..bytes.len() - 1].split(|b| *b == b'\n') {
        let v: serde_json::Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(_) => return false,
        };
        if v["prev_sha256"] != prev.as_str() {
            return false;
        }
        prev = hex::encode(Sha256::digest(line));
    }
    true
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
}

#[test]
fn a_written_trail_verifies_by_the_binary_and_by_the_published_rule() {
    let (_dir, path) = trail(20);
    let out = verify_cli(&path);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("intact: 21 lines, 1 runs"), "{}", out.stdout);
    assert!(verify_by_published_rule(&std::fs::read(&path).unwrap()));

    let first: serde_json::Value = serde_json::from_str(&lines_of(&path)[0]).unwrap();
    let keys: Vec<&String> = first.as_object().unwrap().keys().collect();
    assert_eq!(keys[..4], ["seq", "ts", "run_id", "event"]);
    assert_eq!(keys.last().unwrap().as_str(), "prev_sha256");
    assert_eq!(first["event"], "run_started");
    assert_eq!(first["prev_sha256"], "0".repeat(64));
    for key in [
        "tool",
        "version",
        "host",
        "os_user",
        "command_line",
        "config_path",
        "config_sha256",
        "config_git_commit",
        "config_git_blob",
        "config_dirty",
        "allow_dirty",
        "stream",
    ] {
        assert!(first.get(key).is_some(), "run_started lacks {key}");
    }
    assert_eq!(first["allow_dirty"], true);
    assert_eq!(first["stream"]["study"], "S1");
    let ts = first["ts"].as_str().unwrap();
    assert!(
        ts.len() == 24 && ts.ends_with('Z') && ts.as_bytes()[19] == b'.',
        "RFC 3339 UTC ms: {ts}"
    );
}

#[test]
fn runs_append_to_one_file_and_the_chain_continues() {
    let (_dir, path) = trail(3);
    write_run(&path, 4);
    write_run(&path, 0);
    let report = verify(&path).unwrap();
    assert!(report.intact(), "{report}");
    assert_eq!((report.lines, report.runs), (4 + 5 + 1, 3));
    assert!(verify_by_published_rule(&std::fs::read(&path).unwrap()));
}

#[test]
fn an_edited_byte_is_detected_at_its_line() {
    let (_dir, path) = trail(10);
    let mut lines = lines_of(&path);
    lines[4] = lines[4].replacen("note 4", "note 5", 1);
    write_lines(&path, &lines);
    let out = verify_cli(&path);
    assert_eq!(out.code, 65, "{}", out.stderr);
    assert!(out.stderr.contains(":5: edited:"), "{}", out.stderr);
    assert!(!verify_by_published_rule(&std::fs::read(&path).unwrap()));
}

#[test]
fn an_edited_chain_field_is_blamed_on_its_own_line() {
    let (_dir, path) = trail(10);
    let mut lines = lines_of(&path);
    let flipped: String = {
        let l = &lines[6];
        let i = l.len() - 3;
        let c = if &l[i..i + 1] == "0" { "1" } else { "0" };
        format!("{}{}{}", &l[..i], c, &l[i + 1..])
    };
    lines[6] = flipped;
    write_lines(&path, &lines);
    let report = verify(&path).unwrap();
    let finding = report.finding.expect("detected");
    assert_eq!((finding.line, finding.damage), (7, Damage::Edited));
}

#[test]
fn a_deleted_line_is_detected_as_removed() {
    let (_dir, path) = trail(10);
    let mut lines = lines_of(&path);
    lines.remove(5);
    write_lines(&path, &lines);
    let out = verify_cli(&path);
    assert_eq!(out.code, 65);
    assert!(out.stderr.contains(":6: removed:"), "{}", out.stderr);
    assert!(out.stderr.contains("from seq 5 to seq 7"), "{}", out.stderr);
}

#[test]
fn a_deleted_first_line_is_detected() {
    let (_dir, path) = trail(3);
    let lines = lines_of(&path);
    write_lines(&path, &lines[1..]);
    let report = verify(&path).unwrap();
    assert_eq!(
        report.finding.map(|f| (f.line, f.damage)),
        Some((1, Damage::Removed))
    );
}

#[test]
fn swapped_lines_are_detected_as_reordered() {
    let (_dir, path) = trail(10);
    let mut lines = lines_of(&path);
    lines.swap(3, 4);
    write_lines(&path, &lines);
    let out = verify_cli(&path);
    assert_eq!(out.code, 65);
    assert!(
        out.stderr
            .contains(":4: reordered: this line was written right after line 5"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_line_that_is_not_json_is_malformed() {
    let (_dir, path) = trail(5);
    let mut lines = lines_of(&path);
    lines[2] = "{not json".into();
    write_lines(&path, &lines);
    let report = verify(&path).unwrap();
    assert_eq!(
        report.finding.map(|f| (f.line, f.damage)),
        Some((3, Damage::Malformed))
    );
}

#[test]
fn a_torn_tail_is_reported_then_acknowledged_by_the_next_run() {
    let (_dir, path) = trail(5);
    let mut bytes = std::fs::read(&path).unwrap();
    let last_line = lines_of(&path).pop().unwrap();
    // Simulate a crash mid-write: half of one more line, no newline.
    bytes.extend_from_slice(&last_line.as_bytes()[..last_line.len() / 2]);
    std::fs::write(&path, &bytes).unwrap();
    let out = verify_cli(&path);
    assert_eq!(out.code, 65);
    assert!(out.stderr.contains(":7: torn final line:"), "{}", out.stderr);

    // The next run keeps the torn bytes, acknowledges them, and chains on.
    write_run(&path, 2);
    let after = std::fs::read(&path).unwrap();
    assert!(
        after.starts_with(&bytes),
        "the torn bytes are kept, byte for byte"
    );
    let out = verify_cli(&path);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains(":7: note: torn line left by a crash, acknowledged"),
        "{}",
        out.stdout
    );
    let lines = lines_of(&path);
    let repair: serde_json::Value = serde_json::from_str(&lines[7]).unwrap();
    assert_eq!(repair["event"], "audit_tail_repaired");
    assert_eq!(
        repair["torn_line_sha256"],
        hex::encode(Sha256::digest(lines[6].as_bytes()))
    );
}

#[test]
fn a_missing_audit_file_is_no_input() {
    let out = run(&["audit", "verify", "/nonexistent/audit.jsonl"]);
    assert_eq!(out.code, 66, "{}", out.stderr);
    assert!(out
        .stderr
        .contains("cannot read audit file /nonexistent/audit.jsonl"));
}

/// The child side of the concurrency test: appends lines to the file named
/// in `EDC_SYNC_TEST_AUDIT_FILE`. Run only by re-execution from
/// `four_processes_appending_at_once_keep_the_chain`.
#[test]
#[ignore = "helper: re-executed as a child process by four_processes_appending_at_once_keep_the_chain"]
fn child_appender() {
    let path = PathBuf::from(std::env::var("EDC_SYNC_TEST_AUDIT_FILE").expect("set by the parent test"));
    let lines: u64 = std::env::var("EDC_SYNC_TEST_LINES").unwrap().parse().unwrap();
    let mut log = AuditLog::open(&path, RunId::new()).unwrap();
    for n in 1..=lines {
        log.record(&Note {
            n,
            text: format!("pid {}", std::process::id()),
        })
        .unwrap();
    }
}

#[test]
fn four_processes_appending_at_once_keep_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..4)
        .map(|_| {
            std::process::Command::new(&exe)
                .args([
                    "--ignored",
                    "--exact",
                    "audit_trail::child_appender",
                    "--test-threads",
                    "1",
                ])
                .env("EDC_SYNC_TEST_AUDIT_FILE", &path)
                .env("EDC_SYNC_TEST_LINES", "500")
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let report = verify(&path).unwrap();
    assert!(report.intact(), "{report}");
    // Past 256 KiB the writers add `trail_heads` lines, each one checked
    // by `verify` against the commits before it.
    let heads = lines_of(&path)
        .iter()
        .filter(|l| l.contains("\"event\":\"trail_heads\""))
        .count() as u64;
    assert_eq!((report.lines - heads, report.runs), (2000, 4));
    assert!(verify_by_published_rule(&std::fs::read(&path).unwrap()));
    // The runs really did interleave, or this test proves nothing about locking.
    let runs: Vec<String> = lines_of(&path)
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["run_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let switches = runs.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(switches > 3, "expected interleaved runs, saw {switches} switches");
}

/// An empty file proves nothing: every line of a trail can be removed by
/// truncating it, so verify must not call that intact.
/// Flips one byte of line `index` (0-based) of the trail at `path`,
/// keeping its length: an edit a length check alone would not see.
fn flip_a_byte_of_line(path: &Path, index: usize) {
    let mut lines = lines_of(path);
    let at = lines[index].find("note ").expect("a note line") + 5;
    let digit = lines[index].as_bytes()[at];
    let other = if digit == b'9' { '8' } else { '9' };
    lines[index].replace_range(at..at + 1, &other.to_string());
    write_lines(path, &lines);
}

fn note(n: u64) -> Note {
    Note {
        n,
        text: format!("note {n} of this run"),
    }
}

/// A trail of three notes and the writer that appended them, still open.
fn three_notes() -> (tempfile::TempDir, PathBuf, AuditLog) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let mut log = AuditLog::open(&path, RunId::new()).unwrap();
    for n in 1..=3 {
        log.record(&note(n)).unwrap();
    }
    (dir, path, log)
}

/// An append chains to the end as the writer's own previous append left
/// it only while the file still ends in exactly those bytes: an edit of
/// either of the last two lines between two appends of one run stops the
/// run, the last line's too, which no link shows (nothing links to it yet).
#[test]
fn an_edit_of_the_last_two_lines_between_two_appends_of_one_run_is_refused() {
    for edited in [1usize, 2] {
        let (_dir, path, mut log) = three_notes();
        flip_a_byte_of_line(&path, edited);
        let refused = log.record(&note(4)).expect_err("the edited end must be refused");
        assert!(refused.is_damage(), "line {edited}: {refused}");
        assert_eq!(lines_of(&path).len(), 3, "nothing was appended");
    }
}

/// Lines longer than the block the end is compared in (a commit line with
/// a long lookback memory) are compared whole: an edit far into the last
/// line is refused, and an untouched end is chained to.
#[test]
fn lines_longer_than_a_compare_block_are_compared_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let mut log = AuditLog::open(&path, RunId::new()).unwrap();
    let long = |n: u64| Note {
        n,
        text: format!("note {n} {}", "x".repeat(150_000)),
    };
    for n in 1..=3 {
        log.record(&long(n)).unwrap();
    }
    assert!(verify_by_published_rule(&std::fs::read(&path).unwrap()));
    let mut lines = lines_of(&path);
    let last = lines.last_mut().unwrap();
    let at = last.rfind('x').unwrap();
    last.replace_range(at..at + 1, "y");
    write_lines(&path, &lines);
    let refused = log
        .record(&long(4))
        .expect_err("an edit 150 KB into the last line must be refused");
    assert!(refused.is_damage(), "{refused}");
}

/// Another writer's lines between two appends of one run are chained to,
/// not mistaken for damage, and the trail verifies.
#[test]
fn another_writers_lines_between_two_appends_are_chained_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let mut first = AuditLog::open(&path, RunId::new()).unwrap();
    first.record(&note(1)).unwrap();
    first.record(&note(2)).unwrap();
    let mut second = AuditLog::open(&path, RunId::new()).unwrap();
    second.record(&note(3)).unwrap();
    first.record(&note(4)).unwrap();
    second.record(&note(5)).unwrap();
    first.record(&note(6)).unwrap();
    assert_eq!(lines_of(&path).len(), 6);
    assert!(verify_by_published_rule(&std::fs::read(&path).unwrap()));
}

/// Lines cut from the end between two appends of one run are refused,
/// the last one too, though what remains is a chain that links: the
/// trail is shorter than the run left it.
#[test]
fn a_trail_cut_between_two_appends_of_one_run_is_refused() {
    for removed in [1usize, 2] {
        let (_dir, path, mut log) = three_notes();
        let mut lines = lines_of(&path);
        lines.remove(removed);
        write_lines(&path, &lines);
        let refused = log
            .record(&note(4))
            .expect_err("a line removed from the end must be refused");
        assert!(refused.is_damage(), "line {removed}: {refused}");
        assert!(refused.to_string().contains("short of where"), "{refused}");
    }
}

#[test]
fn an_empty_audit_file_is_not_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    std::fs::write(&path, b"").unwrap();
    let out = verify_cli(&path);
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    assert!(
        format!("{}{}", out.stdout, out.stderr).contains("empty"),
        "{}",
        out.stderr
    );
}

/// `audit verify` on something that is not a regular file (a device that
/// never ends) answers at once instead of reading forever.
#[test]
fn verify_refuses_what_is_not_a_regular_file() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(verify_cli(Path::new("/dev/zero")));
    });
    let out = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("audit verify /dev/zero returned");
    assert_eq!(out.code, 66, "{}", out.stderr);
    assert!(out.stderr.contains("not a regular file"), "{}", out.stderr);
}

/// Every event a run writes has its row in docs/audit-trail.md's table of
/// events, with its fields: a reviewer reads the trail by that table, and
/// an event added without its row would be a line nobody can interpret.
#[test]
fn every_event_the_code_writes_is_documented() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = std::fs::read_to_string(root.join("docs/audit-trail.md")).unwrap();
    let mut files = Vec::new();
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    walk(&root.join("crates/core/src"), &mut files);
    let marker = "const NAME: &'static str = \"";
    // Written by the trail's writers themselves, not as events.
    let mut names = vec!["page_committed".to_string(), "page_committed_part".to_string()];
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (at, _) in text.match_indices(marker) {
            let rest = &text[at + marker.len()..];
            names.push(rest[..rest.find('"').unwrap()].to_string());
        }
    }
    assert!(names.len() > 20, "found the events: {names:?}");
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !docs.contains(&format!("| `{n}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "no row in docs/audit-trail.md for {missing:?}"
    );
}

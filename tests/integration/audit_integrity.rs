//! An audit trail an insider cannot quietly rewrite: the tail a run chains
//! to is checked, the chain head is anchored outside the file, and a keyed
//! checkpoint proves the file was not recomputed without the key. Each
//! attack is carried out for real on a trail written by real runs.

use crate::support;

use std::path::Path;

use edc_core::audit::AuditKey;
use edc_core::run::{AuditOptions, PacerChoice};
use support::runs::{sim, Fixture, KEY};

fn keyed() -> AuditOptions {
    AuditOptions {
        key: Some(AuditKey::new(KEY.as_bytes().to_vec(), "test").unwrap()),
        ..AuditOptions::default()
    }
}

fn append(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

/// The lines of `event` in a trail that may hold damaged bytes.
fn events(path: &Path, event: &str) -> Vec<serde_json::Value> {
    std::fs::read(path)
        .unwrap()
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .filter(|l| l["event"] == event)
        .collect()
}

/// 200 bytes that are not the start of any audit line, without a newline.
fn noise() -> Vec<u8> {
    (0..200u32).map(|i| (i * 37 % 251) as u8).collect()
}

// ---- the tail a run chains to -----------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bytes_at_the_end_are_corruption_not_a_torn_line() {
    let fx = Fixture::new();
    let sim = sim().await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    append(&fx.trail(), &noise());
    let before = std::fs::read(fx.trail()).unwrap();
    let requests = sim.requests().len();

    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 65, "{message}");
    assert!(message.contains(fx.trail().to_str().unwrap()), "{message}");
    assert!(
        message.contains("not what an interrupted write leaves"),
        "{message}"
    );
    assert!(message.contains("--repair-audit"), "{message}");
    assert_eq!(std::fs::read(fx.trail()).unwrap(), before, "nothing was appended");
    assert_eq!(sim.requests().len(), requests, "no request was sent");

    let out = fx.verify(&[]);
    assert_eq!(out.code, 65, "{}", out.stdout);
    assert!(out.stderr.contains("malformed"), "{}", out.stderr);
    assert!(
        !out.stderr.contains("torn"),
        "random bytes are not called torn: {}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_audit_records_the_damage_and_verify_still_reports_it() {
    let fx = Fixture::new();
    let sim = sim().await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    append(&fx.trail(), &noise());
    let damaged = std::fs::read(fx.trail()).unwrap();
    let repair = AuditOptions {
        repair: true,
        ..AuditOptions::default()
    };
    let (code, message) = fx.run(&sim, repair).await;
    assert_eq!(code, 0, "{message}");
    let after = std::fs::read(fx.trail()).unwrap();
    assert!(
        after.starts_with(&damaged),
        "the damaged bytes are kept as they were"
    );
    let repaired = events(&fx.trail(), "audit_repaired");
    assert_eq!(repaired.len(), 1);
    assert_eq!(repaired[0]["repaired_by"], "--repair-audit");
    let problems = repaired[0]["problems"].to_string();
    assert!(
        problems.contains("not what an interrupted write leaves"),
        "{problems}"
    );
    // The damage stays visible: verify names its line.
    let out = fx.verify(&[]);
    assert_eq!(out.code, 65);
    // Later runs chain on without the flag.
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_line_whose_link_was_edited_stops_the_next_run() {
    let fx = Fixture::new();
    let sim = sim().await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let text = std::fs::read_to_string(fx.trail()).unwrap();
    // Only the last line's link changes; the rest stays as written.
    let at = text.rfind("\"prev_sha256\":\"").unwrap() + "\"prev_sha256\":\"".len();
    let rewritten = format!("{}{}{}", &text[..at], "f".repeat(64), &text[at + 64..]);
    std::fs::write(fx.trail(), &rewritten).unwrap();
    // The anchor would catch this too; remove it to see the tail check alone.
    std::fs::remove_dir_all(fx.path("state/audit-anchors")).unwrap();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 65, "{message}");
    assert!(
        message.contains("does not link to the line before it"),
        "{message}"
    );
    assert_eq!(std::fs::read_to_string(fx.trail()).unwrap(), rewritten);
}

/// A line longer than a trail line may be (what a page of 120,000 records
/// once made of its commit line) is named as what it is, at its byte, by
/// the run and by `audit verify` alike, even with a short line after it:
/// the two never disagree about the same trail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_longer_than_a_trail_line_may_be_is_named_by_the_run_and_by_audit_verify() {
    use sha2::Digest;
    let fx = Fixture::new();
    let sim = sim().await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let text = std::fs::read_to_string(fx.trail()).unwrap();
    let last = text.lines().last().unwrap();
    let sha = |line: &str| hex::encode(sha2::Sha256::digest(line.as_bytes()));
    let long = format!(
        r#"{{"seq":1,"ts":"2026-12-07T00:00:00.000Z","run_id":"old","event":"page_committed","lookback_change":"{}","prev_sha256":"{}"}}"#,
        "a".repeat(5 << 20),
        sha(last)
    );
    let short = format!(
        r#"{{"seq":2,"ts":"2026-12-07T00:00:00.000Z","run_id":"old","event":"trail_note","prev_sha256":"{}"}}"#,
        sha(&long)
    );
    append(&fx.trail(), format!("{long}\n{short}\n").as_bytes());
    let ends_at = text.len() + long.len();
    // The anchor would refuse the trail first; without it, the line.
    std::fs::remove_dir_all(fx.path("state/audit-anchors")).unwrap();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 65, "{message}");
    assert!(
        message.contains(&format!(
            "the line ending at byte {ends_at} is longer than the 4194304 bytes a trail line may be"
        )),
        "{message}"
    );
    let out = fx.verify(&[]);
    assert_eq!(out.code, 65, "{}", out.stdout);
    let line = text.lines().count() + 1;
    assert!(
        out.stderr.contains(&format!(
            ":{line}: malformed: the line is {} bytes, longer than the 4194304 bytes",
            long.len()
        )),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_line_is_a_strict_prefix_and_is_still_acknowledged() {
    let fx = Fixture::new();
    let sim = sim().await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let last = std::fs::read_to_string(fx.trail())
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_string();
    append(&fx.trail(), &last.as_bytes()[..last.len() / 3]);
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 0, "{message}");
    assert_eq!(events(&fx.trail(), "audit_tail_repaired").len(), 1);
    assert_eq!(
        fx.verify(&["--anchors", fx.path("state").to_str().unwrap()]).code,
        0
    );
}

// ---- anchors ----------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_emptied_truncated_or_replaced_trail_is_refused_by_its_anchor() {
    type Attack = fn(&Path);
    let attacks: [(&str, Attack); 5] = [
        ("deleted", |p| std::fs::remove_file(p).unwrap()),
        ("emptied", |p| std::fs::write(p, "").unwrap()),
        ("truncated", |p| {
            let text = std::fs::read_to_string(p).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let keep = lines[..lines.len() - 2].join("\n") + "\n";
            std::fs::write(p, keep).unwrap();
        }),
        ("replaced", |p| {
            // Another trail of the same length written by a fresh run.
            let other = p.with_file_name("other.jsonl");
            std::fs::rename(&other, p).unwrap();
        }),
        ("last line edited", |p| {
            let text = std::fs::read_to_string(p).unwrap();
            std::fs::write(p, text.replace("\"exit_code\":0", "\"exit_code\":1")).unwrap();
        }),
    ];
    for (name, attack) in attacks {
        let fx = Fixture::new();
        let sim = sim().await;
        assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0, "{name}");
        let mut other = fx.spec(&sim, AuditOptions::default());
        other.audit_log = fx.path("other.jsonl");
        other.state = fx.path("other-state").into();
        other.out = fx.path("other-landing").into();
        assert_eq!(fx.run_spec(other).await.0, 0, "{name}");
        let anchor_dir = fx.path("state");
        attack(&fx.trail());
        if fx.trail().exists() {
            let out = fx.verify(&["--anchors", anchor_dir.to_str().unwrap()]);
            assert_eq!(out.code, 65, "{name}: {}{}", out.stdout, out.stderr);
            // An emptied file fails the chain check itself before the anchor.
            assert!(
                out.stderr.contains("anchor") || out.stderr.contains("the file is empty"),
                "{name}: {}",
                out.stderr
            );
        }
        let before = std::fs::read(fx.trail()).ok();
        let (code, message) = fx.run(&sim, AuditOptions::default()).await;
        assert_eq!(code, 65, "{name}: {message}");
        assert!(message.contains("anchor"), "{name}: {message}");
        assert!(message.contains("--repair-audit"), "{name}: {message}");
        if let Some(before) = before {
            assert_eq!(
                std::fs::read(fx.trail()).unwrap(),
                before,
                "{name}: nothing appended"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_anchor_catches_a_trail_replaced_with_its_state_directory() {
    let redis = support::redis::start();
    let fx = Fixture::new();
    let sim = sim().await;
    let mut spec = fx.spec(&sim, AuditOptions::default());
    spec.pacer = PacerChoice::Redis(redis.url());
    assert_eq!(fx.run_spec(spec).await.0, 0);
    // The insider empties the trail and removes the state directory's anchor.
    std::fs::write(fx.trail(), "").unwrap();
    std::fs::remove_dir_all(fx.path("state/audit-anchors")).unwrap();
    let mut spec = fx.spec(&sim, AuditOptions::default());
    spec.pacer = PacerChoice::Redis(redis.url());
    let requests = sim.requests().len();
    let (code, message) = fx.run_spec(spec).await;
    assert_eq!(code, 65, "{message}");
    assert!(message.contains("Redis anchor"), "{message}");
    assert_eq!(sim.requests().len(), requests, "no request was sent");
    // A run stopped on a divergence writes no anchor that would bless it.
    assert!(
        !fx.path("state/audit-anchors").exists(),
        "the state directory's anchor was written anyway"
    );
}

// ---- keyed checkpoints --------------------------------------------------------

/// Rewrites line `n` (1-based) of the trail and recomputes the whole chain,
/// as an insider with a text editor and Python would, dropping the line
/// seals they cannot recompute (the checkpoints are what is left to catch
/// it).
const RECOMPUTE: &str = r#"
import hashlib, json, sys
path, n = sys.argv[1], int(sys.argv[2])
lines = open(path, 'rb').read().split(b'\n')[:-1]
objs = [json.loads(l) for l in lines]
objs[n - 1]['records'] = 999999
prev = '0' * 64
out = []
for o in objs:
    o.pop('line_mac', None)
    o['prev_sha256'] = prev
    b = json.dumps(o, separators=(',', ':'), ensure_ascii=False).encode()
    out.append(b)
    prev = hashlib.sha256(b).hexdigest()
open(path, 'wb').write(b'\n'.join(out) + b'\n')
"#;

/// The published check of docs/audit-trail.md, in Python: every
/// run_finished checkpoint is the HMAC of its own head.
const CHECK_KEYED: &str = r#"
import hashlib, hmac, json, os, sys
key = os.environ['EDC_SYNC_AUDIT_KEY'].encode()
ok = 0
for raw in open(sys.argv[1], 'rb').read().split(b'\n')[:-1]:
    line = json.loads(raw)
    if line['event'] != 'run_finished':
        continue
    msg = 'edc-sync-audit-checkpoint-v1\n%s\n%d\n%s' % (line['run_id'], line['seq'], line['prev_sha256'])
    mac = hmac.new(key, msg.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, line['checkpoint']['mac']):
        print('BAD', line['seq']); sys.exit(1)
    ok += 1
print('OK', ok)
"#;

fn python(script: &str, args: &[&str]) -> support::Outcome {
    support::run_cmd(
        std::process::Command::new("python3")
            .arg("-c")
            .arg(script)
            .args(args)
            .env("EDC_SYNC_AUDIT_KEY", KEY),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trail_rewritten_and_fully_recomputed_is_caught_by_anchor_and_key() {
    let fx = Fixture::new();
    let sim = sim().await;
    for _ in 0..2 {
        assert_eq!(fx.run(&sim, keyed()).await.0, 0);
    }
    let finished = support::audit_events(&fx.trail(), "run_finished");
    assert_eq!(finished.len(), 2);
    for line in &finished {
        assert_eq!(line["checkpoint"]["alg"], "HMAC-SHA256");
        assert!(!line.to_string().contains(KEY), "the key is never written");
    }
    let anchors = fx.path("state");
    let anchors = anchors.to_str().unwrap();
    let out = fx.verify(&["--key", "--anchors", anchors]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("2 keyed checkpoints verified"),
        "{}",
        out.stdout
    );
    let out = python(CHECK_KEYED, &[fx.trail().to_str().unwrap()]);
    assert_eq!(
        out.stdout.trim(),
        "OK 2",
        "the documented check, in Python: {}",
        out.stderr
    );

    // The insider rewrites the first run_finished and recomputes the chain.
    let lines = support::audit_lines(&fx.trail());
    let target = lines.iter().position(|l| l["event"] == "run_finished").unwrap() + 1;
    let out = python(RECOMPUTE, &[fx.trail().to_str().unwrap(), &target.to_string()]);
    assert_eq!(out.code, 0, "{}", out.stderr);

    let plain = fx.verify(&[]);
    assert_eq!(
        plain.code, 0,
        "a recomputed chain alone verifies: {}",
        plain.stderr
    );
    let with_key = fx.verify(&["--key"]);
    assert_eq!(with_key.code, 65, "{}", with_key.stdout);
    assert!(
        with_key.stderr.contains("checkpoint does not verify"),
        "{}",
        with_key.stderr
    );
    let anchored = fx.verify(&["--anchors", anchors]);
    assert_eq!(anchored.code, 65, "{}", anchored.stdout);
    assert!(
        anchored.stderr.contains("diverges from its anchor"),
        "{}",
        anchored.stderr
    );
    assert_ne!(python(CHECK_KEYED, &[fx.trail().to_str().unwrap()]).code, 0);
    // And the next run refuses to append to it.
    let (code, message) = fx.run(&sim, keyed()).await;
    assert_eq!(code, 65, "{message}");
}

#[test]
fn a_short_audit_key_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let trail = dir.path().join("a.jsonl");
    std::fs::write(&trail, "").unwrap();
    let out = support::run_cmd(
        support::edc_sync()
            .args(["audit", "verify", trail.to_str().unwrap(), "--key"])
            .env("EDC_SYNC_AUDIT_KEY", "short"),
    );
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("EDC_SYNC_AUDIT_KEY: the audit key is 5 bytes"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("short\n"), "{}", out.stderr);
}

/// Once a trail has been anchored, removing the anchor does not re-bless
/// a trail cut short: a trail with lines and no anchor stops the run (65)
/// before anything is appended or fetched; `--repair-audit` records it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_anchor_does_not_rebless_a_truncated_trail() {
    let fx = Fixture::new();
    let sim = sim().await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let text = std::fs::read_to_string(fx.trail()).unwrap();
    let second = text.match_indices("\"event\":\"run_started\"").nth(1).unwrap().0;
    let cut = text[..second].rfind('\n').unwrap() + 1;
    std::fs::write(fx.trail(), &text[..cut]).unwrap();
    std::fs::remove_dir_all(fx.path("state/audit-anchors")).unwrap();
    let requests = sim.requests().len();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 65, "{message}");
    assert!(message.contains("no anchor"), "{message}");
    assert_eq!(std::fs::read_to_string(fx.trail()).unwrap(), &text[..cut]);
    assert_eq!(sim.requests().len(), requests, "no request was sent");
    let repair = || AuditOptions {
        repair: true,
        ..AuditOptions::default()
    };
    // The cut took the second run's commit with it: the cursor is now ahead
    // of the trail's last commit of the stream, and the trail decides. The
    // trail's repair is recorded; the cursor waits for --repair-state.
    let (code, message) = fx.run(&sim, repair()).await;
    assert_eq!(code, 65, "{message}");
    assert!(message.contains("--repair-state"), "{message}");
    let mut spec = fx.spec(&sim, repair());
    spec.options.repair_state = true;
    assert_eq!(fx.run_spec(spec).await.0, 0);
    let repaired = support::audit_events(&fx.trail(), "audit_repaired");
    assert!(
        repaired[0]["problems"].to_string().contains("no anchor"),
        "{repaired:?}"
    );
    assert_eq!(support::audit_events(&fx.trail(), "state_repaired").len(), 1);
}

/// A run holding the audit key proves the trail's last checkpoint before
/// it appends: a chain rewritten and recomputed by someone without the key,
/// with the state directory's anchor forged to match, stops the run (65).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_run_checks_the_last_checkpoint_before_appending() {
    let fx = Fixture::new();
    let sim = sim().await;
    for _ in 0..2 {
        assert_eq!(fx.run(&sim, keyed()).await.0, 0);
    }
    // Line 2 rewritten, the chain recomputed, the anchor forged to match.
    let out = python(RECOMPUTE, &[fx.trail().to_str().unwrap(), "2"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let anchor = std::fs::read_dir(fx.path("state/audit-anchors"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut head: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&anchor).unwrap()).unwrap();
    let text = std::fs::read(fx.trail()).unwrap();
    let body = &text[..text.len() - 1];
    let start = body.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    head["bytes"] = text.len().into();
    head["last_line_offset"] = start.into();
    head["last_sha256"] = edc_core::digest::sha256_hex(&body[start..]).into();
    std::fs::write(&anchor, serde_json::to_string_pretty(&head).unwrap()).unwrap();
    let forged = std::fs::read(fx.trail()).unwrap();
    let requests = sim.requests().len();

    let (code, message) = fx.run(&sim, keyed()).await;
    assert_eq!(code, 65, "{message}");
    assert!(message.contains("checkpoint"), "{message}");
    assert_eq!(std::fs::read(fx.trail()).unwrap(), forged, "nothing appended");
    assert_eq!(sim.requests().len(), requests, "no request was sent");
}

/// An anchor file replaced by a symbolic link is never followed, and the
/// refusal says so (not a bare ELOOP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anchor_that_is_a_symlink_is_never_followed() {
    let fx = Fixture::new();
    let sim = sim().await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let anchor = std::fs::read_dir(fx.path("state/audit-anchors"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let target = fx.path("elsewhere.json");
    std::fs::rename(&anchor, &target).unwrap();
    std::os::unix::fs::symlink(&target, &anchor).unwrap();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_ne!(code, 0, "{message}");
    assert!(
        message.contains("symbolic link, which is never followed"),
        "{message}"
    );
    assert!(message.contains(&*anchor.to_string_lossy()), "{message}");
}

/// The anchors directory replaced by a symbolic link: anchoring through it
/// would write where the link points (and a later run could be shown a
/// copy put back). A run refuses it before its first line (74, naming the
/// directory), and nothing is appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anchors_directory_that_is_a_symlink_stops_the_run_before_any_line() {
    let fx = Fixture::new();
    let sim = sim().await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let dir = fx.path("state/audit-anchors");
    let elsewhere = fx.path("anchors-elsewhere");
    std::fs::rename(&dir, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
    let trail = std::fs::read(fx.trail()).unwrap();
    let requests = sim.requests().len();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 74, "{message}");
    assert!(message.contains(&*dir.to_string_lossy()), "{message}");
    assert!(message.contains("symbolic link"), "{message}");
    assert_eq!(std::fs::read(fx.trail()).unwrap(), trail, "nothing appended");
    assert_eq!(sim.requests().len(), requests, "nothing fetched");
}

/// A state directory and trail restored together from an older backup agree
/// with each other, so `audit verify --anchors` finds the trail intact; the
/// anchor in Redis, out of the restore's reach, is further on.
/// `audit verify --redis` proves the trail against it: intact before the
/// restore, 65 naming the Redis anchor after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_verify_checks_the_trail_against_the_redis_anchor() {
    let redis = support::redis::start();
    let fx = Fixture::new();
    let sim = sim().await;
    let run = || {
        let mut spec = fx.spec(&sim, AuditOptions::default());
        spec.pacer = PacerChoice::Redis(redis.url());
        fx.run_spec(spec)
    };
    assert_eq!(run().await.0, 0);
    let backup = std::fs::read(fx.trail()).unwrap();
    let anchors_backup: Vec<(std::path::PathBuf, Vec<u8>)> =
        std::fs::read_dir(fx.path("state/audit-anchors"))
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let bytes = std::fs::read(&p).unwrap();
                (p, bytes)
            })
            .collect();
    assert_eq!(run().await.0, 0);
    let audit_verify = |extra: &[&str]| {
        support::run_cmd(
            support::edc_sync()
                .args(["audit", "verify"])
                .arg(fx.trail())
                .args(extra),
        )
    };
    let url = redis.url();
    let out = audit_verify(&["--redis", &url]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    // The restore: the trail and the state directory's anchor as they were.
    std::fs::write(fx.trail(), &backup).unwrap();
    for (path, bytes) in &anchors_backup {
        std::fs::write(path, bytes).unwrap();
    }
    let state = fx.path("state");
    let out = audit_verify(&["--anchors", state.to_str().unwrap()]);
    assert_eq!(
        out.code, 0,
        "the state agrees with itself: {}{}",
        out.stdout, out.stderr
    );
    let out = audit_verify(&["--redis", &url]);
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("Redis anchor"), "{said}");
}

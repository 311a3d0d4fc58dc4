//! Landed data that can be re-proven: `edc-sync verify` names every way the
//! landing, the manifests, the audit trail and the cursors disagree, and the
//! manifest is recovered truthfully after a torn tail.

use crate::support;

use std::path::{Path, PathBuf};

use edc_core::run::AuditOptions;
use support::runs::{sim_with, Fixture};

/// 200 records in pages of 40: five landed pages.
const RECORDS: u32 = 200;

fn stream_dir(fx: &Fixture) -> PathBuf {
    fx.path("landing/vault_json/-/S1/-/default")
}

fn cursor_file(fx: &Fixture) -> PathBuf {
    fx.path("state/vault_json/-/S1/-/default.cursor.json")
}

fn verify(fx: &Fixture) -> support::Outcome {
    fx.verify_landing()
}

fn pages(fx: &Fixture) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(stream_dir(fx).join("pages"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn manifest_lines(fx: &Fixture) -> Vec<String> {
    std::fs::read_to_string(stream_dir(fx).join("manifest.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn events(path: &Path, event: &str) -> Vec<serde_json::Value> {
    support::audit_events(path, event)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_passes_after_a_sync_and_names_every_tampering() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let out = verify(&fx);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("5 landed files, 5 manifest entries"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("no discrepancy"), "{}", out.stdout);

    let pages = pages(&fx);
    // 1. One landed page modified.
    let mut bytes = std::fs::read(&pages[0]).unwrap();
    bytes[10] ^= 1;
    std::fs::write(&pages[0], bytes).unwrap();
    // 2. Another deleted.
    std::fs::remove_file(&pages[1]).unwrap();
    // 3. A manifest line removed (its page stays landed).
    let name2 = pages[2].file_name().unwrap().to_str().unwrap();
    let (dropped, kept): (Vec<String>, Vec<String>) =
        manifest_lines(&fx).into_iter().partition(|l| l.contains(name2));
    let dropped: serde_json::Value = serde_json::from_str(&dropped[0]).unwrap();
    std::fs::write(stream_dir(&fx).join("manifest.jsonl"), kept.join("\n") + "\n").unwrap();
    // 4. The cursor moved by hand (its lookback memory is held by a
    // seal, the memory itself in the journal beside it).
    let cursor = std::fs::read_to_string(cursor_file(&fx)).unwrap();
    let mut moved: serde_json::Value = serde_json::from_str(&cursor).unwrap();
    moved["window_start"] = "2027-01-01T00:00:00Z".into();
    std::fs::write(cursor_file(&fx), moved.to_string()).unwrap();

    let out = verify(&fx);
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    let report = out.stdout;
    let name0 = pages[0].file_name().unwrap().to_str().unwrap();
    let name1 = pages[1].file_name().unwrap().to_str().unwrap();
    let dropped_file = dropped["file"].as_str().unwrap();
    for expected in [
        format!("{}: modified after landing", pages[0].display()),
        format!("lists pages/{name1} but the file is missing"),
        format!("{}: landed but not listed in the manifest", pages[2].display()),
        format!("does not list {dropped_file}, which page_committed at audit line"),
        format!("{}: it is", cursor_file(&fx).display()),
    ] {
        assert!(
            report.contains(&expected),
            "missing {expected:?} in:\n{report}\n{}",
            out.stderr
        );
    }
    assert!(report.contains(name0));
    assert!(out.stderr.contains("discrepancies"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_replayed_over_a_modified_file_is_rehashed_and_replaced() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let first = pages(&fx)[0].clone();
    let original = std::fs::read(&first).unwrap();
    std::fs::write(&first, b"tampered").unwrap();
    // Forget the cursor: every page is fetched and landed again.
    std::fs::remove_file(cursor_file(&fx)).unwrap();
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    assert_eq!(
        std::fs::read(&first).unwrap(),
        original,
        "the good bytes are back"
    );
    let repaired: Vec<_> = events(&fx.trail(), "page_committed")
        .into_iter()
        .filter(|l| l["replaced_damaged_file"] == true)
        .collect();
    assert_eq!(
        repaired.len(),
        1,
        "audited as a replacement, not as a plain replay"
    );
    let out = verify(&fx);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_manifest_tail_of_a_committed_page_is_rebuilt_from_the_audit_trail() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let manifest = stream_dir(&fx).join("manifest.jsonl");
    let text = std::fs::read_to_string(&manifest).unwrap();
    // The last line loses its second half: its page is committed, the
    // cursor is past it, so a replay would never list it.
    let cut = text.len() - text.lines().last().unwrap().len() / 2;
    std::fs::write(&manifest, &text[..cut]).unwrap();

    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    assert_eq!(
        manifest_lines(&fx).len(),
        pages(&fx).len(),
        "every page on disk is listed"
    );
    let rebuilt = events(&fx.trail(), "manifest_rebuilt");
    assert_eq!(rebuilt.len(), 1);
    assert_eq!(rebuilt[0]["relisted"], 1);
    let out = verify(&fx);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mid_file_manifest_corruption_stops_the_run_with_65_naming_the_line() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let manifest = stream_dir(&fx).join("manifest.jsonl");
    let mut lines = manifest_lines(&fx);
    lines[1] = "{\"not\": \"an entry\"".into();
    let damaged = lines.join("\n") + "\n";
    std::fs::write(&manifest, &damaged).unwrap();
    let requests = sim.requests().len();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 65, "{message}");
    assert!(
        message.contains("manifest.jsonl: line 2 is not a manifest entry"),
        "{message}"
    );
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), damaged);
    assert_eq!(sim.requests().len(), requests, "no request was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_that_is_a_symlink_is_never_followed() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let manifest = stream_dir(&fx).join("manifest.jsonl");
    let target = fx.path("precious.txt");
    std::fs::rename(&manifest, &target).unwrap();
    std::os::unix::fs::symlink(&target, &manifest).unwrap();
    let before = std::fs::read(&target).unwrap();
    std::fs::remove_file(cursor_file(&fx)).unwrap();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 74, "{message}");
    assert!(message.contains("symbolic link"), "{message}");
    assert_eq!(std::fs::read(&target).unwrap(), before);
}

#[test]
fn verify_of_a_missing_directory_is_no_input() {
    let dir = tempfile::tempdir().unwrap();
    let trail = dir.path().join("a.jsonl");
    let out = support::run(&[
        "verify",
        "--out",
        "/nonexistent/landing",
        "--state",
        dir.path().to_str().unwrap(),
        "--audit-log",
        trail.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 66, "{}", out.stderr);
}

/// The study ids `a/b` and `a_2fb` shared one directory under the old
/// names: now each has its own landing and cursor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ids_that_collided_under_the_old_names_land_apart() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    for study in ["a/b", "a_2fb"] {
        let mut spec = fx.spec(&sim, AuditOptions::default());
        spec.study = study.into();
        assert_eq!(fx.run_spec(spec).await.0, 0, "{study}");
    }
    let cursors: Vec<String> = ["a/b", "a_2fb"]
        .iter()
        .map(|s| {
            let name = edc_core::store::sanitize(s);
            let path = fx.path(&format!("state/vault_json/-/{name}/-/default.cursor.json"));
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect();
    assert!(cursors[0].contains("\"a/b\"") && cursors[1].contains("\"a_2fb\""));
    assert_eq!(verify(&fx).code, 0);
}

/// State left under an old name is moved once, audited, and the stream
/// resumes from its cursor instead of starting over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_under_the_old_names_is_migrated_and_resumed() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    let study = "S 1/x";
    let mut spec = fx.spec(&sim, AuditOptions::default());
    spec.study = study.into();
    assert_eq!(fx.run_spec(spec.clone()).await.0, 0);
    // Put the state where the previous version kept it.
    let (new, old) = (
        edc_core::store::sanitize(study),
        edc_core::store::legacy_sanitize(study),
    );
    assert_ne!(new, old);
    for root in ["state/vault_json/-", "landing/vault_json/-"] {
        std::fs::rename(
            fx.path(&format!("{root}/{new}")),
            fx.path(&format!("{root}/{old}")),
        )
        .unwrap();
    }
    let commits_before = events(&fx.trail(), "page_committed").len();
    assert_eq!(fx.run_spec(spec).await.0, 0);
    let migrated = events(&fx.trail(), "state_migrated");
    assert_eq!(migrated.len(), 2, "landing directory and cursor: {migrated:?}");
    // Resumed from its cursor and its memory of landed records: the
    // lookback's re-read lands nothing again. Started over, it would.
    let resumed = &events(&fx.trail(), "page_committed")[commits_before..];
    assert!(!resumed.is_empty());
    for line in resumed {
        assert_eq!(line["landed"], false, "resumed: nothing landed again: {line}");
        assert_eq!(line["repeated_records"], line["records"], "{line}");
    }
    assert!(fx
        .path(&format!("state/vault_json/-/{new}/-/default.cursor.json"))
        .exists());
    assert!(!fx
        .path(&format!("state/vault_json/-/{old}/-/default.cursor.json"))
        .exists());
}

/// No state file is opened through a symlink: a stream's lock file planted
/// as a link to the audit trail would have been truncated and overwritten
/// with the holder's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_file_that_is_a_symlink_is_never_followed() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let lock = fx.path("state/vault_json/-/S1/-/default.lock");
    let target = fx.path("precious.txt");
    std::fs::write(&target, "do not truncate\n").unwrap();
    std::fs::remove_file(&lock).unwrap();
    std::os::unix::fs::symlink(&target, &lock).unwrap();
    let requests = sim.requests().len();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 74, "{message}");
    assert!(
        message.contains("symbolic link, which is never followed"),
        "{message}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "do not truncate\n");
    assert_eq!(sim.requests().len(), requests, "no request was sent");
}

/// The cursor's temp file is never opened through a symlink either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_temp_file_that_is_a_symlink_is_never_followed() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    let target = fx.path("precious.txt");
    std::fs::write(&target, "do not overwrite\n").unwrap();
    let tmp = cursor_file(&fx).with_extension("json.tmp");
    std::fs::create_dir_all(tmp.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&target, &tmp).unwrap();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 74, "{message}");
    assert!(
        message.contains("symbolic link, which is never followed"),
        "{message}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "do not overwrite\n");
}

/// The trail is the ledger: a cursor file edited by hand (its next page
/// moved past data it never fetched) disagrees with the `page_committed`
/// line its receipt names. The next run refuses it (65, naming the file
/// and both values) before fetching anything; `--repair-state` takes the
/// trail's cursor, says so in an audit line, and every record lands once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_edited_cursor_is_refused_and_repaired_only_on_request() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    let mut spec = fx.spec(&sim, AuditOptions::default());
    spec.options.max_pages = Some(2);
    assert_eq!(fx.run_spec(spec).await.0, 0);
    let path = cursor_file(&fx);
    let mut cursor: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let next = cursor["next_page"].as_str().unwrap().to_string();
    let (head, tail) = next.split_once("offset=").unwrap();
    let offset: u64 = tail.split('&').next().unwrap().parse().unwrap();
    let edited = next.replace(&format!("offset={offset}"), &format!("offset={}", offset + 80));
    assert!(head.contains('?') && edited != next);
    cursor["next_page"] = edited.clone().into();
    std::fs::write(&path, serde_json::to_string_pretty(&cursor).unwrap() + "\n").unwrap();
    let requests = sim.requests().len();

    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 65, "{message}");
    assert!(message.contains("default.cursor.json"), "{message}");
    assert!(message.contains(&format!("offset={}", offset + 80)), "{message}");
    assert!(message.contains(&format!("offset={offset}")), "{message}");
    assert!(message.contains("--repair-state"), "{message}");
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");

    let mut spec = fx.spec(&sim, AuditOptions::default());
    spec.options.repair_state = true;
    let (code, message) = fx.run_spec(spec).await;
    assert_eq!(code, 0, "{message}");
    let repaired = events(&fx.trail(), "state_repaired");
    assert_eq!(repaired.len(), 1);
    assert_eq!(repaired[0]["file_said"]["next_page"], edited.as_str());
    assert_eq!(repaired[0]["trail_says"]["next_page"], next.as_str());
    let mut ids = edc_qualify::landed::landed_json_record_ids(&stream_dir(&fx)).unwrap();
    let landed = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!((landed, ids.len()), (RECORDS as usize, RECORDS as usize));
    assert_eq!(verify(&fx).code, 0);
}

/// A page listed twice in a manifest (a replay after a removed cursor, or
/// two state directories over one landing) would count its records twice
/// for any reader of the manifest: `verify` names the second line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_names_a_page_listed_twice() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let manifest = stream_dir(&fx).join("manifest.jsonl");
    let lines = manifest_lines(&fx);
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str(&lines[1]);
    text.push('\n');
    std::fs::write(&manifest, text).unwrap();
    let out = verify(&fx);
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    let both = format!("{}{}", out.stdout, out.stderr);
    assert!(
        both.contains(&format!("line {} lists the page", lines.len() + 1))
            && both.contains("again, first at line 2"),
        "{both}"
    );
}

/// A manifest entry naming its existing page another way (`./pages/X`) is
/// named as a name a run never writes, on its line; the page is not
/// reported missing, since it is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_names_a_page_named_another_way_not_a_missing_page() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let manifest = stream_dir(&fx).join("manifest.jsonl");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let changed = text.replacen("\"file\":\"pages/", "\"file\":\"./pages/", 1);
    assert_ne!(changed, text);
    std::fs::write(&manifest, changed).unwrap();
    let out = verify(&fx);
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("line 1 names its file \"./pages/")
            && out.stdout.contains("not as a run names a page"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("missing"), "{}", out.stdout);
}

/// Two of five pages landed: a run continues from the cursor after them.
async fn two_pages_landed(fx: &Fixture, sim: &edc_sim::Simulator) {
    let mut spec = fx.spec(sim, AuditOptions::default());
    spec.options.max_pages = Some(2);
    assert_eq!(fx.run_spec(spec).await.0, 0);
}

/// Every record of the simulator landed exactly once, and `verify` agrees.
fn assert_landed_once(fx: &Fixture) {
    let mut ids = edc_qualify::landed::landed_json_record_ids(&stream_dir(fx)).unwrap();
    let landed = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!((landed, ids.len()), (RECORDS as usize, RECORDS as usize));
    let out = verify(fx);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

/// A manifest deleted between runs would have the run list only the pages
/// it lands itself, losing the others for every reader of the manifest.
/// The trail says what the manifest ends with: the run stops with 65
/// naming the file, fetching nothing; `--repair-state` rebuilds the
/// manifest from the trail, in an audit line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_manifest_is_refused_and_rebuilt_from_the_trail_only_on_request() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    two_pages_landed(&fx, &sim).await;
    let manifest = stream_dir(&fx).join("manifest.jsonl");
    std::fs::remove_file(&manifest).unwrap();
    let requests = sim.requests().len();

    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 65, "{message}");
    assert!(message.contains(&*manifest.to_string_lossy()), "{message}");
    assert!(message.contains("--repair-state"), "{message}");
    assert!(!manifest.exists(), "nothing was written");
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");

    let mut spec = fx.spec(&sim, AuditOptions::default());
    spec.options.repair_state = true;
    let (code, message) = fx.run_spec(spec).await;
    assert_eq!(code, 0, "{message}");
    let repaired = events(&fx.trail(), "manifest_repaired");
    assert_eq!(repaired.len(), 1, "audited");
    assert_eq!(repaired[0]["listed"], 2);
    assert_landed_once(&fx);
}

/// Another stream's manifest copied over this one's: the line the cursor
/// recorded is not the trail's last landed page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_that_is_not_the_trails_is_refused() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    two_pages_landed(&fx, &sim).await;
    let mut other = fx.spec(&sim, AuditOptions::default());
    other.study = "S2".into();
    other.options.max_pages = Some(3);
    assert_eq!(fx.run_spec(other).await.0, 0);
    let manifest = stream_dir(&fx).join("manifest.jsonl");
    std::fs::copy(
        fx.path("landing/vault_json/-/S2/-/default/manifest.jsonl"),
        &manifest,
    )
    .unwrap();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 65, "{message}");
    assert!(message.contains(&*manifest.to_string_lossy()), "{message}");
    assert!(message.contains("page_committed"), "{message}");
}

/// The last landed page deleted or modified: the run would continue after
/// it as if it were there. It stops naming the file (it cannot make the
/// bytes again); removing the cursor file fetches every page again and
/// puts the page back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_last_landed_page_is_refused_until_the_pages_are_fetched_again() {
    for damage in ["delete", "modify"] {
        let fx = Fixture::new();
        let sim = sim_with(RECORDS).await;
        two_pages_landed(&fx, &sim).await;
        let lines = manifest_lines(&fx);
        let last: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
        let page = stream_dir(&fx).join(last["file"].as_str().unwrap());
        match damage {
            "delete" => std::fs::remove_file(&page).unwrap(),
            _ => {
                let mut bytes = std::fs::read(&page).unwrap();
                bytes[3] ^= 1;
                std::fs::write(&page, bytes).unwrap();
            }
        }
        let requests = sim.requests().len();
        let (code, message) = fx.run(&sim, AuditOptions::default()).await;
        assert_eq!(code, 65, "{damage}: {message}");
        assert!(message.contains(&*page.to_string_lossy()), "{damage}: {message}");
        assert!(message.contains("cursor file"), "{damage}: {message}");
        assert_eq!(sim.requests().len(), requests, "{damage}: nothing was fetched");

        std::fs::remove_file(cursor_file(&fx)).unwrap();
        let (code, message) = fx.run(&sim, AuditOptions::default()).await;
        assert_eq!(code, 0, "{damage}: {message}");
        assert_landed_once(&fx);
    }
}

/// A stream's landing directory swapped for a symbolic link: the run
/// refuses to land through it (74, "never followed"), and `verify` names
/// the link rather than calling the directory gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_landing_directory_that_is_a_symlink_is_never_followed() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    two_pages_landed(&fx, &sim).await;
    let dir = stream_dir(&fx);
    let elsewhere = fx.path("elsewhere");
    std::fs::rename(&dir, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
    let requests = sim.requests().len();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 74, "{message}");
    assert!(
        message.contains("symbolic link, which is never followed"),
        "{message}"
    );
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");
    let out = verify(&fx);
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("a symbolic link inside the landing"),
        "{}",
        out.stdout
    );
}

/// The same for the state directory of a stream: its lock and cursor are
/// never reached through a link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_directory_that_is_a_symlink_is_never_followed() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    two_pages_landed(&fx, &sim).await;
    let dir = fx.path("state/vault_json/-/S1");
    let elsewhere = fx.path("elsewhere");
    std::fs::rename(&dir, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 74, "{message}");
    assert!(
        message.contains("symbolic link, which is never followed"),
        "{message}"
    );
}

/// A run killed after it listed a page and before its commit line leaves
/// the page listed under its run id; the next run replays the page, finds
/// it listed, and commits it under its own. The start-up check takes that
/// manifest line as the page the trail committed (a crash, not damage).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_listed_by_a_killed_run_and_committed_by_the_next_passes_the_tail_check() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    two_pages_landed(&fx, &sim).await;
    let manifest = stream_dir(&fx).join("manifest.jsonl");
    let mut lines = manifest_lines(&fx);
    let mut last: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    let run_id = last["run_id"].as_str().unwrap().to_string();
    let killed = format!("{}x", &run_id[..run_id.len() - 1]);
    last["run_id"] = killed.into();
    let edited = serde_json::to_string(&last).unwrap();
    assert_eq!(
        edited.len(),
        lines.last().unwrap().len(),
        "same length, same offsets"
    );
    *lines.last_mut().unwrap() = edited;
    std::fs::write(&manifest, lines.join("\n") + "\n").unwrap();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 0, "{message}");
}

/// Two state directories over one landing would each keep a cursor of
/// their own for the same pages. The landing belongs to the state
/// directory that first landed there: a run with another refuses it (65,
/// naming the owner file) before fetching anything; `--repair-state` makes
/// the new one the owner, in an audit line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_landing_refuses_a_second_state_directory() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    two_pages_landed(&fx, &sim).await;
    let mut other = fx.spec(&sim, AuditOptions::default());
    other.state = fx.path("state-elsewhere").into();
    // Its own anchors live in its own state directory.
    other.audit.anchor_root = Some(fx.path("state"));
    let requests = sim.requests().len();
    let (code, message) = fx.run_spec(other).await;
    assert_eq!(code, 65, "{message}");
    assert!(message.contains(".owner"), "{message}");
    assert!(message.contains("--repair-state"), "{message}");
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");

    let mut other = fx.spec(&sim, AuditOptions::default());
    other.state = fx.path("state-elsewhere").into();
    other.audit.anchor_root = Some(fx.path("state"));
    other.options.repair_state = true;
    let (code, message) = fx.run_spec(other).await;
    assert_eq!(code, 0, "{message}");
    assert_eq!(events(&fx.trail(), "landing_owner_changed").len(), 1);
    let mut ids = edc_qualify::landed::landed_json_record_ids(&stream_dir(&fx)).unwrap();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), RECORDS as usize);
    // verify with the new owner agrees; with the old one it names .owner.
    let (out, trail) = (fx.path("landing"), fx.trail());
    let owner = support::runs::verify_roots(&out, &fx.path("state-elsewhere"), &trail);
    assert_eq!(owner.code, 0, "{}{}", owner.stdout, owner.stderr);
    let former = support::runs::verify_roots(&out, &fx.path("state"), &trail);
    assert_eq!(former.code, 65, "{}", former.stdout);
    assert!(
        former
            .stdout
            .contains(".owner: this landing directory belongs to"),
        "{}",
        former.stdout
    );
    // The first state directory is no longer the owner.
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 65, "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_names_a_landing_that_belongs_to_another_state_directory() {
    let fx = support::runs::Fixture::new();
    let sim = support::runs::sim().await;
    let (code, message) = fx.run(&sim, edc_core::run::AuditOptions::default()).await;
    assert_eq!(code, 0, "{message}");
    assert_eq!(fx.verify_landing().code, 0);
    let owner = fx.path("landing/vault_json/-/S1/-/default/.owner");
    std::fs::write(&owner, "0123456789abcdef\n").unwrap();
    let out = fx.verify_landing();
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            ".owner: this landing directory belongs to the state with id 0123456789abcdef, not to the state \
             directory given"
        ),
        "{}",
        out.stdout
    );
}

/// Two studies share one landing and one state directory, each with its
/// own audit trail: verified against one trail, the other study's pages
/// are (rightly) unexplained; scoped to its study, each verifies clean, and
/// damage inside the scope is still found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_landing_shared_by_studies_with_separate_trails_verifies_clean_per_study() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    for (study, trail) in [("S1", "s1-audit.jsonl"), ("S2", "s2-audit.jsonl")] {
        let mut spec = fx.spec(&sim, AuditOptions::default());
        spec.study = study.into();
        spec.audit_log = fx.path(trail);
        assert_eq!(fx.run_spec(spec).await.0, 0, "{study}");
    }
    let verify = |trail: &str, scope: &[&str]| {
        let mut args = vec![
            "verify".to_string(),
            "--out".into(),
            fx.path("landing").display().to_string(),
            "--state".into(),
            fx.path("state").display().to_string(),
            "--audit-log".into(),
            fx.path(trail).display().to_string(),
        ];
        args.extend(scope.iter().map(|s| s.to_string()));
        support::run(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    // What users met before scoping: every other study's page reported.
    let unscoped = verify("s1-audit.jsonl", &[]);
    assert_eq!(unscoped.code, 65, "{}", unscoped.stdout);
    assert!(
        unscoped.stdout.contains("/S2/"),
        "the other study's pages: {}",
        unscoped.stdout
    );
    for (study, trail) in [("S1", "s1-audit.jsonl"), ("S2", "s2-audit.jsonl")] {
        let scoped = verify(trail, &["--vendor", "vault_json", "--study", study]);
        assert_eq!(scoped.code, 0, "{study}: {}{}", scoped.stdout, scoped.stderr);
        assert!(
            scoped.stdout.contains(&format!(
                "vendor vault_json, study {study}: 1 landing directories"
            )),
            "{}",
            scoped.stdout
        );
        let stream = verify(
            trail,
            &["--vendor", "vault_json", "--study", study, "--stream", "default"],
        );
        assert_eq!(stream.code, 0, "{}", stream.stdout);
    }
    // Damage within the scope is found; the other study stays clean.
    let page = pages(&fx)[0].clone();
    std::fs::write(&page, b"[]").unwrap();
    let s1 = verify("s1-audit.jsonl", &["--vendor", "vault_json", "--study", "S1"]);
    assert_eq!(s1.code, 65, "{}", s1.stdout);
    assert!(s1.stdout.contains("modified after landing"), "{}", s1.stdout);
    assert_eq!(
        verify("s2-audit.jsonl", &["--vendor", "vault_json", "--study", "S2"]).code,
        0
    );
    // A scope needs its study.
    assert_eq!(verify("s1-audit.jsonl", &["--vendor", "vault_json"]).code, 2);
}

/// `verify` reads a landing's `.owner` as a run does: never through a
/// symbolic link, and only a state id. A link to another file
/// (a secret, say) or content that is no id is a discrepancy naming the
/// file; what the file holds is never printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_never_follows_or_prints_an_owner_file() {
    for (damage, secret) in [
        ("link", "PASSWORD=hunter2-of-the-env-file"),
        ("content", "line one\nforged: verify passed\n"),
    ] {
        let fx = Fixture::new();
        let sim = sim_with(RECORDS).await;
        assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
        let owner = stream_dir(&fx).join(".owner");
        match damage {
            "link" => {
                let target = fx.path("service.env");
                std::fs::write(&target, secret).unwrap();
                std::fs::remove_file(&owner).unwrap();
                std::os::unix::fs::symlink(&target, &owner).unwrap();
            }
            _ => std::fs::write(&owner, secret).unwrap(),
        }
        let out = fx.verify_landing();
        assert_eq!(out.code, 65, "{damage}: {}{}", out.stdout, out.stderr);
        let said = format!("{}{}", out.stdout, out.stderr);
        assert!(said.contains(&*owner.to_string_lossy()), "{damage}: {said}");
        for part in secret.lines() {
            assert!(!said.contains(part), "{damage}: {part:?} printed: {said}");
        }
    }
}

/// A cursor file replaced by a symbolic link is never followed, read or
/// replaced: the run stops (74) naming it, and the link is left as found,
/// whatever it points at (here, bytes that would read as a torn file).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_file_that_is_a_symlink_is_refused_not_rebuilt() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let cursor = cursor_file(&fx);
    let target = fx.path("elsewhere.json");
    std::fs::write(&target, b"{\"torn").unwrap();
    std::fs::remove_file(&cursor).unwrap();
    std::os::unix::fs::symlink(&target, &cursor).unwrap();
    let requests = sim.requests().len();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 74, "{message}");
    assert!(message.contains(&*cursor.to_string_lossy()), "{message}");
    assert!(message.contains("symbolic link"), "{message}");
    assert!(std::fs::symlink_metadata(&cursor)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(&target).unwrap(), b"{\"torn");
    assert_eq!(sim.requests().len(), requests, "nothing fetched");
}

/// Copies the directory `from` to `to`, as a backup does.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A state directory and its trail restored together from an older backup,
/// while the landing kept everything landed since: the landing's manifest
/// lists pages of a run the trail does not record. Continuing would commit
/// those pages again as the next run's, and the lost history would leave
/// no trace. The run stops (65) naming the manifest and what it found,
/// before any request; `verify` names the pages too; `--accept-rollback`
/// records the deviation in a `rollback_accepted` line and continues, and
/// nothing lands twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_restored_from_an_older_backup_is_refused_until_accepted() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    let mut spec = fx.spec(&sim, AuditOptions::default());
    spec.options.max_pages = Some(2);
    assert_eq!(fx.run_spec(spec).await.0, 0);
    copy_dir(&fx.path("state"), &fx.path("backup/state"));
    std::fs::copy(fx.trail(), fx.path("backup/audit.jsonl")).unwrap();
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let lost_run = events(&fx.trail(), "run_started").last().unwrap()["run_id"].clone();
    std::fs::remove_dir_all(fx.path("state")).unwrap();
    copy_dir(&fx.path("backup/state"), &fx.path("state"));
    std::fs::copy(fx.path("backup/audit.jsonl"), fx.trail()).unwrap();

    let requests = sim.requests().len();
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 65, "{message}");
    for needed in [
        "manifest.jsonl",
        "3 manifest line(s)",
        lost_run.as_str().unwrap(),
        "--accept-rollback",
    ] {
        assert!(message.contains(needed), "{needed:?} missing from: {message}");
    }
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");
    assert_eq!(verify(&fx).code, 65);

    let mut spec = fx.spec(&sim, AuditOptions::default());
    spec.options.accept_rollback = true;
    let (code, message) = fx.run_spec(spec).await;
    assert_eq!(code, 0, "{message}");
    let accepted = events(&fx.trail(), "rollback_accepted");
    assert_eq!(accepted.len(), 1, "{accepted:?}");
    assert_eq!(accepted[0]["unrecorded"].as_array().unwrap().len(), 3);
    assert_eq!(accepted[0]["unrecorded"][0]["run_id"], lost_run);
    let mut ids = edc_qualify::landed::landed_json_record_ids(&stream_dir(&fx)).unwrap();
    let landed = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!((landed, ids.len()), (RECORDS as usize, RECORDS as usize));
    let out = verify(&fx);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

/// The readers open nothing through a link either: a trail that is a
/// symbolic link (to a copy an insider keeps intact elsewhere, say) is
/// refused by `audit verify` and `verify` (74, naming it), as a run
/// refuses it; the linked file is never read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readers_never_follow_a_link_to_the_trail() {
    let fx = Fixture::new();
    let sim = sim_with(RECORDS).await;
    assert_eq!(fx.run(&sim, AuditOptions::default()).await.0, 0);
    let elsewhere = fx.path("elsewhere.jsonl");
    std::fs::rename(fx.trail(), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, fx.trail()).unwrap();
    let trail = fx.trail();
    let audit = support::run_cmd(support::edc_sync().args(["audit", "verify"]).arg(&trail));
    let reconcile = verify(&fx);
    for out in [&audit, &reconcile] {
        assert_eq!(out.code, 74, "{}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains("audit.jsonl")
                && out.stderr.contains("symbolic link, which is never followed"),
            "{}",
            out.stderr
        );
    }
}

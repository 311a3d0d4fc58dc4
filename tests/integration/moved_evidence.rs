//! Evidence that moves: a landing, its state directory and its audit trail
//! copied, restored or renamed anywhere still verify, and a run resumes
//! there. Every path they record is relative to its root, so nothing in
//! them names the place they were written.

use crate::support;

use std::path::Path;

use edc_core::audit::AuditKey;
use edc_core::run::AuditOptions;
use support::runs::{sim_with, verify_roots as verify, Fixture, KEY};

fn keyed() -> AuditOptions {
    AuditOptions {
        key: Some(AuditKey::new(KEY.as_bytes().to_vec(), "test").unwrap()),
        ..AuditOptions::default()
    }
}

/// `edc-sync audit verify TRAIL --key --anchors STATE`.
fn verify_trail(trail: &Path, state: &Path) -> support::Outcome {
    support::run_cmd(
        support::edc_sync()
            .args(["audit", "verify", trail.to_str().unwrap(), "--key", "--anchors"])
            .arg(state)
            .env("EDC_SYNC_AUDIT_KEY", KEY),
    )
}

/// Every file below `dir` (and `dir` itself when it is one) whose bytes
/// contain `needle`.
fn files_naming(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(path) = todo.pop() {
        if path.is_dir() {
            todo.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(bytes) = std::fs::read(&path) {
            if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

/// A fixture landed by two keyed runs over 100 records (several pages).
async fn landed() -> (Fixture, edc_sim::Simulator) {
    let fx = Fixture::new();
    let sim = sim_with(100).await;
    for _ in 0..2 {
        let (code, message) = fx.run(&sim, keyed()).await;
        assert_eq!(code, 0, "{message}");
    }
    assert!(fx.path("state/audit-anchors").is_dir(), "the trail is anchored");
    (fx, sim)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_moved_anywhere_verifies_clean_and_names_nothing_of_where_it_was() {
    let (fx, sim) = landed().await;
    let original = fx.path("");
    let elsewhere = tempfile::tempdir().unwrap();
    let copy = elsewhere.path().join("restored-for-inspection");
    let cp = std::process::Command::new("cp")
        .arg("-r")
        .arg(&original)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(cp.success());
    // Nothing is left where it was written: the copy must stand alone.
    for gone in ["landing", "state", "audit.jsonl"] {
        let p = fx.path(gone);
        if p.is_dir() {
            std::fs::remove_dir_all(p).unwrap();
        } else {
            std::fs::remove_file(p).unwrap();
        }
    }
    let original = original.to_str().unwrap().trim_end_matches('/').to_string();
    for root in ["landing", "state", "audit.jsonl"] {
        assert_eq!(
            files_naming(&copy.join(root), &original),
            Vec::<String>::new(),
            "no recorded path names the place the evidence was written"
        );
    }

    let (out, state, trail) = (copy.join("landing"), copy.join("state"), copy.join("audit.jsonl"));
    let landing = verify(&out, &state, &trail);
    assert_eq!(landing.code, 0, "{}{}", landing.stdout, landing.stderr);
    assert!(landing.stdout.contains("no discrepancy"), "{}", landing.stdout);
    let chain = verify_trail(&trail, &state);
    assert_eq!(chain.code, 0, "{}{}", chain.stdout, chain.stderr);
    assert!(
        chain.stdout.contains("2 keyed checkpoints verified"),
        "{}",
        chain.stdout
    );

    // A run resumes from the copy: nothing is fetched twice, and the copy
    // still verifies after it.
    let landed = |trail: &Path| {
        support::audit_events(trail, "page_committed")
            .iter()
            .filter(|l| l["landed"] == true)
            .count()
    };
    let before = landed(&trail);
    let mut spec = fx.spec(&sim, keyed());
    (spec.out, spec.state, spec.audit_log) = (out.clone().into(), state.clone().into(), trail.clone());
    let (code, message) = fx.run_spec(spec).await;
    assert_eq!(code, 0, "{message}");
    assert_eq!(landed(&trail), before, "nothing was landed again");
    assert!(support::audit_events(&trail, "paths_reinterpreted").is_empty());
    assert_eq!(verify(&out, &state, &trail).code, 0);
    assert_eq!(verify_trail(&trail, &state).code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_renamed_and_given_separately_still_verify_and_resume() {
    let (fx, sim) = landed().await;
    let elsewhere = tempfile::tempdir().unwrap();
    let lake = elsewhere.path().join("lake/edc");
    let state = elsewhere.path().join("hosts/new/state-2027");
    let trail = elsewhere.path().join("archive/study-S1-audit.jsonl");
    for (from, to) in [("landing", &lake), ("state", &state), ("audit.jsonl", &trail)] {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::rename(fx.path(from), to).unwrap();
    }
    let landing = verify(&lake, &state, &trail);
    assert_eq!(landing.code, 0, "{}{}", landing.stdout, landing.stderr);
    let chain = verify_trail(&trail, &state);
    assert_eq!(chain.code, 0, "{}{}", chain.stdout, chain.stderr);

    let mut spec = fx.spec(&sim, keyed());
    (spec.out, spec.state, spec.audit_log) = (lake.clone().into(), state.clone().into(), trail.clone());
    let before = std::fs::metadata(&trail).unwrap().len();
    let (code, message) = fx.run_spec(spec).await;
    assert_eq!(code, 0, "{message}");
    assert!(
        std::fs::metadata(&trail).unwrap().len() > before,
        "the run chained on"
    );
    assert_eq!(verify(&lake, &state, &trail).code, 0);
    assert_eq!(verify_trail(&trail, &state).code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trail_emptied_in_place_is_still_refused_by_its_anchor() {
    let (fx, sim) = landed().await;
    std::fs::write(fx.trail(), b"").unwrap();
    let requests = sim.requests().len();
    let (code, message) = fx.run(&sim, keyed()).await;
    assert_eq!(code, 65, "{message}");
    assert!(message.contains("shorter than the"), "{message}");
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");
}

/// Evidence as a version that recorded absolute paths left it: every
/// `page_committed` line naming its landing directory absolutely (the
/// chain recomputed over the rewritten lines, as that version wrote them),
/// the cursor's receipt naming the trail by its absolute path, the anchor
/// under the name made from that path.
fn make_legacy(fx: &Fixture) {
    use edc_core::digest::{sha256_hex, ZERO_SHA256};
    let trail = fx.trail();
    let landing = std::fs::canonicalize(fx.path("landing")).unwrap();
    let canonical = std::fs::canonicalize(&trail).unwrap();
    let mut prev = ZERO_SHA256.to_string();
    let mut out = Vec::new();
    for raw in std::fs::read(&trail)
        .unwrap()
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
    {
        let mut line: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(raw).unwrap();
        if line["event"] == "page_committed" {
            let rel = line["landing_dir"].as_str().unwrap().to_string();
            line.insert(
                "landing_dir".into(),
                landing.join(rel).display().to_string().into(),
            );
        }
        line.insert("prev_sha256".into(), prev.clone().into());
        let bytes = serde_json::to_vec(&line).unwrap();
        prev = sha256_hex(&bytes);
        out.extend_from_slice(&bytes);
        out.push(b'\n');
    }
    std::fs::write(&trail, &out).unwrap();
    let cursor = fx.path("state/vault_json/-/S1/-/default.cursor.json");
    let mut state: serde_json::Value = serde_json::from_slice(&std::fs::read(&cursor).unwrap()).unwrap();
    state["receipt"]["audit_log"] = canonical.display().to_string().into();
    // The receipt's line moved with the rewrite: it names the line that
    // now holds the same commit (the last page_committed line).
    let text = String::from_utf8(out).unwrap();
    let at = text.rfind("\"event\":\"page_committed\"").unwrap();
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = start + text[start..].find('\n').unwrap();
    state["receipt"]["offset"] = start.into();
    state["receipt"]["sha256"] = sha256_hex(&text.as_bytes()[start..end]).into();
    std::fs::write(&cursor, serde_json::to_vec_pretty(&state).unwrap()).unwrap();
    std::fs::remove_dir_all(fx.path("state/audit-anchors")).unwrap();
    let file = std::fs::File::open(&trail).unwrap();
    let mut head = edc_core::audit::ChainHead::of(&file, &canonical, "legacy", None).unwrap();
    head.audit_log = canonical.clone();
    head.first_sha256 = None;
    head.store(&edc_core::audit::ChainHead::legacy_file_in(
        &fx.path("state"),
        &canonical,
    ))
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_written_with_absolute_paths_is_still_read_and_the_run_says_what_it_reinterpreted() {
    let fx = Fixture::new();
    let sim = sim_with(100).await;
    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 0, "{message}");
    make_legacy(&fx);
    assert_eq!(
        fx.verify_landing().code,
        0,
        "the legacy evidence verifies: {}",
        fx.verify_landing().stdout
    );

    let (code, message) = fx.run(&sim, AuditOptions::default()).await;
    assert_eq!(code, 0, "{message}");
    let said: Vec<String> = support::audit_events(&fx.trail(), "paths_reinterpreted")
        .iter()
        .map(|l| l["what"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        said,
        ["audit anchor", "page_committed landing_dir", "cursor receipt"],
        "{said:?}"
    );
    let landed = support::audit_events(&fx.trail(), "page_committed");
    assert_eq!(
        landed.iter().filter(|c| c["replayed"] == true).count(),
        0,
        "nothing fetched twice"
    );
    assert_eq!(fx.verify_landing().code, 0, "{}", fx.verify_landing().stdout);
    let chain = fx.verify(&["--anchors", fx.path("state").to_str().unwrap()]);
    assert_eq!(chain.code, 0, "{}{}", chain.stdout, chain.stderr);
    assert!(
        !fx.path("state/audit-anchors").read_dir().unwrap().any(|e| {
            let name = e.unwrap().file_name();
            name == *edc_core::audit::ChainHead::legacy_file_in(
                std::path::Path::new(""),
                &std::fs::canonicalize(fx.trail()).unwrap(),
            )
            .file_name()
            .unwrap()
        }),
        "the older anchor was replaced by the current one"
    );
}

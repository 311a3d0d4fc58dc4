//! `edc-sync demo --dir DIR`: it starts afresh each time, but clears only
//! what a previous demo made there; a directory holding anything else is
//! refused, untouched.

use crate::support;

#[test]
fn the_demo_reruns_in_its_own_directory_and_refuses_one_holding_anything_else() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let args = |d: &std::path::Path| {
        [
            "demo".to_string(),
            "--dir".into(),
            d.display().to_string(),
            "--records".into(),
            "20".into(),
        ]
    };
    let run = |d: &std::path::Path| {
        let a = args(d);
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        support::run(&refs)
    };
    let first = run(&demo);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let again = run(&demo);
    assert_eq!(
        again.code, 0,
        "a previous demo's directory is cleared and reused: {}",
        again.stderr
    );

    // Someone's directory that happens to hold a landing/ and a trail.
    let theirs = dir.path().join("theirs");
    std::fs::create_dir_all(theirs.join("landing")).unwrap();
    std::fs::write(theirs.join("landing/precious.json"), b"{}").unwrap();
    std::fs::write(theirs.join("audit.jsonl"), b"their trail\n").unwrap();
    let refused = run(&theirs);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains(&theirs.display().to_string()) && refused.stderr.contains("audit.jsonl"),
        "the message names the directory and what is in it: {}",
        refused.stderr
    );
    assert_eq!(
        std::fs::read(theirs.join("landing/precious.json")).unwrap(),
        b"{}"
    );
    assert_eq!(
        std::fs::read(theirs.join("audit.jsonl")).unwrap(),
        b"their trail\n"
    );
}

/// A file someone put inside a demo's own `landing/` or `state/` is not the
/// demo's to clear: the next demo refuses (2) naming it, touching nothing,
/// and runs again once it is gone.
#[test]
fn a_file_put_inside_a_demos_own_output_is_never_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let shown = demo.display().to_string();
    let run = || support::run(&["demo", "--dir", &shown, "--records", "20"]);
    let first = run();
    assert_eq!(first.code, 0, "{}", first.stderr);
    for placed in ["landing/notes.txt", "state/keep-me.json"] {
        std::fs::write(demo.join(placed), b"mine\n").unwrap();
        let trail = std::fs::read(demo.join("audit.jsonl")).unwrap();
        let refused = run();
        assert_eq!(refused.code, 2, "{placed}: {}", refused.stderr);
        assert!(refused.stderr.contains(placed), "names it: {}", refused.stderr);
        assert_eq!(std::fs::read(demo.join(placed)).unwrap(), b"mine\n");
        assert_eq!(
            std::fs::read(demo.join("audit.jsonl")).unwrap(),
            trail,
            "nothing cleared"
        );
        std::fs::remove_file(demo.join(placed)).unwrap();
        let again = run();
        assert_eq!(again.code, 0, "{}", again.stderr);
    }
}

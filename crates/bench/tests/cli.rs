//! The benchmark program's own test: it starts, lists its benchmarks, and
//! says where it looks for the `edc-sync` binary it measures. (Its presence
//! also makes `cargo test --workspace` build `edc-sync-bench`, which the
//! workspace's integration tests run beside `edc-sync`.)

use std::process::Command;

#[test]
fn help_lists_every_benchmark_and_hides_the_workers() {
    let out = Command::new(env!("CARGO_BIN_EXE_edc-sync-bench"))
        .arg("--help")
        .output()
        .expect("edc-sync-bench runs");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for bench in [
        "pacer",
        "sync",
        "startup",
        "crash-soak",
        "state",
        "hosts-soak",
        "large-page",
    ] {
        assert!(
            help.contains(&format!("  {bench} ")),
            "{bench} missing from:\n{help}"
        );
    }
    for worker in ["sync-phase", "pacer-worker"] {
        assert!(!help.contains(worker), "{worker} shown in:\n{help}");
    }
}

#[test]
fn a_missing_edc_sync_binary_is_named_with_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("edc-sync-bench");
    std::fs::copy(env!("CARGO_BIN_EXE_edc-sync-bench"), &copy).unwrap();
    let out = Command::new(&copy)
        .args(["startup", "--entries", "1"])
        .env_remove("EDC_SYNC_BIN")
        .output()
        .expect("edc-sync-bench runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&dir.path().join("edc-sync").display().to_string()),
        "{stderr}"
    );
    assert!(stderr.contains("cargo build --release --workspace"), "{stderr}");
}

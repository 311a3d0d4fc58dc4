//! Provenance of the loaded policy, against real git repositories: the
//! SHA-256 of the bytes, HEAD's commit, the file's blob at HEAD, and
//! whether what was loaded differs from what was committed.

use crate::support;

use edc_core::config::{self, ChangeState};
use edc_core::digest::sha256_hex;
use support::{example_config, git_commit_all, git_init, run};

struct Repo {
    dir: tempfile::TempDir,
    repo: git2::Repository,
}

impl Repo {
    /// A repository with `config/rate_limits.yaml` committed.
    fn committed() -> (Repo, git2::Oid) {
        let dir = tempfile::tempdir().unwrap();
        let repo = git_init(dir.path());
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(dir.path().join("config/rate_limits.yaml"), example_config()).unwrap();
        let commit = git_commit_all(&repo, "policy v1");
        (Repo { dir, repo }, commit)
    }

    fn config_path(&self) -> std::path::PathBuf {
        self.dir.path().join("config/rate_limits.yaml")
    }

    fn validate(&self, extra: &[&str]) -> support::Outcome {
        let path = self.config_path();
        let mut args = vec!["config", "validate", "--config", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        run(&args)
    }
}

#[test]
fn a_clean_committed_config_has_full_provenance() {
    let (repo, commit) = Repo::committed();
    let loaded = config::load(&repo.config_path()).unwrap();
    let p = &loaded.provenance;
    let bytes = std::fs::read(repo.config_path()).unwrap();
    assert_eq!(p.config_sha256, sha256_hex(&bytes));
    assert_eq!(p.config_git_commit.as_deref(), Some(commit.to_string().as_str()));
    let blob = repo
        .repo
        .find_commit(commit)
        .unwrap()
        .tree()
        .unwrap()
        .get_path("config/rate_limits.yaml".as_ref())
        .unwrap()
        .id();
    assert_eq!(p.config_git_blob.as_deref(), Some(blob.to_string().as_str()));
    assert_eq!(p.state, ChangeState::Committed);
    assert!(!p.dirty());
    loaded.require_committed(false).unwrap();

    let out = repo.validate(&["--require-committed"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains(&format!("committed at {commit} (blob {blob})")),
        "{}",
        out.stdout
    );
}

#[test]
fn a_modified_config_is_refused_unless_allow_dirty() {
    let (repo, commit) = Repo::committed();
    let edited = example_config().replacen("burst_capacity: 20", "burst_capacity: 25", 1);
    std::fs::write(repo.config_path(), &edited).unwrap();
    let loaded = config::load(&repo.config_path()).unwrap();
    assert_eq!(loaded.provenance.state, ChangeState::Modified);
    assert_eq!(
        loaded.provenance.config_git_commit.as_deref(),
        Some(commit.to_string().as_str())
    );
    assert_eq!(
        loaded.provenance.config_sha256,
        sha256_hex(edited.as_bytes()),
        "hash of the bytes actually loaded"
    );
    let err = loaded.require_committed(false).unwrap_err().to_string();
    assert!(
        err.contains("differs from the version committed at HEAD"),
        "{err}"
    );
    assert!(err.contains("--allow-dirty"), "{err}");
    loaded.require_committed(true).expect("--allow-dirty lets it run");

    let out = repo.validate(&["--require-committed"]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr.contains("differs from the version committed at HEAD"),
        "{}",
        out.stderr
    );
    // Plain validation still passes: the content is valid, only its state is not.
    assert_eq!(repo.validate(&[]).code, 0);
}

#[test]
fn an_untracked_config_is_refused() {
    let (repo, _) = Repo::committed();
    let other = repo.dir.path().join("config/other.yaml");
    std::fs::write(&other, example_config()).unwrap();
    let loaded = config::load(&other).unwrap();
    assert_eq!(
        loaded.provenance.state,
        ChangeState::NotCommitted("untracked".into())
    );
    assert_eq!(loaded.provenance.config_git_blob, None);
    assert!(loaded
        .require_committed(false)
        .unwrap_err()
        .to_string()
        .contains("is not committed at HEAD (untracked)"));
    let out = run(&[
        "config",
        "validate",
        "--require-committed",
        "--config",
        other.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 78);
}

#[test]
fn a_staged_but_uncommitted_config_is_refused() {
    let (repo, _) = Repo::committed();
    let other = repo.dir.path().join("config/staged.yaml");
    std::fs::write(&other, example_config()).unwrap();
    let mut index = repo.repo.index().unwrap();
    index.add_path("config/staged.yaml".as_ref()).unwrap();
    index.write().unwrap();
    let loaded = config::load(&other).unwrap();
    assert_eq!(
        loaded.provenance.state,
        ChangeState::NotCommitted("staged but not committed".into())
    );
}

#[test]
fn a_config_outside_any_repository_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rate_limits.yaml");
    std::fs::write(&path, example_config()).unwrap();
    let loaded = config::load(&path).unwrap();
    assert_eq!(loaded.provenance.state, ChangeState::OutsideRepository);
    assert_eq!(loaded.provenance.config_git_commit, None);
    assert!(loaded
        .require_committed(false)
        .unwrap_err()
        .to_string()
        .contains("is not inside a git repository"));
    let out = run(&[
        "config",
        "validate",
        "--require-committed",
        "--config",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 78);
    assert!(
        out.stderr.contains("is not inside a git repository"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_repository_without_commits_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    git_init(dir.path());
    let path = dir.path().join("rate_limits.yaml");
    std::fs::write(&path, example_config()).unwrap();
    let loaded = config::load(&path).unwrap();
    assert!(loaded.provenance.dirty());
    assert!(loaded.require_committed(false).is_err());
}

/// A policy repository owned by another user (the systemd pattern: the
/// repository belongs to its maintainers, the service runs as its own
/// account) is refused by git's ownership check, not because anything is
/// uncommitted: the message says so, names the repository and how to trust
/// it, and does not advise --allow-dirty.
#[test]
fn a_repository_owned_by_another_user_names_git_ownership_not_a_commit() {
    let (repo, _) = Repo::committed();
    // Tests run as root (the README's test command installs packages);
    // `nobody` owns the repository now.
    let chown = std::process::Command::new("chown")
        .args(["-R", "nobody"])
        .arg(repo.dir.path())
        .status()
        .expect("chown runs");
    assert!(
        chown.success(),
        "this test needs root to give the repository to another user"
    );
    let loaded = config::load(&repo.config_path()).unwrap();
    let err = loaded.require_committed(false).unwrap_err().to_string();
    let top = repo.dir.path().canonicalize().unwrap();
    assert!(err.contains("owned by another user"), "{err}");
    // The advice works for a service account with no home directory
    // (useradd --system): the system-wide file libgit2 reads, named (a
    // `git config --system` writes wherever that git was built to look:
    // /usr/local/etc/gitconfig for a git built from source).
    let advice = format!(
        "git config --file /etc/gitconfig --add safe.directory {}",
        top.display()
    );
    assert!(err.contains(&advice), "{err}");
    assert!(!err.contains("--allow-dirty"), "{err}");
    let out = repo.validate(&["--require-committed"]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stderr.contains("safe.directory"), "{}", out.stderr);
    // Followed, in a mount namespace of its own (a /etc of its own, so this
    // machine's system configuration is untouched), with no home: accepted.
    let script = format!(
        "mount -t tmpfs tmpfs /etc && {advice} && HOME=/nonexistent exec {} config validate --require-committed --config {}",
        env!("CARGO_BIN_EXE_edc-sync"),
        repo.config_path().display()
    );
    let followed = std::process::Command::new("unshare")
        .args(["--mount", "sh", "-c", &script])
        .output()
        .expect("unshare (util-linux) runs");
    assert!(
        followed.status.success(),
        "{}{}",
        String::from_utf8_lossy(&followed.stdout),
        String::from_utf8_lossy(&followed.stderr)
    );
}

/// Where a policy runs without its repository (a container's ConfigMap, an
/// image): `config stamp` in the repository writes the provenance beside
/// the policy; a run with no `.git` around it takes the policy when its
/// bytes are the ones the stamp names, and says so in its header; one byte
/// changed is refused (78) naming the stamp; a policy not committed cannot
/// be stamped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_without_its_repository_runs_from_its_stamp_and_a_changed_byte_is_refused() {
    let fx = support::runs::Fixture::new();
    let sim = support::runs::sim().await;
    let policy = fx.path("policies.yaml");
    let out = run(&["config", "stamp", "--config", policy.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let stamp_file = fx.path("policies.yaml.stamp.json");
    let stamp: serde_json::Value = serde_json::from_slice(&std::fs::read(&stamp_file).unwrap()).unwrap();
    let committed = config::load(&policy).unwrap().provenance;
    assert_eq!(stamp["blob"], committed.config_git_blob.clone().unwrap().as_str());
    assert_eq!(
        stamp["commit"],
        committed.config_git_commit.clone().unwrap().as_str()
    );
    assert!(
        out.stdout.contains(stamp["commit"].as_str().unwrap()),
        "{}",
        out.stdout
    );

    // The policy and its stamp, without the repository.
    std::fs::remove_dir_all(fx.path(".git")).unwrap();
    let loaded = config::load(&policy).unwrap();
    assert_eq!(
        loaded.provenance.state,
        ChangeState::Stamped("policies.yaml.stamp.json".into())
    );
    let out = run(&[
        "config",
        "validate",
        "--require-committed",
        "--config",
        policy.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("stamped at commit"), "{}", out.stdout);
    let (code, message) = fx.run(&sim, edc_core::run::AuditOptions::default()).await;
    assert_eq!(code, 0, "{message}");
    let header = support::audit_events(&fx.trail(), "run_started").remove(0);
    assert_eq!(header["config_stamp"], "policies.yaml.stamp.json");
    assert_eq!(header["config_git_blob"], stamp["blob"]);
    assert_eq!(header["config_dirty"], false);

    // One byte changed.
    let mut bytes = std::fs::read(&policy).unwrap();
    bytes.push(b'\n');
    std::fs::write(&policy, bytes).unwrap();
    let before = std::fs::read(fx.trail()).unwrap();
    let (code, message) = fx.run(&sim, edc_core::run::AuditOptions::default()).await;
    assert_eq!(code, 78, "{message}");
    assert!(message.contains("policies.yaml.stamp.json"), "{message}");
    assert_eq!(std::fs::read(fx.trail()).unwrap(), before, "nothing appended");
}

/// A fixture whose policy was stamped with the audit key, then its
/// repository moved away (to `policy-repo.git`, the reviewer's clone).
fn stamped_with_the_key() -> (support::runs::Fixture, std::path::PathBuf, serde_json::Value) {
    let fx = support::runs::Fixture::new();
    let policy = fx.path("policies.yaml");
    let out = support::run_cmd(
        support::edc_sync()
            .args(["config", "stamp", "--config", policy.to_str().unwrap()])
            .env("EDC_SYNC_AUDIT_KEY", support::runs::KEY),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("MAC with audit key"), "{}", out.stdout);
    let stamp_file = fx.path("policies.yaml.stamp.json");
    let stamp: serde_json::Value = serde_json::from_slice(&std::fs::read(&stamp_file).unwrap()).unwrap();
    assert!(stamp["mac"].is_string(), "{stamp}");
    std::fs::rename(fx.path(".git"), fx.path("policy-repo.git")).unwrap();
    (fx, stamp_file, stamp)
}

/// The policy changed after review and its stamp rewritten by hand to
/// match: blob and SHA-256 updated, the released commit and the MAC kept.
fn rewrite_policy_and_stamp(
    fx: &support::runs::Fixture,
    stamp_file: &std::path::Path,
    mut stamp: serde_json::Value,
) -> String {
    let policy = fx.path("policies.yaml");
    let mut bytes = std::fs::read(&policy).unwrap();
    bytes.extend_from_slice(b"# changed after review\n");
    std::fs::write(&policy, &bytes).unwrap();
    let blob = git2::Oid::hash_object(git2::ObjectType::Blob, &bytes)
        .unwrap()
        .to_string();
    stamp["blob"] = blob.clone().into();
    stamp["sha256"] = sha256_hex(&bytes).into();
    std::fs::write(stamp_file, serde_json::to_string_pretty(&stamp).unwrap()).unwrap();
    blob
}

/// `config check-stamp` of `fx`'s trail against the moved repository.
fn check_stamp(fx: &support::runs::Fixture, trail: &std::path::Path) -> support::Outcome {
    support::run(&[
        "config",
        "check-stamp",
        "--repo",
        fx.path("policy-repo.git").to_str().unwrap(),
        "--trail",
        trail.to_str().unwrap(),
    ])
}

/// A stamp anyone who can write the policy could write too: with the audit
/// key, `config stamp` MACs it, a keyed run records
/// `config_stamp_verified: true`, and refuses (78), before any line or
/// request, a stamp rewritten by hand (blob and SHA-256 changed, commit and
/// MAC kept).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stamp_rewritten_by_hand_is_refused_by_a_run_holding_the_key() {
    let (fx, stamp_file, stamp) = stamped_with_the_key();
    let sim = support::runs::sim().await;
    let keyed = || edc_core::run::AuditOptions {
        key: Some(edc_core::audit::AuditKey::new(support::runs::KEY.as_bytes().to_vec(), "test").unwrap()),
        ..edc_core::run::AuditOptions::default()
    };
    let (code, message) = fx.run(&sim, keyed()).await;
    assert_eq!(code, 0, "{message}");
    let header = support::audit_events(&fx.trail(), "run_started").remove(0);
    assert_eq!(header["config_stamp_verified"], true);
    let out = check_stamp(&fx, &fx.trail());
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(" holds policies.yaml as blob"),
        "{}",
        out.stdout
    );
    rewrite_policy_and_stamp(&fx, &stamp_file, stamp);
    let before = std::fs::read(fx.trail()).unwrap();
    let requests = sim.requests().len();
    let (code, message) = fx.run(&sim, keyed()).await;
    assert_eq!(code, 78, "{message}");
    assert!(
        message.contains("does not verify") && message.contains("policies.yaml.stamp.json"),
        "{message}"
    );
    assert_eq!(std::fs::read(fx.trail()).unwrap(), before, "nothing appended");
    assert_eq!(sim.requests().len(), requests, "no request sent");
}

/// Without the key a run cannot tell a rewritten stamp from a released one:
/// it records `config_stamp_verified: false`, and `config check-stamp`
/// against a clone of the repository names the recorded commit that does
/// not hold the recorded blob (65); a trail it cannot read is 66.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_stamp_names_a_recorded_commit_that_does_not_hold_the_recorded_blob() {
    let (fx, stamp_file, stamp) = stamped_with_the_key();
    let sim = support::runs::sim().await;
    let blob = rewrite_policy_and_stamp(&fx, &stamp_file, stamp);
    let (code, message) = fx.run(&sim, edc_core::run::AuditOptions::default()).await;
    assert_eq!(code, 0, "{message}");
    let header = support::audit_events(&fx.trail(), "run_started").remove(0);
    assert_eq!(header["config_stamp_verified"], false);
    assert_eq!(header["config_dirty"], false);
    let out = check_stamp(&fx, &fx.trail());
    assert_eq!(out.code, 65, "{}{}", out.stdout, out.stderr);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains(&format!("does NOT hold policies.yaml as blob {blob}")),
        "{said}"
    );
    let out = check_stamp(&fx, &fx.path("no-such-trail.jsonl"));
    assert_eq!(out.code, 66, "{}{}", out.stdout, out.stderr);
}

#[test]
fn a_policy_not_committed_is_not_stamped() {
    let (repo, _) = Repo::committed();
    std::fs::write(repo.config_path(), example_config() + "\n").unwrap();
    let out = run(&[
        "config",
        "stamp",
        "--config",
        repo.config_path().to_str().unwrap(),
    ]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(!repo
        .dir
        .path()
        .join("config/rate_limits.yaml.stamp.json")
        .exists());
}

//! S3 Object Lock for landed pages (`object_lock` in the policy), against
//! moto in server mode (started on loopback by the test): the one
//! installable S3 server with Object Lock. A run proves the bucket locks
//! objects before any request, writes every page with its retention in the
//! same request, reads it back into its `page_committed` line; `verify`
//! reports every page's retention. Garage stands for a server without
//! Object Lock (501).

fn moto(object_lock: bool, default: Option<(&str, u32)>) -> PrivateS3 {
    PrivateS3::moto(object_lock, default).unwrap_or_else(|e| panic!("{e}"))
}

use crate::support;

use std::process::{Command, Stdio};

use edc_testkit::s3_server::PrivateS3;

/// The token the default simulator takes.
const TOKEN: &str = "sim-token";

/// A policy repository whose `vault_json` asks for `lock` (a YAML flow
/// map), and a bucket on `s3`.
struct Site {
    dir: tempfile::TempDir,
    s3: PrivateS3,
}

impl Site {
    fn new(lock: &str, s3: PrivateS3) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let repo = support::git_init(dir.path());
        let policy = support::SIM_POLICIES
            .replace("page_size: 40", "page_size: 5")
            .replacen(
                "vault_json:\n",
                &format!("vault_json:\n  object_lock: {lock}\n"),
                1,
            );
        std::fs::write(dir.path().join("policies.yaml"), policy).unwrap();
        support::git_commit_all(&repo, "policies");
        Site { dir, s3 }
    }

    fn path(&self, p: &str) -> String {
        self.dir.path().join(p).display().to_string()
    }

    fn edc_sync(&self, args: &[&str]) -> Command {
        let mut cmd = support::edc_sync();
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (k, v) in self.s3.env() {
            cmd.env(k, v);
        }
        cmd
    }

    fn sync(&self, sim: &str, out: &str) -> support::Outcome {
        let (config, state, trail) = (
            self.path("policies.yaml"),
            self.path("state"),
            self.path("audit.jsonl"),
        );
        let mut cmd = self.edc_sync(&[
            "sync",
            "--config",
            &config,
            "--vendor",
            "vault_json",
            "--study",
            "S-1",
            "--out",
            out,
            "--state",
            &state,
            "--audit-log",
            &trail,
            "--pacer",
            "local",
        ]);
        cmd.env("EDC_SYNC_TEST_BASE_URL", sim)
            .env("EDC_SYNC_TEST_TOKEN", TOKEN);
        support::run_cmd(&mut cmd)
    }

    fn events(&self, name: &str) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.path("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|l| l["event"] == name)
            .collect()
    }
}

/// A bucket created with Object Lock: every page is written with the
/// policy's retention in the same request, read back, and recorded in its
/// `page_committed` line (whatever the bucket's default: here one shorter
/// than the policy's, and none); the `object_landing_ready` line records
/// the policy and the bucket's configuration; `verify` reports each page's
/// retention and finds nothing wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_lands_locked_and_its_retention_is_recorded_and_verified() {
    for default in [None, Some(("GOVERNANCE", 1))] {
        every_page_lands_locked(default).await;
    }
}

async fn every_page_lands_locked(default: Option<(&str, u32)>) {
    let site = Site::new("{mode: governance, days: 3}", moto(true, default));
    let sim = support::runs::sim_with(12).await;
    let out = site.s3.url("raw");
    let run = tokio::task::block_in_place(|| site.sync(&sim.base_url(), &out));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ready = site.events("object_landing_ready");
    assert_eq!(
        ready[0]["object_lock"]["policy"]["mode"], "governance",
        "{}",
        ready[0]
    );
    assert_eq!(ready[0]["object_lock"]["policy"]["days"], 3);
    let expected_default = default.map(|(mode, _)| mode);
    assert_eq!(
        ready[0]["object_lock"]["bucket_default"]["mode"].as_str(),
        expected_default
    );
    let in_three_days = (time::OffsetDateTime::now_utc() + time::Duration::days(3)
        - time::Duration::minutes(5))
    .format(&time::format_description::well_known::Rfc3339)
    .unwrap();
    let pages: Vec<serde_json::Value> = site
        .events("page_committed")
        .into_iter()
        .filter(|p| p["landed"] == true)
        .collect();
    assert_eq!(pages.len(), 3, "12 records in pages of 5");
    for page in &pages {
        assert_eq!(page["retention"]["mode"], "GOVERNANCE", "{page}");
        let until = page["retention"]["retain_until"].as_str().unwrap();
        assert!(
            until > in_three_days.as_str(),
            "the policy's 3 days from the write: {until}"
        );
    }
    let (state, trail) = (site.path("state"), site.path("audit.jsonl"));
    let verify = tokio::task::block_in_place(|| {
        support::run_cmd(&mut site.edc_sync(&[
            "verify",
            "--out",
            &out,
            "--state",
            &state,
            "--audit-log",
            &trail,
        ]))
    });
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
    assert!(
        verify
            .stdout
            .contains("no discrepancy; 3 page(s) retained GOVERNANCE, the earliest until"),
        "verify reports the pages' retention: {}",
        verify.stdout
    );
    let each = verify
        .stdout
        .lines()
        .filter(|l| l.contains(": retained GOVERNANCE until "))
        .count();
    assert_eq!(each, 3, "one line a page: {}", verify.stdout);
}

/// A bucket that cannot keep the policy's promise is refused (78) before
/// any request to the EDC and before anything is written to it, naming
/// why: a bucket made without Object Lock (moto), a server without it
/// (Garage answers 501).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_that_cannot_lock_is_refused_before_any_request() {
    let garage = || PrivateS3::garage().unwrap_or_else(|e| panic!("{e}"));
    for (s3, named) in [
        (moto(false, None), "no Object Lock configuration"),
        (garage(), "does not implement S3 Object Lock"),
    ] {
        let lock = "{mode: compliance, days: 1}";
        let site = Site::new(lock, s3);
        let sim = support::runs::sim_with(12).await;
        let run = tokio::task::block_in_place(|| site.sync(&sim.base_url(), &site.s3.url("raw")));
        assert_eq!(run.code, 78, "{lock}: {}", run.stderr);
        assert!(
            run.stderr.contains(named) && run.stderr.contains("object_lock"),
            "{lock}: {}",
            run.stderr
        );
        assert!(sim.requests().is_empty(), "{lock}: nothing was fetched");
        let written = site.s3.names("raw").await.unwrap();
        assert!(written.is_empty(), "{lock}: nothing was written: {written:?}");
    }
}

/// `object_lock` with a landing that is no S3 bucket (a directory) cannot
/// be kept: 78 naming the key, before any request. A malformed
/// `object_lock` is refused by `config validate`, naming the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_lock_needs_an_s3_landing_and_a_valid_mode_and_days() {
    let site = Site::new("{mode: governance, days: 1}", moto(true, None));
    let sim = support::runs::sim_with(12).await;
    let run = tokio::task::block_in_place(|| site.sync(&sim.base_url(), &site.path("landing")));
    assert_eq!(run.code, 78, "{}", run.stderr);
    assert!(run.stderr.contains("vault_json.object_lock"), "{}", run.stderr);
    assert!(sim.requests().is_empty());
    let bad = support::SIM_POLICIES.replacen(
        "vault_json:\n",
        "vault_json:\n  object_lock: {mode: forever, days: 0}\n",
        1,
    );
    let file = site.dir.path().join("bad.yaml");
    std::fs::write(&file, bad).unwrap();
    let out = support::run(&["config", "validate", "--config", file.to_str().unwrap()]);
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr.contains("vault_json.object_lock.mode"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("vault_json.object_lock.days"),
        "{}",
        out.stderr
    );
}

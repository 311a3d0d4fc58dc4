//! Landing in object storage, against a real S3-compatible server (Garage,
//! started on loopback by the test; see edc_testkit::garage for why Garage
//! and what it lacks). What landed is read back with the object_store
//! client directly and checked with the testkit's own readers.

use crate::support;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use edc_testkit::s3_server::PrivateS3;

const TOKEN: &str = "object-landing-test-token";

struct Fixture {
    dir: tempfile::TempDir,
    garage: PrivateS3,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = support::small_page_policy_repo();
        let garage = PrivateS3::garage().unwrap_or_else(|e| panic!("{e}"));
        Fixture { dir, garage }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// `edc-sync <args>` with the AWS environment of the test server.
    fn edc_sync(&self, args: &[&str]) -> Command {
        let mut cmd = support::edc_sync();
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (k, v) in self.garage.env() {
            cmd.env(k, v);
        }
        cmd
    }

    fn sync(&self, sim: &str, out: &str) -> Command {
        self.sync_with(sim, out, &self.path("state"), &self.path("audit.jsonl"))
    }

    fn sync_with(&self, sim: &str, out: &str, state: &std::path::Path, trail: &std::path::Path) -> Command {
        self.sync_study("S-1", sim, out, state, trail)
    }

    /// `sync` of study `study`.
    fn sync_study(
        &self,
        study: &str,
        sim: &str,
        out: &str,
        state: &std::path::Path,
        trail: &std::path::Path,
    ) -> Command {
        let config = self.path("policies.yaml");
        let mut cmd = self.edc_sync(&[
            "sync",
            "--config",
            config.to_str().unwrap(),
            "--vendor",
            "vault_json",
            "--study",
            study,
            "--out",
            out,
            "--state",
            state.to_str().unwrap(),
            "--audit-log",
            trail.to_str().unwrap(),
            "--pacer",
            "local",
        ]);
        cmd.env("EDC_SYNC_TEST_BASE_URL", sim)
            .env("EDC_SYNC_TEST_TOKEN", TOKEN);
        cmd
    }

    /// `edc-sync verify` of the landing at `out`.
    fn verify(&self, out: &str) -> Command {
        let (state, trail) = (self.path("state"), self.path("audit.jsonl"));
        self.edc_sync(&[
            "verify",
            "--out",
            out,
            "--state",
            state.to_str().unwrap(),
            "--audit-log",
            trail.to_str().unwrap(),
        ])
    }

    /// The landing as the bucket holds it, copied out.
    async fn downloaded(&self, prefix: &str) -> PathBuf {
        let to = self.path(&format!("downloaded-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&to);
        self.garage.download(prefix, &to).await.unwrap();
        to
    }
}

async fn sim(records: u32) -> edc_sim::Simulator {
    let config = edc_sim::SimConfig {
        token: TOKEN.into(),
        dataset: edc_sim::Dataset {
            subjects: 3,
            records,
            seed: 7,
            padding: 0,
        },
        ..edc_sim::SimConfig::default()
    };
    edc_sim::Simulator::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

fn ids_once(dir: &std::path::Path, n: usize) {
    let ids = edc_qualify::landed::landed_json_record_ids(&dir.join("vault_json/-/S-1/-/default")).unwrap();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!((ids.len(), unique.len()), (n, n), "landed / distinct records");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_to_s3_lands_every_record_once_and_keeps_no_page_locally() {
    let fx = Fixture::new();
    let sim = sim(23).await;
    let out = fx.garage.url("edc");
    let first = support::run_cmd(&mut fx.sync(&sim.base_url(), &out));
    assert_eq!(first.code, 0, "{}", first.stderr);
    ids_once(&fx.downloaded("edc").await, 23);
    // Pages live in the bucket only: the state directory keeps the
    // manifest index, not the page bytes.
    let index = fx.path("state/.landing/vault_json/-/S-1/-/default");
    assert!(index.join("manifest.jsonl").is_file());
    let kept: Vec<_> = std::fs::read_dir(index.join("pages")).unwrap().collect();
    assert!(kept.is_empty(), "no page kept locally: {kept:?}");
    let commits = support::audit_events(&fx.path("audit.jsonl"), "page_committed");
    assert!(commits
        .iter()
        .all(|c| c["landing_dir"] == "vault_json/-/S-1/-/default"));

    // Once more, with nothing new: nothing is landed twice.
    let second = support::run_cmd(&mut fx.sync(&sim.base_url(), &out));
    assert_eq!(second.code, 0, "{}", second.stderr);
    ids_once(&fx.downloaded("edc").await, 23);

    // verify re-proves the bucket: every object read back and hashed.
    let verified = support::run_cmd(&mut fx.verify(&out));
    assert_eq!(verified.code, 0, "{}{}", verified.stdout, verified.stderr);
    assert!(
        verified
            .stdout
            .contains("1 landing directories, 5 landed files, 5 manifest entries"),
        "{}",
        verified.stdout
    );
    assert!(verified.stdout.contains("no discrepancy"), "{}", verified.stdout);
    // An insider with write access replaces one page's bytes.
    let page = commits.iter().find_map(|c| c["landing_file"].as_str()).unwrap();
    fx.garage
        .put(
            &format!("edc/vault_json/-/S-1/-/default/{page}"),
            b"{\"data\":[]}".to_vec(),
        )
        .await
        .unwrap();
    let tampered = support::run_cmd(&mut fx.verify(&out));
    assert_eq!(tampered.code, 65, "{}{}", tampered.stdout, tampered.stderr);
    let named = format!("s3://landing/edc/vault_json/-/S-1/-/default/{page}: modified after landing");
    assert!(tampered.stdout.contains(&named), "{}", tampered.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsupported_scheme_or_an_unreachable_bucket_is_refused_before_any_request() {
    let fx = Fixture::new();
    let sim = sim(10).await;
    let refused = support::run_cmd(&mut fx.sync(&sim.base_url(), "ftp://host/landing"));
    assert_eq!(refused.code, 78, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--out ftp://host/landing"),
        "{}",
        refused.stderr
    );
    assert!(!fx.path("ftp:").exists(), "no directory named after the scheme");

    let mut unreachable = fx.sync(&sim.base_url(), &fx.garage.url("edc"));
    unreachable.env(
        "AWS_ENDPOINT_URL",
        format!(
            "http://127.0.0.1:{}",
            edc_testkit::redis_server::free_port().unwrap()
        ),
    );
    let out = support::run_cmd(&mut unreachable);
    assert_eq!(out.code, 69, "{}", out.stderr);
    assert!(out.stderr.contains("s3://landing/edc"), "{}", out.stderr);
    assert_eq!(sim.requests().len(), 0, "nothing was fetched");

    let mut refused_key = fx.sync(&sim.base_url(), &fx.garage.url("edc"));
    refused_key.env("AWS_SECRET_ACCESS_KEY", "0".repeat(64));
    let out = support::run_cmd(&mut refused_key);
    assert_eq!(out.code, 77, "{}", out.stderr);
    assert!(!out.stderr.contains(&"0".repeat(64)), "the secret is never shown");
    assert_eq!(sim.requests().len(), 0, "nothing was fetched");
}

/// The crash soak of docs/operations.md with the pages in a private S3
/// `server`: SIGKILL at 30 seeded instants with faults on, resume, then
/// count what the bucket holds and run `edc-sync verify` over it. The
/// command exits non-zero on any loss, duplicate, cursor ahead or
/// discrepancy; the figures are checked here too.
fn thirty_kills_over(server: &str) {
    let out = support::bench(&[
        "crash-soak",
        "--object-store",
        server,
        "--rounds",
        "30",
        "--records",
        "120",
    ]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(!out.stdout.contains("Some("), "no Debug text: {}", out.stdout);
    let figures: serde_json::Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(figures["rounds"], 30);
    assert_eq!(figures["rounds_with_cursor_ahead"], 0);
    assert_eq!(
        (figures["records_landed"].as_u64(), figures["duplicates"].as_u64()),
        (Some(120), Some(0))
    );
    assert_eq!(figures["lost"], 0);
    assert_eq!(figures["verify_exit_code"], 0, "{}", figures["verify_summary"]);
    let landing = figures["landing"].as_str().unwrap();
    assert!(
        landing.starts_with("s3://") && landing.to_lowercase().contains(server),
        "{landing}"
    );
}

#[test]
fn thirty_kills_over_a_garage_landing_lose_nothing_and_duplicate_nothing() {
    thirty_kills_over("garage");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_region_and_endpoint_come_from_an_aws_profile_as_the_cli_reads_them() {
    let fx = Fixture::new();
    let sim = sim(12).await;
    let home = fx.path("home");
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(
        home.join(".aws/credentials"),
        format!(
            "[default]\naws_access_key_id = GKnotthisone\naws_secret_access_key = nope\n\n[edc-lake]\n\
             aws_access_key_id = {}\naws_secret_access_key = {}\n",
            edc_testkit::s3_server::ACCESS_KEY,
            edc_testkit::s3_server::SECRET_KEY
        ),
    )
    .unwrap();
    std::fs::write(
        home.join(".aws/config"),
        format!(
            "[profile edc-lake]\nregion = garage\nendpoint_url = {}\n",
            fx.garage.endpoint()
        ),
    )
    .unwrap();
    // The test server's variables removed: only the files say where it is.
    let with_profile = |profile: &str| {
        let mut cmd = fx.sync(&sim.base_url(), &fx.garage.url("from-profile"));
        for (k, _) in fx.garage.env() {
            cmd.env_remove(k);
        }
        cmd.env("HOME", &home).env("AWS_PROFILE", profile);
        cmd
    };
    let out = support::run_cmd(&mut with_profile("edc-lake"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    ids_once(&fx.downloaded("from-profile").await, 12);

    let out = support::run_cmd(&mut with_profile("no-such-profile"));
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("AWS_PROFILE=no-such-profile: no such profile"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_object_store_failure_is_a_clear_exit_with_nothing_committed_and_an_exact_resume() {
    use edc_testkit::fault_proxy::{Fault, FaultProxy};
    let fx = Fixture::new();
    let sim = sim(23).await;
    let cases = [
        (Fault::SlowDown, 75, "SlowDown"),
        (Fault::TooManyRequests, 75, "429"),
        (Fault::ServerError, 69, "500"),
        (Fault::CorruptBody, 74, "Digest"),
        (Fault::CloseMidBody, 69, "s3://landing/"),
    ];
    for (i, (fault, code, says)) in cases.into_iter().enumerate() {
        let prefix = format!("faults-{i}");
        let trail = fx.path(&format!("audit-{i}.jsonl"));
        let state = fx.path(&format!("state-{i}"));
        let run = |endpoint: String| {
            let mut cmd = fx.sync_with(&sim.base_url(), &fx.garage.url(&prefix), &state, &trail);
            cmd.env("AWS_ENDPOINT_URL", endpoint);
            cmd
        };
        // The second page's PUT meets the fault; the first lands.
        let proxy = FaultProxy::start(fx.garage.port, "PUT", "/pages/", 2, fault).await;
        let out = support::run_cmd(&mut run(proxy.endpoint()));
        assert_eq!(out.code, code, "{fault:?}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{fault:?}: {}", out.stderr);
        assert!(
            !out.stderr.contains(edc_testkit::s3_server::SECRET_KEY),
            "{fault:?}: the secret is never shown"
        );
        let landed: Vec<_> = support::audit_events(&trail, "page_committed")
            .into_iter()
            .filter(|c| c["landed"] == true)
            .collect();
        assert_eq!(landed.len(), 1, "{fault:?}: only the first page is committed");
        // The next run, with the store healthy, resumes exactly.
        let out = support::run_cmd(&mut run(fx.garage.endpoint()));
        assert_eq!(out.code, 0, "{fault:?}: {}", out.stderr);
        ids_once(&fx.downloaded(&prefix).await, 23);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_honours_conditional_writes_gets_one_conditional_put_a_page() {
    // s3s-fs refuses a second If-None-Match: * write of one name; Garage
    // ignores it (and edc-sync then HEADs first): the probe tells them apart.
    let fx = Fixture::new();
    let s3s = PrivateS3::s3s_fs().unwrap_or_else(|e| panic!("{e}"));
    let sim = sim(23).await;
    for (server, conditional, prefix) in [(&s3s, true, "conditional"), (&fx.garage, false, "head-first")] {
        let run = || {
            let state = fx.path(&format!("state-{prefix}"));
            let trail = fx.path(&format!("audit-{prefix}.jsonl"));
            let mut cmd = fx.sync_with(&sim.base_url(), &server.url(prefix), &state, &trail);
            cmd.envs(server.env());
            (cmd, trail)
        };
        let (mut cmd, trail) = run();
        let out = support::run_cmd(&mut cmd);
        assert_eq!(out.code, 0, "{}: {}", server.name, out.stderr);
        let ready = support::audit_events(&trail, "object_landing_ready");
        assert_eq!(ready[0]["conditional_writes"], conditional, "{}", server.name);
        // Replays meet pages already there: the cursor file removed (the
        // documented way to fetch everything again) lands nothing twice.
        std::fs::remove_file(fx.path(&format!("state-{prefix}/vault_json/-/S-1/-/default.cursor.json")))
            .unwrap();
        let out = support::run_cmd(&mut run().0);
        assert_eq!(out.code, 0, "{}: {}", server.name, out.stderr);
        let to = fx.path(&format!("downloaded-{prefix}"));
        server.download(prefix, &to).await.unwrap();
        ids_once(&to, 23);
        let replayed = support::audit_events(&trail, "page_committed");
        assert!(
            replayed.iter().any(|c| c["replayed"] == true),
            "{}: the replay met landed pages",
            server.name
        );
    }
}

#[test]
fn thirty_kills_over_a_conditional_write_landing_lose_nothing_and_duplicate_nothing() {
    thirty_kills_over("s3s-fs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_writes_nothing_to_the_bucket_not_even_the_probe() {
    let fx = Fixture::new();
    let sim = sim(12).await;
    let mut cmd = fx.sync(&sim.base_url(), &fx.garage.url("dry"));
    cmd.arg("--dry-run");
    let out = support::run_cmd(&mut cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let to = fx.path("downloaded-dry");
    assert_eq!(
        fx.garage.download("dry", &to).await.unwrap(),
        0,
        "no object in the bucket"
    );
    let ready = support::audit_events(&fx.path("audit.jsonl"), "object_landing_ready");
    assert!(ready[0]["conditional_writes"].is_null(), "{}", ready[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn az_lands_in_azure_blob_storage_through_the_same_client_and_verify_proves_it() {
    // Azurite, Microsoft's emulator, from the npm registry: the Azure path
    // of the same object_store client. Azure checks no SHA-256 sent with a
    // blob (object_store sends none there), so verify is what proves them.
    let azurite = edc_testkit::azurite::PrivateAzurite::start().unwrap_or_else(|e| panic!("{e}"));
    let fx = Fixture::new();
    let sim = sim(23).await;
    let out = azurite.url("edc");
    for run in 1..=2 {
        let mut cmd = fx.sync(&sim.base_url(), &out);
        for (k, _) in fx.garage.env() {
            cmd.env_remove(k);
        }
        cmd.envs(azurite.env());
        let done = support::run_cmd(&mut cmd);
        assert_eq!(done.code, 0, "run {run}: {}", done.stderr);
    }
    let mut verify = fx.verify(&out);
    verify.envs(azurite.env());
    let verified = support::run_cmd(&mut verify);
    assert_eq!(verified.code, 0, "{}{}", verified.stdout, verified.stderr);
    assert!(
        verified
            .stdout
            .contains("1 landing directories, 5 landed files, 5 manifest entries"),
        "{}",
        verified.stdout
    );
    let commits = support::audit_events(&fx.path("audit.jsonl"), "page_committed");
    let landed: u64 = commits
        .iter()
        .filter(|c| c["landed"] == true)
        .map(|c| c["records"].as_u64().unwrap())
        .sum();
    assert_eq!(landed, 23, "every record landed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_start_lists_only_the_manifest_lines_written_since_the_last() {
    use edc_testkit::fault_proxy::{Fault, FaultProxy};
    let fx = Fixture::new();
    let sim = sim(23).await;
    let out = fx.garage.url("bounded");
    let first = support::run_cmd(&mut fx.sync(&sim.base_url(), &out));
    assert_eq!(first.code, 0, "{}", first.stderr);
    let watermark = fx.path("state/.landing/vault_json/-/S-1/-/default/manifest.published");
    let index = fx.path("state/.landing/vault_json/-/S-1/-/default/manifest.jsonl");
    let len = std::fs::metadata(&index).unwrap().len();
    assert_eq!(
        std::fs::read_to_string(&watermark).unwrap().trim(),
        len.to_string()
    );
    // The next start lists from the watermark on (S3 start-after), not the
    // stream's whole history.
    let counter = FaultProxy::start(
        fx.garage.port,
        "GET",
        "start-after=",
        u64::MAX,
        Fault::ServerError,
    )
    .await;
    let mut next = fx.sync(&sim.base_url(), &out);
    next.env("AWS_ENDPOINT_URL", counter.endpoint());
    let second = support::run_cmd(&mut next);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(
        counter.matched.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one bounded listing"
    );
    let mut verify = fx.verify(&out);
    assert_eq!(support::run_cmd(&mut verify).code, 0);
}

/// Credentials written into an object store's endpoint URL
/// (`http://KEYID:SECRET@host`) would reach every message and audit line
/// that names the endpoint. The URL is refused (78) before anything is
/// sent, naming the variable; neither part of the credential is shown, in
/// stderr or in the trail; and `verify` refuses it the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_url_with_credentials_in_it_is_refused_and_never_shown() {
    let fx = Fixture::new();
    let sim = support::runs::sim().await;
    let port = edc_testkit::redis_server::free_port().unwrap();
    let endpoint = format!("http://AKIDKEYID7f3a:SECRETkey7f3a@127.0.0.1:{port}");
    for cmd in [
        fx.sync(&sim.base_url(), "s3://edc-landing/lake"),
        fx.verify("s3://edc-landing/lake"),
    ] {
        let mut cmd = cmd;
        let out = support::run_cmd(cmd.env("AWS_ENDPOINT_URL", &endpoint));
        assert_eq!(out.code, 78, "{}", out.stderr);
        assert!(out.stderr.contains("AWS_ENDPOINT_URL"), "{}", out.stderr);
        let trail = std::fs::read_to_string(fx.path("audit.jsonl")).unwrap_or_default();
        for said in [&out.stdout, &out.stderr, &trail] {
            assert!(!said.contains("7f3a"), "a credential shown: {said}");
        }
    }
    assert!(sim.requests().is_empty(), "nothing was fetched");
}

/// The manifest line objects of a stream (`…/manifest/<offset>.json`).
async fn manifest_objects(fx: &Fixture, prefix: &str) -> Vec<String> {
    fx.garage
        .names(&format!("{prefix}/vault_json/-/S-1/-/default/manifest/"))
        .await
        .unwrap()
}

/// The bucket's manifest is the landing's proof without the state: its
/// last line object deleted leaves a hole a reader of the bucket counts
/// as pages never landed. The next run refuses it (65) naming the object,
/// before any request, as a cut manifest is refused; `--repair-state`
/// writes it again from the state's manifest index, audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_last_manifest_object_is_refused_and_written_again_only_on_request() {
    let fx = Fixture::new();
    let sim = sim(23).await;
    let out = fx.garage.url("cut");
    let first = support::run_cmd(&mut fx.sync(&sim.base_url(), &out));
    assert_eq!(first.code, 0, "{}", first.stderr);
    let objects = manifest_objects(&fx, "cut").await;
    let last = objects.last().unwrap().clone();
    fx.garage.delete(&last).await.unwrap();
    let requests = sim.requests().len();
    let refused = support::run_cmd(&mut fx.sync(&sim.base_url(), &out));
    assert_eq!(refused.code, 65, "{}", refused.stderr);
    let name = last.strip_prefix("cut/").unwrap();
    assert!(refused.stderr.contains(name), "{}", refused.stderr);
    assert!(refused.stderr.contains("--repair-state"), "{}", refused.stderr);
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");
    assert_eq!(
        manifest_objects(&fx, "cut").await.len(),
        objects.len() - 1,
        "nothing written"
    );
    let mut repair = fx.sync(&sim.base_url(), &out);
    repair.arg("--repair-state");
    let repaired = support::run_cmd(&mut repair);
    assert_eq!(repaired.code, 0, "{}", repaired.stderr);
    assert_eq!(manifest_objects(&fx, "cut").await, objects);
    let lines = support::audit_events(&fx.path("audit.jsonl"), "manifest_objects_repaired");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["written"][0]["name"], name);
    ids_once(&fx.downloaded("cut").await, 23);
    assert_eq!(support::run_cmd(&mut fx.verify(&out)).code, 0);
}

/// A manifest line object past the end of the state's manifest index (one
/// an insider put there, or a crashed run's line it never committed) is
/// removed so the bucket says what the index says, and never without a
/// line in the trail naming it with its SHA-256.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_object_past_the_index_is_removed_only_with_an_audit_line() {
    let fx = Fixture::new();
    let sim = sim(23).await;
    let out = fx.garage.url("extra");
    let first = support::run_cmd(&mut fx.sync(&sim.base_url(), &out));
    assert_eq!(first.code, 0, "{}", first.stderr);
    let index = fx.path("state/.landing/vault_json/-/S-1/-/default/manifest.jsonl");
    let len = std::fs::metadata(&index).unwrap().len();
    let planted = format!("extra/vault_json/-/S-1/-/default/manifest/{len:015}.json");
    let body = b"{\"planted\":true}\n".to_vec();
    fx.garage.put(&planted, body.clone()).await.unwrap();
    // The index's end is past the watermark again, as after a crash.
    let watermark = fx.path("state/.landing/vault_json/-/S-1/-/default/manifest.published");
    std::fs::write(&watermark, "0").unwrap();
    let second = support::run_cmd(&mut fx.sync(&sim.base_url(), &out));
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(!manifest_objects(&fx, "extra").await.contains(&planted));
    let lines = support::audit_events(&fx.path("audit.jsonl"), "manifest_objects_removed");
    assert_eq!(lines.len(), 1, "{lines:?}");
    let removed = &lines[0]["removed"][0];
    assert_eq!(removed["name"], planted.strip_prefix("extra/").unwrap());
    assert_eq!(removed["sha256"], edc_core::digest::sha256_hex(&body));
    assert_eq!(removed["bytes"], body.len());
}

/// The same page listed again under another page key, in the state's
/// manifest index past the cursor's point and as its object in the
/// bucket: the index line is named (`manifest_lines_removed`) and cut, then
/// its object, now past the index's end, is named
/// (`manifest_objects_removed`) and removed; the bucket lists every record
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_line_past_the_cursor_that_no_commit_records_is_removed_from_index_and_bucket() {
    let fx = Fixture::new();
    let sim = sim(23).await;
    let out = fx.garage.url("again");
    let first = support::run_cmd(&mut fx.sync(&sim.base_url(), &out));
    assert_eq!(first.code, 0, "{}", first.stderr);
    let index = fx.path("state/.landing/vault_json/-/S-1/-/default/manifest.jsonl");
    let mut text = std::fs::read_to_string(&index).unwrap();
    let len = text.len();
    let mut entry: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    entry["page_key"] = format!("{}&again=1", entry["page_key"].as_str().unwrap()).into();
    let line = serde_json::to_string(&entry).unwrap() + "\n";
    text.push_str(&line);
    std::fs::write(&index, &text).unwrap();
    let planted = format!("again/vault_json/-/S-1/-/default/manifest/{len:015}.json");
    fx.garage.put(&planted, line.clone().into_bytes()).await.unwrap();
    let second = support::run_cmd(&mut fx.sync(&sim.base_url(), &out));
    assert_eq!(second.code, 0, "{}", second.stderr);
    let lines = support::audit_events(&fx.path("audit.jsonl"), "manifest_lines_removed");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        lines[0]["removed"][0]["sha256"],
        edc_core::digest::sha256_hex(line.as_bytes())
    );
    let objects = support::audit_events(&fx.path("audit.jsonl"), "manifest_objects_removed");
    assert_eq!(objects.len(), 1, "{objects:?}");
    assert_eq!(
        objects[0]["removed"][0]["sha256"],
        edc_core::digest::sha256_hex(line.as_bytes())
    );
    assert_eq!(std::fs::read_to_string(&index).unwrap().len(), len);
    ids_once(&fx.downloaded("again").await, 23);
    assert_eq!(support::run_cmd(&mut fx.verify(&out)).code, 0);
}

/// Copies the directory `from` to `to`, as a backup does.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
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

/// On an object-store landing the manifest index is in the state: a state
/// and trail restored from an older backup leave the bucket with manifest
/// line objects past the index's end, of a run the trail does not record.
/// Removing them would launder the lost history: the run stops (65) naming
/// the index and the run, before any request; `--accept-rollback` records
/// the deviation and continues, nothing landed twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_restored_from_an_older_backup_is_refused_over_a_bucket_too() {
    let fx = Fixture::new();
    let sim = sim(23).await;
    let out = fx.garage.url("rollback");
    let mut first = fx.sync(&sim.base_url(), &out);
    first.args(["--max-pages", "2"]);
    assert_eq!(support::run_cmd(&mut first).code, 0);
    copy_dir(&fx.path("state"), &fx.path("backup/state"));
    std::fs::copy(fx.path("audit.jsonl"), fx.path("backup/audit.jsonl")).unwrap();
    let all = support::run_cmd(&mut fx.sync(&sim.base_url(), &out));
    assert_eq!(all.code, 0, "{}", all.stderr);
    let lost_run = support::audit_events(&fx.path("audit.jsonl"), "run_started")
        .last()
        .unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::remove_dir_all(fx.path("state")).unwrap();
    copy_dir(&fx.path("backup/state"), &fx.path("state"));
    std::fs::copy(fx.path("backup/audit.jsonl"), fx.path("audit.jsonl")).unwrap();
    let objects = manifest_objects(&fx, "rollback").await;

    let requests = sim.requests().len();
    let refused = support::run_cmd(&mut fx.sync(&sim.base_url(), &out));
    assert_eq!(refused.code, 65, "{}", refused.stderr);
    for needed in ["manifest.jsonl", &lost_run, "--accept-rollback"] {
        assert!(
            refused.stderr.contains(needed),
            "{needed:?} missing from: {}",
            refused.stderr
        );
    }
    assert_eq!(sim.requests().len(), requests, "nothing was fetched");
    assert_eq!(
        manifest_objects(&fx, "rollback").await,
        objects,
        "nothing removed"
    );

    let mut accept = fx.sync(&sim.base_url(), &out);
    accept.arg("--accept-rollback");
    let accepted = support::run_cmd(&mut accept);
    assert_eq!(accepted.code, 0, "{}", accepted.stderr);
    let lines = support::audit_events(&fx.path("audit.jsonl"), "rollback_accepted");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["unrecorded"][0]["run_id"], lost_run.as_str());
    ids_once(&fx.downloaded("rollback").await, 23);
    assert_eq!(support::run_cmd(&mut fx.verify(&out)).code, 0);
}

/// `verify` walks a bucket once, in key order, whatever it holds: two
/// streams' landing directories side by side, each judged on its own. A
/// page object of one rewritten and a manifest entry of the other listed
/// again under another page key are each named; before the damage the
/// same bucket verifies clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_walks_a_bucket_of_two_streams_once_and_names_the_damage_of_each() {
    let fx = Fixture::new();
    let sim = sim(23).await;
    let out = fx.garage.url("two");
    for study in ["S-1", "S-2"] {
        let (state, trail) = (fx.path("state"), fx.path("audit.jsonl"));
        let synced = support::run_cmd(&mut fx.sync_study(study, &sim.base_url(), &out, &state, &trail));
        assert_eq!(synced.code, 0, "{study}: {}", synced.stderr);
    }
    let clean = support::run_cmd(&mut fx.verify(&out));
    assert_eq!(clean.code, 0, "{}{}", clean.stdout, clean.stderr);
    let downloaded = fx.downloaded("two").await;
    // S-1: a page object's bytes changed.
    let s1 = downloaded.join("vault_json/-/S-1/-/default");
    let first = std::fs::read_to_string(s1.join("manifest.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    let page = first["file"].as_str().unwrap();
    let mut bytes = std::fs::read(s1.join(page)).unwrap();
    bytes[3] ^= 1;
    fx.garage
        .put(&format!("two/vault_json/-/S-1/-/default/{page}"), bytes)
        .await
        .unwrap();
    // S-2: its first entry listed again, under another page key, after its last.
    let s2 = downloaded.join("vault_json/-/S-2/-/default");
    let listed = std::fs::read_to_string(s2.join("manifest.jsonl")).unwrap();
    let mut again: serde_json::Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
    again["page_key"] = format!("{}&again=1", again["page_key"].as_str().unwrap()).into();
    let again_file = again["file"].as_str().unwrap().to_string();
    fx.garage
        .put(
            "two/vault_json/-/S-2/-/default/manifest/999999999999999.json",
            format!("{again}\n").into_bytes(),
        )
        .await
        .unwrap();
    let damaged = support::run_cmd(&mut fx.verify(&out));
    assert_eq!(damaged.code, 65, "{}{}", damaged.stdout, damaged.stderr);
    assert!(
        damaged
            .stdout
            .contains(&format!("S-1/-/default/{page}: modified after landing")),
        "{}",
        damaged.stdout
    );
    assert!(
        damaged
            .stdout
            .lines()
            .any(|l| l.contains("S-2/-/default") && l.contains(&again_file) && l.contains("counted twice")),
        "{}",
        damaged.stdout
    );
}

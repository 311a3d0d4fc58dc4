//! Speaking to the real vendors: authentication schemes and error dialects
//! end to end, the real binary against the simulator's rave and vault
//! profiles over loopback (which imitate the vendors' documents; see
//! `crates/sim/src/profile.rs`), real files, real audit trail.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use edc_core::audit::verify;
use edc_sim::{Dataset, FaultSchedule, LogEntry, Profile, SimConfig, Simulator};

pub(crate) const USER: &str = "oq.user@example.invalid";
pub(crate) const PASSWORD: &str = "pw-Vendor-7f3c9a1e";
const STUDY: &str = "Mediflex(Prod)";

/// Policies for each scheme and dialect, against the simulator's shapes.
const POLICIES: &str = include_str!("../../config/fixtures/simulator-policies.yaml");

/// A working directory with the policies committed in a git repository.
pub(crate) struct Fixture {
    pub(crate) dir: tempfile::TempDir,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = support::git_init(dir.path());
        std::fs::write(dir.path().join("policies.yaml"), POLICIES).unwrap();
        support::git_commit_all(&repo, "vendor policies");
        Fixture { dir }
    }

    pub(crate) fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// The committed policies with `from` replaced by `to` (uncommitted:
    /// runs need --allow-dirty).
    pub(crate) fn edit_policies(&self, from: &str, to: &str) {
        let policies = std::fs::read_to_string(self.path("policies.yaml")).unwrap();
        assert!(policies.contains(from), "the policies contain {from:?}");
        std::fs::write(self.path("policies.yaml"), policies.replacen(from, to, 1)).unwrap();
    }

    /// The vault_audit block with `lookback: {identical_records: distinct}`
    /// (uncommitted: runs need --allow-dirty).
    fn vault_audit_with_distinct_twins(&self) {
        self.edit_policies(
            "      settle_lag_s: 1\nvault_vql:",
            "      settle_lag_s: 1\n    lookback:\n      identical_records: distinct\nvault_vql:",
        );
    }

    /// The vault_audit block with `lookback: {seconds: 0}` (uncommitted:
    /// runs need --allow-dirty).
    fn vault_audit_without_lookback(&self) {
        let policies = std::fs::read_to_string(self.path("policies.yaml"))
            .unwrap()
            .replacen(
                "      settle_lag_s: 1\nvault_vql:",
                "      settle_lag_s: 1\n    lookback:\n      seconds: 0\nvault_vql:",
                1,
            );
        assert!(policies.contains("seconds: 0"));
        std::fs::write(self.path("policies.yaml"), policies).unwrap();
    }

    pub(crate) fn sync(&self, vendor: &str, sim: &Simulator, password: &str) -> Command {
        self.command("sync", vendor, sim, password)
    }

    /// `edc-sync <sub>` (sync or backfill) on this fixture's directories.
    pub(crate) fn command(&self, sub: &str, vendor: &str, sim: &Simulator, password: &str) -> Command {
        let state = self.path("state").display().to_string();
        self.command_with_state(sub, vendor, sim, password, &state)
    }

    /// [`Self::command`] with `--state state` (a directory or a database).
    pub(crate) fn command_with_state(
        &self,
        sub: &str,
        vendor: &str,
        sim: &Simulator,
        password: &str,
        state: &str,
    ) -> Command {
        let env_file = self.path("helper-env.txt");
        let mut cmd = support::edc_sync();
        cmd.args([sub, "--config"])
            .arg(self.path("policies.yaml"))
            .args(["--vendor", vendor, "--study", STUDY, "--out"])
            .arg(self.path("landing"))
            .args(["--state", state])
            .arg("--audit-log")
            .arg(self.path("audit.jsonl"))
            .args(["--pacer", "local"])
            .env("EDC_SYNC_TEST_BASE_URL", sim.base_url())
            .env("EDC_SYNC_TEST_USER", USER)
            .env("EDC_SYNC_TEST_PASSWORD", password)
            .env("EDC_SYNC_TEST_HELPER_TOKEN", HELPER_TOKEN)
            .env("EDC_SYNC_TEST_HELPER_ENV_FILE", env_file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    pub(crate) async fn run(&self, vendor: &str, sim: &Simulator, password: &str) -> Output {
        self.run_with(vendor, sim, password, &[]).await
    }

    pub(crate) async fn run_with(
        &self,
        vendor: &str,
        sim: &Simulator,
        password: &str,
        extra: &[&str],
    ) -> Output {
        let mut cmd = self.sync(vendor, sim, password);
        cmd.args(extra);
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    }

    pub(crate) fn events(&self, name: &str) -> Vec<serde_json::Value> {
        support::audit_events(&self.path("audit.jsonl"), name)
    }

    pub(crate) fn stream_dir(&self, vendor: &str) -> PathBuf {
        self.path(&format!("landing/{vendor}/-/{STUDY}/-/default"))
    }

    pub(crate) fn cursor(&self, vendor: &str) -> serde_json::Value {
        let path = self.path(&format!("state/{vendor}/-/{STUDY}/-/default.cursor.json"));
        std::fs::read_to_string(path)
            .map(|t| serde_json::from_str(&t).unwrap())
            .unwrap_or(serde_json::Value::Null)
    }

    fn manifest_pages(&self, vendor: &str) -> usize {
        std::fs::read_to_string(self.stream_dir(vendor).join("manifest.jsonl"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

const HELPER_TOKEN: &str = "helper-issued-token-9c1b77";

pub(crate) async fn sim(
    profile: Profile,
    records: u32,
    faults: &[&str],
    tune: impl FnOnce(&mut SimConfig),
) -> Simulator {
    let mut schedule = FaultSchedule::default();
    for f in faults {
        let (n, fault) = FaultSchedule::parse_entry(f).unwrap();
        schedule.insert(n, fault);
    }
    let mut config = SimConfig {
        dataset: Dataset {
            subjects: 7,
            records,
            seed: 11,
            padding: 0,
        },
        profile,
        username: USER.into(),
        password: PASSWORD.into(),
        faults: schedule,
        ..SimConfig::default()
    };
    tune(&mut config);
    Simulator::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

#[track_caller]
pub(crate) fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Only GET and HEAD reach the EDC, plus the login form at its path.
#[track_caller]
fn assert_read_only(requests: &[LogEntry], login_path: &str) {
    for r in requests {
        let ok = matches!(r.method.as_str(), "GET" | "HEAD") || (r.method == "POST" && r.path == login_path);
        assert!(ok, "a request that is neither GET/HEAD nor the login form: {r:?}");
    }
}

/// No file under `dir` and neither output stream holds any of `secrets`.
#[track_caller]
fn assert_no_secret(dir: &Path, outputs: &[&Output], secrets: &[&str]) {
    let mut texts: Vec<(String, Vec<u8>)> = outputs
        .iter()
        .flat_map(|o| {
            [
                ("stdout".to_string(), o.stdout.clone()),
                ("stderr".to_string(), o.stderr.clone()),
            ]
        })
        .collect();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == ".git") {
                    continue;
                }
                stack.push(path);
            } else {
                texts.push((path.display().to_string(), std::fs::read(&path).unwrap()));
            }
        }
    }
    for (name, bytes) in texts {
        let text = String::from_utf8_lossy(&bytes);
        for secret in secrets {
            assert!(!text.contains(secret), "{name} contains a secret");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_syncs_the_rave_profile_and_lands_every_record_once() {
    let fx = Fixture::new();
    let sim = sim(Profile::Rave, 130, &[], |_| {}).await;
    let out = fx.run("rave_basic", &sim, PASSWORD).await;
    assert_exit(&out, 0);
    let mut ids = edc_qualify::landed::landed_odm_source_ids(&fx.stream_dir("rave_basic")).unwrap();
    assert_eq!(ids.len(), 130);
    ids.dedup();
    assert_eq!(ids.len(), 130, "a record landed twice");
    let requests = sim.requests();
    assert!(
        requests.iter().all(|r| r.auth == "ok" && r.method == "GET"),
        "{requests:?}"
    );
    assert!(verify(&fx.path("audit.jsonl")).unwrap().intact());
    // Basic carries the password base64-encoded: neither form leaks.
    use base64::Engine;
    let pair = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    assert_no_secret(fx.dir.path(), &[&out], &[PASSWORD, &pair]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rave_next_page_keeps_the_requests_own_parameters_when_the_link_drops_them() {
    // The rave profile's Link carries studyoid, startid and per_page only
    // (as RWS's documented examples do): pages 2 onward must still ask for
    // mode and unicode, or a name like Müller comes back as M?ller.
    let fx = Fixture::new();
    let sim = sim(Profile::Rave, 130, &[], |_| {}).await;
    let out = fx.run("rave_basic", &sim, PASSWORD).await;
    assert_exit(&out, 0);
    let pages: Vec<LogEntry> = sim
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("ClinicalAuditRecords"))
        .collect();
    assert_eq!(pages.len(), 4, "{pages:?}");
    for page in &pages {
        assert!(
            page.path.contains("mode=default") && page.path.contains("unicode=true"),
            "a page asked without the policy's parameters: {}",
            page.path
        );
    }
    let mut landed = String::new();
    for entry in std::fs::read_dir(fx.stream_dir("rave_basic").join("pages")).unwrap() {
        landed.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    assert_eq!(landed.matches("Korrigiert von Müller").count(), 130);
    assert!(!landed.contains("M?ller"));
}

/// A Rave study dataset synced incrementally: three runs while records
/// arrive (whole-second times, several a second), every record landed
/// once; each run asks from the second the last document was made in, and
/// the records of that second it reads again are recognised, not landed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rave_study_dataset_syncs_incrementally_every_record_once() {
    const RECORDS: u32 = 60;
    let fx = Fixture::new();
    // Records every 250 ms from 10 s ago to 5 s from now.
    let origin = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
    let sim = sim(Profile::Rave, RECORDS, &[], |c| {
        c.audit_trail = Some(edc_sim::audit_trail::Arrivals::every(
            origin,
            std::time::Duration::from_millis(250),
        ))
    })
    .await;
    let mut starts = Vec::new();
    for run in 0..3 {
        if run > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(3000)).await;
        }
        assert_exit(&fx.run("rave_dataset", &sim, PASSWORD).await, 0);
        starts.push(fx.cursor("rave_dataset")["window_start"].clone());
    }
    let requests: Vec<String> = sim.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(requests.len(), 3, "one document a run: {requests:?}");
    assert!(
        !requests[0].contains("start="),
        "the first run reads the whole dataset"
    );
    for (r, start) in requests[1..].iter().zip(&starts) {
        let sent = start.as_str().unwrap().trim_end_matches('Z').replace(':', "%3A");
        assert!(r.contains(&format!("start={sent}")), "{r} asks from {start}");
    }
    let mut ids = edc_qualify::landed::landed_dataset_record_ids(&fx.stream_dir("rave_dataset")).unwrap();
    assert_distinct(&ids, "dataset records");
    ids.sort();
    let every: Vec<String> = (1..=RECORDS).map(|n| format!("DS-{n:07}")).collect();
    assert_eq!(ids, every, "every record once after the arrivals end");
    let repeated: u64 = fx
        .events("page_committed")
        .iter()
        .map(|l| l["repeated_records"].as_u64().unwrap_or(0))
        .sum();
    assert!(repeated > 0, "the boundary second was read again and recognised");

    // The shipped block, unchanged, against the same server: twice.
    let dir = shipped_policy_repo();
    for _ in 0..2 {
        let out = shipped_sync(
            dir.path(),
            "medidata_rave_dataset",
            &["--tenant", "acme"],
            &[("RAVE_API_BASE_URL", sim.base_url())],
        )
        .await;
        assert_exit(&out, 0);
    }
    let shipped = edc_qualify::landed::landed_dataset_record_ids(
        &dir.path()
            .join(format!("landing/medidata_rave_dataset/acme/{STUDY}/-/default")),
    )
    .unwrap();
    assert_distinct(&shipped, "shipped dataset block");
    assert_eq!(shipped.len(), RECORDS as usize);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_rave_password_exits_77_naming_the_variables_and_the_reason_code() {
    let fx = Fixture::new();
    let sim = sim(Profile::Rave, 20, &[], |_| {}).await;
    let out = fx.run("rave_basic", &sim, "not-the-password").await;
    assert_exit(&out, 77);
    let err = stderr(&out);
    assert!(
        err.contains("EDC_SYNC_TEST_USER / EDC_SYNC_TEST_PASSWORD"),
        "{err}"
    );
    assert!(err.contains("RWS00008"), "{err}");
    assert!(!err.contains("check the token"), "{err}");
    let failed = fx.events("request_failed");
    assert_eq!(failed[0]["vendor_error"]["code"], "RWS00008");
    assert_eq!(failed[0]["status"], 401);
    assert_eq!(fx.cursor("rave_basic"), serde_json::Value::Null);
    assert_no_secret(fx.dir.path(), &[&out], &["not-the-password"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vault_session_that_expires_every_7_requests_is_renewed_and_every_record_lands_once() {
    let fx = Fixture::new();
    // 200 records in pages of 5: a 40-page window.
    let sim = sim(Profile::Vault, 200, &[], |c| c.session_ttl_requests = Some(7)).await;
    let out = fx.run("vault_session", &sim, PASSWORD).await;
    assert_exit(&out, 0);
    let mut ids = edc_qualify::landed::landed_json_record_ids(&fx.stream_dir("vault_session")).unwrap();
    assert_eq!(ids.len(), 200);
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 200, "a record landed twice");
    assert_eq!(fx.manifest_pages("vault_session"), 40);
    // 40 pages, 7 per session: 6 sessions, so 1 login and 5 renewals.
    assert_eq!(fx.events("session_started").len(), 1);
    let renewed = fx.events("session_renewed");
    assert_eq!(renewed.len(), 5);
    for (i, line) in renewed.iter().enumerate() {
        assert_eq!(line["generation"], i as u64 + 2);
        assert_eq!(line["refused_generation"], i as u64 + 1);
        assert!(
            line["reason"].as_str().unwrap().contains("INVALID_SESSION_ID"),
            "{line}"
        );
        assert_eq!(line["login_path"], "/api/v24.1/auth");
    }
    let requests = sim.requests();
    assert_read_only(&requests, "/api/v24.1/auth");
    assert_eq!(requests.iter().filter(|r| r.method == "POST").count(), 6);
    // Every page line names Vault's execution id, for support tickets.
    for line in fx.events("page_committed") {
        assert!(line["vendor_execution_id"]
            .as_str()
            .unwrap()
            .starts_with("sim-exec-"));
    }
    assert!(verify(&fx.path("audit.jsonl")).unwrap().intact());
    // Neither the password nor any session id the simulator issued leaks
    // (a fresh registry with the same seed issues the same six ids).
    let issued = edc_sim::vendor::Sessions::default();
    let ids: Vec<String> = (0..6).map(|_| issued.issue(11)).collect();
    let mut secrets: Vec<&str> = ids.iter().map(String::as_str).collect();
    secrets.push(PASSWORD);
    assert_no_secret(fx.dir.path(), &[&out], &secrets);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_refused_again_right_after_its_renewal_exits_77_with_the_cursor_unmoved() {
    let fx = Fixture::new();
    // 1 = login, 2 = page 1, 3 = page 2 refused, 4 = renewal, 5 = page 2 refused again.
    let sim = sim(
        Profile::Vault,
        50,
        &[
            "3=vault-failure:INVALID_SESSION_ID",
            "5=vault-failure:INVALID_SESSION_ID",
        ],
        |_| {},
    )
    .await;
    let out = fx.run("vault_session", &sim, PASSWORD).await;
    assert_exit(&out, 77);
    assert!(
        stderr(&out).contains("EDC_SYNC_TEST_USER / EDC_SYNC_TEST_PASSWORD"),
        "{}",
        stderr(&out)
    );
    assert_eq!(fx.events("session_renewed").len(), 1);
    assert_eq!(fx.manifest_pages("vault_session"), 1);
    assert_eq!(
        fx.cursor("vault_session")["high_water"],
        "2026-01-01T00:00:05Z",
        "the cursor stays on the last committed page"
    );
    assert_eq!(sim.requests().len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_made_for_another_vault_exits_77_naming_both_before_any_data_request() {
    // The user's only vault is another one: Vault ignores a vaultDNS the
    // user has no access to and logs in to the user's default vault.
    let fx = Fixture::new();
    let sim = sim(Profile::Vault, 20, &[], |c| {
        c.vaults = vec!["other-vault.example".into()]
    })
    .await;
    let out = fx.run("vault_session", &sim, PASSWORD).await;
    assert_exit(&out, 77);
    let err = stderr(&out);
    assert!(
        err.contains("vault other-vault.example, not 127.0.0.1"),
        "the message names both vaults: {err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let requests = sim.requests();
    assert_eq!(requests.len(), 1, "nothing but the login was sent: {requests:?}");
    assert_eq!(fx.manifest_pages("vault_session"), 0);
    assert_eq!(fx.cursor("vault_session"), serde_json::Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_login_asks_for_the_configured_vault_among_the_users_vaults() {
    // The user's default vault is another one; vaultDNS (the base URL's
    // host, or auth.vault_dns behind a gateway) selects the right one.
    let fx = Fixture::new();
    let sim = sim(Profile::Vault, 20, &[], |c| {
        c.vaults = vec!["other-vault.example".into(), "127.0.0.1".into()]
    })
    .await;
    let out = fx.run("vault_session", &sim, PASSWORD).await;
    assert_exit(&out, 0);
    assert_eq!(fx.events("session_started").len(), 1);
    assert_eq!(sim.requests()[0].vault_dns.as_deref(), Some("127.0.0.1"));

    let gateway = Fixture::new();
    let policies = std::fs::read_to_string(gateway.path("policies.yaml")).unwrap().replace(
        "    login_path: /api/v24.1/auth\n  dialect: vault\n  sustained_rate_per_sec: 1000",
        "    login_path: /api/v24.1/auth\n    vault_dns: Other-Vault.example\n  dialect: vault\n  sustained_rate_per_sec: 1000",
    );
    assert!(policies.contains("vault_dns: Other-Vault.example"));
    std::fs::write(gateway.path("policies.yaml"), policies).unwrap();
    let out = gateway
        .run_with("vault_session", &sim, PASSWORD, &["--allow-dirty"])
        .await;
    assert_exit(&out, 0);
    let logins: Vec<LogEntry> = sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(logins.len(), 2, "{logins:?}");
    assert_eq!(logins[1].vault_dns.as_deref(), Some("other-vault.example"));
}

/// A vault with Client ID Filtering admits the default client ID the
/// policy sends when a connection lists it, and refuses the login (77)
/// when none does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_id_filtering_admits_the_listed_id_and_refuses_the_rest_with_77() {
    let fx = Fixture::new();
    let listed = sim(Profile::Vault, 20, &[], |c| {
        c.client_id_filter = Some(vec![edc_core::config::DEFAULT_VAULT_CLIENT_ID.into()])
    })
    .await;
    assert_exit(&fx.run("vault_session", &listed, PASSWORD).await, 0);
    assert!(listed.requests().iter().all(|r| r.status == 200));

    let fx = Fixture::new();
    let other = sim(Profile::Vault, 20, &[], |c| {
        c.client_id_filter = Some(vec!["acme-clinical-dm-server-other".into()])
    })
    .await;
    let out = fx.run("vault_session", &other, PASSWORD).await;
    assert_exit(&out, 77);
    assert!(stderr(&out).contains("INSUFFICIENT_ACCESS"), "{}", stderr(&out));
    assert_eq!(other.requests().len(), 1, "nothing but the login was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_vault_password_exits_77_naming_the_variables() {
    let fx = Fixture::new();
    let sim = sim(Profile::Vault, 20, &[], |_| {}).await;
    let out = fx.run("vault_session", &sim, "wrong-password-123").await;
    assert_exit(&out, 77);
    let err = stderr(&out);
    assert!(err.contains("USERNAME_OR_PASSWORD_INCORRECT"), "{err}");
    assert!(
        err.contains("EDC_SYNC_TEST_USER / EDC_SYNC_TEST_PASSWORD"),
        "{err}"
    );
    let requests = sim.requests();
    assert_eq!(requests.len(), 1, "nothing but the login was sent: {requests:?}");
    assert_eq!(requests[0].method, "POST");
    assert!(fx.events("session_started").is_empty());
    assert_no_secret(fx.dir.path(), &[&out], &["wrong-password-123"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_helper_supplies_the_bearer_token_and_a_failing_one_exits_77() {
    let fx = Fixture::new();
    let sim = sim(Profile::Generic, 60, &[], |c| c.token = HELPER_TOKEN.into()).await;
    let out = fx.run("helper", &sim, PASSWORD).await;
    assert_exit(&out, 0);
    assert_eq!(
        edc_qualify::landed::landed_json_record_ids(&fx.stream_dir("helper"))
            .unwrap()
            .len(),
        60
    );
    let started = fx.events("session_started");
    assert_eq!(
        (started.len(), started[0]["scheme"].as_str()),
        (1, Some("command"))
    );

    let out = fx.run("broken_helper", &sim, PASSWORD).await;
    assert_exit(&out, 77);
    let err = stderr(&out);
    assert!(err.contains("exit status 3"), "{err}");
    // The helper's stderr is never copied anywhere: it may hold anything.
    assert!(!err.contains("IdP refused"), "{err}");
    assert!(!err.contains(HELPER_TOKEN), "{err}");
    assert_no_secret(fx.dir.path(), &[&out], &[HELPER_TOKEN]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vault_failure_with_an_empty_data_array_mid_window_never_ends_the_window() {
    let fx = Fixture::new();
    // 1 = login, 2 and 3 = pages 1 and 2, 4 = a 200 FAILURE.
    let sim = sim(Profile::Vault, 50, &["4=vault-failure:INVALID_DATA"], |_| {}).await;
    let out = fx.run("vault_session", &sim, PASSWORD).await;
    assert_exit(&out, 65);
    let err = stderr(&out);
    assert!(err.contains("INVALID_DATA"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("window complete"));
    assert_eq!(fx.manifest_pages("vault_session"), 2);
    assert_eq!(fx.cursor("vault_session")["high_water"], "2026-01-01T00:00:10Z");
    let failed = fx.events("request_failed");
    assert_eq!(failed[0]["vendor_error"]["code"], "INVALID_DATA");
    assert_eq!(failed[0]["vendor_execution_id"], "sim-exec-00000004");
    assert!(fx.events("stream_finished")[0]["window_complete"] == false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_limit_exceeded_in_a_body_waits_like_a_429_and_the_same_page_is_fetched_again() {
    let fx = Fixture::new();
    let sim = sim(
        Profile::Vault,
        30,
        &["3=vault-failure:API_LIMIT_EXCEEDED"],
        |_| {},
    )
    .await;
    let out = fx.run("vault_session", &sim, PASSWORD).await;
    assert_exit(&out, 0);
    let limited = fx.events("rate_limited");
    assert_eq!(limited.len(), 1);
    let line = &limited[0];
    assert_eq!(line["signal"], "vendor_body");
    assert_eq!(line["retry_after_source"], "vendor_body");
    assert_eq!(line["retry_after_s"], 1.0);
    assert_eq!(line["vendor_error"]["code"], "API_LIMIT_EXCEEDED");
    assert_eq!(line["vendor_execution_id"], "sim-exec-00000003");
    let requests = sim.requests();
    assert_eq!(
        requests[2].path, requests[3].path,
        "the same page again after the wait"
    );
    assert!(
        requests[3].t_us - requests[2].t_us >= 1_000_000,
        "no request went out early"
    );
    assert_eq!(
        edc_qualify::landed::landed_json_record_ids(&fx.stream_dir("vault_session"))
            .unwrap()
            .len(),
        30
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insufficient_access_in_a_vault_body_exits_77() {
    let fx = Fixture::new();
    let sim = sim(
        Profile::Vault,
        30,
        &["2=vault-failure:INSUFFICIENT_ACCESS"],
        |_| {},
    )
    .await;
    let out = fx.run("vault_session", &sim, PASSWORD).await;
    assert_exit(&out, 77);
    assert!(stderr(&out).contains("INSUFFICIENT_ACCESS"), "{}", stderr(&out));
    assert_eq!(fx.manifest_pages("vault_session"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rave_error_documents_at_200_and_at_4xx_are_errors_naming_the_reason_code() {
    for fault in [
        "2=rave-odm-error:200:RWS00092",
        "2=rave-error:200:RWS00092",
        "2=rave-error:404:RWS00092",
    ] {
        let fx = Fixture::new();
        let sim = sim(Profile::Rave, 100, &[fault], |_| {}).await;
        let out = fx.run("rave_basic", &sim, PASSWORD).await;
        assert_exit(&out, 65);
        assert!(stderr(&out).contains("RWS00092"), "{fault}: {}", stderr(&out));
        let failed = fx.events("request_failed");
        assert_eq!(failed[0]["vendor_error"]["code"], "RWS00092", "{fault}");
        // Page 1 was committed; the error page never was.
        assert_eq!(fx.manifest_pages("rave_basic"), 1, "{fault}");
        assert_eq!(fx.cursor("rave_basic")["high_water"], 1000 + 40 * 7, "{fault}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_date_is_measured_against_the_servers_clock_not_ours() {
    for skew in [300i64, -300] {
        let fx = Fixture::new();
        let sim = sim(Profile::Rave, 60, &["2=429:date:2"], |c| c.clock_skew_s = skew).await;
        let metrics = fx.path("edc_sync.prom");
        let out = fx
            .run_with(
                "rave_basic",
                &sim,
                PASSWORD,
                &["--metrics-file", metrics.to_str().unwrap()],
            )
            .await;
        assert_exit(&out, 0);
        let prom = std::fs::read_to_string(&metrics).unwrap();
        let gauge: f64 = prom
            .lines()
            .find_map(|l| l.strip_prefix("edc_sync_clock_skew_seconds{"))
            .and_then(|rest| rest.split_once("} "))
            .map(|(_, v)| v.trim().parse().unwrap())
            .unwrap();
        assert!((gauge - skew as f64).abs() <= 2.0, "skew {skew}: metric {gauge}");
        let limited = fx.events("rate_limited");
        let line = &limited[0];
        // HTTP dates have whole seconds: the wait is the server's 2 s, +-1.
        let wait = line["retry_after_s"].as_f64().unwrap();
        assert!((1.0..=3.0).contains(&wait), "skew {skew}: waited {wait} s");
        assert_eq!(line["retry_after_source"], "date");
        let measured = line["clock_skew_s"].as_f64().unwrap();
        assert!(
            (measured - skew as f64).abs() <= 2.0,
            "skew {skew}: measured {measured}"
        );
        assert!(line["server_date"].is_string());
        assert!(stderr(&out).contains("clock_skew_warn_s"), "{}", stderr(&out));
    }
}

/// `edc-sync sync` of a shipped vendor block, as an operator runs it.
/// A directory whose git repository holds the shipped policy, committed,
/// as `rate_limits.yaml`.
pub(crate) fn shipped_policy_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let repo = support::git_init(dir.path());
    std::fs::write(dir.path().join("rate_limits.yaml"), support::example_config()).unwrap();
    support::git_commit_all(&repo, "the shipped policy");
    dir
}

pub(crate) async fn shipped_sync(dir: &Path, vendor: &str, extra: &[&str], env: &[(&str, String)]) -> Output {
    let mut cmd = support::edc_sync();
    cmd.args(["sync", "--config"])
        .arg(dir.join("rate_limits.yaml"))
        .args(["--vendor", vendor, "--study", STUDY, "--pacer", "local", "--out"])
        .arg(dir.join("landing"))
        .arg("--state")
        .arg(dir.join("state"))
        .arg("--audit-log")
        .arg(dir.join("audit.jsonl"))
        .args(extra)
        .env("VAULT_USERNAME", USER)
        .env("VAULT_PASSWORD", PASSWORD)
        .env("RAVE_USERNAME", USER)
        .env("RAVE_PASSWORD", PASSWORD)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

#[track_caller]
fn assert_distinct<T: Ord + Clone + std::fmt::Debug>(ids: &[T], what: &str) {
    let mut unique = ids.to_vec();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "{what}: a record landed twice");
}

/// The shipped veeva_vault (audit trail), veeva_vault_vql and medidata_rave
/// blocks, unchanged, against the simulator's vendor profiles: three runs
/// each with new records arriving between them, every record exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_vendor_blocks_land_every_record_once_across_three_runs_while_records_arrive() {
    let dir = shipped_policy_repo();

    // Vault's audit trail: records keep arriving; the shipped settle lag is
    // 120 s, so they are stamped around two minutes ago.
    let origin = std::time::SystemTime::now() - std::time::Duration::from_secs(125);
    let vault = sim(Profile::Vault, 200, &[], |c| {
        c.audit_trail = Some(edc_sim::audit_trail::Arrivals::every(
            origin,
            std::time::Duration::from_millis(250),
        ))
    })
    .await;
    for run in 0..3 {
        if run > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
        }
        let extra = ["--all-streams", "--protocol-version", "3"];
        let out = shipped_sync(
            dir.path(),
            "veeva_vault",
            &extra,
            &[("VAULT_API_BASE_URL", vault.base_url())],
        )
        .await;
        assert_exit(&out, 0);
    }
    for stream in ["object_audit_trail", "document_audit_trail"] {
        let landed = dir
            .path()
            .join(format!("landing/veeva_vault/-/{STUDY}/3/{stream}"));
        let ids = edc_qualify::landed::landed_json_record_ids(&landed).unwrap();
        assert_distinct(&ids, stream);
        let n = ids.len() as u32;
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            (1..=n).map(|i| format!("AT-{i:07}")).collect::<Vec<_>>(),
            "{stream}: a gap"
        );
        assert!(
            n > 20,
            "{stream}: records that arrived between runs were landed ({n})"
        );
    }
    // One login per run, shared by both streams.
    assert_eq!(vault.requests().iter().filter(|r| r.method == "POST").count(), 3);

    // VQL and Rave: each run meets a server that has 50 more records.
    for records in [100, 150, 200] {
        let vql = sim(Profile::Vault, records, &[], |_| {}).await;
        let out = shipped_sync(
            dir.path(),
            "veeva_vault_vql",
            &["--protocol-version", "3"],
            &[("VAULT_API_BASE_URL", vql.base_url())],
        )
        .await;
        assert_exit(&out, 0);
        let rave = sim(Profile::Rave, records, &[], |_| {}).await;
        let out = shipped_sync(
            dir.path(),
            "medidata_rave",
            &["--tenant", "acme"],
            &[("RAVE_API_BASE_URL", rave.base_url())],
        )
        .await;
        assert_exit(&out, 0);
    }
    let vql = edc_qualify::landed::landed_json_record_ids(
        &dir.path()
            .join(format!("landing/veeva_vault_vql/-/{STUDY}/3/default")),
    )
    .unwrap();
    assert_distinct(&vql, "vql");
    assert_eq!(vql.len(), 200);
    let rave = edc_qualify::landed::landed_odm_source_ids(
        &dir.path()
            .join(format!("landing/medidata_rave/acme/{STUDY}/-/default")),
    )
    .unwrap();
    assert_distinct(&rave, "rave");
    assert_eq!(rave.len(), 200);
}

/// `edc-sync simulate` as a user starts it; killed when dropped.
/// `edc-sync simulate` as a process of its own, and its base URL.
pub(crate) struct SimProcess(std::process::Child, pub(crate) String);

impl SimProcess {
    pub(crate) fn start(args: &[&str]) -> SimProcess {
        use std::io::BufRead;
        let mut child = support::edc_sync()
            .args(["simulate", "--port", "0", "--records", "12"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().rsplit(' ').next().unwrap().to_string();
        SimProcess(child, url)
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_serves_the_vault_and_rave_profiles_from_the_command_line() {
    async fn json(r: reqwest::Response) -> serde_json::Value {
        serde_json::from_slice(&r.bytes().await.unwrap()).unwrap()
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let vault = SimProcess::start(&[
        "--profile",
        "vault",
        "--username",
        USER,
        "--password",
        PASSWORD,
        "--session-ttl-requests",
        "1",
    ]);
    let login = |password: &str| {
        let body = format!("username={}&password={password}", USER.replace('@', "%40"));
        http.post(format!("{}/api/v24.1/auth", vault.1))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let refused: serde_json::Value = json(login("nope").await.unwrap()).await;
    assert_eq!(refused["responseStatus"], "FAILURE");
    assert_eq!(refused["errors"][0]["type"], "USERNAME_OR_PASSWORD_INCORRECT");
    let ok = login(PASSWORD).await.unwrap();
    assert_eq!(ok.status(), 200);
    let session = json(ok).await["sessionId"].as_str().unwrap().to_string();
    let page = || {
        http.get(format!("{}/api/v24.1/query/audit_trail?limit=5", vault.1))
            .header("authorization", &session)
            .send()
    };
    let first = page().await.unwrap();
    assert!(first.headers().contains_key("x-vaultapi-executionid"));
    assert!(first.headers().contains_key("date"));
    let first = json(first).await;
    assert_eq!(
        (
            first["responseStatus"].as_str(),
            first["data"].as_array().map(Vec::len)
        ),
        (Some("SUCCESS"), Some(5))
    );
    // The session served its one request: now it is expired, at HTTP 200.
    let expired = page().await.unwrap();
    assert_eq!(expired.status(), 200);
    let expired = json(expired).await;
    assert_eq!(expired["errors"][0]["type"], "INVALID_SESSION_ID");
    let delete = http
        .delete(format!("{}/api/v24.1/query/audit_trail", vault.1))
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), 405);

    let rave = SimProcess::start(&["--profile", "rave", "--username", USER, "--password", PASSWORD]);
    let url = format!(
        "{}/RaveWebServices/datasets/ClinicalAuditRecords.odm?studyoid=S(Prod)&per_page=5",
        rave.1
    );
    let refused = http
        .get(&url)
        .basic_auth(USER, Some("nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert!(refused
        .text()
        .await
        .unwrap()
        .contains("mdsol:ErrorDescription=\"Incorrect login and password combination. [RWS00008]\""));
    let ok = http
        .get(&url)
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.text().await.unwrap().matches("<AuditRecord ").count(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incremental_poll_with_no_new_records_lands_no_file() {
    let fx = Fixture::new();
    let sim = sim(Profile::Rave, 50, &[], |_| {}).await;
    assert_exit(&fx.run("rave_basic", &sim, PASSWORD).await, 0);
    let files =
        |fx: &Fixture| std::fs::read_dir(fx.stream_dir("rave_basic").join("pages")).map_or(0, |d| d.count());
    let (pages_before, manifest_before) = (files(&fx), fx.manifest_pages("rave_basic"));
    assert!(pages_before > 0);
    // Rave stamps each answer anew, so an empty poll differs in bytes from
    // the last: nothing new must still mean nothing landed.
    std::thread::sleep(std::time::Duration::from_millis(5));
    for _ in 0..2 {
        assert_exit(&fx.run("rave_basic", &sim, PASSWORD).await, 0);
    }
    assert_eq!(files(&fx), pages_before, "no new landed file");
    assert_eq!(
        fx.manifest_pages("rave_basic"),
        manifest_before,
        "the manifest is unchanged"
    );
    let polls: Vec<_> = fx
        .events("page_committed")
        .into_iter()
        .filter(|l| l["records"] == 0)
        .collect();
    assert!(polls.len() >= 2, "each empty poll is audited");
    for line in polls {
        assert_eq!(line["landing_file"], serde_json::Value::Null);
        assert_eq!(line["payload_sha256"].as_str().unwrap().len(), 64);
        assert!(line["bytes"].as_u64().unwrap() > 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vault_audit_trail_lands_every_record_once_across_runs_while_records_arrive() {
    let fx = Fixture::new();
    // Records arrive every 250 ms from 20 s ago until 30 s from now.
    let origin = std::time::SystemTime::now() - std::time::Duration::from_secs(20);
    let sim = sim(Profile::Vault, 200, &[], |c| {
        c.audit_trail = Some(edc_sim::audit_trail::Arrivals::every(
            origin,
            std::time::Duration::from_millis(250),
        ))
    })
    .await;
    let mut ends = Vec::new();
    for run in 0..3 {
        if run > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
        }
        assert_exit(&fx.run("vault_audit", &sim, PASSWORD).await, 0);
        ends.push(
            fx.cursor("vault_audit")["window_start"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let mut ids = edc_qualify::landed::landed_json_record_ids(&fx.stream_dir("vault_audit")).unwrap();
    let landed = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), landed, "a record landed twice");
    // Every record up to the last window's end, none missing: ids 1..=N.
    let expected: Vec<String> = (1..=landed as u32).map(|n| format!("AT-{n:07}")).collect();
    assert_eq!(ids, expected, "a gap in the landed records");
    assert!(
        landed > 80,
        "records that arrived between runs were landed too ({landed})"
    );
    assert!(
        ends.windows(2).all(|w| w[0] < w[1]),
        "each run moved the window on: {ends:?}"
    );
    // Each window was asked for with an explicit, closed date range.
    let data: Vec<_> = sim
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/audittrail/"))
        .collect();
    assert!(
        data.iter()
            .all(|r| r.path.contains("start_date=") && r.path.contains("end_date=")),
        "{data:?}"
    );
}

/// Three growing runs against a vault whose audit records carry sub-second
/// times (compared exactly with the whole-second window ends) and of which
/// every 4th becomes visible 3 s after its time, three times the settle
/// lag: with the default lookback every record lands exactly once; with
/// `lookback.seconds: 0` records are lost, silently, as they were before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_visible_records_and_sub_second_times_land_once_with_the_lookback_and_not_without() {
    const RECORDS: u32 = 120;
    let origin = std::time::SystemTime::now() - std::time::Duration::from_secs(30);
    let arrivals = edc_sim::audit_trail::Arrivals::late_and_subsecond(origin);
    let with = Fixture::new();
    let without = Fixture::new();
    without.vault_audit_without_lookback();
    let sim = sim(Profile::Vault, RECORDS, &[], |c| {
        c.audit_trail = Some(arrivals.clone())
    })
    .await;
    for run in 0..3 {
        if run > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(2600)).await;
        }
        assert_exit(&with.run("vault_audit", &sim, PASSWORD).await, 0);
        assert_exit(
            &without
                .run_with("vault_audit", &sim, PASSWORD, &["--allow-dirty"])
                .await,
            0,
        );
    }
    let landed =
        |fx: &Fixture| edc_qualify::landed::landed_json_record_ids(&fx.stream_dir("vault_audit")).unwrap();
    let ids = landed(&with);
    assert_distinct(&ids, "records landed with the lookback");
    let every: Vec<String> = (1..=RECORDS).map(|n| format!("AT-{n:07}")).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, every, "with the lookback, every record once");
    let repeats: u64 = with
        .events("page_committed")
        .iter()
        .map(|l| l["repeated_records"].as_u64().unwrap_or(0))
        .sum();
    assert!(repeats > 0, "the lookback re-read records and recognised them");
    let mut without_ids = landed(&without);
    without_ids.sort();
    without_ids.dedup();
    let lost = RECORDS as usize - without_ids.len();
    assert!(
        lost > 0,
        "without a lookback, late and sub-second records are lost"
    );
}

/// An audit trail whose rows carry no ids shows two identical changes made
/// in one second as two identical rows. Three growing runs, every 5th row a
/// twin of the one before it: with `identical_records: distinct` each twin
/// lands once beside its original, across pages and the re-read span; with
/// the default (`same`, one record listed twice) every twin is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_rows_are_two_events_each_landed_once_when_the_policy_says_so() {
    const RECORDS: u32 = 100;
    let arrivals = rows_with_twins(15, 5);
    let distinct = Fixture::new();
    distinct.vault_audit_with_distinct_twins();
    let same = Fixture::new();
    let sim = sim(Profile::Vault, RECORDS, &[], |c| {
        c.audit_trail = Some(arrivals.clone())
    })
    .await;
    for run in 0..3 {
        if run > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(2600)).await;
        }
        assert_exit(
            &distinct
                .run_with("vault_audit", &sim, PASSWORD, &["--allow-dirty"])
                .await,
            0,
        );
        assert_exit(&same.run("vault_audit", &sim, PASSWORD).await, 0);
    }
    let landed =
        |fx: &Fixture| edc_qualify::landed::landed_json_record_ids(&fx.stream_dir("vault_audit")).unwrap();
    // Every row served up to the last window, twins included, once: the
    // landed rows are exactly the first N the server listed.
    let mut got = landed(&distinct);
    got.sort();
    let expected = served_rows(&arrivals, got.len() as u32);
    assert_eq!(got, expected, "with distinct, every row once, twins included");
    assert!(
        got.len() > 60,
        "rows that arrived between runs were landed too ({})",
        got.len()
    );
    let twins = |ids: &[String]| ids.windows(2).filter(|w| w[0] == w[1]).count();
    assert!(twins(&got) >= 12, "{got:?}");
    let repeats: u64 = distinct
        .events("page_committed")
        .iter()
        .map(|l| l["repeated_records"].as_u64().unwrap_or(0))
        .sum();
    assert!(repeats > 0, "the re-read span was recognised, twins and all");
    let mut without = landed(&same);
    without.sort();
    assert_eq!(
        twins(&without),
        0,
        "with same, each twin is its original listed twice: lost"
    );
}

/// An audit trail of rows every 250 ms from `ago_s` seconds ago, every
/// `k`-th the twin of the one before it.
fn rows_with_twins(ago_s: u64, k: u32) -> edc_sim::audit_trail::Arrivals {
    let origin = std::time::SystemTime::now() - std::time::Duration::from_secs(ago_s);
    edc_sim::audit_trail::Arrivals {
        twins: Some(k),
        ..edc_sim::audit_trail::Arrivals::every(origin, std::time::Duration::from_millis(250))
    }
}

/// The ids of the first `n` rows the audit trail lists (twins repeat
/// their original's), sorted.
fn served_rows(arrivals: &edc_sim::audit_trail::Arrivals, n: u32) -> Vec<String> {
    let mut ids: Vec<String> = (1..=n)
        .map(|k| format!("AT-{:07}", arrivals.original(k)))
        .collect();
    ids.sort();
    ids
}

/// A window with twins stopped part-way (`--max-pages`) is read again from
/// its first page by the next run: the twins' count is whole only so, and
/// what the first run landed is recognised, not landed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_window_with_twins_is_read_again_from_its_first_page() {
    const RECORDS: u32 = 40;
    // Every row arrived already: one window of 6 pages of 7.
    let arrivals = rows_with_twins(60, 3);
    let fx = Fixture::new();
    fx.vault_audit_with_distinct_twins();
    let sim = sim(Profile::Vault, RECORDS, &[], |c| {
        c.audit_trail = Some(arrivals.clone())
    })
    .await;
    let first = fx
        .run_with(
            "vault_audit",
            &sim,
            PASSWORD,
            &["--allow-dirty", "--max-pages", "3"],
        )
        .await;
    assert_exit(&first, 0);
    assert!(
        fx.cursor("vault_audit")["next_page"].is_string(),
        "stopped inside the window"
    );
    let before = sim.requests().len();
    assert_exit(
        &fx.run_with("vault_audit", &sim, PASSWORD, &["--allow-dirty"])
            .await,
        0,
    );
    let second: Vec<_> = sim.requests()[before..]
        .iter()
        .filter(|r| r.path.contains("/audittrail/"))
        .cloned()
        .collect();
    assert!(
        !second[0].path.contains("offset="),
        "the second run began at the window's first page: {:?}",
        second[0]
    );
    let mut got = edc_qualify::landed::landed_json_record_ids(&fx.stream_dir("vault_audit")).unwrap();
    got.sort();
    let expected = served_rows(&arrivals, RECORDS);
    assert_eq!(got, expected, "every row once, twins included");
}

/// The completeness check: records a sync without a lookback lost (late
/// and sub-second ones) are found by `backfill --missing-only`, which lands
/// them and says how many; the same check run again finds none missing.
/// The incremental cursor does not move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_only_backfill_lands_what_was_lost_and_then_proves_nothing_missing() {
    const RECORDS: u32 = 120;
    let origin = std::time::SystemTime::now() - std::time::Duration::from_secs(30);
    let arrivals = edc_sim::audit_trail::Arrivals::late_and_subsecond(origin);
    let fx = Fixture::new();
    fx.vault_audit_without_lookback();
    let sim = sim(Profile::Vault, RECORDS, &[], |c| {
        c.audit_trail = Some(arrivals.clone())
    })
    .await;
    for run in 0..3 {
        if run > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(2600)).await;
        }
        assert_exit(
            &fx.run_with("vault_audit", &sim, PASSWORD, &["--allow-dirty"])
                .await,
            0,
        );
    }
    let cursor = fx.cursor("vault_audit");
    // Distinct: without identities, a late record that shows up mid-window
    // shifts the newest-first offsets and can be served on two pages.
    let mut before = edc_qualify::landed::landed_json_record_ids(&fx.stream_dir("vault_audit")).unwrap();
    before.sort();
    before.dedup();
    let lost = RECORDS as usize - before.len();
    assert!(lost > 0, "without a lookback, records were lost");
    let since = edc_sim::audit_trail::vault_date(
        origin.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64,
    );
    let check = || {
        let mut cmd = fx.command("backfill", "vault_audit", &sim, PASSWORD);
        cmd.args(["--allow-dirty", "--since", &since, "--missing-only"]);
        let out = cmd.output().unwrap();
        assert_exit(&out, 0);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = tokio::task::block_in_place(check);
    assert!(
        first.contains(&format!("{lost} records missing from the landing (landed now)")),
        "{first}"
    );
    let second = tokio::task::block_in_place(check);
    assert!(
        second.contains("0 records missing from the landing (landed now)"),
        "{second}"
    );
    // Every record once over the incremental landing and the checks'.
    let mut ids = edc_qualify::landed::landed_json_record_ids(&fx.stream_dir("vault_audit")).unwrap();
    for check in std::fs::read_dir(fx.path("landing/backfill")).unwrap() {
        let dir = check
            .unwrap()
            .path()
            .join(format!("vault_audit/-/{STUDY}/-/default"));
        ids.extend(edc_qualify::landed::landed_json_record_ids(&dir).unwrap());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        RECORDS as usize,
        "every record, over the landing and its checks"
    );
    assert_eq!(
        fx.cursor("vault_audit"),
        cursor,
        "the incremental cursor is untouched"
    );
    let finished = fx.events("stream_finished");
    assert_eq!(finished.last().unwrap()["records"], 0);
    assert!(finished.last().unwrap()["repeated_records"].as_u64().unwrap() >= RECORDS as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_start_older_than_the_endpoint_serves_is_named_not_skipped() {
    let fx = Fixture::new();
    let sim = sim(Profile::Vault, 50, &[], |c| {
        c.audit_trail = Some(edc_sim::audit_trail::Arrivals::every(
            std::time::SystemTime::now() - std::time::Duration::from_secs(60),
            std::time::Duration::from_secs(1),
        ))
    })
    .await;
    let since = "2026-01-01T00:00:00Z";
    let cmd = fx.sync("vault_audit", &sim, PASSWORD);
    let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let mut backfill = support::edc_sync();
    backfill.arg("backfill").args(&args[1..]).args(["--since", since]);
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            backfill.env(k, v);
        }
    }
    let out = tokio::task::spawn_blocking(move || backfill.output().unwrap())
        .await
        .unwrap();
    assert_exit(&out, 65);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("[{since}, ")),
        "the interval is named: {err}"
    );
    assert!(err.contains("max_age_days"), "{err}");
    let data = sim
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/audittrail/") && r.method == "GET")
        .count();
    assert_eq!(data, 0, "no request for a window the endpoint cannot serve");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vql_delta_posts_its_query_and_its_next_pages_and_lands_every_record_once() {
    let fx = Fixture::new();
    let sim = sim(Profile::Vault, 60, &[], |_| {}).await;
    assert_exit(&fx.run("vault_vql", &sim, PASSWORD).await, 0);
    let mut ids = edc_qualify::landed::landed_json_record_ids(&fx.stream_dir("vault_vql")).unwrap();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 60);
    let requests = sim.requests();
    assert!(
        requests.iter().all(|r| r.method == "POST"),
        "VQL is POST only: {requests:?}"
    );
    assert_eq!(requests[1].path, "/api/v24.1/query");
    assert_eq!(requests[1].vql_since.as_deref(), Some("2000-01-01T00:00:00Z"));
    assert!(
        requests[2].path.starts_with("/api/v24.1/query/sim-q-"),
        "next pages are POSTed: {requests:?}"
    );
    // The next run asks only for what is newer than the high-water mark.
    assert_exit(&fx.run("vault_vql", &sim, PASSWORD).await, 0);
    let last = sim.requests().pop().unwrap();
    assert_eq!(
        last.vql_since,
        Some(
            edc_sim::Dataset {
                subjects: 7,
                records: 60,
                seed: 11,
                padding: 0
            }
            .record(60)
            .modified
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_cursor_value_from_vendor_data_stays_one_inert_literal() {
    let fx = Fixture::new();
    let hostile = "2099-12-31T00:00:00Z' OR name__v != 'x";
    // 1 = login, 2 = page 1, 3 = page 2 whose records carry the hostile value.
    let sim = sim(
        Profile::Vault,
        20,
        &[&format!("3=cursor-value:{hostile}")],
        |_| {},
    )
    .await;
    assert_exit(&fx.run("vault_vql", &sim, PASSWORD).await, 0);
    assert_exit(&fx.run("vault_vql", &sim, PASSWORD).await, 0);
    let last = sim.requests().pop().unwrap();
    // The server parsed one literal holding the whole value: the query's
    // structure is the policy's, whatever the data said.
    assert_eq!(last.vql_since.as_deref(), Some(hostile));
    assert!(last.fault.is_none());
}

// ---- no secret in any output, whatever its bytes --------------------------

/// Every file under `dir` and every output stream, as bytes.
fn everything_written(dir: &Path, outputs: &[Output]) -> Vec<(String, Vec<u8>)> {
    let mut all: Vec<(String, Vec<u8>)> = outputs
        .iter()
        .enumerate()
        .flat_map(|(i, o)| {
            [
                (format!("stdout of run {i}"), o.stdout.clone()),
                (format!("stderr of run {i}"), o.stderr.clone()),
            ]
        })
        .collect();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap_or_default();
            if path.is_dir() {
                if name != ".git" {
                    stack.push(path);
                }
            } else if name != "policies.yaml" {
                all.push((path.display().to_string(), std::fs::read(&path).unwrap()));
            }
        }
    }
    all
}

/// The forms a secret could be written in: its bytes, and the escaped
/// forms JSON and Rust's `{:?}` would give it.
fn secret_forms(secret: &[u8]) -> Vec<Vec<u8>> {
    let mut forms = vec![secret.to_vec()];
    if let Ok(text) = std::str::from_utf8(secret) {
        let json = serde_json::to_string(text).unwrap();
        forms.push(json.as_bytes()[1..json.len() - 1].to_vec());
        let debug = format!("{text:?}");
        forms.push(debug.as_bytes()[1..debug.len() - 1].to_vec());
    }
    forms.sort();
    forms.dedup();
    forms
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A run of `vendor` with the secret in `place`.
fn secret_run(fx: &Fixture, sim: &Simulator, vendor: &str, place: &str, secret: &std::ffi::OsStr) -> Output {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let mut cmd = fx.sync(vendor, sim, PASSWORD);
    match place {
        "password" => {
            cmd.env("EDC_SYNC_TEST_PASSWORD", secret);
        }
        "helper output" => {
            cmd.env("EDC_SYNC_TEST_HELPER_TOKEN", secret);
        }
        "base URL userinfo" => {
            let mut url = b"http://user:".to_vec();
            url.extend_from_slice(secret.as_bytes());
            url.extend_from_slice(format!("@{}", sim.base_url().trim_start_matches("http://")).as_bytes());
            cmd.env("EDC_SYNC_TEST_BASE_URL", std::ffi::OsString::from_vec(url));
        }
        "Redis URL password" => {
            let mut url = b"redis://:".to_vec();
            url.extend_from_slice(secret.as_bytes());
            url.extend_from_slice(b"@127.0.0.1:1/");
            let args: Vec<std::ffi::OsString> = cmd.get_args().map(|a| a.to_os_string()).collect();
            let mut fresh = support::edc_sync();
            for a in args {
                if a == "--pacer" {
                    fresh
                        .arg("--redis")
                        .arg(std::ffi::OsString::from_vec(url.clone()));
                    continue;
                }
                if a == "local" {
                    continue;
                }
                fresh.arg(a);
            }
            for (k, v) in cmd.get_envs() {
                if let Some(v) = v {
                    fresh.env(k, v);
                }
            }
            fresh.stdout(Stdio::piped()).stderr(Stdio::piped());
            cmd = fresh;
        }
        other => panic!("no place {other}"),
    }
    cmd.args(["--metrics-file"]).arg(fx.path("metrics.prom"));
    cmd.output().unwrap()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

    /// A secret of any bytes (printable, control characters, non-ASCII,
    /// not UTF-8), handed to a run as a password, a credential helper's
    /// output, a base URL's userinfo or a Redis password, appears in no
    /// file and no stream the run writes, in no escaped form either.
    #[test]
    fn no_generated_secret_appears_in_any_output(
        core in proptest::collection::vec(1u8..=255, 8..24),
        printable in "[!-~]{8,20}",
        as_text in proptest::bool::ANY,
    ) {
        use std::os::unix::ffi::OsStrExt;
        let secret: Vec<u8> = if as_text { printable.into_bytes() } else { core };
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let fx = Fixture::new();
        let sim = rt.block_on(sim(Profile::Rave, 30, &[], |_| {}));
        let os = std::ffi::OsStr::from_bytes(&secret);
        let outputs: Vec<Output> = [
            ("rave_basic", "password"),
            ("vault_session", "password"),
            ("helper", "helper output"),
            ("rave_basic", "base URL userinfo"),
            ("rave_basic", "Redis URL password"),
        ]
        .iter()
        .map(|(vendor, place)| {
            let out = secret_run(&fx, &sim, vendor, place, os);
            proptest::prop_assert_ne!(out.status.code(), Some(0), "{} in {}: the run cannot succeed", place, vendor);
            Ok(out)
        })
        .collect::<Result<_, _>>()?;
        let forms = secret_forms(&secret);
        for (name, bytes) in everything_written(fx.dir.path(), &outputs) {
            for form in &forms {
                proptest::prop_assert!(!contains(&bytes, form), "{} holds the secret {:?}", name, String::from_utf8_lossy(form));
            }
        }
        drop(sim);
    }
}

/// A server's clock is evidence only within `clock_skew_max_s`: a `Date`
/// two days (or thousands of years) ahead, or at 1970, stops the stream
/// with 75, naming both clocks, before a window is planned on it (no date
/// arithmetic panics at either end of the calendar); nothing is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_clock_beyond_the_bound_stops_the_stream_and_moves_nothing() {
    let since_1970 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    for skew in [2 * 86_400i64, 250_000_000_000 - 1_700_000_000, 1 - since_1970] {
        let fx = Fixture::new();
        let origin = std::time::SystemTime::now() - std::time::Duration::from_secs(20);
        let sim = sim(Profile::Vault, 50, &[], |c| {
            c.clock_skew_s = skew;
            c.audit_trail = Some(edc_sim::audit_trail::Arrivals::every(
                origin,
                std::time::Duration::from_millis(250),
            ))
        })
        .await;
        let out = fx.run("vault_audit", &sim, PASSWORD).await;
        assert_exit(&out, 75);
        let err = stderr(&out);
        assert!(err.contains("clock_skew_max_s"), "skew {skew}: {err}");
        assert!(err.contains("this host's clock"), "skew {skew}: {err}");
        assert_eq!(fx.cursor("vault_audit"), serde_json::Value::Null, "skew {skew}");
        assert!(fx.events("page_committed").is_empty(), "skew {skew}");
        let failed = fx.events("request_failed");
        assert!(
            failed
                .iter()
                .any(|l| l["reason"].as_str().unwrap_or("").contains("clock_skew_max_s")),
            "skew {skew}: the refusal is audited"
        );
    }
}

/// A credential helper sees only what the policy passes (auth.pass_env,
/// and PATH, HOME, LANG, LC_ALL, TZ): never the audit key, another
/// vendor's secret or anything else of the operator's environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_helper_sees_only_the_environment_the_policy_passes() {
    let fx = Fixture::new();
    let sim = sim(Profile::Generic, 30, &[], |c| c.token = HELPER_TOKEN.into()).await;
    let mut cmd = fx.sync("env_helper", &sim, PASSWORD);
    cmd.env("EDC_SYNC_AUDIT_KEY", "a-32-byte-audit-key-for-the-tests!!");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_exit(&out, 0);
    let env = std::fs::read_to_string(fx.path("helper-env.txt")).unwrap();
    let names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    for forbidden in [
        "EDC_SYNC_AUDIT_KEY",
        "EDC_SYNC_TEST_PASSWORD",
        "EDC_SYNC_TEST_USER",
        "EDC_SYNC_TEST_BASE_URL",
    ] {
        assert!(
            !names.contains(&forbidden),
            "{forbidden} reached the helper: {names:?}"
        );
    }
    assert!(names.contains(&"EDC_SYNC_TEST_HELPER_TOKEN"), "{names:?}");
}

/// A helper's output is bounded: a megabyte is refused (77) without being
/// read whole, sent as a header or echoed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_helper_that_prints_too_much_is_refused() {
    let fx = Fixture::new();
    let sim = sim(Profile::Generic, 30, &[], |c| c.token = HELPER_TOKEN.into()).await;
    let out = fx.run("chatty_helper", &sim, PASSWORD).await;
    assert_exit(&out, 77);
    let err = stderr(&out);
    assert!(err.contains("64 KiB"), "{err}");
    assert!(!err.contains("aaaaaaaa"), "{err}");
    assert!(sim.requests().is_empty(), "nothing was sent with it");
}

/// A cursor value holding a control character is never committed: it
/// would become the VQL literal of every later run (65 each time until a
/// hand edit). The page stops the stream (65) before anything moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_value_with_a_control_character_is_never_committed() {
    let fx = Fixture::new();
    let hostile = "2026-01-01T00:00:00Z\nX";
    // 1 = login, 2 = page 1, 3 = page 2 whose records carry the value.
    let sim = sim(
        Profile::Vault,
        20,
        &[&format!("3=cursor-value:{hostile}")],
        |_| {},
    )
    .await;
    let out = fx.run("vault_vql", &sim, PASSWORD).await;
    assert_exit(&out, 65);
    // A timestamp stream refuses it as no timestamp; a text stream
    // (delta.cursor_kind: text) for its control character.
    let err = stderr(&out);
    assert!(
        err.contains("control character") || err.contains("not an RFC 3339 timestamp"),
        "{err}"
    );
    let committed = fx.events("page_committed");
    assert_eq!(committed.len(), 1, "only page 1 was committed");
    let cursor = fx.cursor("vault_vql");
    assert!(!cursor.to_string().contains("\\nX"), "{cursor}");
}

/// A Vault login redirected to another origin is refused like a data
/// request's redirect: a data error (65), not "unavailable, try later"
/// (69); the password never leaves the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_redirected_off_the_origin_is_a_data_error() {
    let fx = Fixture::new();
    // 1 = the login, answered with a redirect to another origin.
    let sim = sim(
        Profile::Vault,
        20,
        &["1=redirect:http://127.0.0.1:9/api/v24.1/auth"],
        |_| {},
    )
    .await;
    let out = fx.run("vault_session", &sim, PASSWORD).await;
    assert_exit(&out, 65);
    assert!(stderr(&out).contains("not followed"), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("EDC_SYNC_TEST_PASSWORD"),
        "{}",
        stderr(&out)
    );
}

/// A 307 keeps a POST's method and body: following it on the origin would
/// re-send the password to a path the policy never named. No redirect of
/// the login is followed; the path it pointed to sees nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_redirected_on_the_origin_is_not_followed_with_the_password() {
    let fx = Fixture::new();
    let sim = sim(Profile::Vault, 20, &["1=redirect-307:/elsewhere/auth"], |_| {}).await;
    let out = fx.run("vault_session", &sim, PASSWORD).await;
    assert_exit(&out, 65);
    assert!(stderr(&out).contains("auth.login_path"), "{}", stderr(&out));
    let requests = sim.requests();
    assert!(
        requests.iter().all(|r| !r.path.starts_with("/elsewhere")),
        "{requests:?}"
    );
}

/// HTTP Basic cannot carry a user name with a ':' (RFC 7617, section 2:
/// the first colon ends the user-id): such a name is refused before any
/// request, as a configuration error naming the variables, never sent as
/// a different user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_basic_user_name_with_a_colon_is_refused_before_any_request() {
    let fx = Fixture::new();
    let sim = sim(Profile::Rave, 20, &[], |_| {}).await;
    let mut cmd = fx.sync("rave_basic", &sim, PASSWORD);
    cmd.env("EDC_SYNC_TEST_USER", "svc:rave");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_exit(&out, 78);
    let err = stderr(&out);
    assert!(
        err.contains("RFC 7617") && err.contains("EDC_SYNC_TEST_USER"),
        "{err}"
    );
    assert!(sim.requests().is_empty(), "nothing was sent");
}

/// A password that happens to be a piece of a page's SHA-256 is scrubbed
/// from free text only: the hashes, files and cursors of the audit lines
/// stay whole, so `verify` and a cursor rebuild still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrubbing_a_secret_never_rewrites_a_hash_a_file_or_a_cursor() {
    let first = Fixture::new();
    let sim1 = sim(Profile::Vault, 60, &[], |_| {}).await;
    assert_exit(&first.run("vault_session", &sim1, PASSWORD).await, 0);
    let sha = first.events("page_committed")[0]["payload_sha256"]
        .as_str()
        .unwrap()
        .to_string();
    let password = sha[20..28].to_string();

    let fx = Fixture::new();
    let sim2 = sim(Profile::Vault, 60, &[], |c| c.password = password.clone()).await;
    let out = fx.run("vault_session", &sim2, &password).await;
    assert_exit(&out, 0);
    let committed = fx.events("page_committed");
    assert_eq!(committed[0]["payload_sha256"], sha.as_str());
    for line in &committed {
        let file = line["landing_file"].as_str().unwrap();
        assert!(file.contains(line["payload_sha256"].as_str().unwrap()), "{line}");
        assert!(!line["cursor_after"].to_string().contains("***"), "{line}");
    }
    let (land, state, trail) = (fx.path("landing"), fx.path("state"), fx.path("audit.jsonl"));
    let verified = support::run(&[
        "verify",
        "--out",
        land.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--audit-log",
        trail.to_str().unwrap(),
    ]);
    assert_eq!(verified.code, 0, "{}{}", verified.stdout, verified.stderr);
}

/// Processes whose command line holds `needle`.
fn processes_running(needle: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| String::from_utf8_lossy(c).replace('\0', " ").contains(needle))
        .count()
}

/// A stop request (SIGTERM) while a credential helper hangs or a login is
/// slow is honoured at once: exit 75 (stopped, run again), not 77 or 69
/// after the timeout; the helper's whole process group is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_hanging_helper_or_a_slow_login_stops_the_run_at_once() {
    for (vendor, latency) in [("slow_helper", 0u64), ("vault_session", 20_000)] {
        let fx = Fixture::new();
        let sim = sim(Profile::Vault, 20, &[], |c| {
            c.latency = std::time::Duration::from_millis(latency)
        })
        .await;
        let child = fx.sync(vendor, &sim, PASSWORD).spawn().unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        let sent = std::time::Instant::now();
        // SAFETY: kill(2) on the pid of our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(75), "{vendor}: {}", stderr(&out));
        assert!(
            sent.elapsed() < std::time::Duration::from_secs(5),
            "{vendor}: stopped after {:?}",
            sent.elapsed()
        );
        assert_eq!(
            processes_running("sleep 29.5"),
            0,
            "{vendor}: the helper's group was killed"
        );
        assert!(fx.events("run_interrupted").len() == 1, "{vendor}");
    }
}

/// A cursor value of the wrong kind (text that is no timestamp, where the
/// stream declares timestamps) would outrank every timestamp as the
/// high-water mark and end the stream's progress: the page is refused (65)
/// naming the record's position and the declared kind, never committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_value_of_the_wrong_kind_is_never_committed() {
    let fx = Fixture::new();
    // 1 = login, 2 = page 1, 3 = page 2 whose records carry the value.
    let sim = sim(Profile::Vault, 20, &["3=cursor-value:zzz-not-a-date"], |_| {}).await;
    let out = fx.run("vault_session", &sim, PASSWORD).await;
    assert_exit(&out, 65);
    let err = stderr(&out);
    assert!(err.contains("record 1 of /data"), "{err}");
    assert!(err.contains("delta.cursor_kind: timestamp"), "{err}");
    assert!(!err.contains("zzz-not-a-date"), "the value is not quoted: {err}");
    assert_eq!(fx.events("page_committed").len(), 1, "only page 1 was committed");
    assert!(!fx.cursor("vault_session").to_string().contains("zzz"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_vault_request_names_the_client_id_the_login_included() {
    // Vault REST API reference, "Client ID": without one the API Usage Log
    // says `unknown`, and a vault with Client ID Filtering rejects the call.
    let fx = Fixture::new();
    let vault = sim(Profile::Vault, 30, &[], |_| {}).await;
    let out = fx.run("vault_session", &vault, PASSWORD).await;
    assert_exit(&out, 0);
    let requests = vault.requests();
    assert!(requests.iter().any(|r| r.method == "POST"), "the login");
    for r in &requests {
        assert_eq!(
            r.client_id.as_deref(),
            Some(edc_core::config::DEFAULT_VAULT_CLIENT_ID),
            "{} {}",
            r.method,
            r.path
        );
    }
    // A site's own client ID, in the form Vault recommends.
    let fx = Fixture::new();
    let own = POLICIES.replace(
        "vault_session:\n",
        "vault_session:\n  client_id: verteobiotech-clinical-datamgmt-server-edcsync\n",
    );
    std::fs::write(fx.path("policies.yaml"), own).unwrap();
    support::git_commit_all(&git2::Repository::open(fx.path("")).unwrap(), "client id");
    let vault = sim(Profile::Vault, 30, &[], |_| {}).await;
    let out = fx.run("vault_session", &vault, PASSWORD).await;
    assert_exit(&out, 0);
    assert!(vault
        .requests()
        .iter()
        .all(|r| r.client_id.as_deref() == Some("verteobiotech-clinical-datamgmt-server-edcsync")));
    // Another dialect sends none unless asked.
    let fx = Fixture::new();
    let rave = sim(Profile::Rave, 30, &[], |_| {}).await;
    let out = fx.run("rave_basic", &rave, PASSWORD).await;
    assert_exit(&out, 0);
    assert!(rave.requests().iter().all(|r| r.client_id.is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_limit_exceeded_at_the_login_is_waited_like_a_429_and_75_when_spent_never_77() {
    // Vault limits logins per minute per user and domain (Vault Help,
    // "About Authentication API Transaction Limits"): many studies logging
    // in from cron at the same minute meet it. It is not a bad password.
    let fx = Fixture::new();
    let vault = sim(
        Profile::Vault,
        30,
        &["1=vault-failure:API_LIMIT_EXCEEDED"],
        |_| {},
    )
    .await;
    let out = fx.run("vault_session", &vault, PASSWORD).await;
    assert_exit(&out, 0);
    let limited = fx.events("rate_limited");
    assert_eq!(limited.len(), 1, "{limited:?}");
    assert_eq!(limited[0]["vendor_error"]["code"], "API_LIMIT_EXCEEDED");
    assert!(
        limited[0]["url"].as_str().unwrap().ends_with("/api/v24.1/auth"),
        "the login endpoint is named: {}",
        limited[0]["url"]
    );
    assert_eq!(fx.events("session_started").len(), 1);
    let requests = vault.requests();
    assert_eq!(requests.iter().filter(|r| r.method == "POST").count(), 2);
    assert!(
        requests[1].t_us - requests[0].t_us >= 1_000_000,
        "waited before logging in again"
    );
    // Every attempt of the budget (3) throttled: 75, try later.
    let fx = Fixture::new();
    let faults = [
        "1=vault-failure:API_LIMIT_EXCEEDED",
        "2=vault-failure:API_LIMIT_EXCEEDED",
        "3=vault-failure:API_LIMIT_EXCEEDED",
    ];
    let vault = sim(Profile::Vault, 30, &faults, |_| {}).await;
    let out = fx.run("vault_session", &vault, PASSWORD).await;
    assert_exit(&out, 75);
    assert!(
        !stderr(&out).contains("password"),
        "not a credential problem: {}",
        stderr(&out)
    );
    assert_eq!(fx.events("rate_limited").len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rave_500_with_an_error_document_is_retried_within_the_budget() {
    // The server's own failure, whatever document comes with it: the same
    // page again after the backoff, every record once.
    let fx = Fixture::new();
    let rave = sim(Profile::Rave, 130, &["3=rave-error:500:RWS00100"], |_| {}).await;
    let out = fx.run("rave_basic", &rave, PASSWORD).await;
    assert_exit(&out, 0);
    let mut ids = edc_qualify::landed::landed_odm_source_ids(&fx.stream_dir("rave_basic")).unwrap();
    assert_eq!(ids.len(), 130);
    ids.dedup();
    assert_eq!(ids.len(), 130, "a record landed twice");
    let requests = rave.requests();
    assert_eq!(requests[2].status, 500);
    assert_eq!(requests[2].path, requests[3].path, "the same page again");
    // A 404 with the same document is the request's fault: not retried.
    let fx = Fixture::new();
    let rave = sim(Profile::Rave, 130, &["3=rave-error:404:RWS00100"], |_| {}).await;
    let out = fx.run("rave_basic", &rave, PASSWORD).await;
    assert_exit(&out, 65);
    assert_eq!(rave.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_the_server_fails_is_retried_like_a_data_request_and_69_when_spent() {
    // A 5xx (or no answer) at the login is the server's trouble, as on a
    // data request: waited out with the same audited backoff within the
    // page's retry budget, not the end of the run at the first try.
    let fx = Fixture::new();
    let vault = sim(Profile::Vault, 30, &["1=502"], |_| {}).await;
    let out = fx.run("vault_session", &vault, PASSWORD).await;
    assert_exit(&out, 0);
    let retries = fx.events("retry_scheduled");
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert!(
        retries[0]["reason"].as_str().unwrap().contains("credential"),
        "{}",
        retries[0]
    );
    assert_eq!(fx.events("session_started").len(), 1);
    let posts = vault.requests().iter().filter(|r| r.method == "POST").count();
    assert_eq!(posts, 2, "logged in again after the wait");
    // Every attempt of the budget (3) failed: 69, the EDC is unavailable.
    let fx = Fixture::new();
    let vault = sim(Profile::Vault, 30, &["1=502", "2=502", "3=502"], |_| {}).await;
    let out = fx.run("vault_session", &vault, PASSWORD).await;
    assert_exit(&out, 69);
    assert_eq!(vault.requests().len(), 3, "three logins, no data request");
    assert_eq!(fx.events("retry_scheduled").len(), 2);
}

/// `simulate --profile vault` serves the shipped policy's `veeva_vault`
/// vendor as it is (its audit trail endpoint, both streams): a sync of the
/// shipped policy against it lands every record of each stream (it
/// answered 404).
#[test]
fn simulate_serves_the_shipped_veeva_vault_vendor() {
    let vault = SimProcess::start(&["--profile", "vault", "--username", USER, "--password", PASSWORD]);
    let dir = tempfile::tempdir().unwrap();
    let out = support::run_cmd(
        support::edc_sync()
            .args([
                "sync",
                "--config",
                concat!(env!("CARGO_MANIFEST_DIR"), "/config/rate_limits.yaml"),
            ])
            .args([
                "--vendor",
                "veeva_vault",
                "--study",
                "S-001",
                "--protocol-version",
                "3",
                "--all-streams",
            ])
            .args([
                "--out",
                "l",
                "--state",
                "s",
                "--audit-log",
                "a.jsonl",
                "--pacer",
                "local",
                "--allow-dirty",
            ])
            .env("VAULT_API_BASE_URL", &vault.1)
            .env("VAULT_USERNAME", USER)
            .env("VAULT_PASSWORD", PASSWORD)
            .current_dir(dir.path()),
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    for stream in ["object_audit_trail", "document_audit_trail"] {
        assert!(
            out.stdout
                .contains(&format!("stream {stream}: 1 pages, 12 records")),
            "{stream}: {}",
            out.stdout
        );
    }
}

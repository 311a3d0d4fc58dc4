//! Secrets in every URL and variable the product is given never reach an
//! output: a Redis password (an ACL user's, in `--redis`'s URL), the
//! PostgreSQL password (in `EDC_SYNC_STATE`, as the docs allow), the object
//! store's secret key, the EDC token and the audit key, all set at once,
//! with trace logging, through a run that succeeds and through each way a
//! run fails on one of them (a wrong password, a server that is not there).
//! Every stdout and stderr, the trail (exported from the database), the
//! metrics file and the landing read back from the bucket are searched for
//! every secret. (`--help` with every variable set is
//! `cli_conventions::help_never_shows_an_environment_variables_value`.)

use std::path::Path;
use std::process::Command;

use crate::support::{self, postgres, runs};
use edc_testkit::redis_server::PrivateRedis;
use edc_testkit::s3_server::PrivateS3;

const REDIS_PASSWORD: &str = "rds-pw-5e1c9";
const TOKEN: &str = "edc-token-5e1c9";
const WRONG: &str = "wrong-secret-5e1c9";

/// Every secret of the test, and the wrong ones it tries.
fn secrets(garage: &PrivateS3) -> Vec<String> {
    let aws_secret = garage
        .env()
        .into_iter()
        .find(|(k, _)| *k == "AWS_SECRET_ACCESS_KEY")
        .map(|(_, v)| v)
        .unwrap();
    vec![
        REDIS_PASSWORD.into(),
        postgres::PASSWORD_TEXT.into(),
        aws_secret,
        TOKEN.into(),
        runs::KEY.into(),
        WRONG.into(),
    ]
}

struct Site {
    dir: tempfile::TempDir,
    redis: PrivateRedis,
    pg: postgres::Postgres,
    garage: PrivateS3,
    sim: edc_sim::Simulator,
}

impl Site {
    fn redis_url(&self, password: &str, port: u16) -> String {
        format!("redis://edc:{password}@127.0.0.1:{port}/")
    }

    /// `edc-sync ARGS` with every secret in its environment, at trace level.
    fn edc_sync(&self, args: &[&str]) -> Command {
        let mut cmd = support::edc_sync();
        cmd.args(args)
            .env("RUST_LOG", "trace")
            .env("EDC_SYNC_STATE", self.pg.run_url())
            .env(
                "EDC_SYNC_REDIS_URL",
                self.redis_url(REDIS_PASSWORD, self.redis.port),
            )
            .env("EDC_SYNC_AUDIT_KEY", runs::KEY)
            .env("EDC_SYNC_TEST_BASE_URL", self.sim.base_url())
            .env("EDC_SYNC_TEST_TOKEN", TOKEN)
            .current_dir(self.dir.path());
        for (k, v) in self.garage.env() {
            cmd.env(k, v);
        }
        cmd
    }

    fn sync(&self) -> Command {
        let config = self.dir.path().join("policies.yaml");
        let metrics = self.dir.path().join("metrics.prom");
        self.edc_sync(&[
            "sync",
            "--config",
            config.to_str().unwrap(),
            "--vendor",
            "vault_json",
            "--study",
            "S1",
            "--out",
            &self.garage.url("secrets"),
            "--audit-log",
            "audit.jsonl",
            "--metrics-file",
            metrics.to_str().unwrap(),
        ])
    }
}

fn assert_clean(what: &str, text: &str, secrets: &[String]) {
    for secret in secrets {
        assert!(
            !text.contains(secret.as_str()),
            "{what} shows a secret ({secret}):\n{text}"
        );
    }
}

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_any_output_the_trail_or_the_landing() {
    let acl: Vec<String> = [
        "--user",
        "edc",
        "on",
        &format!(">{REDIS_PASSWORD}"),
        "~*",
        "&*",
        "+@all",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let redis =
        PrivateRedis::start_with(&acl).unwrap_or_else(|e| panic!("{e}: apt-get install -y redis-server"));
    let garage = PrivateS3::garage().unwrap_or_else(|e| panic!("{e}"));
    let dir = support::small_page_policy_repo();
    let config = edc_sim::SimConfig {
        token: TOKEN.into(),
        dataset: edc_sim::Dataset {
            subjects: 3,
            records: 23,
            seed: 7,
            padding: 0,
        },
        ..edc_sim::SimConfig::default()
    };
    let sim = edc_sim::Simulator::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let site = Site {
        dir,
        redis,
        pg: postgres::start_migrated(),
        garage,
        sim,
    };
    let secrets = secrets(&site.garage);
    let mut outputs: Vec<(String, support::Outcome)> = Vec::new();

    let ok = support::run_cmd(&mut site.sync());
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert!(
        ok.stderr.contains("TRACE") || ok.stderr.contains("DEBUG"),
        "trace logging is on"
    );
    outputs.push(("a run that succeeds".into(), ok));

    // Each way a run fails on a secret of its own.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    drop(dead);
    let mut no_redis = site.sync();
    no_redis.env("EDC_SYNC_REDIS_URL", site.redis_url(REDIS_PASSWORD, dead_port));
    outputs.push(("Redis not there".into(), support::run_cmd(&mut no_redis)));
    let mut wrong_redis = site.sync();
    wrong_redis.env("EDC_SYNC_REDIS_URL", site.redis_url(WRONG, site.redis.port));
    outputs.push((
        "a wrong Redis password".into(),
        support::run_cmd(&mut wrong_redis),
    ));
    let mut wrong_pg = site.sync();
    wrong_pg.env(
        "EDC_SYNC_STATE",
        site.pg.run_url().replace(postgres::PASSWORD_TEXT, WRONG),
    );
    outputs.push((
        "a wrong database password".into(),
        support::run_cmd(&mut wrong_pg),
    ));
    let mut wrong_aws = site.sync();
    wrong_aws.env("AWS_SECRET_ACCESS_KEY", WRONG);
    outputs.push((
        "a wrong object-store key".into(),
        support::run_cmd(&mut wrong_aws),
    ));
    let mut wrong_token = site.sync();
    wrong_token.env("EDC_SYNC_TEST_TOKEN", WRONG);
    outputs.push(("a wrong EDC token".into(), support::run_cmd(&mut wrong_token)));
    // Unreachable is 69 (run again later); a credential refused is 77
    // (fix the credential: retrying cannot help).
    for ((what, out), code) in outputs[1..].iter().zip([69, 77, 77, 77, 77]) {
        assert_eq!(out.code, code, "{what}: {}", out.stderr);
    }

    // The readers, with the same environment.
    let landing = site.garage.url("secrets");
    let redis_url = site.redis_url(REDIS_PASSWORD, site.redis.port);
    for (what, args) in [
        (
            "verify",
            vec!["verify", "--out", &landing, "--audit-log", "audit.jsonl"],
        ),
        (
            "audit verify",
            vec![
                "audit",
                "verify",
                "--state",
                &site.pg.run_url(),
                "--redis",
                &redis_url,
                "--key",
            ],
        ),
        ("audit export", vec!["audit", "export", "--to", "exported.jsonl"]),
        (
            "cursor show",
            vec!["cursor", "show", "--vendor", "vault_json", "--study", "S1"],
        ),
    ] {
        let out = support::run_cmd(&mut site.edc_sync(&args));
        assert_eq!(out.code, 0, "{what}: {}{}", out.stdout, out.stderr);
        outputs.push((what.into(), out));
    }
    for (what, out) in &outputs {
        assert_clean(what, &format!("{}{}", out.stdout, out.stderr), &secrets);
    }

    // What the runs left: the trail, the metrics, the landing.
    let trail = std::fs::read_to_string(site.dir.path().join("exported.jsonl")).unwrap();
    assert!(trail.lines().count() > 10, "{trail}");
    assert_clean("the trail", &trail, &secrets);
    let metrics = std::fs::read_to_string(site.dir.path().join("metrics.prom")).unwrap();
    assert_clean("the metrics file", &metrics, &secrets);
    let landed = site.dir.path().join("downloaded");
    site.garage.download("secrets", &landed).await.unwrap();
    let mut files = Vec::new();
    files_under(&landed, &mut files);
    assert!(!files.is_empty());
    for file in files {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        assert_clean(&file.display().to_string(), &text, &secrets);
    }
}

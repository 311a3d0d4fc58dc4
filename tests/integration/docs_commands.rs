//! Every command a user would copy from README.md, docs/ and validation/,
//! and every example `--help` and the manual pages show, runs as written:
//! against a site made of the simulator (Vault and Rave profiles), a
//! private Redis, PostgreSQL and S3-compatible store, and scratch
//! directories standing in for the paths the docs use (`/srv/edc/...`,
//! `/mnt/...`, `db.example`). Only names that belong to a site are mapped
//! (paths, hosts, ports, bucket); flags, vendors and values run as printed.
//! A block that cannot run here is listed with the reason, and the list is
//! checked against the docs so it cannot go stale.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support;

/// The documents, in the order their blocks run (operations.md builds on
/// the site the README's and its own earlier blocks leave).
const DOCS: &[(&str, &str)] = &[
    ("README.md", include_str!("../../README.md")),
    ("docs/operations.md", include_str!("../../docs/operations.md")),
    ("docs/vendors/rave.md", include_str!("../../docs/vendors/rave.md")),
    (
        "docs/vendors/vault.md",
        include_str!("../../docs/vendors/vault.md"),
    ),
    (
        "docs/vendors/castor.md",
        include_str!("../../docs/vendors/castor.md"),
    ),
    (
        "docs/vendors/redcap.md",
        include_str!("../../docs/vendors/redcap.md"),
    ),
    ("docs/audit-trail.md", include_str!("../../docs/audit-trail.md")),
    ("docs/architecture.md", include_str!("../../docs/architecture.md")),
    ("docs/benchmarks.md", include_str!("../../docs/benchmarks.md")),
    ("docs/commit.md", include_str!("../../docs/commit.md")),
    ("docs/pacer.md", include_str!("../../docs/pacer.md")),
    (
        "docs/pacing-your-own-submitter.md",
        include_str!("../../docs/pacing-your-own-submitter.md"),
    ),
    ("docs/validation.md", include_str!("../../docs/validation.md")),
    ("validation/IQ.md", include_str!("../../validation/IQ.md")),
    ("validation/OQ.md", include_str!("../../validation/OQ.md")),
    ("validation/PQ.md", include_str!("../../validation/PQ.md")),
    ("validation/FS.md", include_str!("../../validation/FS.md")),
    ("validation/URS.md", include_str!("../../validation/URS.md")),
    (
        "validation/traceability.md",
        include_str!("../../validation/traceability.md"),
    ),
];

/// Blocks that do not run here, each named by a line it holds, with why.
const NOT_RUN: &[(&str, &str)] = &[
    ("scripts/test", "the README's test command: it is what runs this test"),
    (
        "cargo install --locked --path .",
        "a release build of several minutes into /usr/local; CI builds the same sources",
    ),
    (
        "redis-server --port 6390",
        "a benchmark of minutes that leaves a Redis daemon running; `bench_pacer_runs_on_a_redis_cluster` runs it on a cluster",
    ),
    (
        "bench sync --pages 500",
        "a benchmark of minutes (1 GiB of large pages); operations::bench_sync_reports_its_small_pages_beside_their_floor_round_by_round runs it small",
    ),
    (
        "bench verify --pages 3000,10000,30000",
        "a benchmark of minutes (it lands 43,000 pages first); operations::bench_verify_prints_its_figures runs it small",
    ),
    (
        "bench scale --pages 10000",
        "a benchmark of minutes; operations::bench_scale_prints_its_figures runs it small",
    ),
    (
        "bench streams --redis redis://127.0.0.1:6391",
        "a benchmark of minutes against a Redis it leaves running; operations::bench_streams_prints_its_figures runs it small",
    ),
    (
        "bench startup --entries 100000",
        "a benchmark of minutes; operations::bench_startup_prints_its_figures runs it small",
    ),
    (
        "edc-sync-bench state",
        "a benchmark that starts its own PostgreSQL; state_db::bench_state_prints_commit_cost_for_files_and_postgres_and_throughput_side_by_side runs it",
    ),
    (
        "bench hosts-soak --rounds 200",
        "a soak of about a minute; state_db::hosts_taking_turns_and_killing_each_other_lose_duplicate_and_unfence_nothing runs 30 rounds",
    ),
    (
        "scripts/crash-soak 200",
        "a soak of minutes; sync::sigkill_at_random_moments_loses_and_duplicates_nothing runs 30 rounds",
    ),
    (
        "bench large-page --rows 1000000",
        "a million-row sync of about ten minutes, a script a reviewer starts (scripts/large-pages); redcap::a_log_window_too_large_for_one_trail_line_commits_and_reads_back runs 130,000 rows",
    ),
    (
        "sudo git config --file /etc/gitconfig",
        "writes this machine's /etc/gitconfig; config_provenance runs it in a mount namespace of its own, with no home directory",
    ),
    (
        "rediss://:PASSWORD@redis.internal",
        "Redis over TLS with a password; the URL form (rediss://, ssl_ca_certs) runs in pacer.rs's TLS tests",
    ),
    (
        "redis+cluster://edc:PASSWORD@10.0.0.11",
        "a fragment (`sync ...`); the cluster form runs in pacer::bench_pacer_runs_on_a_redis_cluster and oq.rs",
    ),
    (
        "from airflow.operators.bash import BashOperator",
        "needs an Airflow installation; the last stdout line it keeps is operations::summary_json_makes_the_last_stdout_line_one_json_object",
    ),
    (
        "from dagster import",
        "needs a Dagster installation; the summary line it reads is operations::summary_json_makes_the_last_stdout_line_one_json_object",
    ),
    (
        "edc-sync qualify oq --evidence",
        "every OQ scenario runs in oq.rs, one test each, and `qualify oq` itself in oq::qualify_oq_writes_a_complete_package",
    ),
];

/// Kinds of fenced block a user copies.
const RUNNABLE: &[&str] = &["sh", "sql", "python", "cron", "ini"];

struct Block {
    file: &'static str,
    lang: String,
    body: String,
}

fn blocks() -> Vec<Block> {
    let mut out = Vec::new();
    for (file, text) in DOCS {
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            let Some(lang) = line.strip_prefix("```") else {
                continue;
            };
            let body: Vec<&str> = lines.by_ref().take_while(|l| !l.starts_with("```")).collect();
            out.push(Block {
                file,
                lang: lang.trim().to_string(),
                body: body.join("\n") + "\n",
            });
        }
    }
    out
}

fn not_run(block: &Block) -> Option<&'static str> {
    NOT_RUN
        .iter()
        .find(|(marker, _)| block.body.contains(marker))
        .map(|(_, why)| *why)
}

/// Every Markdown file of the README, docs/ and validation/ is read here.
#[test]
fn every_document_is_read() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in ["docs", "docs/vendors", "validation"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let name = format!("{dir}/{}", entry.unwrap().file_name().to_string_lossy());
            if name.ends_with(".md") {
                assert!(DOCS.iter().any(|(f, _)| *f == name), "{name} is not in DOCS");
            }
        }
    }
    for (marker, _) in NOT_RUN {
        assert!(
            blocks().iter().any(|b| b.body.contains(marker)),
            "NOT_RUN names a block that is gone: {marker}"
        );
    }
}

/// The `edc-sync` command lines in a block: shell lines (continuations
/// joined, up to a redirection, `;`, `|` or `&`), a unit's ExecStart, a
/// cron entry's command, a manifest's `args`.
fn edc_sync_lines(block: &Block) -> Vec<Vec<String>> {
    let joined = block.body.replace("\\\n", " ");
    let mut found = Vec::new();
    for line in joined.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        if let Some(args) = line.trim().strip_prefix("args: ") {
            let args: Vec<String> = serde_json::from_str(args).unwrap();
            found.push([vec!["edc-sync".to_string()], args].concat());
            continue;
        }
        let Some(at) = line.find("edc-sync ") else {
            continue;
        };
        let before = &line[..at];
        // `edc-sync` as a program: at the start, after an assignment or a
        // path, in ExecStart, or after cargo run's `--`.
        let is_program = before.is_empty()
            || before.ends_with('/')
            || before.ends_with("ExecStart=")
            || before
                .split_whitespace()
                .last()
                .is_some_and(|w| w.contains('=') && !w.ends_with('=') && !w.contains("=/"))
            || before.contains(" edcsync ");
        if !is_program {
            continue;
        }
        let rest = &line[at..];
        let end = rest.find([';', '|', '&']).unwrap_or(rest.len());
        let end = rest[..end].find(" 2>").unwrap_or(end);
        let end = rest[..end].find(" >").unwrap_or(end);
        let mut w = support::shell_words(&rest[..end]);
        w.retain(|x| !x.starts_with('#'));
        if let Some(comment) = w.iter().position(|x| x == "#") {
            w.truncate(comment);
        }
        found.push(w);
    }
    found
}

/// Every `edc-sync` command line in the docs and every example parses as
/// the command-line definitions say (fragments with `...` aside).
#[test]
fn every_edc_sync_command_in_the_docs_parses() {
    let mut checked = 0;
    let mut lines: Vec<(String, Vec<String>)> = Vec::new();
    for block in blocks() {
        if !RUNNABLE.contains(&block.lang.as_str()) && block.lang != "yaml" {
            continue; // diagrams and sample output
        }
        for w in edc_sync_lines(&block) {
            lines.push((block.file.to_string(), w));
        }
    }
    for e in edc_sync::cli::examples::EXAMPLES {
        lines.push(("--help examples".into(), support::shell_words(e.line)));
    }
    for (file, w) in lines {
        if w.iter().any(|x| x == "..." || x.contains('…')) {
            continue;
        }
        match edc_sync::cli::command().try_get_matches_from(&w) {
            Ok(_) => {}
            // A unit's EnvironmentFile or a CronJob's secret holds
            // EDC_SYNC_STATE, as the docs say beside them.
            Err(e)
                if e.kind() == clap::error::ErrorKind::MissingRequiredArgument
                    && e.to_string().contains("--state <DIR|URL>")
                    && e.to_string().matches("\n  --").count() == 1 => {}
            Err(e) => panic!("{file}: {}:\n{e}", w.join(" ")),
        }
        checked += 1;
    }
    assert!(checked > 30, "only {checked} command lines found");
}

/// The site the docs' commands run against.
struct Site {
    root: tempfile::TempDir,
    bin: PathBuf,
    vault: edc_sim::Simulator,
    rave: edc_sim::Simulator,
    castor: edc_sim::Simulator,
    redcap: edc_sim::Simulator,
    redis: support::redis::RedisServer,
    pg: support::postgres::Postgres,
    s3: edc_testkit::s3_server::PrivateS3,
    clearinghouse_port: u16,
}

const USER: &str = "edc.reader@example.invalid";
const PASSWORD: &str = "pw-Docs-4b1d";
const AUDIT_KEY: &str = "the audit key of the docs' site, at least thirty-two bytes";

impl Site {
    async fn start() -> Site {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        for dir in [
            "srv/edc/policy/config",
            "srv/validation",
            "mnt/inspection",
            "var/lib/node_exporter/textfile",
            "var/log/edc-sync",
            "etc/edc-sync",
            "home/.aws",
            "bin",
            "work",
        ] {
            std::fs::create_dir_all(r.join(dir)).unwrap();
        }
        // The policy under change control, where the systemd unit's
        // WorkingDirectory and the cron entry's --config say it is.
        let policy = r.join("srv/edc/policy");
        let repo = support::git_init(&policy);
        std::fs::write(policy.join("config/rate_limits.yaml"), support::example_config()).unwrap();
        support::git_commit_all(&repo, "the site policy");
        // edc-sync and the example submitter on the PATH, as installed.
        let bin = r.join("bin");
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_edc-sync"), bin.join("edc-sync")).unwrap();
        let exe = std::env::current_exe().unwrap();
        let examples = exe
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("examples/claim_submitter");
        std::os::unix::fs::symlink(examples, bin.join("claim_submitter")).unwrap();
        // Vault's audit trail: records stamped two minutes ago (the shipped
        // settle lag), arriving every 250 ms; Rave's ODM.
        let origin = std::time::SystemTime::now() - std::time::Duration::from_secs(125);
        let sim = |profile| edc_sim::SimConfig {
            dataset: edc_sim::Dataset {
                subjects: 5,
                records: 120,
                seed: 21,
                padding: 0,
            },
            profile,
            username: USER.into(),
            password: PASSWORD.into(),
            audit_trail: Some(edc_sim::audit_trail::Arrivals::every(
                origin,
                std::time::Duration::from_millis(250),
            )),
            ..edc_sim::SimConfig::default()
        };
        let start = |config| edc_sim::Simulator::start(config, "127.0.0.1:0".parse().unwrap());
        let vault = start(sim(edc_sim::Profile::Vault)).await.unwrap();
        let rave = start(sim(edc_sim::Profile::Rave)).await.unwrap();
        let castor = start(sim(edc_sim::Profile::Castor)).await.unwrap();
        let redcap = start(edc_sim::SimConfig {
            token: PASSWORD.into(),
            ..sim(edc_sim::Profile::Redcap)
        })
        .await
        .unwrap();
        let redis = support::redis::start();
        let pg = edc_testkit::postgres_server::PrivatePostgres::start_bare()
            .unwrap_or_else(|e| panic!("{e}; install PostgreSQL 15: sudo apt-get install -y postgresql-15"));
        let s3 = edc_testkit::s3_server::PrivateS3::s3s_fs().unwrap_or_else(|e| panic!("{e}"));
        // The profile `export AWS_PROFILE=edc-lake` names.
        std::fs::write(
            r.join("home/.aws/config"),
            format!(
                "[profile edc-lake]\nregion = garage\nendpoint_url = {}\n",
                s3.endpoint()
            ),
        )
        .unwrap();
        std::fs::write(
            r.join("home/.aws/credentials"),
            format!(
                "[edc-lake]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
                edc_testkit::s3_server::ACCESS_KEY,
                edc_testkit::s3_server::SECRET_KEY
            ),
        )
        .unwrap();
        let clearinghouse_port = edc_testkit::redis_server::free_port().unwrap();
        // The credentials file the cron entry and the systemd unit read
        // (the site writes it; cron passes no other environment).
        let env_file = r.join("etc/edc-sync/s001.env");
        std::fs::write(
            &env_file,
            format!(
                "VAULT_API_BASE_URL={}\nVAULT_USERNAME={USER}\nVAULT_PASSWORD={PASSWORD}\nEDC_SYNC_AUDIT_KEY=\"{AUDIT_KEY}\"\n",
                vault.base_url()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&env_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        Site {
            root,
            bin,
            vault,
            rave,
            castor,
            redcap,
            redis,
            pg,
            s3,
            clearinghouse_port,
        }
    }

    fn path(&self, p: &str) -> String {
        self.root.path().join(p).display().to_string()
    }

    /// The docs' site names mapped to this site's: paths, hosts, ports and
    /// the bucket. Nothing else is changed.
    fn substitute(&self, text: &str) -> String {
        let pg_host = format!("127.0.0.1:{}", self.pg.port);
        let pairs: Vec<(String, String)> = vec![
            ("cargo run --release -- ".into(), "edc-sync ".into()),
            (
                "cargo run -p quota-pacer --example claim_submitter -- ".into(),
                "claim_submitter ".into(),
            ),
            ("/usr/local/bin/edc-sync".into(), "edc-sync".into()),
            ("redis://127.0.0.1:6379/".into(), self.redis.url()),
            ("redis://HOST:6379/".into(), self.redis.url()),
            ("redis://HOST:PORT/".into(), self.redis.url()),
            ("db.example:5432".into(), pg_host),
            ("s3://edc-lake/raw".into(), self.s3.url("raw")),
            (
                "http://127.0.0.1:8099".into(),
                format!("http://127.0.0.1:{}", self.clearinghouse_port),
            ),
            (
                "--port 8099".into(),
                format!("--port {}", self.clearinghouse_port),
            ),
            ("/usr/local/share/man/".into(), self.path("man/")),
            // A port free now, not one next to another: a parallel test's
            // server may hold that one (seen: "Address already in use").
            (
                "--port 8080".into(),
                format!("--port {}", edc_testkit::redis_server::free_port().unwrap()),
            ),
            (
                "/path/to/config/rate_limits.yaml".into(),
                "config/rate_limits.yaml".into(),
            ),
            ("/path/to/".into(), self.path("path/to/")),
            ("EVIDENCE/".into(), self.path("evidence/")),
            ("/tmp/".into(), self.path("tmp/")),
            ("/srv/".into(), self.path("srv/")),
            ("/mnt/".into(), self.path("mnt/")),
            ("/var/".into(), self.path("var/")),
            ("/etc/edc-sync/".into(), self.path("etc/edc-sync/")),
        ];
        let mut text = text.to_string();
        for (from, to) in pairs {
            text = text.replace(&from, &to);
        }
        text
    }

    /// What the site's environment holds: the vendors' variables, the
    /// audit key, the state database's URL, the run role's PGPASSWORD.
    fn env(&self) -> Vec<(String, String)> {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut env: Vec<(String, String)> = vec![
            ("PATH".into(), path),
            ("HOME".into(), self.path("home")),
            ("VAULT_API_BASE_URL".into(), self.vault.base_url()),
            ("VAULT_USERNAME".into(), USER.into()),
            ("VAULT_PASSWORD".into(), PASSWORD.into()),
            ("RAVE_API_BASE_URL".into(), self.rave.base_url()),
            ("RAVE_USERNAME".into(), USER.into()),
            ("RAVE_PASSWORD".into(), PASSWORD.into()),
            ("CASTOR_BASE_URL".into(), self.castor.base_url()),
            ("CASTOR_CLIENT_ID".into(), USER.into()),
            ("CASTOR_CLIENT_SECRET".into(), PASSWORD.into()),
            (
                "REDCAP_API_URL".into(),
                format!("{}/api/", self.redcap.base_url()),
            ),
            ("REDCAP_API_TOKEN".into(), PASSWORD.into()),
            ("EDC_SYNC_AUDIT_KEY".into(), AUDIT_KEY.into()),
            ("PGPASSWORD".into(), "run-password".into()),
            // The private store speaks plain HTTP on loopback.
            ("AWS_ALLOW_HTTP".into(), "true".into()),
        ];
        env.push((
            "EDC_SYNC_STATE".into(),
            self.substitute("postgres://edc_run:run-password@db.example:5432/edc"),
        ));
        env
    }

    /// Runs `script` with bash in the policy directory: with errexit and
    /// pipefail, unless `as_cron` (cron's shell has neither).
    fn run(&self, script: &str, as_cron: bool) -> Output {
        let mut cmd = Command::new("bash");
        match as_cron {
            true => cmd.args(["-c", script]),
            false => cmd.args(["-eo", "pipefail", "-c", script]),
        };
        cmd.current_dir(self.root.path().join("srv/edc/policy"))
            .env_remove("EDC_SYNC_REDIS_URL")
            .env_remove("EDC_SYNC_CONFIG")
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_ENDPOINT_URL")
            .envs(self.env());
        if as_cron {
            // cron's environment holds no credential: the entry reads them
            // from the file it names.
            for variable in [
                "VAULT_API_BASE_URL",
                "VAULT_USERNAME",
                "VAULT_PASSWORD",
                "EDC_SYNC_AUDIT_KEY",
            ] {
                cmd.env_remove(variable);
            }
        }
        cmd.output().unwrap()
    }

    /// A block as the shell runs it: a sql block through psql as the
    /// server's superuser, a python block with python3 next to the trail,
    /// a unit's ExecStart, a cron entry's command, a shell block as is (a
    /// line ending in `&` gets a moment to start, as a person typing would
    /// give it).
    fn script(&self, block: &Block) -> String {
        let body = self.substitute(&block.body);
        match block.lang.as_str() {
            "sql" => format!(
                "PGPASSWORD='{}' psql -v ON_ERROR_STOP=1 -h 127.0.0.1 -p {} -U db_admin -d postgres <<'SQL'\n{body}SQL\n",
                edc_testkit::postgres_server::PASSWORD,
                self.pg.port
            ),
            "python" => format!(
                "cp {} audit.jsonl\npython3 - <<'PY'\n{body}PY\nrm -f audit.jsonl\n",
                self.path("srv/edc/audit.jsonl")
            ),
            "ini" => body
                .replace("\\\n", " ")
                .lines()
                .filter_map(|l| l.strip_prefix("ExecStart="))
                .map(|l| format!("{l}\n"))
                .collect(),
            "cron" => body
                .lines()
                .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                .map(|l| {
                    // Five schedule fields and the user, then the command.
                    let command: Vec<&str> = l.splitn(7, ' ').collect();
                    format!("{}\n", command[6])
                })
                .collect(),
            _ => {
                let mut script = String::from("trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n");
                for line in body.lines() {
                    script.push_str(line);
                    script.push('\n');
                    if line.trim_end().ends_with('&') {
                        script.push_str("sleep 2\n");
                    }
                }
                script
            }
        }
    }
}

/// Every runnable block of the docs, in document order, on one site; then
/// every `--help` example. A failure names the file, the block and what
/// the shell said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_commands_run_as_written() {
    let site = Site::start().await;
    let mut ran = 0;
    for block in blocks() {
        if !RUNNABLE.contains(&block.lang.as_str()) {
            continue;
        }
        if not_run(&block).is_some() {
            continue;
        }
        let script = site.script(&block);
        if script.trim().is_empty() {
            continue; // a timer unit: nothing to execute
        }
        let out = tokio::task::block_in_place(|| site.run(&script, block.lang == "cron"));
        // A cron entry's own `|| echo ... | logger` hides the exit code:
        // the run's log says how it ended.
        assert!(
            out.status.success(),
            "{} ({} block) failed with {:?}:\n{}\n--- stdout\n{}\n--- stderr\n{}",
            block.file,
            block.lang,
            out.status.code(),
            script,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    let cron_log = std::fs::read_to_string(site.path("var/log/edc-sync/s001.log")).unwrap_or_default();
    assert!(
        !cron_log.contains("\"ERROR\""),
        "the cron entry's run failed: {cron_log}"
    );
    // Its stdout went to the log too: the run's JSON summary, exit 0.
    let summary: serde_json::Value = cron_log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .rfind(|l| l.get("outcome").is_some())
        .unwrap_or_else(|| {
            panic!(
                "no summary in the cron log {}: {cron_log}",
                site.path("var/log/edc-sync/s001.log")
            )
        });
    assert_eq!(summary["exit_code"], 0, "{summary}");
    assert!(ran >= 15, "only {ran} blocks ran");

    // Then every --help example, on the same site (the database the docs
    // set up, the landing they filled), from a clone of the policy
    // repository of its own (its exports are new files).
    let clone = site.path("work/policy");
    let cloned = Command::new("git")
        .args(["clone", "-q", &site.path("srv/edc/policy"), &clone])
        .output()
        .unwrap();
    assert!(
        cloned.status.success(),
        "{}",
        String::from_utf8_lossy(&cloned.stderr)
    );
    for e in edc_sync::cli::examples::EXAMPLES {
        if let Some((_, why)) = EXAMPLES_NOT_RUN.iter().find(|(line, _)| *line == e.line) {
            eprintln!("not run: {} ({why})", e.line);
            continue;
        }
        let line = site.substitute(e.line);
        // `simulate` serves until stopped: it must answer, then it is stopped.
        let script = match e.command {
            "simulate" => format!(
                "cd '{clone}'\n{line} > sim.out &\nfor _ in $(seq 50); do grep -q http sim.out 2>/dev/null && break; sleep 0.1; done\n\
                 curl -sf -o /dev/null -w '%{{http_code}}' \"$(grep -o 'http://[^ ]*' sim.out | head -1)\" || true\nkill %1\ngrep -q http sim.out\n"
            ),
            // Run as the schema's owner, whose password the site gives it
            // (the run role's is the site's PGPASSWORD).
            "state migrate" => format!("cd '{clone}'\nPGPASSWORD=owner-password {line}\n"),
            _ => format!("cd '{clone}'\n{line}\n"),
        };
        let out = tokio::task::block_in_place(|| site.run(&script, false));
        assert!(
            out.status.success(),
            "the example of `edc-sync {}` failed with {:?}:\n{line}\n--- stdout\n{}\n--- stderr\n{}",
            e.command,
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `--help` examples that do not run in this test, with why.
const EXAMPLES_NOT_RUN: &[(&str, &str)] = &[];

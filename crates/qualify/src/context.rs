//! What a scenario works with: its own directory, a policy committed in a
//! git repository of its own, the simulator, and a place to record steps.

use std::fmt::Display;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::evidence::{Pacing, Step};
use edc_core::run::{Endpoint, PacerChoice, RunSpec, Streams};
use edc_core::sync::SyncOptions;
use edc_sim::{Dataset, FaultSchedule, SimConfig, Simulator};

/// The token the OQ's simulator accepts: distinctive, so a grep of every
/// output for it proves it never leaked.
pub const OQ_TOKEN: &str = "oq-tok-7f3a9c21-do-not-log";

/// The user and password the vendor-profile simulators accept; the
/// password is distinctive too, so a grep proves it never leaked.
pub const OQ_USER: &str = "oq.user@edc-sync.invalid";
pub const OQ_PASSWORD: &str = "oq-pw-5d1e8b40-do-not-log";

/// The policies the scenarios run with (committed in each scenario's repo).
pub const OQ_POLICY: &str = include_str!("../../../config/fixtures/simulator-policies.yaml");

pub const OQ_STUDY: &str = "OQ-STUDY(Val)";

/// A scenario's working state.
pub struct Ctx {
    pub id: &'static str,
    /// The scenario's own directory inside the evidence directory.
    pub dir: PathBuf,
    pub evidence_root: PathBuf,
    pub redis: Option<String>,
    /// The edc-sync executable, for scenarios that run it as a process.
    pub exe: PathBuf,
    pub(crate) steps: Vec<Step>,
    pub(crate) artifacts: Vec<PathBuf>,
    pub(crate) pacing: Option<Pacing>,
}

impl Ctx {
    pub(crate) fn new(id: &'static str, evidence_root: &Path, redis: Option<String>, exe: PathBuf) -> Ctx {
        Ctx {
            id,
            dir: evidence_root.join(id),
            evidence_root: evidence_root.to_path_buf(),
            redis,
            exe,
            steps: Vec::new(),
            artifacts: Vec::new(),
            pacing: None,
        }
    }

    /// Records a step; returns whether it passed.
    pub fn check(
        &mut self,
        description: &str,
        expected: impl Display,
        actual: impl Display,
        pass: bool,
    ) -> bool {
        self.steps.push(Step {
            description: description.to_string(),
            expected: expected.to_string(),
            actual: actual.to_string(),
            pass,
        });
        pass
    }

    /// Records a step that compares two values.
    pub fn check_eq<T: PartialEq + Display>(&mut self, description: &str, expected: T, actual: T) -> bool {
        let pass = expected == actual;
        self.check(description, expected, actual, pass)
    }

    /// Keeps a file as evidence (it must be inside the scenario directory).
    pub fn attach(&mut self, path: &Path) {
        if path.exists() && !self.artifacts.iter().any(|p| p == path) {
            self.artifacts.push(path.to_path_buf());
        }
    }

    pub fn set_pacing(&mut self, pacing: Pacing) {
        self.pacing = Some(pacing);
    }

    /// `policy/` in the scenario directory: a git repository with
    /// `rate_limits.yaml` committed. Returns the file's path.
    pub fn policy_repo(&mut self) -> anyhow::Result<PathBuf> {
        self.policy_repo_as("policy", |policy| policy.to_string())
    }

    /// A policy repository of its own under the scenario's directory
    /// (`dir`), its one commit the OQ policy as `edit` changes it: a
    /// variant a scenario runs beside the OQ policy.
    pub fn policy_repo_as(
        &mut self,
        dir: &str,
        edit: impl FnOnce(&str) -> String,
    ) -> anyhow::Result<PathBuf> {
        let repo_dir = self.dir.join(dir);
        std::fs::create_dir_all(&repo_dir)?;
        let repo =
            git2::Repository::init(&repo_dir).context("git init of the scenario's policy repository")?;
        let path = repo_dir.join("rate_limits.yaml");
        edc_core::no_follow::write(&path, edit(OQ_POLICY))?;
        let mut index = repo.index()?;
        index.add_path(Path::new("rate_limits.yaml"))?;
        index.write()?;
        let tree = repo.find_tree(index.write_tree()?)?;
        let sig = git2::Signature::now("edc-sync qualify", "qualify@edc-sync.invalid")?;
        repo.commit(Some("HEAD"), &sig, &sig, "OQ policy", &tree, &[])?;
        self.attach(&path);
        Ok(path)
    }

    /// Starts the simulator with `records` records and `faults`, logging to
    /// the scenario directory.
    pub async fn sim(
        &mut self,
        records: u32,
        faults: &[&str],
        quota: Option<(f64, u32)>,
    ) -> anyhow::Result<Simulator> {
        self.sim_with(records, faults, |c| c.quota = quota).await
    }

    /// [`Ctx::sim`] with the configuration adjusted by `tune` (a vendor
    /// profile, session lifetime, clock skew...). The profiles accept
    /// [`OQ_USER`] / [`OQ_PASSWORD`].
    pub async fn sim_with(
        &mut self,
        records: u32,
        faults: &[&str],
        tune: impl FnOnce(&mut SimConfig),
    ) -> anyhow::Result<Simulator> {
        let mut schedule = FaultSchedule::default();
        for f in faults {
            let (n, fault) = FaultSchedule::parse_entry(f).map_err(anyhow::Error::msg)?;
            schedule.insert(n, fault);
        }
        std::fs::create_dir_all(&self.dir)?;
        let log = self.dir.join("simulator-requests.jsonl");
        let mut config = SimConfig {
            dataset: dataset(records),
            token: OQ_TOKEN.into(),
            username: OQ_USER.into(),
            password: OQ_PASSWORD.into(),
            faults: schedule,
            request_log: Some(log.clone()),
            ..SimConfig::default()
        };
        tune(&mut config);
        let sim = Simulator::start(config, SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        self.artifacts.push(log);
        Ok(sim)
    }

    /// A run of `vendor` against `sim`, with everything under the scenario
    /// directory and the in-process pacer.
    pub fn spec(&self, config: &Path, vendor: &str, sim: &Simulator) -> RunSpec {
        RunSpec {
            config: config.to_path_buf(),
            allow_dirty: false,
            vendor: vendor.into(),
            tenant: None,
            study: OQ_STUDY.into(),
            protocol_version: None,
            streams: Streams::One("default".into()),
            out: self.dir.join("landing").into(),
            state: self.dir.join("state").into(),
            audit_log: self.dir.join("audit.jsonl"),
            pacer: PacerChoice::Local,
            options: SyncOptions::default(),
            metrics: Default::default(),
            audit: Default::default(),
            endpoint: Some(Endpoint::bearer(sim.base_url(), OQ_TOKEN)),
        }
    }

    /// `edc-sync sync` of `oq_vault` against `sim` as a separate process of
    /// the installed executable, with everything under the scenario
    /// directory; `extra` flags are appended.
    pub fn sync_command(&self, config: &Path, sim: &Simulator, extra: &[&str]) -> std::process::Command {
        self.vendor_command(config, sim, "oq_vault", OQ_PASSWORD, extra)
    }

    /// [`Ctx::sync_command`] for `vendor`, with `password` in the
    /// password variable the vendor policies name.
    pub fn vendor_command(
        &self,
        config: &Path,
        sim: &Simulator,
        vendor: &str,
        password: &str,
        extra: &[&str],
    ) -> std::process::Command {
        self.command("sync", config, sim, vendor, password, extra)
    }

    /// `edc-sync <subcommand>` (sync or backfill) of `vendor` against `sim`.
    pub fn command(
        &self,
        subcommand: &str,
        config: &Path,
        sim: &Simulator,
        vendor: &str,
        password: &str,
        extra: &[&str],
    ) -> std::process::Command {
        let roots = Roots {
            out: &self.dir.join("landing"),
            state: &self.dir.join("state"),
            audit_log: &self.dir.join("audit.jsonl"),
        };
        self.command_over(subcommand, config, sim, vendor, password, extra, roots)
    }

    /// [`Self::command`] over other landing, state and trail roots.
    #[allow(clippy::too_many_arguments)]
    pub fn command_over(
        &self,
        subcommand: &str,
        config: &Path,
        sim: &Simulator,
        vendor: &str,
        password: &str,
        extra: &[&str],
        roots: Roots<'_>,
    ) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.args([subcommand, "--config"])
            .arg(config)
            .args([
                "--vendor", vendor, "--study", OQ_STUDY, "--pacer", "local", "--out",
            ])
            .arg(roots.out)
            .arg("--state")
            .arg(roots.state)
            .arg("--audit-log")
            .arg(roots.audit_log)
            .args(extra)
            .env("EDC_SYNC_OQ_BASE_URL", sim.base_url())
            .env("EDC_SYNC_OQ_TOKEN", OQ_TOKEN)
            .env("EDC_SYNC_OQ_USERNAME", OQ_USER)
            .env("EDC_SYNC_OQ_PASSWORD", password);
        cmd
    }

    /// `edc-sync verify` of the landing, state and trail of `roots`.
    pub fn verify_over(&self, roots: Roots<'_>) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.arg("verify")
            .arg("--out")
            .arg(roots.out)
            .arg("--state")
            .arg(roots.state)
            .arg("--audit-log")
            .arg(roots.audit_log);
        cmd
    }

    /// Attaches what a run leaves behind: audit trail, manifests, cursors
    /// and the journals of their lookback memories.
    pub fn attach_run_outputs(&mut self) {
        for path in crate::files::under(&self.dir) {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name == "audit.jsonl"
                || name == "manifest.jsonl"
                || name.ends_with(".cursor.json")
                || name.ends_with(".memory.jsonl")
            {
                self.attach(&path);
            }
        }
    }
}

/// Where a command lands, keeps its state and writes its trail.
#[derive(Clone, Copy)]
pub struct Roots<'a> {
    pub out: &'a Path,
    pub state: &'a Path,
    pub audit_log: &'a Path,
}

/// The OQ dataset: deterministic, so two runs observe the same values.
pub fn dataset(records: u32) -> Dataset {
    Dataset {
        subjects: 12,
        records,
        seed: 1301,
        padding: 0,
    }
}

/// Runs `cmd` to the end off the runtime's threads.
pub(crate) async fn output(mut cmd: std::process::Command) -> anyhow::Result<std::process::Output> {
    Ok(tokio::task::spawn_blocking(move || cmd.output()).await??)
}

/// A list as a reviewer reads it in a step's actual result: the items
/// comma-separated, or "none".
pub(crate) fn listed<T: std::fmt::Display>(items: &[T]) -> String {
    match items {
        [] => "none".into(),
        _ => items
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The exit code (-1 for a signal).
pub(crate) fn code(out: &std::process::Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// stdout then stderr, as text.
pub(crate) fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

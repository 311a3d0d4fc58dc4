//! One policy repo, one simulator, one `run::execute`: the fixture of the
//! tests that attack what runs leave behind (audit trail, landing, state).

use std::path::PathBuf;

use super as support;

use edc_core::run::{self, AuditOptions, Endpoint, PacerChoice, RunSpec, Streams};
use edc_core::sync::SyncOptions;
use edc_sim::{Dataset, SimConfig, Simulator};

/// An audit key (32+ bytes) for the keyed-checkpoint tests.
pub const KEY: &str = "an audit key of at least thirty-two bytes, for tests";

pub struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = support::git_init(dir.path());
        std::fs::write(dir.path().join("policies.yaml"), support::SIM_POLICIES).unwrap();
        support::git_commit_all(&repo, "test policies");
        Fixture { dir }
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    pub fn trail(&self) -> PathBuf {
        self.path("audit.jsonl")
    }

    pub fn spec(&self, sim: &Simulator, audit: AuditOptions) -> RunSpec {
        RunSpec {
            config: self.path("policies.yaml"),
            allow_dirty: false,
            vendor: "vault_json".into(),
            tenant: None,
            study: "S1".into(),
            protocol_version: None,
            streams: Streams::One("default".into()),
            out: self.path("landing").into(),
            state: self.path("state").into(),
            audit_log: self.trail(),
            pacer: PacerChoice::Local,
            options: SyncOptions::default(),
            metrics: Default::default(),
            endpoint: Some(Endpoint::bearer(sim.base_url(), "sim-token")),
            audit,
        }
    }

    /// Runs once; the exit code (errors before the header included).
    pub async fn run(&self, sim: &Simulator, audit: AuditOptions) -> (u8, String) {
        self.run_spec(self.spec(sim, audit)).await
    }

    pub async fn run_spec(&self, spec: RunSpec) -> (u8, String) {
        match run::execute(spec).await {
            Ok(r) => match r.outcome {
                Ok(()) => (0, String::new()),
                Err(e) => (e.exit().code(), format!("{e:#}")),
            },
            Err(e) => (e.exit().code(), format!("{e:#}")),
        }
    }

    /// `edc-sync verify` over this fixture's landing, state and trail.
    pub fn verify_landing(&self) -> support::Outcome {
        verify_roots(&self.path("landing"), &self.path("state"), &self.trail())
    }

    pub fn verify(&self, extra: &[&str]) -> support::Outcome {
        let trail = self.trail();
        let mut args = vec!["audit", "verify", trail.to_str().unwrap()];
        args.extend_from_slice(extra);
        support::run_cmd(support::edc_sync().args(&args).env("EDC_SYNC_AUDIT_KEY", KEY))
    }
}

/// `edc-sync verify --out OUT --state STATE --audit-log TRAIL`.
pub fn verify_roots(
    out: &std::path::Path,
    state: &std::path::Path,
    trail: &std::path::Path,
) -> support::Outcome {
    support::run(&[
        "verify",
        "--out",
        out.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--audit-log",
        trail.to_str().unwrap(),
    ])
}

/// A simulator with `records` records (12 by default: one page of 40).
pub async fn sim() -> Simulator {
    sim_with(12).await
}

pub async fn sim_with(records: u32) -> Simulator {
    let config = SimConfig {
        dataset: Dataset {
            subjects: 3,
            records,
            seed: 1,
            padding: 0,
        },
        ..SimConfig::default()
    };
    Simulator::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

//! What a qualification run records: per scenario, steps with expected and
//! *observed* results, pass/fail, times and artifacts; and the environment.

use serde::Serialize;

/// One checked step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub description: String,
    pub expected: String,
    /// The value observed, never just "as expected".
    pub actual: String,
    pub pass: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Passed,
    Failed,
    /// Not run here (e.g. no Redis): never counted as passed.
    NotExecuted,
}

/// A point of a pacing chart: a request's arrival, seconds from the start.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pacing {
    pub rate_per_sec: f64,
    pub burst: u32,
    /// Arrival times of requests at the simulator, seconds from the first.
    pub arrivals_s: Vec<f64>,
    /// Waits: (seconds from the first arrival, length in seconds, reason).
    pub waits: Vec<(f64, f64, String)>,
    /// How much later than its grant a request may arrive, as URS-003
    /// states it ([`crate::envelope::ARRIVAL_TOLERANCE_S`]).
    pub tolerance_s: f64,
}

/// One scenario's evidence.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub id: String,
    pub title: String,
    pub requirements: Vec<String>,
    pub status: Status,
    /// Why it failed or was not executed.
    pub note: Option<String>,
    pub started: String,
    pub finished: String,
    pub steps: Vec<Step>,
    /// Files the scenario produced, relative to the evidence directory.
    pub artifacts: Vec<String>,
    pub pacing: Option<Pacing>,
}

/// Where and with what the qualification ran.
#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    pub tool: String,
    pub version: String,
    pub executable: String,
    pub executable_sha256: String,
    pub os: String,
    pub host: String,
    pub user: String,
    pub redis_url: Option<String>,
    pub redis_version: Option<String>,
    pub config_path: String,
    pub config_sha256: Option<String>,
    pub config_git_commit: Option<String>,
    pub config_git_blob: Option<String>,
    pub config_dirty: Option<bool>,
}

/// A whole run: `oq-results.json` / `iq-results.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    pub kind: String,
    pub started: String,
    pub finished: String,
    pub environment: Environment,
    pub summary: Summary,
    pub scenarios: Vec<ScenarioResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub total: usize,
    pub passed: usize,
    pub failed: usize,
    pub not_executed: usize,
}

impl Summary {
    pub fn of(results: &[ScenarioResult]) -> Summary {
        let count = |s| results.iter().filter(|r| r.status == s).count();
        Summary {
            total: results.len(),
            passed: count(Status::Passed),
            failed: count(Status::Failed),
            not_executed: count(Status::NotExecuted),
        }
    }
}

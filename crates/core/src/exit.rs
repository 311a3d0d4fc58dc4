//! Exit codes are part of the interface (README, docs/operations.md): the
//! codes and what each means, here; which failure exits with which is
//! decided by the failure's type (`Error::exit` in `error.rs`). Codes are
//! sysexits-style; extend, never renumber.

use quota_pacer::PacerError;

/// A qualification whose executed checks did not all pass (exit 70).
/// Defined here, beside the mapping, so that nothing below `commands/`
/// needs to know `qualify` exists.
#[derive(Debug, thiserror::Error)]
#[error("{kind}: {failed} of {executed} executed check(s) failed; see {report}")]
pub struct NotQualified {
    pub kind: String,
    pub failed: usize,
    pub executed: usize,
    pub report: String,
}

/// Every code the tool exits with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Done: everything requested completed.
    Ok = 0,
    /// Usage error (reported by clap).
    Usage = 2,
    /// Data error: invalid payload, broken audit chain.
    DataErr = 65,
    /// An input file named on the command line cannot be read.
    NoInput = 66,
    /// Unavailable: EDC or Redis unreachable after the retry budget.
    Unavailable = 69,
    /// A qualification (IQ/OQ) check did not pass.
    QualificationFailed = 70,
    /// I/O error writing landing, audit or state.
    IoErr = 74,
    /// Temporary failure, progress saved: try again later.
    TempFail = 75,
    /// The EDC banned this host's address (REDCap): only its administrator
    /// can lift the ban; retrying keeps it.
    Banned = 76,
    /// Permission: the EDC refused the credential (401/403, a vendor's
    /// refusal in the body, a failed login or credential helper).
    NoPerm = 77,
    /// Configuration: invalid, uncommitted, or a missing environment variable.
    Config = 78,
}

/// One documented exit code: its number, a short label for `--help`, and
/// the meaning and advice the README's table gives word for word (a test
/// holds the README to this list).
pub struct Documented {
    pub code: u8,
    pub label: &'static str,
    pub meaning: &'static str,
    pub what_to_do: &'static str,
}

impl Exit {
    /// Every code the tool exits with, in order. 130 is not an [`Exit`]:
    /// it is the signal handler's abort, outside the error mapping.
    pub const ALL: [Documented; 12] = [
        Documented { code: 0, label: "ok", meaning: "done: everything requested completed", what_to_do: "nothing" },
        Documented { code: 2, label: "usage", meaning: "usage error (bad flags)", what_to_do: "fix the command line" },
        Documented {
            code: 65,
            label: "data",
            meaning: "data error: invalid payload (a cursor value of the wrong kind included), broken audit chain, an audit trail whose end does not verify or that diverges from its anchor, a trail with no sealed line under the audit key (unless adopted), state that disagrees with the trail at start (a cursor, the manifest's tail, the last landed page, a landing owned by another state directory, a landing newer than the state and trail), a damaged manifest, `verify` discrepancies",
            what_to_do: "investigate; do not retry blindly (`--repair-audit` records a known audit damage, `--repair-state` takes the trail's state, `--accept-rollback` records a state restored from an older backup, `--adopt-unsealed-trail` takes a trail written before the audit key; all audited; docs/operations.md)",
        },
        Documented {
            code: 66,
            label: "no input",
            meaning: "an input file named on the command line cannot be read (`--config`, `audit verify FILE`, the paths given to `verify`)",
            what_to_do: "check the path",
        },
        Documented {
            code: 69,
            label: "unavailable",
            meaning: "unavailable: EDC or Redis unreachable after the retry budget, the landing's object store unreachable or failing (5xx), or the PostgreSQL state database unreachable or lost mid-run (nothing more was committed)",
            what_to_do: "check connectivity; the next run resumes",
        },
        Documented {
            code: 70,
            label: "qualification failed",
            meaning: "qualification failed: an IQ/OQ check did not pass",
            what_to_do: "read the report's Deviations",
        },
        Documented {
            code: 74,
            label: "I/O",
            meaning: "I/O error writing landing, audit or state (an object store that found other bytes than the SHA-256 sent included, a state database out of disk), or a file or directory below them that is a symbolic link (never followed)",
            what_to_do: "check disk space and permissions; replace the link by what it stood for",
        },
        Documented {
            code: 75,
            label: "try later",
            meaning: "temporary failure, progress saved (retry budget or max wait exhausted, stream locked, the run lock taken over by another run, interrupted, the object store throttling: 429 or SlowDown, a state-database deadlock or serialization failure that outlasted its retries)",
            what_to_do: "nothing: the next scheduled run resumes",
        },
        Documented {
            code: 76,
            label: "banned",
            meaning: "the EDC banned this host's address for suspected abuse (REDCap's per-minute hit threshold): it answers every request, from every user behind the same address, with 429 until its administrator lifts the ban; nothing was retried",
            what_to_do: "stop the schedule; ask the EDC's administrator to lift the ban (REDCap: Control Center), lower the policy's rate, then resume",
        },
        Documented {
            code: 77,
            label: "permission",
            meaning: "permission: the EDC refused the credential (401/403, a refused login, a vendor's access error, a failed credential helper), the object store refused the landing's credentials, Redis refused the user or password in its URL, or the state database refused the role or its grants",
            what_to_do: "check the variables the message names",
        },
        Documented {
            code: 78,
            label: "configuration",
            meaning: "configuration: invalid, uncommitted, a missing environment variable, a URL edc-sync does not take there (`--out ftp://…`, `--state redis://…`), a state database without this binary's schema version or read-only (a replica), a backfill window kept under the directory name an earlier version gave it, or a run without the audit key over a trail whose lines are sealed with one",
            what_to_do: "fix and commit the policy, set the variable (`EDC_SYNC_AUDIT_KEY` for a sealed trail), give a path or a URL edc-sync takes there, run `edc-sync state migrate`, point --state at the primary, or move the backfill's directory to the name the message gives",
        },
        Documented {
            code: 130,
            label: "aborted",
            meaning: "aborted by a second SIGINT/SIGTERM (the first stops at a safe point with 75)",
            what_to_do: "nothing is corrupt; run again",
        },
    ];

    /// `Exit codes: 0 ok, 2 usage, ...` for the end of `--help`.
    pub fn help_footer() -> String {
        let codes: Vec<String> = Exit::ALL
            .iter()
            .map(|d| format!("{} {}", d.code, d.label))
            .collect();
        format!("Exit codes: {} (see the README).", codes.join(", "))
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    /// A pacer that cannot be used: a URL it does not take is a
    /// configuration mistake (78) wherever it is given; anything else is
    /// Redis unavailable or misbehaving (69).
    pub(crate) fn for_pacer(e: &PacerError) -> Exit {
        match e {
            PacerError::InvalidUrl { .. } => Exit::Config,
            PacerError::Unavailable { .. } | PacerError::Protocol { .. } => Exit::Unavailable,
            PacerError::Refused { .. } => Exit::NoPerm,
        }
    }
}

/// A child process's exit status as people read it (in a soak's figures,
/// an OQ step's result): the code, or that a signal ended it.
pub fn status_text(code: Option<i32>) -> String {
    code.map_or_else(|| "none (killed by a signal)".into(), |c| c.to_string())
}

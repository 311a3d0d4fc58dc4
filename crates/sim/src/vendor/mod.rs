//! The vendors the simulator imitates, one file each (`generic.rs`,
//! `rave.rs`, `vault.rs`, `castor.rs`, `redcap.rs`): how each authenticates, reports errors, logs in,
//! pages and stamps its answers, each behaviour beside the document or
//! client it imitates. When the documents and a file here disagree, the
//! file is wrong. The server asks this file what the profile in use does
//! and never names a vendor itself; adding one is the checklist in
//! docs/architecture.md ("Adding a vendor").

pub mod castor;
pub mod generic;
pub mod rave;
pub mod redcap;
pub mod vault;

use std::str::FromStr;

use hyper::header::{HeaderMap, AUTHORIZATION};
use hyper::StatusCode;

pub use vault::Sessions;

/// Which vendor the simulator imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// A bearer token; errors are bare HTTP statuses.
    #[default]
    Generic,
    /// Medidata Rave Web Services.
    Rave,
    /// Veeva Vault.
    Vault,
    /// Castor EDC.
    Castor,
    /// REDCap: one POST endpoint, the token in the form.
    Redcap,
}

impl Profile {
    /// The profiles' names, as `--profile` takes them.
    pub const NAMES: [&'static str; 5] = ["generic", "rave", "vault", "castor", "redcap"];
}

impl FromStr for Profile {
    type Err = String;

    fn from_str(s: &str) -> Result<Profile, String> {
        match s {
            "generic" => Ok(Profile::Generic),
            "rave" => Ok(Profile::Rave),
            "vault" => Ok(Profile::Vault),
            "castor" => Ok(Profile::Castor),
            "redcap" => Ok(Profile::Redcap),
            other => Err(format!(
                "unknown profile {other:?} (generic, rave, vault, castor, redcap)"
            )),
        }
    }
}

/// Whether a request carried an acceptable credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authn {
    Ok,
    Missing,
    Invalid,
    /// A Vault session that existed but is used up (`--session-ttl-requests`).
    Expired,
}

impl Authn {
    pub fn label(self) -> &'static str {
        match self {
            Authn::Ok => "ok",
            Authn::Missing => "missing",
            Authn::Invalid => "invalid",
            Authn::Expired => "expired",
        }
    }
}

/// Checks a data request's `Authorization` under `profile`.
pub fn authenticate(
    profile: Profile,
    headers: &HeaderMap,
    config: &crate::SimConfig,
    sessions: &Sessions,
    tokens: &castor::Tokens,
) -> Authn {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Authn::Missing;
    };
    let value = value.as_bytes();
    match profile {
        Profile::Generic => generic::authenticate(value, config),
        Profile::Rave => rave::authenticate(value, config),
        Profile::Vault => vault::authenticate(value, config, sessions),
        Profile::Castor => castor::authenticate(value, config, tokens),
        // REDCap reads its token from the form (`redcap::authenticate`):
        // an Authorization header proves nothing to it.
        Profile::Redcap => Authn::Missing,
    }
}

/// A refused credential, as each vendor reports it: the status, and the
/// body with its content type, if any.
pub fn refused_credential(profile: Profile) -> (StatusCode, Option<(&'static str, String)>) {
    match profile {
        Profile::Generic => (StatusCode::UNAUTHORIZED, None),
        Profile::Rave => rave::refused_credential(),
        Profile::Vault => vault::refused_credential(),
        Profile::Castor => castor::refused_credential(),
        Profile::Redcap => redcap::refused_credential(),
    }
}

impl Profile {
    /// It logs in with a form POSTed to the login path (Vault's login,
    /// Castor's OAuth2 token request).
    pub fn logs_in_with_a_form(self) -> bool {
        matches!(self, Profile::Vault | Profile::Castor)
    }

    /// Where its login form goes: the configured login path (Vault), or
    /// Castor's fixed token endpoint.
    pub fn form_login_path(self, config: &crate::SimConfig) -> &str {
        match self {
            Profile::Castor => castor::TOKEN_PATH,
            _ => &config.login_path,
        }
    }

    /// It refuses requests from client ids not allowed (Vault's Client ID
    /// Filtering).
    pub fn filters_client_ids(self) -> bool {
        self == Profile::Vault
    }

    /// It stamps every answer with an execution id (Vault's
    /// `X-VaultAPI-ExecutionId`).
    pub fn stamps_execution_ids(self) -> bool {
        self == Profile::Vault
    }

    /// Every request is a form POSTed to one path, the token in the form
    /// (REDCap's API).
    pub fn exports_by_form(self) -> bool {
        self == Profile::Redcap
    }

    /// It answers queries POSTed to its query path (Vault's VQL).
    pub fn answers_queries(self) -> bool {
        self == Profile::Vault
    }

    /// It serves study datasets (Rave's `studies/{study}/datasets/...`).
    pub fn serves_study_datasets(self) -> bool {
        self == Profile::Rave
    }

    /// Its audit records' next link, their reason texts and their creation
    /// time are Rave's (`rave.rs`).
    pub fn pages_audit_records_as_rave(self) -> bool {
        self == Profile::Rave
    }
}

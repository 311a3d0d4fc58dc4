//! Credentials and the session that carries them.
//!
//! Five schemes (`config::Auth`): a bearer token and HTTP Basic are fixed
//! for the run; a Vault session, a credential helper's token and an OAuth2
//! client-credentials token are *obtained* at run time and *renewed* once
//! when the EDC says the session is no longer valid (an OAuth2 token also
//! before its announced lifetime runs out). The credential in use has a generation number, so
//! when several streams see the same expiry only the first renews and the
//! others simply repeat their request with the new credential.
//!
//! Secrets never leave this module except as a sensitive header value:
//! every value read or obtained is registered with [`crate::redact`], which
//! scrubs it from every output the tool writes.

use std::process::Stdio;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use reqwest::header::HeaderValue;

use super::secret::Secret;
use crate::config::{Auth, MissingEnv, Policy};

/// The values behind a policy's `auth` block, read from the environment.
#[derive(Clone)]
pub enum Credentials {
    Bearer(Secret),
    Basic {
        username: String,
        password: Secret,
    },
    VaultSession {
        username: String,
        password: Secret,
        login_path: String,
        vault_dns: Option<String>,
    },
    Command {
        argv: Vec<String>,
        /// The variables passed through to the helper (auth.pass_env).
        pass_env: Vec<String>,
    },
    OAuth2 {
        client_id: String,
        client_secret: Secret,
        token_path: String,
    },
    /// REDCap's API token: a form field of every export, never a header.
    RedcapToken(Secret),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, ***)", self.scheme())
    }
}

impl Credentials {
    /// Reads the variables `policy.auth` names. Errors name the variable
    /// and its key, never a value.
    pub fn from_policy(policy: &Policy) -> Result<Credentials, MissingEnv> {
        let vendor = &policy.vendor;
        let read = |name: &crate::config::EnvVarName, key: &str| name.read(&format!("{vendor}.{key}"));
        let creds = match &policy.auth {
            Auth::Bearer { token_env } => Credentials::Bearer(Secret::new(read(token_env, "token_env")?)),
            Auth::RedcapToken { token_env } => {
                Credentials::RedcapToken(Secret::new(read(token_env, "token_env")?))
            }
            Auth::Basic {
                username_env,
                password_env,
            } => Credentials::Basic {
                username: read(username_env, "auth.username_env")?,
                password: Secret::new(read(password_env, "auth.password_env")?),
            },
            Auth::VaultSession {
                username_env,
                password_env,
                login_path,
                vault_dns,
            } => Credentials::VaultSession {
                username: read(username_env, "auth.username_env")?,
                password: Secret::new(read(password_env, "auth.password_env")?),
                login_path: login_path.clone(),
                vault_dns: vault_dns.clone(),
            },
            Auth::Command { command, pass_env } => Credentials::Command {
                argv: command.clone(),
                pass_env: pass_env.iter().map(|n| n.as_str().to_string()).collect(),
            },
            Auth::OAuth2ClientCredentials {
                client_id_env,
                client_secret_env,
                token_path,
            } => Credentials::OAuth2 {
                client_id: read(client_id_env, "auth.client_id_env")?,
                client_secret: Secret::new(read(client_secret_env, "auth.client_secret_env")?),
                token_path: token_path.clone(),
            },
        };
        creds.register_secrets();
        Ok(creds)
    }

    /// A REDCap API token (the simulator's, in tests).
    pub fn redcap_token(token: impl Into<String>) -> Credentials {
        let creds = Credentials::RedcapToken(Secret::new(token));
        creds.register_secrets();
        creds
    }

    /// A bearer token (the simulator's, in tests, the demo and the OQ).
    pub fn bearer(token: impl Into<String>) -> Credentials {
        let creds = Credentials::Bearer(Secret::new(token));
        creds.register_secrets();
        creds
    }

    pub fn scheme(&self) -> &'static str {
        match self {
            Credentials::Bearer(_) => "bearer",
            Credentials::Basic { .. } => "basic",
            Credentials::VaultSession { .. } => "vault_session",
            Credentials::Command { .. } => "command",
            Credentials::OAuth2 { .. } => "oauth2_client_credentials",
            Credentials::RedcapToken(_) => "redcap_token",
        }
    }

    /// Whether the credential is obtained (and can be renewed) at run time.
    pub fn renewable(&self) -> bool {
        matches!(
            self,
            Credentials::VaultSession { .. } | Credentials::Command { .. } | Credentials::OAuth2 { .. }
        )
    }

    /// Whether the credential is obtained with a request to the EDC (a
    /// login or a token request, which spends the quota like any other).
    pub fn requested(&self) -> bool {
        matches!(
            self,
            Credentials::VaultSession { .. } | Credentials::OAuth2 { .. }
        )
    }

    /// Secret material known before the run, for the identifier masker's
    /// key (see `mask`): never printed, only hashed.
    pub fn key_material(&self) -> String {
        match self {
            Credentials::Bearer(t) | Credentials::RedcapToken(t) => t.expose().to_string(),
            Credentials::Basic { password, .. } | Credentials::VaultSession { password, .. } => {
                password.expose().to_string()
            }
            Credentials::Command { argv, .. } => argv.join("\0"),
            Credentials::OAuth2 { client_secret, .. } => client_secret.expose().to_string(),
        }
    }

    fn register_secrets(&self) {
        match self {
            Credentials::Bearer(t) | Credentials::RedcapToken(t) => {
                crate::redact::register_secret(t.expose())
            }
            Credentials::Basic { password, .. } | Credentials::VaultSession { password, .. } => {
                crate::redact::register_secret(password.expose())
            }
            Credentials::OAuth2 { client_secret, .. } => {
                crate::redact::register_secret(client_secret.expose())
            }
            Credentials::Command { .. } => {}
        }
    }

    /// The proof of a fixed scheme; `None` for schemes obtained at run time.
    fn fixed_proof(&self) -> Result<Option<Proof>, AuthError> {
        Ok(self.fixed_header()?.map(Proof::Header).or(match self {
            Credentials::RedcapToken(t) => Some(Proof::FormToken(t.clone())),
            _ => None,
        }))
    }

    /// The header of a fixed scheme; `None` for schemes obtained at run
    /// time or sent in a form.
    fn fixed_header(&self) -> Result<Option<HeaderValue>, AuthError> {
        match self {
            Credentials::Bearer(t) => header(&format!("Bearer {}", t.expose()), "the token").map(Some),
            Credentials::Basic { username, password } => {
                use base64::Engine;
                // RFC 7617, section 2: the first colon ends the user-id, so
                // such a name would log in as someone else (or no one).
                if username.contains(':') {
                    return Err(AuthError::Refused {
                        code: "INVALID_CREDENTIAL".into(),
                        detail:
                            "the user name contains ':', which HTTP Basic cannot carry (RFC 7617, section 2)"
                                .into(),
                    });
                }
                let pair = base64::engine::general_purpose::STANDARD
                    .encode(format!("{username}:{}", password.expose()).as_bytes());
                crate::redact::register_secret(&pair);
                header(&format!("Basic {pair}"), "the username or password").map(Some)
            }
            _ => Ok(None),
        }
    }
}

/// Kills a helper's process group when dropped armed: the future that
/// waits for the helper is dropped when the run is stopped.
struct GroupKiller(Option<i32>);

impl GroupKiller {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // SAFETY: kill(2) with a negative pid signals that process
            // group; it touches no memory of ours.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
    }
}

/// A sensitive header value (never printed by reqwest or hyper).
fn header(value: &str, what: &str) -> Result<HeaderValue, AuthError> {
    let mut v = HeaderValue::from_str(value).map_err(|_| AuthError::Refused {
        code: "INVALID_CREDENTIAL".into(),
        detail: format!("{what} contains characters not allowed in an HTTP header"),
    })?;
    v.set_sensitive(true);
    Ok(v)
}

/// How a request proves who sends it.
#[derive(Clone)]
pub(super) enum Proof {
    /// An `Authorization` value (marked sensitive).
    Header(HeaderValue),
    /// A form field `token` of the request body (REDCap's exports only:
    /// the client sends no other request with it).
    FormToken(Secret),
}

/// The credential a request carries, and which generation it is.
#[derive(Clone)]
pub(super) struct Credential {
    pub(super) proof: Proof,
    pub generation: u64,
    /// When to obtain the next one: before the lifetime the vendor
    /// announced runs out (`None`: it announced none).
    renew_at: Option<Instant>,
}

/// What a login, token request or helper granted (its header is marked
/// sensitive, so `Debug` never prints it).
#[derive(Debug)]
pub(crate) struct Granted {
    /// The `Authorization` value.
    pub header: HeaderValue,
    /// Where the form went (path only), for the audit line.
    pub login_path: Option<String>,
    /// The response's execution id (Vault).
    pub execution_id: Option<String>,
    /// How long the vendor says the credential lasts (OAuth2 `expires_in`).
    pub lifetime: Option<Duration>,
}

/// How long before a credential's announced end it is renewed: five
/// minutes, or the longest a request may wait for its slot after the
/// check (the policy's `max_wait_s`) when that is longer, so a request
/// that waited out a spent window still arrives with a live token; never
/// more than half its lifetime.
pub(crate) fn renewal_margin(lifetime: Duration, longest_wait: Duration) -> Duration {
    (lifetime / 2).min(Duration::from_secs(300).max(longest_wait))
}

/// Why a credential could not be had.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuthError {
    /// The EDC refused the credential (exit 77).
    #[error("the EDC refused the login ({code}): {detail}")]
    Refused { code: String, detail: String },
    /// The credential helper failed (exit 77).
    #[error("the credential helper {program:?} failed: {detail}")]
    Helper { program: String, detail: String },
    /// The login endpoint could not be reached or answered 5xx (exit 69).
    #[error("the login endpoint {url} is unavailable: {detail}")]
    Unavailable { url: String, detail: String },
    /// The login was sent, or redirected, off the configured origin; it was
    /// refused before the password left it (exit 65, as for a data request).
    #[error("the login endpoint {url}: {detail}")]
    OffOrigin { url: String, detail: String },
    /// The login or token answer is not what the vendor documents (exit 65).
    #[error("the login endpoint {url} answered something that is not the login or token response its scheme documents: {detail}")]
    Protocol { url: String, detail: String },
    /// Vault logged the session in to another vault than the one the
    /// policy names (`vaultDNS` not honoured: the user has no access to it
    /// and Vault chose the user's default vault). Exit 77: this credential
    /// may not read the configured vault.
    #[error("the login made a session for vault {got}, not {expected} (auth.vault_dns, else the base URL's host): check that this user has access to {expected}")]
    WrongVault { expected: String, got: String },
    /// Vault's own limit on logins (`API_LIMIT_EXCEEDED` at the login:
    /// a per-minute burst per user and domain, Vault Help "About
    /// Authentication API Transaction Limits"): a throttle like a 429,
    /// waited and budgeted by the page loop (75 when spent), never 77.
    #[error("the login endpoint {} is throttled: {vendor}", meta.url.path())]
    Throttled {
        meta: Box<super::ResponseMeta>,
        vendor: super::vendor_error::VendorError,
    },
}

/// A credential obtained by a login or the helper.
#[derive(Debug, Clone)]
pub struct Obtained {
    pub generation: u64,
    /// Where the login form went (path only), for the audit line.
    pub login_path: Option<String>,
    /// `X-VaultAPI-ExecutionId` of the login response.
    pub execution_id: Option<String>,
    /// The lifetime the vendor announced (OAuth2 `expires_in`).
    pub lifetime: Option<Duration>,
}

/// Holds the credential in use and serialises obtaining a new one.
pub(super) struct Authenticator {
    pub(super) credentials: Credentials,
    /// The longest a request may wait for its slot once its credential
    /// was checked (the policy's `max_wait_s`): renewals allow for it.
    pub(super) longest_wait: Duration,
    current: RwLock<Option<Credential>>,
    obtaining: tokio::sync::Mutex<()>,
}

impl Authenticator {
    pub(super) fn new(credentials: Credentials) -> Result<Authenticator, AuthError> {
        let current = credentials.fixed_proof()?.map(|proof| Credential {
            proof,
            generation: 1,
            renew_at: None,
        });
        Ok(Authenticator {
            credentials,
            longest_wait: Duration::ZERO,
            current: RwLock::new(current),
            obtaining: tokio::sync::Mutex::new(()),
        })
    }

    pub(super) fn current(&self) -> Option<Credential> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The generation of the credential held when it is due for renewal
    /// (its announced lifetime is nearly over), and how long it had left.
    pub(super) fn due(&self) -> Option<(u64, Duration)> {
        let held = self.current()?;
        let at = held.renew_at?;
        let now = Instant::now();
        (now >= at).then(|| (held.generation, at.saturating_duration_since(now)))
    }

    /// Runs `obtain` unless a credential other than `stale` is already
    /// held (another stream logged in or renewed first): then `None`.
    pub(super) async fn refresh<F, Fut>(
        &self,
        stale: Option<u64>,
        obtain: F,
    ) -> Result<Option<Obtained>, AuthError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Granted, AuthError>>,
    {
        let _one_at_a_time = self.obtaining.lock().await;
        let held = self.current().map(|c| c.generation);
        let fresh_enough = match (held, stale) {
            (Some(_), None) => true,
            (Some(g), Some(s)) => g != s,
            (None, _) => false,
        };
        if fresh_enough {
            return Ok(None);
        }
        let asked_at = Instant::now();
        let granted = obtain().await?;
        let generation = held.unwrap_or(0) + 1;
        // Counted from when it was asked for: the vendor's clock started
        // no earlier than that.
        let renew_at = granted
            .lifetime
            .map(|life| asked_at + life.saturating_sub(renewal_margin(life, self.longest_wait)));
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(Credential {
            proof: Proof::Header(granted.header),
            generation,
            renew_at,
        });
        Ok(Some(Obtained {
            generation,
            login_path: granted.login_path,
            execution_id: granted.execution_id,
            lifetime: granted.lifetime,
        }))
    }
}

/// The most a credential helper may print: a token is a few KiB at most.
const HELPER_OUTPUT_MAX: usize = 64 * 1024;

/// What a helper inherits of the environment besides `auth.pass_env`.
const HELPER_BASE_ENV: [&str; 5] = ["PATH", "HOME", "LANG", "LC_ALL", "TZ"];

/// Runs the credential helper `argv` and reads its token from stdout.
///
/// The helper is a program of the operator's, but what reaches it and what
/// comes back is bounded: it starts with an empty environment plus
/// `HELPER_BASE_ENV` and `pass_env` (never the audit key or another
/// vendor's secret); its stdout is read up to 64 KiB and never echoed; its
/// stderr is not read at all (it may hold anything, the token included),
/// so a failure says only the program and its exit status; it runs in a
/// process group of its own, killed whole (grandchildren too) when it
/// outlives `timeout`. Every failure is [`AuthError::Helper`] (77).
pub(super) async fn run_helper(
    argv: &[String],
    pass_env: &[String],
    timeout: Duration,
) -> Result<HeaderValue, AuthError> {
    use tokio::io::AsyncReadExt;
    let program = argv.first().cloned().unwrap_or_default();
    let fail = |detail: String| AuthError::Helper {
        program: program.clone(),
        detail,
    };
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(&argv[1..])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    for name in HELPER_BASE_ENV
        .iter()
        .copied()
        .chain(pass_env.iter().map(String::as_str))
    {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    let mut child = cmd.spawn().map_err(|e| fail(format!("cannot start it: {e}")))?;
    let group = child.id();
    // A run stopped while the helper runs (SIGTERM drops this future)
    // kills its whole group, grandchildren too, not only the child.
    let mut orphaned = GroupKiller(group.and_then(|p| i32::try_from(p).ok()));
    let kill_group = || {
        if let Some(pid) = group.and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: kill(2) with a negative pid signals that process
            // group; it touches no memory of ours.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
    };
    let mut stdout = child.stdout.take().ok_or_else(|| fail("no stdout".into()))?;
    let mut out = Vec::new();
    let read = async {
        let mut limited = (&mut stdout).take(HELPER_OUTPUT_MAX as u64 + 1);
        limited.read_to_end(&mut out).await?;
        if out.len() > HELPER_OUTPUT_MAX {
            return Ok(None);
        }
        child.wait().await.map(Some)
    };
    let status = match tokio::time::timeout(timeout, read).await {
        Ok(Ok(Some(status))) => {
            orphaned.disarm();
            status
        }
        Ok(Ok(None)) => {
            kill_group();
            return Err(fail(format!(
                "it printed more than {} KiB; a token is far smaller (its output is not shown)",
                HELPER_OUTPUT_MAX / 1024
            )));
        }
        Ok(Err(e)) => {
            kill_group();
            return Err(fail(format!("reading its output: {e}")));
        }
        Err(_) => {
            kill_group();
            return Err(fail(format!(
                "no answer within {} s; its process group was killed",
                timeout.as_secs_f64()
            )));
        }
    };
    // Whatever it printed may be a token: registered before any message.
    let stdout = String::from_utf8(out).map_err(|_| fail("its output is not UTF-8".into()))?;
    let token = stdout.trim();
    crate::redact::register_secret(token);
    if !status.success() {
        let status = match status.code() {
            Some(c) => format!("exit status {c}"),
            None => "killed by a signal".into(),
        };
        return Err(fail(format!(
            "{status} (its stderr is not shown: run the helper by hand to see it)"
        )));
    }
    if token.is_empty() {
        return Err(fail("it printed no token".into()));
    }
    header(&format!("Bearer {token}"), "the helper's token")
        .map_err(|_| fail("its token contains characters not allowed in an HTTP header".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    /// A token is renewed early enough to outlive the longest wait for a
    /// slot the policy allows (`max_wait_s`): Castor's five-hour token with
    /// the shipped 15-minute wait is renewed 15 minutes before its end, not
    /// 5, so a request that waited out a spent 10-minute window still goes
    /// with a live token. Never earlier than half the lifetime (a short
    /// token would otherwise be renewed before every request).
    #[test]
    fn a_token_is_renewed_before_the_longest_wait_could_outlive_it() {
        assert_eq!(renewal_margin(300 * MIN, 15 * MIN), 15 * MIN);
        assert_eq!(renewal_margin(300 * MIN, MIN), 5 * MIN);
        assert_eq!(renewal_margin(10 * MIN, 15 * MIN), 5 * MIN);
        assert_eq!(
            renewal_margin(Duration::from_secs(1), 15 * MIN),
            Duration::from_millis(500)
        );
    }
}

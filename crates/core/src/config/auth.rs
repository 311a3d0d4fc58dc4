//! The `auth` block and `dialect` of a vendor policy: how the tool proves
//! who it is, and how the vendor says something went wrong.
//!
//! Strict like the rest of the file: each scheme names the keys it needs,
//! and a key the chosen scheme does not read is an error, so a reviewer
//! never wonders which of two credentials a run used.

use super::check::{env_name, string, Fields, Report};
use super::policy::{Auth, Dialect, EnvVarName, PayloadFormat};
use super::yaml::Node;

const SCHEMES: &str = "bearer, basic, vault_session, command, oauth2_client_credentials, redcap_token";

/// The schemes that read the top-level `token_env` and nothing in `auth`.
const TOKEN_SCHEMES: [&str; 2] = ["bearer", "redcap_token"];

/// Every key any scheme reads (the first is the selector itself).
const AUTH_KEYS: [&str; 10] = [
    "scheme",
    "username_env",
    "password_env",
    "login_path",
    "vault_dns",
    "command",
    "pass_env",
    "client_id_env",
    "client_secret_env",
    "token_path",
];

/// Where an OAuth2 token endpoint is when the policy does not say: Castor's
/// (`POST {base}/oauth/token`, castoredc_api `CastorClient.auth_url`).
const DEFAULT_TOKEN_PATH: &str = "/oauth/token";

/// The keys each scheme reads inside `auth`, besides `scheme`.
fn keys_of(scheme: &str) -> &'static [&'static str] {
    match scheme {
        "basic" => &["username_env", "password_env"],
        "vault_session" => &["username_env", "password_env", "login_path", "vault_dns"],
        "command" => &["command", "pass_env"],
        "oauth2_client_credentials" => &["client_id_env", "client_secret_env", "token_path"],
        _ => &[],
    }
}

/// Validates `auth` (absent means the user's original schema: a bearer
/// token from the top-level `token_env`).
pub(super) fn auth(
    report: &mut Report,
    path: Vec<String>,
    node: Option<(Vec<String>, &Node)>,
    token_env: (Vec<String>, Option<(Vec<String>, &Node)>),
) -> Option<Auth> {
    let (token_path, token_env) = token_env;
    let scheme_and_fields = match node {
        None => None,
        Some((_, node)) => {
            let mut f = Fields::of(report, path.clone(), node)?;
            let scheme = f.required(report, "scheme").and_then(|(p, n)| {
                let s = string(report, &p, n)?;
                if keys_of(s).is_empty() && !TOKEN_SCHEMES.contains(&s) {
                    report.add(&p, format!("must be one of {SCHEMES}; got {s:?}"));
                    return None;
                }
                Some(s.to_string())
            });
            let Some(scheme) = scheme else {
                f.finish(report, &AUTH_KEYS);
                return None;
            };
            Some((scheme, f))
        }
    };
    let Some((scheme, mut f)) = scheme_and_fields else {
        // No auth block: bearer, and token_env is required as the user wrote it.
        return match token_env {
            Some((p, n)) => env_name(report, &p, n).map(|token_env| Auth::Bearer { token_env }),
            None => {
                report.add(
                    &token_path,
                    "required key is missing (the default auth scheme, bearer, reads the token from it)",
                );
                None
            }
        };
    };
    let uses = keys_of(&scheme);
    for key in AUTH_KEYS[1..].iter().filter(|k| !uses.contains(k)) {
        if f.optional(key).is_some() {
            report.add(
                &f.child(key),
                format!("not used by auth.scheme {scheme} (it reads: {})", reads(&scheme)),
            );
        }
    }
    let auth = match scheme.as_str() {
        scheme @ ("bearer" | "redcap_token") => match token_env {
            Some((p, n)) => env_name(report, &p, n).map(|token_env| match scheme {
                "bearer" => Auth::Bearer { token_env },
                _ => Auth::RedcapToken { token_env },
            }),
            None => {
                report.add(
                    &token_path,
                    format!("required key is missing (auth.scheme {scheme} reads the token from it)"),
                );
                None
            }
        },
        other => {
            if token_env.is_some() {
                report.add(
                    &token_path,
                    format!(
                        "not used by auth.scheme {other} (it reads: {}); remove it",
                        reads(other)
                    ),
                );
            }
            // Every required key is looked at (and reported) before any is
            // found missing, and `finish` below always runs: no early return.
            let mut env = |key: &str| f.required(report, key).and_then(|(p, n)| env_name(report, &p, n));
            match other {
                "basic" => {
                    let (username_env, password_env) = (env("username_env"), env("password_env"));
                    username_env
                        .zip(password_env)
                        .map(|(username_env, password_env)| Auth::Basic {
                            username_env,
                            password_env,
                        })
                }
                "vault_session" => {
                    let (username_env, password_env) = (env("username_env"), env("password_env"));
                    let login_path = f
                        .required(report, "login_path")
                        .and_then(|(p, n)| login_path(report, &p, n));
                    let vault_dns = match f.optional("vault_dns") {
                        Some((p, n)) => vault_dns(report, &p, n).map(Some),
                        None => Some(None),
                    };
                    match (username_env, password_env, login_path, vault_dns) {
                        (Some(username_env), Some(password_env), Some(login_path), Some(vault_dns)) => {
                            Some(Auth::VaultSession {
                                username_env,
                                password_env,
                                login_path,
                                vault_dns,
                            })
                        }
                        _ => None,
                    }
                }
                "oauth2_client_credentials" => {
                    let (client_id_env, client_secret_env) = (env("client_id_env"), env("client_secret_env"));
                    let token_path = match f.optional("token_path") {
                        Some((p, n)) => login_path(report, &p, n),
                        None => Some(DEFAULT_TOKEN_PATH.to_string()),
                    };
                    match (client_id_env, client_secret_env, token_path) {
                        (Some(client_id_env), Some(client_secret_env), Some(token_path)) => {
                            Some(Auth::OAuth2ClientCredentials {
                                client_id_env,
                                client_secret_env,
                                token_path,
                            })
                        }
                        _ => None,
                    }
                }
                _ => {
                    let command = f
                        .required(report, "command")
                        .and_then(|(p, n)| command(report, &p, n));
                    let pass_env = match f.optional("pass_env") {
                        Some((p, n)) => env_names(report, &p, n),
                        None => Some(Vec::new()),
                    };
                    Some(Auth::Command {
                        command: command?,
                        pass_env: pass_env?,
                    })
                }
            }
        }
    };
    f.finish(report, &AUTH_KEYS);
    auth
}

/// What a scheme reads, for messages.
fn reads(scheme: &str) -> String {
    match scheme {
        "bearer" | "redcap_token" => "token_env".into(),
        other => keys_of(other)
            .iter()
            .map(|k| format!("auth.{k}"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The vault's DNS name (`myvault.veevavault.com`): what the login asks
/// for and what the vault Vault answers with must be. A host name only:
/// letters, digits, '-' and '.', at most 253 characters.
fn vault_dns(report: &mut Report, path: &[String], node: &Node) -> Option<String> {
    let s = string(report, path, node)?;
    let labels_ok = s
        .split('.')
        .all(|l| !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if s.len() > 253 || !labels_ok {
        report.add(
            path,
            format!(
                "must be a host name such as myvault.veevavault.com (no scheme, port or path), got {s:?}"
            ),
        );
        return None;
    }
    Some(s.to_ascii_lowercase())
}

/// A path on the data origin: the login form (or the client secret) must
/// never go anywhere else.
fn login_path(report: &mut Report, path: &[String], node: &Node) -> Option<String> {
    let s = string(report, path, node)?;
    let problem = if !s.starts_with('/') {
        Some("must start with '/' (a path on the base URL's origin)")
    } else if s.starts_with("//") {
        Some("must not start with '//' (that names another host)")
    } else if s.contains(['?', '#', '\\']) || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("must be a plain path: no query, fragment, backslash or whitespace")
    } else if s.split('/').any(|seg| seg == "..") {
        Some("must not contain '..'")
    } else {
        None
    };
    match problem {
        Some(p) => {
            report.add(path, format!("{p}, got {s:?}"));
            None
        }
        None => Some(s.to_string()),
    }
}

/// `[PROGRAM, ARGS...]`: at least the program, every item a string.
fn command(report: &mut Report, path: &[String], node: &Node) -> Option<Vec<String>> {
    let Node::Seq(items) = node else {
        report.add(
            path,
            format!("must be a list [PROGRAM, ARGS...], got {}", node.kind()),
        );
        return None;
    };
    if items.is_empty() {
        report.add(path, "must name at least the program to run");
        return None;
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let mut p = path.to_vec();
        p.push(i.to_string());
        match item {
            Node::Str(s) if i > 0 || !s.trim().is_empty() => out.push(s.clone()),
            Node::Str(_) => report.add(&p, "the program must not be empty"),
            other => report.add(&p, format!("must be a string, got {}", other.kind())),
        }
    }
    (out.len() == items.len()).then_some(out)
}

/// A list of environment variable names (`pass_env`).
fn env_names(report: &mut Report, path: &[String], node: &Node) -> Option<Vec<EnvVarName>> {
    let Node::Seq(items) = node else {
        report.add(
            path,
            format!("must be a list of variable names, got {}", node.kind()),
        );
        return None;
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let mut p = path.to_vec();
        p.push(i.to_string());
        match item {
            Node::Str(s) => match EnvVarName::parse(s) {
                Ok(name) => out.push(name),
                Err(e) => report.add(&p, e),
            },
            other => report.add(&p, format!("must be a string, got {}", other.kind())),
        }
    }
    (out.len() == items.len()).then_some(out)
}

/// Validates `dialect` (default generic) against the payload format it
/// can read: Vault speaks JSON, Rave speaks ODM.
pub(super) fn dialect(
    report: &mut Report,
    node: Option<(Vec<String>, &Node)>,
    format: Option<PayloadFormat>,
) -> Option<Dialect> {
    let Some((path, node)) = node else {
        return Some(Dialect::Generic);
    };
    let dialect = match string(report, &path, node)? {
        "generic" => Dialect::Generic,
        "vault" => Dialect::Vault,
        "rave" => Dialect::Rave,
        "castor" => Dialect::Castor,
        "redcap" => Dialect::Redcap,
        other => {
            report.add(
                &path,
                format!("must be one of generic, vault, rave, castor, redcap; got {other:?}"),
            );
            return None;
        }
    };
    let needs = match dialect {
        Dialect::Vault | Dialect::Castor | Dialect::Redcap => Some((PayloadFormat::Json, "json")),
        Dialect::Rave => Some((PayloadFormat::Odm, "odm")),
        Dialect::Generic => None,
    };
    if let (Some((wanted, name)), Some(format)) = (needs, format) {
        if format != wanted {
            report.add(&path, format!("this dialect reads delta.format: {name} only"));
            return None;
        }
    }
    Some(dialect)
}

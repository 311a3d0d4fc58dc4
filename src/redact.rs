//! Keeps secrets out of everything the tool writes.
//!
//! Tokens never reach the command line (they come from `*_env` variables),
//! but a Redis URL may carry a password, and an operator may paste anything.
//!
//! Every secret value a run reads or obtains (token, password, the Basic
//! pair, a Vault session id, a credential helper's output) is registered
//! here the moment it is known; [`scrub`] replaces each occurrence with
//! `***`. The identifier masker runs every audit line and every stderr line
//! through it, so a secret echoed back by a vendor is removed too.

use std::borrow::Cow;
use std::sync::RwLock;

/// Values shorter than this are not scrubbed: replacing every `ab` in every
/// line would destroy the audit trail while protecting nothing of value.
const MIN_SECRET_LEN: usize = 4;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Makes `secret` one of the values [`scrub`] removes.
pub fn register_secret(secret: &str) {
    if secret.len() < MIN_SECRET_LEN {
        return;
    }
    let mut all = SECRETS.write().unwrap_or_else(|p| p.into_inner());
    if !all.iter().any(|s| s == secret) {
        all.push(secret.to_string());
        // Longest first, so a secret that contains another goes whole.
        all.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

/// Whether `text` holds any registered secret.
pub fn contains_secret(text: &str) -> bool {
    let all = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    all.iter().any(|s| text.contains(s.as_str()))
}

/// `text` with every registered secret replaced by `***`.
pub fn scrub(text: &str) -> Cow<'_, str> {
    let all = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    if !all.iter().any(|s| text.contains(s.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for s in all.iter() {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "***");
        }
    }
    Cow::Owned(out)
}

/// Redacts the password of any `scheme://user:password@host` in `arg`,
/// whether the argument is the URL itself or `--flag=URL`.
pub fn redact_arg(arg: &str) -> String {
    let Some(scheme_end) = arg.find("://") else {
        return arg.to_string();
    };
    let rest = &arg[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return arg.to_string();
    };
    let userinfo = &rest[..at];
    let user = userinfo.split(':').next().unwrap_or("");
    let redacted_user = if userinfo.contains(':') {
        format!("{user}:***")
    } else {
        "***".to_string()
    };
    format!("{}{}{}", &arg[..scheme_end + 3], redacted_user, &rest[at..])
}

/// The process arguments with credentials in URLs redacted.
pub fn redact_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    args.into_iter().map(|a| redact_arg(&a)).collect()
}

#[cfg(test)]
mod tests {
    use super::{redact_arg, register_secret, scrub};

    #[test]
    fn registered_secrets_are_scrubbed_wherever_they_appear() {
        register_secret("s3cr3t-session-42");
        register_secret("ab");
        assert_eq!(
            scrub("vendor said: session s3cr3t-session-42 expired; ab"),
            "vendor said: session *** expired; ab"
        );
        assert_eq!(scrub("nothing here"), "nothing here");
    }

    #[test]
    fn passwords_in_urls_are_redacted() {
        assert_eq!(
            redact_arg("redis://:hunter2@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        assert_eq!(redact_arg("--redis=redis://u:p@h"), "--redis=redis://u:***@h");
        assert_eq!(redact_arg("https://token@host/x"), "https://***@host/x");
        assert_eq!(redact_arg("https://host/a@b"), "https://host/a@b");
        assert_eq!(redact_arg("--study"), "--study");
    }
}

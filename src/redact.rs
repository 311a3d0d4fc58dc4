//! Keeps secrets out of everything the tool writes.
//!
//! Tokens never reach the command line (they come from `*_env` variables),
//! but a Redis URL may carry a password, and an operator may paste anything.

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
    use super::redact_arg;

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

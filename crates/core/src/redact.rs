//! Keeps secrets out of everything the tool writes.
//!
//! Tokens never reach the command line (they come from `*_env` variables),
//! but a Redis URL may carry a password, and an operator may paste anything.
//!
//! Every secret value a run reads or obtains (token, password, the Basic
//! pair, a Vault session id, a credential helper's output) is registered
//! here the moment it is known; `scrub` replaces each occurrence with
//! `***`. The identifier masker runs every audit line and every stderr line
//! through it, so a secret echoed back by a vendor is removed too.

use std::borrow::Cow;
use std::sync::RwLock;

/// Secrets at least this long are scrubbed wherever they appear. A shorter
/// one (a 3-character session id, a 2-character password) is scrubbed where
/// it stands alone, not inside a longer word or number: replacing every
/// `ab` of every line would destroy the text while protecting nothing a
/// vendor echoes (an echo stands between spaces, quotes or `=` and `;`).
const MIN_ANYWHERE_LEN: usize = 4;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Makes `secret` one of the values [`scrub`] removes, whatever its length.
pub(crate) fn register_secret(secret: &str) {
    if secret.is_empty() {
        return;
    }
    let mut all = SECRETS.write().unwrap_or_else(|p| p.into_inner());
    if !all.iter().any(|s| s == secret) {
        all.push(secret.to_string());
        // Longest first, so a secret that contains another goes whole.
        all.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

/// Whether `text` holds a registered secret of at least
/// [`MIN_ANYWHERE_LEN`] bytes: the check on a vendor's next link, where a
/// short secret would refuse any URL that happens to hold its letters.
pub(crate) fn contains_secret(text: &str) -> bool {
    let all = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    all.iter()
        .any(|s| s.len() >= MIN_ANYWHERE_LEN && text.contains(s.as_str()))
}

/// `text` with every registered secret replaced by `***` (a short one
/// where it stands alone). Free text only: structured values (hashes,
/// paths, cursors, ids) are never passed here (see `mask::Masker::json`).
pub(crate) fn scrub(text: &str) -> Cow<'_, str> {
    let all = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    if !all.iter().any(|s| text.contains(s.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for s in all.iter() {
        if !out.contains(s.as_str()) {
            continue;
        }
        out = if s.len() >= MIN_ANYWHERE_LEN {
            out.replace(s.as_str(), "***")
        } else {
            replace_standing_alone(&out, s)
        };
    }
    if out == text {
        return Cow::Borrowed(text);
    }
    Cow::Owned(out)
}

/// `text` with each occurrence of `word` that has no letter or digit on
/// either side replaced by `***`.
fn replace_standing_alone(text: &str, word: &str) -> String {
    let alnum = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut before: Option<char> = None;
    while let Some(at) = rest.find(word) {
        let prev = rest[..at].chars().next_back().or(before);
        let next = rest[at + word.len()..].chars().next();
        out.push_str(&rest[..at]);
        if alnum(prev) || alnum(next) {
            out.push_str(word);
        } else {
            out.push_str("***");
        }
        before = word.chars().next_back();
        rest = &rest[at + word.len()..];
    }
    out.push_str(rest);
    out
}

/// Redacts the userinfo of any `scheme://user:password@host` in `arg`,
/// whether the argument is the URL itself or `--flag=URL`: everything from
/// `://` to the last `@` (see `without_userinfo`), user name included,
/// since a token is often passed as the user.
pub fn redact_arg(arg: &str) -> String {
    without_userinfo(arg)
}

/// `text` with everything between `://` and the last `@` replaced by
/// `***`: for a URL that may not even parse (a secret with `/`, `\` or a
/// control character in it breaks the parser before it finds the
/// userinfo), so the whole userinfo goes, whatever its bytes.
pub(crate) fn without_userinfo(text: &str) -> String {
    match (text.find("://"), text.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}***{}", &text[..scheme_end + 3], &text[at..])
        }
        _ => text.to_string(),
    }
}

/// The process arguments with credentials in URLs redacted.
pub(crate) fn redact_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    args.into_iter().map(|a| redact_arg(&a)).collect()
}

#[cfg(test)]
mod tests {
    use super::{redact_arg, register_secret, scrub};

    #[test]
    fn registered_secrets_are_scrubbed_wherever_they_appear() {
        register_secret("s3cr3t-session-42");
        assert_eq!(
            scrub("vendor said: session s3cr3t-session-42 expired; x"),
            "vendor said: session *** expired; x"
        );
        assert_eq!(scrub("nothing here"), "nothing here");
    }

    #[test]
    fn a_short_secret_is_scrubbed_where_it_stands_alone() {
        register_secret("Zq7");
        assert_eq!(scrub("session Zq7 expired"), "session *** expired");
        assert_eq!(scrub("id=Zq7;"), "id=***;");
        assert_eq!(scrub("xZq7y"), "xZq7y", "part of a longer word");
    }

    #[test]
    fn passwords_in_urls_are_redacted() {
        assert_eq!(
            redact_arg("redis://:hunter2@127.0.0.1:6379/0"),
            "redis://***@127.0.0.1:6379/0"
        );
        assert_eq!(redact_arg("--redis=redis://u:p@h"), "--redis=redis://***@h");
        assert_eq!(redact_arg("https://token@host/x"), "https://***@host/x");
        assert_eq!(
            redact_arg("redis://:a/b?c@h:1/"),
            "redis://***@h:1/",
            "a password with / and ?"
        );
        assert_eq!(redact_arg("--study"), "--study");
    }

    #[test]
    fn userinfo_goes_whole_even_when_the_url_does_not_parse() {
        use super::without_userinfo;
        assert_eq!(without_userinfo("http://u:a/b\\c@h:1/x"), "http://***@h:1/x");
        assert_eq!(without_userinfo("http://h/x"), "http://h/x");
    }
}

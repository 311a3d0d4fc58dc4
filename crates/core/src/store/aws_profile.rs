//! AWS shared configuration files (`~/.aws/credentials`, `~/.aws/config`),
//! read as the AWS CLI and SDKs read them, for an `s3://` landing: the
//! object store client takes the environment only.
//!
//! Precedence is the SDKs': a value in the environment (`AWS_ACCESS_KEY_ID`,
//! `AWS_REGION`, `AWS_ENDPOINT_URL`, ...) wins; otherwise the profile named
//! by `AWS_PROFILE` (or `default`) gives it, the credentials file before the
//! config file. The files' places follow `AWS_SHARED_CREDENTIALS_FILE` and
//! `AWS_CONFIG_FILE`. A profile named in `AWS_PROFILE` that neither file
//! has is a configuration error; without files and without `AWS_PROFILE`,
//! nothing is read and the client goes on to its other sources (web
//! identity, the container or instance metadata).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a profile gives, for the keys the environment does not set.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Profile {
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    pub region: Option<String>,
    pub endpoint_url: Option<String>,
}

/// The profile `AWS_PROFILE` (or `default`) names, minus what `env` sets.
pub(super) fn load(env: &dyn Fn(&str) -> Option<String>) -> Result<Profile, String> {
    let home = env("HOME").map(PathBuf::from);
    let file = |var: &str, default: &str| {
        env(var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(default)))
    };
    let named = env("AWS_PROFILE");
    let name = named.clone().unwrap_or_else(|| "default".into());
    let mut found = false;
    let mut values = BTreeMap::new();
    // The config file names a profile `[profile NAME]` (but `[default]`);
    // the credentials file `[NAME]`. The credentials file wins.
    for (path, section) in [
        (file("AWS_CONFIG_FILE", ".aws/config"), config_section(&name)),
        (
            file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials"),
            name.clone(),
        ),
    ] {
        let Some(path) = path else { continue };
        if let Some(found_values) = read_section(&path, &section)? {
            found = true;
            values.extend(found_values);
        }
    }
    if !found && named.is_some() {
        return Err(format!(
            "AWS_PROFILE={name}: no such profile in the AWS config or credentials file ({} or {})",
            file("AWS_CONFIG_FILE", ".aws/config")
                .map_or("~/.aws/config".into(), |p| p.display().to_string()),
            file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials")
                .map_or("~/.aws/credentials".into(), |p| p.display().to_string()),
        ));
    }
    let take = |key: &str, var: &str| match env(var) {
        Some(_) => None,
        None => values.get(key).cloned(),
    };
    // Keys travel together: a key id from the environment is never paired
    // with a secret from a file.
    let keys_in_env = env("AWS_ACCESS_KEY_ID").is_some();
    Ok(Profile {
        access_key_id: (!keys_in_env)
            .then(|| values.get("aws_access_key_id").cloned())
            .flatten(),
        secret_access_key: (!keys_in_env)
            .then(|| values.get("aws_secret_access_key").cloned())
            .flatten(),
        session_token: (!keys_in_env)
            .then(|| values.get("aws_session_token").cloned())
            .flatten(),
        region: take("region", "AWS_REGION").filter(|_| env("AWS_DEFAULT_REGION").is_none()),
        endpoint_url: take("endpoint_url", "AWS_ENDPOINT_URL").filter(|_| env("AWS_ENDPOINT").is_none()),
    })
}

fn config_section(name: &str) -> String {
    match name {
        "default" => "default".into(),
        other => format!("profile {other}"),
    }
}

/// The `key = value` lines of `[section]` in the INI file at `path`;
/// `None` when the file or the section is not there.
fn read_section(path: &Path, section: &str) -> Result<Option<BTreeMap<String, String>>, String> {
    let text = match crate::no_follow::operator_input(path).map(|b| String::from_utf8_lossy(&b).into_owned())
    {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: cannot read it: {e}", path.display())),
    };
    let mut inside = false;
    let mut seen = false;
    let mut values = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = header.trim() == section;
            seen |= inside;
            continue;
        }
        if inside {
            if let Some((key, value)) = line.split_once('=') {
                values.insert(key.trim().to_ascii_lowercase(), value.trim().to_string());
            }
        }
    }
    Ok(seen.then_some(values))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of<'a>(pairs: &'a [(&'a str, String)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn a_profile_gives_what_the_environment_does_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".aws")).unwrap();
        std::fs::write(
            dir.path().join(".aws/credentials"),
            "[default]\naws_access_key_id = AKDEFAULT\naws_secret_access_key = d\n\n[edc]\naws_access_key_id=AKEDC\naws_secret_access_key = s3cr3t\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join(".aws/config"),
            "[profile edc]\nregion = eu-central-1\nendpoint_url = http://127.0.0.1:3900\n[default]\nregion=us-east-1\n",
        )
        .unwrap();
        let home = dir.path().display().to_string();
        let env = [("HOME", home.clone()), ("AWS_PROFILE", "edc".to_string())];
        let p = load(&env_of(&env)).unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKEDC"));
        assert_eq!(p.secret_access_key.as_deref(), Some("s3cr3t"));
        assert_eq!(p.region.as_deref(), Some("eu-central-1"));
        assert_eq!(p.endpoint_url.as_deref(), Some("http://127.0.0.1:3900"));

        let env = [("HOME", home.clone()), ("AWS_REGION", "ap-south-1".to_string())];
        let p = load(&env_of(&env)).unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKDEFAULT"));
        assert_eq!(p.region, None, "the environment's region wins");

        let env = [("HOME", home.clone()), ("AWS_ACCESS_KEY_ID", "AKENV".to_string())];
        let p = load(&env_of(&env)).unwrap();
        assert_eq!(
            (p.access_key_id, p.secret_access_key),
            (None, None),
            "keys travel together"
        );

        let env = [("HOME", home), ("AWS_PROFILE", "nope".to_string())];
        let err = load(&env_of(&env)).unwrap_err();
        assert!(err.starts_with("AWS_PROFILE=nope: no such profile"), "{err}");
    }

    #[test]
    fn without_files_or_a_named_profile_nothing_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let env = [("HOME", dir.path().display().to_string())];
        assert_eq!(load(&env_of(&env)).unwrap(), Profile::default());
    }
}

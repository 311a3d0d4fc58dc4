//! A policy's provenance carried to where it runs without its repository
//! (a container whose policy comes from a Kubernetes ConfigMap or is baked
//! into the image: no `.git`).
//!
//! `edc-sync config stamp`, run in the policy repository at release time,
//! writes `<policy>.stamp.json` beside the policy: the commit, the file's
//! path and blob id at that commit, the bytes' SHA-256 and the repository's
//! remote (without credentials). A run that finds no repository around the
//! policy reads the stamp and accepts the policy only when the bytes it
//! loaded hash to the stamped blob id (a git blob id is computed from the
//! bytes alone) and SHA-256; the run's header then says the provenance
//! came from the stamp. A policy changed by one byte is refused as a
//! modified file in a repository is.
//!
//! The stamp proves the bytes are the reviewed ones only as far as the
//! stamp itself is trusted: anyone who can write the policy can write a
//! stamp naming its new blob at the released commit. So when an audit key
//! is configured, `config stamp` MACs the stamp with it (`mac`), and a run
//! holding the key refuses (78) a stamp whose MAC is missing or does not
//! verify; a run without the key records `config_stamp_verified: false`.
//! Either way `edc-sync config check-stamp` proves later, against the
//! repository, that each recorded commit holds the recorded blob.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The stamp's format version.
const FORMAT: u32 = 1;

/// What `config stamp` writes beside the policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stamp {
    pub format: u32,
    /// The policy's path in its repository.
    pub path: String,
    /// The commit the policy was stamped at (the repository's `HEAD`).
    pub commit: String,
    /// The policy's git blob id at that commit.
    pub blob: String,
    /// Lowercase hex SHA-256 of the policy's bytes.
    pub sha256: String,
    /// The repository's `origin` remote, without any credentials in it.
    pub remote: Option<String>,
    /// With an audit key at `config stamp`: the HMAC-SHA256 of
    /// [`Stamp::signed_content`] with it, lowercase hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// Where the stamp of the policy at `policy` is kept.
pub fn path_for(policy: &Path) -> PathBuf {
    let mut name = policy.file_name().unwrap_or_default().to_os_string();
    name.push(".stamp.json");
    policy.with_file_name(name)
}

impl Stamp {
    /// The stamp of a policy at `repo_path` in its repository, committed
    /// there at `commit` as `blob`, whose bytes hash to `sha256`; `policy`
    /// is where it is on disk (its repository's remote is read from there).
    pub(crate) fn new(
        policy: &Path,
        repo_path: String,
        commit: String,
        blob: String,
        sha256: String,
    ) -> Stamp {
        Stamp {
            format: FORMAT,
            path: repo_path,
            commit,
            blob,
            sha256,
            remote: remote_of(policy),
            mac: None,
        }
    }

    /// What the stamp's MAC covers: every field but the MAC, one a line.
    pub fn signed_content(&self) -> String {
        format!(
            "{}\n{}\n{}\n{}\n{}\n{}",
            self.format,
            self.path,
            self.commit,
            self.blob,
            self.sha256,
            self.remote.as_deref().unwrap_or("")
        )
    }

    /// The stamp with its MAC, as `mac_of` (the audit key's
    /// `stamp_mac`) makes it of [`Stamp::signed_content`].
    pub fn sealed(mut self, mac_of: impl FnOnce(&str) -> String) -> Stamp {
        self.mac = Some(mac_of(&self.signed_content()));
        self
    }

    /// Whether the stamp carries a MAC that `verifies` (the audit key's
    /// `stamp_verifies`) accepts for its content.
    pub fn verifies(&self, verifies: impl FnOnce(&str, &str) -> bool) -> bool {
        self.mac
            .as_deref()
            .is_some_and(|mac| verifies(&self.signed_content(), mac))
    }

    /// The stamp beside `policy`: `Ok(None)` when there is none, `Err`
    /// naming the file when it is not a stamp this version reads.
    pub(crate) fn read(policy: &Path) -> Result<Option<Stamp>, String> {
        let path = path_for(policy);
        // A ConfigMap's files are links into its `..data` directory: the
        // stamp is an operator's input, as the policy is.
        let bytes = match crate::no_follow::operator_input(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read the stamp {}: {e}", path.display())),
        };
        let stamp: Stamp = serde_json::from_slice(&bytes)
            .map_err(|e| format!("the stamp {} is not a policy stamp: {e}", path.display()))?;
        if stamp.format != FORMAT {
            return Err(format!(
                "the stamp {} has format {}; this version reads format {FORMAT}",
                path.display(),
                stamp.format
            ));
        }
        Ok(Some(stamp))
    }
}

/// The `origin` remote of the repository holding `policy`, with any user
/// name and password removed (everything from `://` to the last `@`, as
/// every URL the product shows: a password holding `/` or `@` goes too).
fn remote_of(policy: &Path) -> Option<String> {
    let repo = git2::Repository::discover(policy.parent()?).ok()?;
    let remote = repo.find_remote("origin").ok()?;
    remote.url().ok().map(crate::redact::without_userinfo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_taken_out_of_a_remote() {
        let remote = |url: &str| crate::redact::without_userinfo(url);
        assert_eq!(
            remote("https://u:secret@git.example/p.git"),
            "https://***@git.example/p.git"
        );
        assert_eq!(
            remote("https://u:se/cr@et@git.example/p.git"),
            "https://***@git.example/p.git"
        );
        assert_eq!(remote("git@git.example:p.git"), "git@git.example:p.git");
    }

    #[test]
    fn the_stamp_sits_beside_the_policy() {
        assert_eq!(
            path_for(Path::new("/etc/edc/rate_limits.yaml")),
            Path::new("/etc/edc/rate_limits.yaml.stamp.json")
        );
    }
}

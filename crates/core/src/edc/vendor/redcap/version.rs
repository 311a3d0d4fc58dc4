//! REDCap's version, as `content=version` answers it (REDCap's API help,
//! "Export REDCap Version": plain text such as `14.0.1`; PyCap
//! `Project.export_version`, redcapAPI `exportVersion`), and what each
//! export needs of it: Export Logging exists from 10.8.0 on (REDCap's API
//! help, "Export Logging"; redcapAPI `exportLogging` checks the same).

use super::export::Content;

/// A REDCap version, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Version(u32, u32, u32);

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// The first version with Export Logging (`content=log`).
const LOGGING_SINCE: Version = Version(10, 8, 0);

impl Version {
    /// The version in a `content=version` answer, or why it is none (the
    /// answer's first 40 characters, scrubbed, are named).
    pub(crate) fn parse(body: &[u8]) -> Result<Version, String> {
        let text = String::from_utf8_lossy(body);
        let trimmed = text.trim();
        let parts: Vec<Option<u32>> = trimmed.split('.').map(|p| p.parse().ok()).collect();
        match parts.as_slice() {
            [Some(a), Some(b), Some(c)] => Ok(Version(*a, *b, *c)),
            _ => Err(format!(
                "the answer to content=version is not a REDCap version such as 14.0.1: {:?}",
                crate::redact::scrub(&trimmed.chars().take(40).collect::<String>())
            )),
        }
    }

    /// Why this server cannot serve `content`, if it cannot.
    pub(crate) fn lacks(self, content: Content) -> Option<String> {
        (content == Content::Log && self < LOGGING_SINCE).then(|| {
            format!(
                "REDCap {self} has no Export Logging (content=log needs REDCap {LOGGING_SINCE} or later): upgrade \
                 the server, or remove the log stream from the policy"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logging_needs_10_8_0() {
        let old = Version::parse(b"10.7.9\n").unwrap();
        assert_eq!(
            old.lacks(Content::Log).unwrap(),
            "REDCap 10.7.9 has no Export Logging (content=log needs REDCap 10.8.0 or later): upgrade the server, \
             or remove the log stream from the policy"
        );
        assert_eq!(old.lacks(Content::Record), None);
        assert_eq!(Version::parse(b"10.8.0").unwrap().lacks(Content::Log), None);
        assert_eq!(Version::parse(b"14.0.12").unwrap().lacks(Content::Log), None);
        assert!(Version::parse(b"<html>login</html>")
            .unwrap_err()
            .contains("not a REDCap version"));
        assert!(Version::parse(b"14.0").is_err());
    }
}

//! Where pages land: `--out` parsed once, beside `--state`, into a closed
//! type. A run, `verify` and every step after them match on it; none reads
//! the text of `--out` again to guess what it names.

use std::path::{Path, PathBuf};

use crate::config::ConfigError;

/// The object stores `--out` lands in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectScheme {
    /// `s3://bucket/prefix` (and S3-compatible servers).
    S3,
    /// `gs://bucket/prefix`.
    Gcs,
    /// `az://container/prefix`.
    Azure,
}

impl ObjectScheme {
    fn of(scheme: &str) -> Option<ObjectScheme> {
        match scheme {
            "s3" => Some(ObjectScheme::S3),
            "gs" => Some(ObjectScheme::Gcs),
            "az" => Some(ObjectScheme::Azure),
            _ => None,
        }
    }
}

/// A bucket (and prefix) pages land in: a URL of a scheme edc-sync lands
/// in, as given (credentials, if any, are never shown: [`Self::shown`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketUrl {
    url: String,
    scheme: ObjectScheme,
}

impl BucketUrl {
    /// The URL as given, to open the store with.
    pub fn as_str(&self) -> &str {
        &self.url
    }

    pub fn scheme(&self) -> ObjectScheme {
        self.scheme
    }
}

/// Where a run lands its pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LandingLocation {
    /// A local directory.
    Dir(PathBuf),
    /// A bucket of an object store; the state keeps the landing's index.
    Bucket(BucketUrl),
}

impl From<PathBuf> for LandingLocation {
    /// A landing directory.
    fn from(dir: PathBuf) -> LandingLocation {
        LandingLocation::Dir(dir)
    }
}

impl From<&Path> for LandingLocation {
    /// A landing directory.
    fn from(dir: &Path) -> LandingLocation {
        LandingLocation::Dir(dir.to_path_buf())
    }
}

impl LandingLocation {
    /// `text`, given as `flag`: `s3://`, `gs://` or `az://` is a bucket;
    /// any other URL is refused (78, naming the flag, never its
    /// credentials); anything else is a directory.
    pub fn parse(flag: &str, text: &Path) -> Result<LandingLocation, ConfigError> {
        let shown = text.to_string_lossy();
        let Some(scheme) = crate::paths::url_scheme(&shown) else {
            return Ok(LandingLocation::Dir(text.to_path_buf()));
        };
        match ObjectScheme::of(scheme) {
            Some(scheme) => Ok(LandingLocation::Bucket(BucketUrl {
                url: shown.into_owned(),
                scheme,
            })),
            None => Err(ConfigError::Identity(format!(
                "{flag} {}: a {scheme}:// URL, which edc-sync does not land in: give a local path, \
                 s3://bucket/prefix, gs://bucket/prefix or az://container/prefix",
                crate::redact::redact_arg(&shown)
            ))),
        }
    }

    /// The landing directory, when pages land in files.
    pub fn dir(&self) -> Option<&Path> {
        match self {
            LandingLocation::Dir(dir) => Some(dir),
            LandingLocation::Bucket(_) => None,
        }
    }

    /// The bucket, when pages land in an object store.
    pub fn bucket(&self) -> Option<&BucketUrl> {
        match self {
            LandingLocation::Dir(_) => None,
            LandingLocation::Bucket(bucket) => Some(bucket),
        }
    }

    /// Whether pages land in S3 (where Object Lock is).
    pub fn is_s3(&self) -> bool {
        self.bucket().is_some_and(|b| b.scheme == ObjectScheme::S3)
    }

    /// The landing below this one at `rel` (`backfill/SINCE..UNTIL`): a
    /// directory's subdirectory, or the bucket's prefix extended.
    pub fn join(&self, rel: &str) -> LandingLocation {
        match self {
            LandingLocation::Dir(dir) => LandingLocation::Dir(dir.join(rel)),
            LandingLocation::Bucket(b) => LandingLocation::Bucket(BucketUrl {
                url: format!("{}/{rel}", b.url.trim_end_matches('/')),
                scheme: b.scheme,
            }),
        }
    }

    /// The landing for messages: the directory, or the URL without its
    /// credentials.
    pub fn shown(&self) -> String {
        match self {
            LandingLocation::Dir(dir) => dir.display().to_string(),
            LandingLocation::Bucket(b) => crate::redact::redact_arg(&b.url),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_is_a_directory_or_a_bucket_and_nothing_else() {
        let parse = |t: &str| LandingLocation::parse("--out", Path::new(t));
        assert_eq!(
            parse("/srv/edc/landing").unwrap().dir(),
            Some(Path::new("/srv/edc/landing"))
        );
        assert_eq!(parse("./a://b").unwrap().dir(), Some(Path::new("./a://b")));
        assert!(parse("s3://bucket/prefix").unwrap().is_s3());
        assert_eq!(
            parse("gs://b").unwrap().bucket().unwrap().scheme(),
            ObjectScheme::Gcs
        );
        assert_eq!(
            parse("az://c/p").unwrap().bucket().unwrap().scheme(),
            ObjectScheme::Azure
        );
        let refused = parse("postgres://u:secret@h/db").unwrap_err().to_string();
        assert!(
            refused.contains("--out") && !refused.contains("secret"),
            "{refused}"
        );
        assert_eq!(
            parse("s3://b/p/")
                .unwrap()
                .join("backfill/x")
                .bucket()
                .unwrap()
                .as_str(),
            "s3://b/p/backfill/x"
        );
    }
}

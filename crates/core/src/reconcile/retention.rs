//! What `verify` reports of an S3 landing's retention: each page's Object
//! Lock mode and retain-until date as S3 reports it now (HeadObject), so a
//! reviewer sees that the pages are still unchangeable and until when.

use std::fmt;

use crate::store::object::{ObjectError, ObjectLanding};
use crate::store::object_lock::Retention;

/// The retention of every page of a landing.
#[derive(Debug, Default)]
pub struct Retained {
    /// Each page with a retention: its name below the landing, and it.
    pub pages: Vec<(String, Retention)>,
    /// Pages S3 reports no retention for.
    pub unretained: Vec<String>,
}

impl Retained {
    /// Reads the retention of every page of `landing` (one HEAD a page).
    pub async fn of(landing: &ObjectLanding) -> Result<Retained, ObjectError> {
        let mut retained = Retained::default();
        for name in landing.list("").await? {
            if !name.contains("/pages/") {
                continue;
            }
            match landing.retention(&name).await? {
                Some(r) => retained.pages.push((name, r)),
                None => retained.unretained.push(name),
            }
        }
        Ok(retained)
    }

    /// One line a page with a retention, as `verify` prints them.
    pub fn lines(&self, url: &str) -> Vec<String> {
        self.pages
            .iter()
            .map(|(name, r)| format!("{url}/{name}: retained {} until {}", r.mode, r.retain_until))
            .collect()
    }
}

impl fmt::Display for Retained {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut modes: Vec<&str> = self.pages.iter().map(|(_, r)| r.mode.as_str()).collect();
        modes.sort();
        modes.dedup();
        let earliest = self.pages.iter().map(|(_, r)| r.retain_until.as_str()).min();
        match earliest {
            Some(earliest) => write!(
                f,
                "{} page(s) retained {}, the earliest until {earliest}",
                self.pages.len(),
                modes.join(" and ")
            )?,
            None => write!(f, "no page retained")?,
        }
        match self.unretained.len() {
            0 => Ok(()),
            n => write!(f, ", {n} page(s) without retention"),
        }
    }
}

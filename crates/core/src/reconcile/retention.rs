//! What `verify` reports of an S3 landing's retention: each page's Object
//! Lock mode and retain-until date as S3 reports it now (HeadObject), so a
//! reviewer sees that the pages are still unchangeable and until when.
//!
//! A bucket of a million pages is a million of those lines: they are
//! spooled to an unnamed temporary file as the listing is walked and
//! written out from it, and only the summary (modes, earliest date,
//! counts) is held.

use std::collections::BTreeSet;
use std::fmt;
use std::io::{BufRead, Seek, Write};

use super::{ObjectUnreadable, Unreadable};
use crate::store::object::ObjectLanding;

/// The retention of every page of a landing.
#[derive(Debug)]
pub struct Retained {
    /// How many pages carry a retention.
    pub retained: u64,
    /// How many pages S3 reports no retention for.
    pub unretained: u64,
    modes: BTreeSet<String>,
    earliest: Option<String>,
    /// `<name>: retained <mode> until <date>` a retained page, in listing
    /// order.
    spool: std::fs::File,
}

impl Retained {
    /// Reads the retention of every page of `landing` (one HEAD a page),
    /// walking its listing once.
    pub async fn of(landing: &ObjectLanding) -> Result<Retained, ObjectUnreadable> {
        use futures_util::StreamExt;
        let spooled = |error| Unreadable {
            path: std::env::temp_dir(),
            error,
        };
        let mut retained = Retained {
            retained: 0,
            unretained: 0,
            modes: BTreeSet::new(),
            earliest: None,
            spool: tempfile::tempfile().map_err(spooled)?,
        };
        let mut spool = std::io::BufWriter::new(&retained.spool);
        let mut names = std::pin::pin!(landing.names(""));
        while let Some(name) = names.next().await {
            let name = name?;
            if !name.contains("/pages/") {
                continue;
            }
            match landing.retention(&name).await? {
                Some(r) => {
                    // The line as verify prints it, less the URL: a key
                    // may hold a newline, written escaped.
                    let name = name.escape_debug();
                    writeln!(spool, "{name}: retained {} until {}", r.mode, r.retain_until)
                        .map_err(spooled)?;
                    retained.retained += 1;
                    if retained.earliest.as_ref().is_none_or(|e| r.retain_until < *e) {
                        retained.earliest = Some(r.retain_until.clone());
                    }
                    retained.modes.insert(r.mode);
                }
                None => retained.unretained += 1,
            }
        }
        spool.flush().map_err(spooled)?;
        drop(spool);
        Ok(retained)
    }

    /// Writes one line a page with a retention to `out`, as `verify`
    /// prints them (`url` the landing's, without a trailing slash).
    pub fn write_lines(&self, url: &str, out: &mut impl Write) -> std::io::Result<()> {
        let mut spool = &self.spool;
        spool.rewind()?;
        for line in std::io::BufReader::new(spool).lines() {
            writeln!(out, "{url}/{}", line?)?;
        }
        Ok(())
    }
}

impl fmt::Display for Retained {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.earliest {
            Some(earliest) => write!(
                f,
                "{} page(s) retained {}, the earliest until {earliest}",
                self.retained,
                self.modes
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(" and ")
            )?,
            None => write!(f, "no page retained")?,
        }
        match self.unretained {
            0 => Ok(()),
            n => write!(f, ", {n} page(s) without retention"),
        }
    }
}

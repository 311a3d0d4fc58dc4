//! The simulator's deterministic dataset and how its pages are rendered.
//!
//! Records are a pure function of (seed, record number): the same flags give
//! the same bytes on every machine, which is what lets a test say "every
//! record landed exactly once".

use bytes::Bytes;

/// The shape of the dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dataset {
    pub subjects: u32,
    pub records: u32,
    pub seed: u64,
    /// Extra bytes of filler per record, to make large pages.
    pub padding: usize,
}

/// First record's modification time: 2026-01-01T00:00:00Z; each record is
/// one second later, so the cursor field is strictly increasing.
const EPOCH_2026: u64 = 1_767_225_600;

const FORMS: [(&str, &str); 4] = [("VS", "SYSBP"), ("VS", "DIABP"), ("LB", "HGB"), ("AE", "AETERM")];

/// splitmix64: a seeded, portable generator for the simulated values.
fn mix(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One audit record of the dataset (numbered from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub n: u32,
    pub subject: u32,
    pub form: &'static str,
    pub field: &'static str,
    pub value: u32,
    /// Rave `SourceID`: rising, not contiguous.
    pub source_id: u64,
    /// Vault `modified_date__v`, RFC 3339 UTC.
    pub modified: String,
}

impl Dataset {
    pub fn record(&self, n: u32) -> Record {
        let r = mix(self.seed, u64::from(n));
        let (form, field) = FORMS[(r % FORMS.len() as u64) as usize];
        Record {
            n,
            subject: (n - 1) % self.subjects.max(1) + 1,
            form,
            field,
            value: (r >> 16) as u32 % 200,
            source_id: 1000 + u64::from(n) * 7,
            modified: humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(EPOCH_2026 + u64::from(n)),
            )
            .to_string(),
        }
    }

    /// Records with `modified` strictly after `since` (all when `None`).
    pub fn first_after_modified(&self, since: Option<&str>) -> u32 {
        match since {
            None => 1,
            // Binary search on the strictly increasing timestamps.
            Some(s) => {
                let (mut lo, mut hi) = (1u32, self.records + 1);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if self.record(mid).modified.as_str() > s {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                lo
            }
        }
    }

    /// The first record whose `source_id` is at least `start_id`.
    pub fn first_at_source_id(&self, start_id: u64) -> u32 {
        if start_id <= 1007 {
            return 1;
        }
        let n = (start_id - 1000).div_ceil(7);
        u32::try_from(n).unwrap_or(u32::MAX).min(self.records + 1)
    }

    fn padding(&self) -> String {
        "x".repeat(self.padding)
    }

    /// One Vault-style JSON record.
    pub fn json_record(&self, rec: &Record) -> String {
        let mut s = format!(
            r#"{{"id":"AT-{:07}","subject__v":"SUBJ-{:04}","site__v":"SITE-{:02}","form__v":"{}","field__v":"{}","value__v":"{}","modified_date__v":{}"#,
            rec.n,
            rec.subject,
            rec.subject % 10 + 1,
            rec.form,
            rec.field,
            rec.value,
            // Escaped as JSON, as a vendor sends it: a hostile value set by
            // a fault (quotes, control characters) stays valid JSON.
            serde_json::Value::String(rec.modified.clone())
        );
        if self.padding > 0 {
            s.push_str(&format!(r#","padding__c":"{}""#, self.padding()));
        }
        s.push('}');
        s
    }

    /// One Rave-style audit record inside its SubjectData.
    pub fn odm_record(&self, rec: &Record, study: &str, reason: Option<&str>) -> String {
        let _ = study;
        let reason = match reason {
            Some(text) => format!("<ReasonForChange>{text}</ReasonForChange>"),
            None => "<ReasonForChange/>".to_string(),
        };
        let mut s = format!(
            r#"<SubjectData SubjectKey="{:08x}" mdsol:SubjectKeyType="SubjectUUID" mdsol:SubjectName="SUBJ-{:04}" TransactionType="Upsert"><SiteRef LocationOID="SITE-{:02}"/><AuditRecord EditPoint="DataManagement" UsedImputationMethod="No" mdsol:AuditSubCategoryName="Entered"><UserRef UserOID="sim.user"/><LocationRef LocationOID="SITE-{:02}"/><DateTimeStamp>{}</DateTimeStamp>{reason}<SourceID>{}</SourceID></AuditRecord>"#,
            mix(self.seed, u64::from(rec.subject)) as u32,
            rec.subject,
            rec.subject % 10 + 1,
            rec.subject % 10 + 1,
            // Rave sends local time with no zone; so does the simulator.
            rec.modified.trim_end_matches('Z'),
            rec.source_id
        );
        if self.padding > 0 {
            s.push_str(&format!("<!-- {} -->", self.padding()));
        }
        s.push_str("</SubjectData>");
        s
    }
}

/// A page body as chunks, produced lazily so a 64 MiB page is never held
/// whole, with its exact length known up front (for Content-Length).
pub struct Page {
    pub len: u64,
    pub chunks: Box<dyn Iterator<Item = Bytes> + Send>,
}

impl Page {
    /// Builds a page from a chunk generator; `make` is called twice (once
    /// to measure, once to send), which keeps memory flat.
    pub fn from_fn<F, I>(make: F) -> Page
    where
        F: Fn() -> I + Send + 'static,
        I: Iterator<Item = Bytes> + Send + 'static,
    {
        let len = make().map(|c| c.len() as u64).sum();
        Page {
            len,
            chunks: Box::new(make()),
        }
    }

    pub fn whole(bytes: impl Into<Bytes>) -> Page {
        let bytes = bytes.into();
        Page {
            len: bytes.len() as u64,
            chunks: Box::new(std::iter::once(bytes)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ds() -> Dataset {
        Dataset {
            subjects: 5,
            records: 50,
            seed: 7,
            padding: 0,
        }
    }

    #[test]
    fn records_are_deterministic_and_rising() {
        let (a, b) = (ds(), ds());
        assert_eq!(a.record(17), b.record(17));
        assert!(a.record(2).modified > a.record(1).modified);
        assert!(a.record(2).source_id > a.record(1).source_id);
        assert_ne!(Dataset { seed: 8, ..ds() }.record(17).value, a.record(17).value);
    }

    #[test]
    fn window_searches_find_the_right_record() {
        let d = ds();
        assert_eq!(d.first_after_modified(None), 1);
        assert_eq!(d.first_after_modified(Some(&d.record(10).modified)), 11);
        assert_eq!(d.first_after_modified(Some(&d.record(50).modified)), 51);
        assert_eq!(d.first_at_source_id(1), 1);
        assert_eq!(d.first_at_source_id(d.record(10).source_id), 10);
        assert_eq!(d.first_at_source_id(d.record(10).source_id + 1), 11);
    }
}

//! What a REDCap export may say: its `content`, one of a closed set of
//! reads, and for each content the form fields REDCap's API help documents
//! for that export, an allow-list. Nothing else can be put in the form.
//!
//! Why an allow-list and not a check of `content` and `action` alone: the
//! one endpoint takes every method's fields, so a read content with `data`
//! and `overwriteBehavior` added has the shape of Import Records; and PHP,
//! which parses the form, rewrites field names (a leading space dropped, a
//! space or `.` made `_`), so `" action"` reaches REDCap as `action`. A
//! name is therefore taken only when it is exactly
//! `[A-Za-z_][A-Za-z0-9_]*`, with one `[index]` on a field that is an
//! array, which PHP reads as written.
//!
//! Sources, one per content (REDCap's API help, "Export ..." methods; the
//! same parameters PyCap, REDCapR and redcapAPI send):
//! - Export REDCap Version: `format`;
//! - Export Project Info, Export DAGs: `format`, `returnFormat`;
//! - Export Metadata: `format`, `returnFormat`, `fields[]`, `forms[]`;
//! - Export List of Export Field Names: `format`, `returnFormat`, `field`;
//! - Export Records: `action` (export), `format`, `type`, `records[]`,
//!   `fields[]`, `forms[]`, `events[]`, `rawOrLabel`, `rawOrLabelHeaders`,
//!   `exportCheckboxLabel`, `returnFormat`, `exportSurveyFields`,
//!   `exportDataAccessGroups`, `filterLogic`, `dateRangeBegin`,
//!   `dateRangeEnd`, `csvDelimiter`, `decimalCharacter`,
//!   `exportBlankForGrayFormStatus` (PyCap `export_records`);
//! - Export Logging: `format`, `returnFormat`, `logtype`, `user`, `record`,
//!   `dag`, `beginTime`, `endTime` (redcapAPI `exportLogging`).

/// The contents edc-sync may export: every one a read (REDCap's API help,
/// "Export ..." methods). Imports, deletes, renames, file uploads and
/// every other content have no variant, so no such request can be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportContent {
    /// Export REDCap Version (`content=version`): plain text `14.0.1`.
    Version,
    /// Export Project Info.
    Project,
    /// Export Metadata (Data Dictionary).
    Metadata,
    /// Export List of Export Field Names.
    ExportFieldNames,
    /// Export DAGs.
    Dag,
    /// Export Records (`action` absent or `export`).
    Record,
    /// Export Logging (REDCap 10.8.0 and later).
    Log,
}

/// Whether a documented field takes one value or an array of them
/// (`records[0]`, `records[1]`, ..., or `records` as one list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    One,
    Many,
}

use Takes::{Many, One};

const VERSION: &[(&str, Takes)] = &[("format", One)];
const INFO: &[(&str, Takes)] = &[("format", One), ("returnFormat", One)];
const METADATA: &[(&str, Takes)] = &[
    ("format", One),
    ("returnFormat", One),
    ("fields", Many),
    ("forms", Many),
];
const FIELD_NAMES: &[(&str, Takes)] = &[("format", One), ("returnFormat", One), ("field", One)];
const RECORD: &[(&str, Takes)] = &[
    ("action", One),
    ("format", One),
    ("type", One),
    ("records", Many),
    ("fields", Many),
    ("forms", Many),
    ("events", Many),
    ("rawOrLabel", One),
    ("rawOrLabelHeaders", One),
    ("exportCheckboxLabel", One),
    ("returnFormat", One),
    ("exportSurveyFields", One),
    ("exportDataAccessGroups", One),
    ("filterLogic", One),
    ("dateRangeBegin", One),
    ("dateRangeEnd", One),
    ("csvDelimiter", One),
    ("decimalCharacter", One),
    ("exportBlankForGrayFormStatus", One),
];
const LOG: &[(&str, Takes)] = &[
    ("format", One),
    ("returnFormat", One),
    ("logtype", One),
    ("user", One),
    ("record", One),
    ("dag", One),
    ("beginTime", One),
    ("endTime", One),
];

/// Why a form field name may not be part of an export.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldRefused {
    #[error(
        "{name:?} is not a form field name REDCap reads as written: letters, digits and _, not starting with a \
         digit, with at most one [index] (PHP rewrites any other name, so it could stand for another field)"
    )]
    Malformed { name: String },
    #[error(
        "{name:?} is not a field of REDCap's {content} export, which documents only {listed} (edc-sync sends no \
         other field: the one endpoint would take it for another method)"
    )]
    NotDocumented {
        name: String,
        content: &'static str,
        listed: String,
    },
    #[error("{name:?}: {base} takes one value in REDCap's {content} export, not an array")]
    NotAnArray {
        name: String,
        base: String,
        content: &'static str,
    },
}

impl ExportContent {
    /// Every content, in the order the API help lists them.
    pub const ALL: [ExportContent; 7] = [
        ExportContent::Version,
        ExportContent::Project,
        ExportContent::Metadata,
        ExportContent::ExportFieldNames,
        ExportContent::Dag,
        ExportContent::Record,
        ExportContent::Log,
    ];

    /// Its form value.
    pub fn as_str(self) -> &'static str {
        match self {
            ExportContent::Version => "version",
            ExportContent::Project => "project",
            ExportContent::Metadata => "metadata",
            ExportContent::ExportFieldNames => "exportFieldNames",
            ExportContent::Dag => "dag",
            ExportContent::Record => "record",
            ExportContent::Log => "log",
        }
    }

    /// The content named `value`, if it is one of the read contents.
    pub fn parse(value: &str) -> Option<ExportContent> {
        ExportContent::ALL.into_iter().find(|c| c.as_str() == value)
    }

    /// The fields this export documents besides `token` and `content`.
    fn documented(self) -> &'static [(&'static str, Takes)] {
        match self {
            ExportContent::Version => VERSION,
            ExportContent::Project | ExportContent::Dag => INFO,
            ExportContent::Metadata => METADATA,
            ExportContent::ExportFieldNames => FIELD_NAMES,
            ExportContent::Record => RECORD,
            ExportContent::Log => LOG,
        }
    }

    /// The names of the fields this export documents, as an error lists
    /// them (`records[]` for an array).
    pub fn listed(self) -> String {
        let names: Vec<String> = self
            .documented()
            .iter()
            .map(|(name, takes)| match takes {
                One => name.to_string(),
                Many => format!("{name}[]"),
            })
            .collect();
        names.join(", ")
    }

    /// Whether `name` may be a form field of this export besides `token`
    /// and `content` (which the export itself writes): a well-formed name
    /// of a field the export documents, with an index only on an array.
    pub fn admits(self, name: &str) -> Result<(), FieldRefused> {
        let Some((base, indexed)) = split(name) else {
            return Err(FieldRefused::Malformed { name: name.into() });
        };
        match self.documented().iter().find(|(n, _)| *n == base) {
            None => Err(FieldRefused::NotDocumented {
                name: name.into(),
                content: self.as_str(),
                listed: self.listed(),
            }),
            Some((_, One)) if indexed => Err(FieldRefused::NotAnArray {
                name: name.into(),
                base: base.into(),
                content: self.as_str(),
            }),
            Some(_) => Ok(()),
        }
    }
}

/// `name` as `(base, has an index)` when it is exactly
/// `[A-Za-z_][A-Za-z0-9_]*(\[[0-9]*\])?`; `None` otherwise.
fn split(name: &str) -> Option<(&str, bool)> {
    let (base, index) = match name.find('[') {
        Some(at) => {
            let index = name[at..].strip_prefix('[')?.strip_suffix(']')?;
            (&name[..at], Some(index))
        }
        None => (name, None),
    };
    let mut chars = base.chars();
    let first = chars.next()?;
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if !(first.is_ascii_alphabetic() || first == '_') || !chars.all(word) {
        return None;
    }
    match index {
        Some(digits) if !digits.bytes().all(|b| b.is_ascii_digit()) => None,
        _ => Some((base, index.is_some())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_name_is_taken_only_as_php_reads_it() {
        for good in ["format", "_x", "records[0]", "records[]", "fields[12]", "a1_b2"] {
            assert!(split(good).is_some(), "{good}");
        }
        for bad in [
            "",
            " action",
            "action ",
            "con tent",
            "a.b",
            "1st",
            "records[",
            "records[a]",
            "records[0][1]",
            "records]0[",
            "format[-1]",
            "fïeld",
            "a-b",
            "records[0] ",
            "[0]",
        ] {
            assert_eq!(split(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn each_content_admits_its_documented_fields_only() {
        let log = ExportContent::Log;
        assert_eq!(log.admits("beginTime"), Ok(()));
        assert!(matches!(
            log.admits("data"),
            Err(FieldRefused::NotDocumented { .. })
        ));
        assert!(matches!(
            log.admits("fields[0]"),
            Err(FieldRefused::NotDocumented { .. })
        ));
        assert!(matches!(
            log.admits("format[0]"),
            Err(FieldRefused::NotAnArray { .. })
        ));
        assert!(matches!(
            log.admits(" action"),
            Err(FieldRefused::Malformed { .. })
        ));
        let record = ExportContent::Record;
        for field in ["records[3]", "records", "fields[]", "action", "dateRangeEnd"] {
            assert_eq!(record.admits(field), Ok(()), "{field}");
        }
        // Import Records' own fields.
        for write in [
            "data",
            "overwriteBehavior",
            "forceAutoNumber",
            "returnContent",
            "dateFormat",
        ] {
            assert!(record.admits(write).is_err(), "{write}");
        }
        // Only the form writes these two.
        for own in ["token", "content"] {
            for content in ExportContent::ALL {
                assert!(content.admits(own).is_err(), "{own} {content:?}");
            }
        }
        assert_eq!(ExportContent::Version.listed(), "format");
        assert!(ExportContent::Metadata.listed().contains("fields[]"));
    }
}

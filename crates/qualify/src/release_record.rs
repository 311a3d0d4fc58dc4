//! The release record IQ-001 compares the installed executable with: the
//! checksum file a release publishes beside its files, in the format
//! `sha256sum` writes and `sha256sum -c` checks (`HEX  NAME`, or
//! `HEX *NAME` in binary mode), one released file a line. The executable's
//! line names it with its version (`edc-sync-0.1.0`, or an archive-style
//! `edc-sync-0.1.0-x86_64-linux`), which is how the record states the
//! version it released.

use std::path::Path;

/// One released file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    pub sha256: String,
    pub name: String,
}

/// The lines of the record at `path`; an error names the file and the
/// line that is not a checksum line.
pub fn read(path: &Path) -> Result<Vec<Released>, String> {
    let text = edc_core::no_follow::read_string(path)
        .map_err(|e| format!("release record {}: cannot read it: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            parse(line).ok_or_else(|| {
                format!(
                    "release record {} line {}: not a `sha256sum` line (64 hex digits, two spaces or \" *\", a name)",
                    path.display(),
                    n + 1
                )
            })
        })
        .collect()
}

fn parse(line: &str) -> Option<Released> {
    let (hash, rest) = line.split_at_checked(64)?;
    let name = rest.strip_prefix("  ").or_else(|| rest.strip_prefix(" *"))?;
    (hash.bytes().all(|b| b.is_ascii_hexdigit()) && !name.is_empty()).then(|| Released {
        sha256: hash.to_ascii_lowercase(),
        name: name.to_string(),
    })
}

/// Whether `name` states `version` of edc-sync: `edc-sync-VERSION`, alone
/// or followed by `-`, `.` or `_` and a platform or extension (so 0.1.0 is
/// not taken for 0.1.0x or 0.1.01).
pub fn names_version(name: &str, version: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    base.strip_prefix("edc-sync-")
        .and_then(|rest| rest.strip_prefix(version))
        .is_some_and(|tail| {
            tail.is_empty()
                || tail.starts_with(['-', '.', '_']) && !tail[1..].starts_with(|c: char| c.is_ascii_digit())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256sum_lines_in_both_modes_are_read_and_others_refused() {
        let h = "A".repeat(64);
        assert_eq!(
            parse(&format!("{h}  edc-sync-0.1.0")),
            Some(Released {
                sha256: "a".repeat(64),
                name: "edc-sync-0.1.0".into()
            })
        );
        assert_eq!(
            parse(&format!("{h} *bin/edc-sync-0.1.0")).unwrap().name,
            "bin/edc-sync-0.1.0"
        );
        assert_eq!(parse(&format!("{h} edc-sync-0.1.0")), None);
        assert_eq!(parse(&format!("{}  x", "g".repeat(64))), None);
        assert_eq!(parse("abc  edc-sync"), None);
    }

    #[test]
    fn a_name_states_exactly_its_version() {
        assert!(names_version("edc-sync-0.1.0", "0.1.0"));
        assert!(names_version("dist/edc-sync-0.1.0-x86_64-linux", "0.1.0"));
        assert!(names_version("edc-sync-0.1.0.tar.gz", "0.1.0"));
        assert!(!names_version("edc-sync-0.1.01", "0.1.0"));
        assert!(!names_version("edc-sync-0.1.0.1", "0.1.0"));
        assert!(!names_version("edc-sync-0.0.9", "0.1.0"));
        assert!(!names_version("edc-sync", "0.1.0"));
        assert!(!names_version("not-edc-sync-0.1.0", "0.1.0"));
    }
}

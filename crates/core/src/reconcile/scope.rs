//! What `verify` reconciles: everything under the landing root, or only
//! the streams of one study (`--vendor V --study S`, narrowed further by
//! tenant, protocol version or stream). Several studies may share one
//! landing while each keeps a trail of its own; verified against one
//! trail, every other study's pages would have no `page_committed` line in
//! it and be reported as discrepancies, so a study is verified within its
//! own scope.

/// The streams a verification covers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Scope {
    /// Every landing directory and cursor found.
    #[default]
    All,
    /// The streams of one study: its directories are the landing and state
    /// directories whose last five path components name the vendor, tenant,
    /// study, protocol version and stream (`-` for an absent value), as runs
    /// write them (`backfill/...` windows included). A part left `None`
    /// matches any value.
    Study {
        vendor: String,
        study: String,
        tenant: Option<String>,
        protocol_version: Option<String>,
        stream: Option<String>,
    },
}

impl Scope {
    /// Whether the landing directory (or cursor, without `.cursor.json`)
    /// at `rel`, relative to its root, belongs to this scope.
    pub fn covers(&self, rel: &str) -> bool {
        let Scope::Study {
            vendor,
            study,
            tenant,
            protocol_version,
            stream,
        } = self
        else {
            return true;
        };
        let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        let Some(tail) = parts
            .len()
            .checked_sub(crate::stream::DIR_DEPTH)
            .map(|start| &parts[start..])
        else {
            return false;
        };
        let is = |part: &str, want: &str| part == crate::store::sanitize(want);
        let either = |part: &str, want: &Option<String>| want.as_deref().is_none_or(|w| is(part, w));
        is(tail[0], vendor)
            && either(tail[1], tenant)
            && is(tail[2], study)
            && either(tail[3], protocol_version)
            && either(tail[4], stream)
    }

    /// The scope as a reader reads it in the summary line.
    pub fn describe(&self) -> Option<String> {
        match self {
            Scope::All => None,
            Scope::Study {
                vendor,
                study,
                tenant,
                protocol_version,
                stream,
            } => {
                let mut text = format!("vendor {vendor}, study {study}");
                for (name, value) in [
                    ("tenant", tenant),
                    ("protocol version", protocol_version),
                    ("stream", stream),
                ] {
                    if let Some(v) = value {
                        text.push_str(&format!(", {name} {v}"));
                    }
                }
                Some(text)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn study(stream: Option<&str>) -> Scope {
        Scope::Study {
            vendor: "veeva_vault".into(),
            study: "S-001".into(),
            tenant: None,
            protocol_version: None,
            stream: stream.map(str::to_string),
        }
    }

    #[test]
    fn a_study_scope_covers_its_streams_and_backfills_only() {
        let s = study(None);
        assert!(s.covers("veeva_vault/-/S-001/3/subjects"));
        assert!(s.covers("backfill/2026-01-01T00:00:00Z..open/veeva_vault/-/S-001/-/default"));
        assert!(!s.covers("veeva_vault/-/S-002/3/subjects"));
        assert!(!s.covers("medidata_rave/-/S-001/3/subjects"));
        assert!(!s.covers("S-001/3/subjects"), "too short to name a stream");
        assert!(study(Some("subjects")).covers("veeva_vault/acme/S-001/-/subjects"));
        assert!(!study(Some("subjects")).covers("veeva_vault/acme/S-001/-/visits"));
        assert!(Scope::All.covers("anything"));
    }

    #[test]
    fn names_are_compared_as_runs_write_them() {
        let s = Scope::Study {
            vendor: "medidata_rave".into(),
            study: "Mediflex(Prod)/x".into(),
            tenant: Some("acme".into()),
            protocol_version: None,
            stream: None,
        };
        assert!(s.covers("medidata_rave/acme/Mediflex(Prod)%2Fx/-/default"));
        assert!(!s.covers("medidata_rave/other/Mediflex(Prod)%2Fx/-/default"));
    }
}

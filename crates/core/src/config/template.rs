//! `{placeholder}` templates: the bucket key, the delta path, query values.
//!
//! Placeholders are checked when the file is loaded, so a typo such as
//! `{studdy}` is a configuration error at 09:00 on the day of the change,
//! not a quota collision at 03:00.

use std::fmt;

/// The identity values a template may refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Placeholder {
    Vendor,
    Tenant,
    Study,
    ProtocolVersion,
    /// The stream's name (e.g. a Vault audit-trail type in the path).
    Stream,
    /// The host of the vendor's base URL (with its port when that is not
    /// the scheme's default), in `bucket_key` only: one quota for every
    /// project on one server, as REDCap counts its hit threshold per
    /// client address, not per project or token.
    Host,
}

impl Placeholder {
    pub const ALL: [Placeholder; 6] = [
        Placeholder::Vendor,
        Placeholder::Tenant,
        Placeholder::Study,
        Placeholder::ProtocolVersion,
        Placeholder::Stream,
        Placeholder::Host,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Placeholder::Vendor => "vendor",
            Placeholder::Tenant => "tenant",
            Placeholder::Study => "study",
            Placeholder::ProtocolVersion => "protocol_version",
            Placeholder::Stream => "stream",
            Placeholder::Host => "host",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// `{vendor}, {tenant}, ...` for error messages.
    pub fn known_list() -> String {
        Self::ALL.map(|p| format!("{{{}}}", p.name())).join(", ")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Slot(Placeholder),
}

/// A parsed template whose placeholders are all known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    source: String,
    parts: Vec<Part>,
}

/// Values for the placeholders of one stream identity.
pub trait PlaceholderValues {
    fn value(&self, p: Placeholder) -> Option<&str>;
}

/// A placeholder the template needs but the identity does not supply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template {template:?} needs {{{}}} but none was given", .missing.name())]
pub struct MissingValue {
    pub template: String,
    pub missing: Placeholder,
}

impl Template {
    /// Parses `source`; the error names the offending placeholder.
    pub fn parse(source: &str) -> Result<Self, String> {
        // A template becomes a Redis key, a URL path or a query value: a
        // control character has no business in any of them.
        if let Some(c) = source.chars().find(|c| c.is_control()) {
            return Err(format!("holds a control character ({c:?}) in {source:?}"));
        }
        let mut parts = Vec::new();
        let mut rest = source;
        while let Some(open) = rest.find(['{', '}']) {
            if rest.as_bytes()[open] == b'}' {
                return Err(format!(
                    "stray '}}' at byte {} in {source:?}",
                    source.len() - rest.len() + open
                ));
            }
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_string()));
            }
            let after = &rest[open + 1..];
            let close = match after.find(['{', '}']) {
                Some(i) if after.as_bytes()[i] == b'}' => i,
                _ => return Err(format!("unclosed '{{' in {source:?}")),
            };
            let name = &after[..close];
            let slot = Placeholder::from_name(name).ok_or_else(|| {
                format!(
                    "unknown placeholder {{{name}}} (known: {})",
                    Placeholder::known_list()
                )
            })?;
            parts.push(Part::Slot(slot));
            rest = &after[close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_string()));
        }
        Ok(Template {
            source: source.to_string(),
            parts,
        })
    }

    /// The placeholders this template uses, in order of first use.
    pub fn placeholders(&self) -> Vec<Placeholder> {
        let mut seen = Vec::new();
        for part in &self.parts {
            if let Part::Slot(p) = part {
                if !seen.contains(p) {
                    seen.push(*p);
                }
            }
        }
        seen
    }

    /// Fills every placeholder from `values`.
    pub fn fill(&self, values: &impl PlaceholderValues) -> Result<String, MissingValue> {
        let mut out = String::with_capacity(self.source.len() + 16);
        for part in &self.parts {
            match part {
                Part::Literal(s) => out.push_str(s),
                Part::Slot(p) => out.push_str(values.value(*p).ok_or_else(|| MissingValue {
                    template: self.source.clone(),
                    missing: *p,
                })?),
            }
        }
        Ok(out)
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }
}

impl serde::Serialize for Template {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.source)
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Ids;
    impl PlaceholderValues for Ids {
        fn value(&self, p: Placeholder) -> Option<&str> {
            match p {
                Placeholder::Study => Some("S1"),
                Placeholder::ProtocolVersion => Some("v2"),
                _ => None,
            }
        }
    }

    #[test]
    fn fills_known_placeholders() {
        let t = Template::parse("rl:veeva:{study}:{protocol_version}").unwrap();
        assert_eq!(t.fill(&Ids).unwrap(), "rl:veeva:S1:v2");
        assert_eq!(
            t.placeholders(),
            vec![Placeholder::Study, Placeholder::ProtocolVersion]
        );
    }

    #[test]
    fn refuses_unknown_unclosed_and_stray() {
        assert!(Template::parse("rl:{site}")
            .unwrap_err()
            .contains("unknown placeholder {site}"));
        assert!(Template::parse("rl:{study").unwrap_err().contains("unclosed"));
        assert!(Template::parse("rl:study}").unwrap_err().contains("stray"));
    }

    #[test]
    fn a_missing_value_names_the_placeholder() {
        let t = Template::parse("{tenant}/x").unwrap();
        assert_eq!(t.fill(&Ids).unwrap_err().missing, Placeholder::Tenant);
    }
}

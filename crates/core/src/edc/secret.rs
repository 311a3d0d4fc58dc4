//! A credential that cannot be printed by accident.

use std::fmt;

/// A credential: a token, a password, a Vault session id. `Debug` and
/// `Display` show `***`; the value leaves this type only through
/// [`Secret::expose`], where a header is built or a value registered for
/// scrubbing. It deserializes straight from a vendor's answer, so a
/// session id is never a plain `String` that a `{:?}` could print.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn never_formats_its_value() {
        let s = super::Secret::new("tok-123");
        assert_eq!(format!("{s} {s:?}"), "*** Secret(***)");
        assert_eq!(s.expose(), "tok-123");
    }
}

//! A record's identity: the first 128 bits of the SHA-256 the rule of
//! `edc/payload/identity.rs` makes of it, the value a cursor's lookback
//! memory keeps, and the set it is looked up in.

use sha2::{Digest, Sha256};

/// One record of a page: where it is, what it is, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordKey {
    /// Its position in the page's records array, from 0.
    pub position: u32,
    pub identity: RecordIdentity,
    /// Its cursor value, as a query parameter would carry it.
    pub at: String,
}

/// A record's identity: the first 128 bits of its SHA-256, written as 32
/// lowercase hex digits wherever it is recorded (a cursor's lookback
/// memory). Kept as a number in memory: a memory of thousands of
/// identities is copied, looked up and written at every commit, and a
/// number is one word pair where a string is an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordIdentity(u128);

impl RecordIdentity {
    /// The identity a finished hash gives.
    pub(crate) fn of(hash: Sha256) -> RecordIdentity {
        let digest = hash.finalize();
        let mut first = [0u8; 16];
        first.copy_from_slice(&digest[..16]);
        RecordIdentity(u128::from_be_bytes(first))
    }

    /// The identity of the record read `n`th (from 0) among records of
    /// identical content in one window: the first keeps the content's
    /// identity (so a memory written without counting still recognises
    /// it), each later one is a new identity derived from it and `n`. Two
    /// identical rows are then two events, each landed once, and reading
    /// the window again gives each the identity it had.
    pub(crate) fn occurrence(self, n: u32) -> RecordIdentity {
        if n == 0 {
            return self;
        }
        let mut hash = Sha256::new();
        hash.update(b"edc-sync occurrence\0");
        hash.update(self.0.to_be_bytes());
        hash.update(n.to_be_bytes());
        RecordIdentity::of(hash)
    }

    /// Its 32 lowercase hex digits, without allocating (16 bytes always
    /// fit; `hex` says so rather than assumes it).
    fn hex(self) -> Result<[u8; 32], hex::FromHexError> {
        let mut out = [0u8; 32];
        hex::encode_to_slice(self.0.to_be_bytes(), &mut out)?;
        Ok(out)
    }
}

/// A set of identities. An identity is already the first bits of a
/// SHA-256, as evenly spread as a hash can make them: the set takes its
/// low 64 bits as the hash instead of hashing it again (SipHash, the
/// default, was most of the cost of telling a page's records apart: a
/// set of the memory's hundreds of identities is built for every page).
pub(crate) type IdentitySet =
    std::collections::HashSet<RecordIdentity, std::hash::BuildHasherDefault<AlreadyHashed>>;

/// How many records of each content identity a window's committed pages
/// held so far (`lookback.identical_records: distinct`).
pub(crate) type Occurrences =
    std::collections::HashMap<RecordIdentity, u32, std::hash::BuildHasherDefault<AlreadyHashed>>;

/// The hasher of [`IdentitySet`]: an identity's own bits.
#[derive(Default)]
pub(crate) struct AlreadyHashed(u64);

impl std::hash::Hasher for AlreadyHashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u128(&mut self, n: u128) {
        self.0 = n as u64;
    }

    /// Anything but an identity's one `u128` (not hashed here; kept
    /// correct all the same): its bytes folded in, FNV-1a.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
impl RecordIdentity {
    /// An identity for a test, from its number.
    pub(crate) const fn test(n: u128) -> RecordIdentity {
        RecordIdentity(n)
    }
}

impl std::fmt::Display for RecordIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex = self.hex().map_err(|_| std::fmt::Error)?;
        f.write_str(std::str::from_utf8(&hex).map_err(|_| std::fmt::Error)?)
    }
}

impl std::str::FromStr for RecordIdentity {
    type Err = String;

    /// Exactly 32 lowercase hex digits, as written: anything else is not
    /// an identity this tool recorded.
    fn from_str(text: &str) -> Result<RecordIdentity, String> {
        let lower_hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
        if text.len() != 32 || !text.bytes().all(|b| lower_hex(&b)) {
            return Err(format!(
                "{text:?} is not a record identity (32 lowercase hex digits)"
            ));
        }
        u128::from_str_radix(text, 16)
            .map(RecordIdentity)
            .map_err(|e| format!("{text:?} is not a record identity ({e})"))
    }
}

impl serde::Serialize for RecordIdentity {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let hex = self.hex().map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(std::str::from_utf8(&hex).map_err(serde::ser::Error::custom)?)
    }
}

impl<'de> serde::Deserialize<'de> for RecordIdentity {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<RecordIdentity, D::Error> {
        struct Hex;
        impl serde::de::Visitor<'_> for Hex {
            type Value = RecordIdentity;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a record identity (32 lowercase hex digits)")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<RecordIdentity, E> {
                text.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Hex)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An identity is written as the hex of the hash's first 16 bytes, as
    /// every cursor memory written before holds it, and read back only
    /// from exactly that.
    #[test]
    fn a_set_of_identities_tells_apart_identities_that_share_their_hash() {
        // Equal low 64 bits: the same hash, different identities.
        let (a, b) = (RecordIdentity::test(7), RecordIdentity::test((1 << 64) | 7));
        let mut set = IdentitySet::default();
        assert!(set.insert(a) && set.insert(b) && !set.insert(a));
        assert_eq!(set.len(), 2);
        assert!(set.contains(&b) && !set.contains(&RecordIdentity::test(8)));
    }

    #[test]
    fn an_identity_is_written_and_read_as_the_hex_of_its_hash_prefix() {
        for input in [&b""[..], b"record_id\0\"a\"\0t", &[0xff; 300]] {
            let hash = Sha256::new_with_prefix(input);
            let written = hex::encode(&hash.clone().finalize()[..16]);
            let id = RecordIdentity::of(hash);
            assert_eq!(id.to_string(), written);
            let json = serde_json::to_string(&id).unwrap();
            assert_eq!(json, format!("\"{written}\""));
            assert_eq!(serde_json::from_str::<RecordIdentity>(&json).unwrap(), id);
            assert_eq!(
                serde_json::from_value::<RecordIdentity>(serde_json::json!(written)).unwrap(),
                id
            );
        }
        let small = RecordIdentity::test(1).to_string();
        assert_eq!(
            small, "00000000000000000000000000000001",
            "leading zeros are kept"
        );
        for bad in [
            "",
            "ab",
            &"A".repeat(32),
            &"0".repeat(33),
            &"g".repeat(32),
            &format!("+{}", "0".repeat(31)),
        ] {
            assert!(
                bad.parse::<RecordIdentity>().is_err(),
                "{bad:?} read as an identity"
            );
            assert!(serde_json::from_value::<RecordIdentity>(serde_json::json!(bad)).is_err());
        }
    }
}

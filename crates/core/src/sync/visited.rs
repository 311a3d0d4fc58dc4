//! The pages a window has fetched, so that a next link leading back to one
//! of them (a vendor's paging loop) stops the stream before it is fetched
//! again, however long the window.
//!
//! A window can run to a million pages in one run (a first sync, a
//! backfill); kept as text, its page keys were most of a run's memory (118
//! MiB after 900,000 pages). Each key is kept as the first 128 bits of its
//! SHA-256 instead: 16 bytes a page, and two different keys share a digest
//! with a probability of about n² / 2¹²⁹ (10⁻²⁶ at a million pages), which
//! is no risk a run can meet.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use sha2::{Digest, Sha256};

/// The digests of the page keys fetched in one window.
#[derive(Default)]
pub(super) struct Visited(HashSet<u128, BuildHasherDefault<DigestHasher>>);

impl Visited {
    /// Records `key`; `false` if the window had fetched it already.
    pub(super) fn first_visit(&mut self, key: &str) -> bool {
        let digest = Sha256::digest(key.as_bytes());
        let mut head = [0u8; 16];
        head.copy_from_slice(&digest[..16]);
        self.0.insert(u128::from_be_bytes(head))
    }

    /// Pages fetched in the window so far.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

/// A digest is already uniform: its low 64 bits are its hash.
#[derive(Default)]
struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u128` is called (a `u128` hashes as one); any other
        // input folds in, still a valid hash.
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 ^= u64::from_le_bytes(word);
        }
    }

    fn write_u128(&mut self, value: u128) {
        self.0 = value as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::Visited;

    #[test]
    fn a_key_seen_again_is_told_apart_from_a_new_one() {
        let mut visited = Visited::default();
        assert!(visited.first_visit("/api?page=1"));
        assert!(visited.first_visit("/api?page=2"));
        assert!(!visited.first_visit("/api?page=1"));
        assert_eq!(visited.len(), 2);
    }
}

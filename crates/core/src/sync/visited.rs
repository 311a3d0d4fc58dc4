//! The pages a window has fetched, so that a next link leading back to one
//! of them (a vendor's paging loop) stops the stream before it is fetched
//! again, however long the window.
//!
//! A window can run to a million pages in one run (a first sync, a
//! backfill); kept as text, its page keys were most of a run's memory (118
//! MiB after 900,000 pages). Each key is kept as the first 128 bits of its
//! SHA-256 instead, two different keys sharing a digest with a probability
//! of about n² / 2¹²⁹ (10⁻²⁶ at a million pages), which is no risk a run
//! can meet; in a B-tree, which grows a node at a time: a hash set doubles
//! its table, and while it moves into the new one holds both (52 MiB at a
//! million digests against the B-tree's 28).

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

/// The digests of the page keys fetched in one window.
#[derive(Default)]
pub(super) struct Visited(BTreeSet<u128>);

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

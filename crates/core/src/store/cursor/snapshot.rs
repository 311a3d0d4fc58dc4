//! A collection's snapshot (`delta.collection`): what one consistent pass
//! over a collection with no delta filter read, by hash. The snapshot names
//! the SHA-256 of each of the pass's pages with items, in order; each is
//! landed under that content address, and a page whose bytes the last
//! snapshot (or an earlier pass of the same run) holds already is not
//! landed or listed again: it is unchanged. The snapshot is recorded in
//! the `page_committed` line of the pass's last page and in the cursor, so
//! the next run knows which pages are unchanged, and a reader rebuilds the
//! collection as it stood from the landing alone and proves it by the hash.
//! The cursor grows by 64 characters a page of the collection (a page
//! holds up to 5,000 items on Castor).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The cursor's record of the last consistent pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// SHA-256 over the pages' SHA-256s in order, each as 64 lowercase hex
    /// digits and a newline (see [`Snapshot::of`]).
    pub sha256: String,
    /// Items, as the server stated them on the pass's first and last page.
    pub items: u64,
    /// The SHA-256 of each page with items, in order.
    pub pages: Vec<String>,
}

impl Snapshot {
    /// The snapshot of a pass whose pages with items hashed to `pages`, in
    /// order, and which held `items` items.
    pub fn of(pages: Vec<String>, items: u64) -> Snapshot {
        let mut hasher = Sha256::new();
        for page in &pages {
            hasher.update(page.as_bytes());
            hasher.update(b"\n");
        }
        Snapshot {
            sha256: hex::encode(hasher.finalize()),
            items,
            pages,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_the_hash_of_its_pages_hashes_in_order() {
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let ab = Snapshot::of(vec![a.clone(), b.clone()], 10);
        assert_eq!(ab.pages.len(), 2);
        assert_eq!(ab.items, 10);
        assert_eq!(
            ab.sha256,
            crate::digest::sha256_hex(format!("{a}\n{b}\n").as_bytes())
        );
        assert_ne!(ab.sha256, Snapshot::of(vec![b, a], 10).sha256, "order counts");
        assert_eq!(Snapshot::of(Vec::new(), 0).sha256, crate::digest::sha256_hex(b""));
    }
}

//! Unique keys per object, cheaply: the records of a page almost always
//! have the same keys in the same order, so each key is first compared
//! with the key at the same position in the previous object at the same
//! depth (whose keys were already proven distinct). Only an object that
//! departs from that shape pays for a set.

use std::collections::HashSet;

/// Keys in order, in one buffer.
#[derive(Default)]
struct KeyList {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl KeyList {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// The first `n` keys of `other`.
    fn copy_prefix(&mut self, other: &KeyList, n: usize) {
        self.clear();
        let end = if n == 0 { 0 } else { other.ends[n - 1] };
        self.bytes.extend_from_slice(&other.bytes[..end]);
        self.ends.extend_from_slice(&other.ends[..n]);
    }
}

/// Above this many keys an object's keys are also kept in a hash set.
const LINEAR_MAX: usize = 16;

/// One nesting depth's bookkeeping.
#[derive(Default)]
struct Level {
    /// The keys of an earlier object at this depth: distinct.
    shape: KeyList,
    /// While true, the open object's keys are `shape`'s first `pos` keys.
    same_shape: bool,
    pos: usize,
    /// The open object's keys once it departed from `shape`.
    own: KeyList,
    set: HashSet<Vec<u8>>,
}

/// The keys of every open object, by depth.
#[derive(Default)]
pub(super) struct Keys {
    levels: Vec<Level>,
}

impl Keys {
    /// An object opens at `depth`.
    pub(super) fn open(&mut self, depth: usize) {
        if self.levels.len() <= depth {
            self.levels.resize_with(depth + 1, Level::default);
        }
        let level = &mut self.levels[depth];
        level.same_shape = true;
        level.pos = 0;
    }

    /// A key of the object open at `depth`; false when it is there already.
    pub(super) fn insert(&mut self, depth: usize, key: &[u8]) -> bool {
        let level = &mut self.levels[depth];
        if level.same_shape {
            if level.pos < level.shape.len() && level.shape.get(level.pos) == key {
                level.pos += 1;
                return true;
            }
            level.same_shape = false;
            level.own.copy_prefix(&level.shape, level.pos);
            level.set.clear();
            if level.own.len() > LINEAR_MAX {
                for i in 0..level.own.len() {
                    level.set.insert(level.own.get(i).to_vec());
                }
            }
        }
        let seen = if level.own.len() > LINEAR_MAX {
            !level.set.insert(key.to_vec())
        } else {
            let seen = (0..level.own.len()).any(|i| level.own.get(i) == key);
            if !seen && level.own.len() == LINEAR_MAX {
                for i in 0..level.own.len() {
                    level.set.insert(level.own.get(i).to_vec());
                }
                level.set.insert(key.to_vec());
            }
            seen
        };
        if seen {
            return false;
        }
        level.own.push(key);
        true
    }

    /// The object open at `depth` closes: its keys, distinct, become the
    /// shape the next object at this depth is compared with.
    pub(super) fn close(&mut self, depth: usize) {
        let level = &mut self.levels[depth];
        if !level.same_shape {
            std::mem::swap(&mut level.shape, &mut level.own);
            level.own.clear();
            level.set.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(keys: &mut Keys, depth: usize, names: &[&str]) -> bool {
        keys.open(depth);
        let ok = names.iter().all(|k| keys.insert(depth, k.as_bytes()));
        keys.close(depth);
        ok
    }

    #[test]
    fn a_key_twice_is_caught_in_every_shape() {
        let mut keys = Keys::default();
        assert!(object(&mut keys, 0, &["a", "b", "c"]));
        assert!(object(&mut keys, 0, &["a", "b", "c"]), "the same shape");
        assert!(object(&mut keys, 0, &["a", "b"]), "a prefix of it");
        assert!(
            !object(&mut keys, 0, &["a", "b", "a"]),
            "a repeat after the shape"
        );
        assert!(!object(&mut keys, 0, &["a", "a"]), "a repeat inside the shape");
        assert!(!object(&mut keys, 0, &["x", "y", "x"]), "a repeat in a new shape");
        assert!(object(&mut keys, 0, &["x", "y", "z"]));
        let many: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        let mut names: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(object(&mut keys, 0, &names), "forty distinct keys");
        assert!(object(&mut keys, 0, &names), "the same forty again");
        names.push("k3");
        assert!(!object(&mut keys, 0, &names), "a repeat past the set threshold");
        names.pop();
        names.swap(0, 39);
        names.push("k39");
        assert!(!object(&mut keys, 0, &names), "a repeat after a change of shape");
    }
}

//! Unique keys per object, cheaply: the records of a page almost always
//! have the same keys in the same order, so each key is first compared
//! with the key at the same position in the previous object at the same
//! depth (whose keys were already proven distinct). Only an object that
//! departs from that shape pays for a set.
//!
//! The same shape remembers, key by key, whether the handler skipped that
//! member in an object it called alike (a page's records): the lexer
//! then reads the next alike object's member with that key at that
//! position by comparing its bytes with the key, and skips it without
//! asking the handler again (see `Handler::alike`).

use std::collections::HashSet;

/// Keys in order, in one buffer, each with what is known of it.
#[derive(Default)]
struct KeyList {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    /// The handler skipped this member's value in an alike object (false:
    /// it did not, or was not asked).
    skipped: Vec<bool>,
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
        self.skipped.push(false);
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        self.skipped.clear();
    }

    /// The first `n` keys of `other`.
    fn copy_prefix(&mut self, other: &KeyList, n: usize) {
        self.clear();
        let end = if n == 0 { 0 } else { other.ends[n - 1] };
        self.bytes.extend_from_slice(&other.bytes[..end]);
        self.ends.extend_from_slice(&other.ends[..n]);
        self.skipped.extend_from_slice(&other.skipped[..n]);
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

    /// A key of the object open at `depth`: its position in the object, or
    /// `None` when it is there already.
    pub(super) fn insert(&mut self, depth: usize, key: &[u8]) -> Option<usize> {
        let level = &mut self.levels[depth];
        if level.same_shape {
            if level.pos < level.shape.len() && level.shape.get(level.pos) == key {
                level.pos += 1;
                return Some(level.pos - 1);
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
            return None;
        }
        level.own.push(key);
        Some(level.own.len() - 1)
    }

    /// The key the previous object at `depth` had at the position the
    /// open one reaches next, when the open one has had its keys so far
    /// and the handler skipped that member in an alike object: a member
    /// whose bytes are that key, quoted, is that key at that position
    /// (then [`Keys::follow`]). Only keys written plainly are learned (see
    /// [`Keys::learn`]), so a key's bytes in a document are the key itself.
    #[inline]
    pub(super) fn skipped_next(&self, depth: usize) -> Option<&[u8]> {
        let level = self.levels.get(depth)?;
        let at = level.pos;
        let known = level.same_shape && level.shape.skipped.get(at) == Some(&true);
        known.then(|| level.shape.get(at))
    }

    /// The key [`Keys::skipped_next`] gave came next in the object open at
    /// `depth`: what [`Keys::insert`] of it would do.
    #[inline]
    pub(super) fn follow(&mut self, depth: usize) {
        self.levels[depth].pos += 1;
    }

    /// What the handler wanted of the member just inserted at `position`
    /// of the alike object open at `depth`: skipped or not. Only for a key
    /// written plainly in the document (printable ASCII, no quote, no
    /// backslash, as the lexer's fast path reads them): an escaped key's
    /// decoded bytes written raw would be another text, or no JSON.
    pub(super) fn learn(&mut self, depth: usize, position: usize, skipped: bool) {
        let level = &mut self.levels[depth];
        let list = if level.same_shape {
            &mut level.shape
        } else {
            &mut level.own
        };
        if let Some(slot) = list.skipped.get_mut(position) {
            *slot = skipped;
        }
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
        let ok = names.iter().all(|k| keys.insert(depth, k.as_bytes()).is_some());
        keys.close(depth);
        ok
    }

    #[test]
    fn a_skipped_member_is_offered_at_its_place_in_the_next_object_of_that_shape_only() {
        let mut keys = Keys::default();
        // The first record: `id` skipped, `at` read, `v` skipped.
        keys.open(1);
        for (key, skipped) in [(&b"id"[..], true), (b"at", false), (b"v", true)] {
            let position = keys.insert(1, key).expect("distinct");
            keys.learn(1, position, skipped);
        }
        keys.close(1);
        // The next: offered `id`, then nothing for `at` (read, so asked).
        keys.open(1);
        assert_eq!(keys.skipped_next(1), Some(&b"id"[..]));
        keys.follow(1);
        assert_eq!(keys.skipped_next(1), None, "`at` was read: the handler is asked");
        assert_eq!(keys.insert(1, b"at"), Some(1));
        assert_eq!(keys.skipped_next(1), Some(&b"v"[..]));
        // A record that departs: nothing more is offered in it, and its
        // own shape is what the next one is compared with.
        assert_eq!(keys.insert(1, b"w"), Some(2));
        assert_eq!(keys.skipped_next(1), None, "after a departure");
        keys.close(1);
        keys.open(1);
        assert_eq!(
            keys.skipped_next(1),
            Some(&b"id"[..]),
            "the learned prefix is kept"
        );
        keys.follow(1);
        assert_eq!(keys.insert(1, b"at"), Some(1));
        assert_eq!(keys.skipped_next(1), None, "`w` was never learned");
        keys.close(1);
        // Another depth knows nothing of it.
        keys.open(2);
        assert_eq!(keys.skipped_next(2), None);
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

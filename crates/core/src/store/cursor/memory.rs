//! The lookback's memory: the identities of the records a stream landed
//! whose cursor values lie in the span the next window re-reads, kept in
//! the cursor and committed with it, so a re-read record is recognised and
//! not landed twice (`edc::payload::identity`).
//!
//! It is bounded: past `max_records` identities the oldest cursor values
//! are forgotten whole, and the memory then says from where it is
//! complete; the next window starts no earlier than that, so a record is
//! never re-read without being recognised (the lookback is shortened
//! instead, and the `page_committed` line's cursor shows by how much).

use std::cmp::Ordering;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::record::identity::{IdentitySet, RecordIdentity};
use crate::record::order::compare_params;

/// Identities of landed records grouped by cursor value, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordMemory {
    held: Held,
    written: Written,
}

/// What the memory holds, as it is written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Held {
    /// Every landed record with a cursor value at or after this one is
    /// remembered (`None`: every landed record since the stream began).
    complete_from: Option<String>,
    /// `[cursor value, [identity, ...]]`, ascending by cursor value.
    seen: Vec<Group>,
}

/// The memory as JSON and its SHA-256 (its seal's, `seal.rs`), each made
/// once since its last change: a commit seals it twice (its `page_committed` line and the
/// cursor file) and writes it whole now and then (the journal's base,
/// `journal.rs`), and a memory of thousands of identities is a
/// megabyte to write and hash. Shared by copies; emptied by every change
/// ([`RecordMemory::change`]).
#[derive(Debug, Clone, Default)]
struct Written {
    text: std::sync::OnceLock<Arc<serde_json::value::RawValue>>,
    sha256: std::sync::OnceLock<String>,
}

impl PartialEq for Written {
    /// The text written is the memory's: two memories holding the same
    /// are equal whether or not either was written yet.
    fn eq(&self, _: &Written) -> bool {
        true
    }
}

impl Serialize for RecordMemory {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let Some(text) = self.written.text.get() {
            return text.serialize(serializer);
        }
        let text: Arc<serde_json::value::RawValue> = serde_json::value::to_raw_value(&self.held)
            .map_err(serde::ser::Error::custom)?
            .into();
        // Another thread may have written it meanwhile: the same text.
        let _ = self.written.text.set(text.clone());
        text.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RecordMemory {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<RecordMemory, D::Error> {
        Ok(RecordMemory {
            held: Held::deserialize(deserializer)?,
            written: Written::default(),
        })
    }
}

/// One cursor value and the identities of the records landed with it,
/// written `[cursor value, [identity, ...]]`. Every commit copies the
/// memory (the pending cursor is the committed one advanced, and the
/// committed one is kept until the commit is proven), so a copy must not
/// cost an allocation a value: the value's text is shared between copies,
/// and a value's one identity (the common case) is held in place.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    at: Arc<str>,
    ids: Ids,
}

#[derive(Debug, Clone)]
enum Ids {
    One(RecordIdentity),
    Many(Vec<RecordIdentity>),
}

impl Group {
    pub(super) fn new(at: &str, identity: RecordIdentity) -> Group {
        Group {
            at: at.into(),
            ids: Ids::One(identity),
        }
    }

    pub(super) fn at(&self) -> &str {
        &self.at
    }

    pub(super) fn ids(&self) -> &[RecordIdentity] {
        match &self.ids {
            Ids::One(id) => std::slice::from_ref(id),
            Ids::Many(ids) => ids,
        }
    }

    pub(super) fn push(&mut self, identity: RecordIdentity) {
        match &mut self.ids {
            Ids::One(first) => self.ids = Ids::Many(vec![*first, identity]),
            Ids::Many(ids) => ids.push(identity),
        }
    }
}

impl PartialEq for Group {
    fn eq(&self, other: &Group) -> bool {
        self.at == other.at && self.ids() == other.ids()
    }
}

impl Serialize for Group {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (&*self.at, self.ids()).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Group {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Group, D::Error> {
        let (at, ids) = <(String, Vec<RecordIdentity>)>::deserialize(deserializer)?;
        Ok(Group {
            at: at.into(),
            ids: match ids.as_slice() {
                [one] => Ids::One(*one),
                _ => Ids::Many(ids),
            },
        })
    }
}

impl RecordMemory {
    /// A memory complete from `from`: the start of the window in progress
    /// when a stream first keeps one (nothing before it was remembered).
    pub fn starting_at(from: Option<String>) -> RecordMemory {
        RecordMemory {
            held: Held {
                complete_from: from,
                seen: Vec::new(),
            },
            written: Written::default(),
        }
    }

    /// What the memory holds, to be changed: its written text is
    /// forgotten first, so no change can be written with an old text.
    fn change(&mut self) -> &mut Held {
        self.written = Written::default();
        &mut self.held
    }

    /// The SHA-256 of its JSON, made by `make` once since its last change
    /// (`seal.rs`).
    pub(super) fn sha256_once(&self, make: impl FnOnce(&RecordMemory) -> String) -> &str {
        self.written.sha256.get_or_init(|| make(self))
    }

    /// How many identities are kept.
    pub fn len(&self) -> usize {
        self.held.seen.iter().map(|g| g.ids().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.held.seen.is_empty()
    }

    /// Where the memory is complete from.
    pub fn complete_from(&self) -> Option<&str> {
        self.held.complete_from.as_deref()
    }

    /// How many cursor values it holds identities at.
    pub(super) fn values(&self) -> usize {
        self.held.seen.len()
    }

    /// Forgets the `n` oldest cursor values whole (a change replayed from
    /// the trail, `seal.rs`).
    pub(super) fn drop_oldest(&mut self, n: usize) -> Result<(), String> {
        if n > self.held.seen.len() {
            return Err(format!(
                "the line forgets {n} cursor values of a memory that holds {}",
                self.held.seen.len()
            ));
        }
        if n > 0 {
            self.change().seen.drain(..n);
        }
        Ok(())
    }

    /// Sets where the memory is complete from (a change replayed from the
    /// trail, whose seal says it).
    pub(super) fn set_complete_from(&mut self, from: Option<String>) {
        if self.held.complete_from != from {
            self.change().complete_from = from;
        }
    }

    /// Every identity kept, for looking a page's records up at once.
    pub(crate) fn identities(&self) -> IdentitySet {
        let mut set = IdentitySet::with_capacity_and_hasher(self.len(), Default::default());
        set.extend(self.held.seen.iter().flat_map(|g| g.ids().iter().copied()));
        set
    }

    /// Remembers a landed record.
    pub fn add(&mut self, at: &str, identity: RecordIdentity) {
        let seen = &mut self.change().seen;
        // Records mostly come in cursor order: the newest value first, one
        // comparison instead of a search.
        let newest = seen.last_mut().map(|g| (compare_params(&g.at, at), g));
        match newest {
            Some((Ordering::Equal, group)) => return group.push(identity),
            Some((Ordering::Less, _)) | None => return seen.push(Group::new(at, identity)),
            Some((Ordering::Greater, _)) => {}
        }
        match seen.binary_search_by(|g| compare_params(&g.at, at)) {
            Ok(i) => seen[i].push(identity),
            Err(i) => seen.insert(i, Group::new(at, identity)),
        }
    }

    /// Forgets the oldest cursor values whole until at most `max`
    /// identities are kept (the newest value is kept even when it alone
    /// holds more); the memory is then complete from the oldest kept.
    pub fn bound(&mut self, max: usize) {
        let mut len = self.len();
        let mut dropped = 0;
        while len > max && self.held.seen.len() - dropped > 1 {
            len -= self.held.seen[dropped].ids().len();
            dropped += 1;
        }
        if dropped > 0 {
            let held = self.change();
            held.seen.drain(..dropped);
            held.complete_from = held.seen.first().map(|g| g.at.to_string());
        }
    }

    /// The start of the next window: `wanted` (the end of this one less
    /// the lookback), but never before where the memory is complete.
    pub fn next_start(&self, wanted: String) -> String {
        match &self.held.complete_from {
            Some(from) if compare_params(from, &wanted) == Ordering::Greater => from.clone(),
            _ => wanted,
        }
    }

    /// Forgets the identities before `at`; the memory is then complete
    /// from `at` at most (what it forgot is never to be read again).
    pub fn forget_before(&mut self, at: &str) {
        let held = self.change();
        held.seen.retain(|g| compare_params(&g.at, at) != Ordering::Less);
        let later = match &held.complete_from {
            Some(from) => compare_params(at, from) == Ordering::Greater,
            None => true,
        };
        if later {
            held.complete_from = Some(at.to_string());
        }
    }

    /// Forgets what the window starting at `start` cannot re-read; the
    /// memory is then complete from `start`.
    pub fn keep_from(&mut self, start: &str) {
        let held = self.change();
        held.seen
            .retain(|g| compare_params(&g.at, start) != Ordering::Less);
        held.complete_from = Some(start.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: [&str; 4] = [
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00.500Z",
        "2026-01-01T00:00:01Z",
        "2026-01-01T00:00:02Z",
    ];

    /// The memory as plain pairs, the form it is written in.
    fn plain(m: &RecordMemory) -> Vec<(String, Vec<RecordIdentity>)> {
        m.held
            .seen
            .iter()
            .map(|g| (g.at.to_string(), g.ids().to_vec()))
            .collect()
    }

    proptest::proptest! {
        /// Whatever is added and forgotten, the memory is written as the
        /// plain pairs it holds (`[cursor value, [identity, ...]]`, the
        /// form every earlier version wrote and reads), is read back
        /// equal, and a copy of it is equal and independent.
        #[test]
        fn the_memory_is_written_and_read_as_plain_pairs(
            steps in proptest::collection::vec((0usize..4, 0usize..4, 0u128..6), 0..40)
        ) {
            let mut m = RecordMemory::starting_at(None);
            for (what, at, n) in steps {
                match what {
                    0 | 1 => m.add(T[at], RecordIdentity::test(n)),
                    2 => m.forget_before(T[at]),
                    _ => m.bound(n as usize + 1),
                }
                let copy = m.clone();
                let written = serde_json::to_string(&m).unwrap();
                let expected = serde_json::json!({"complete_from": m.held.complete_from, "seen": plain(&m)});
                proptest::prop_assert_eq!(&written, &expected.to_string());
                // Written once, it is the same value to a `Value` (the
                // state database compares cursors as values).
                proptest::prop_assert_eq!(serde_json::to_value(&m).unwrap(), expected);
                let read: RecordMemory = serde_json::from_str(&written).unwrap();
                proptest::prop_assert_eq!(&read, &m);
                m.add(T[3], RecordIdentity::test(99));
                proptest::prop_assert_ne!(copy.len(), m.len());
            }
        }

        /// Whatever order records come in, the memory is what inserting
        /// each in its place by a plain scan makes: the newest-first
        /// shortcut changes nothing (instants written two ways included).
        #[test]
        fn any_order_of_records_is_remembered_as_a_scan_places_them(
            adds in proptest::collection::vec((0usize..6, 0u128..1000), 0..40)
        ) {
            const AT: [&str; 6] = [
                "2026-01-01T00:00:00Z",
                "2026-01-01T00:00:00.000Z",
                "2026-01-01T00:00:00.500Z",
                "2026-01-01T00:00:01Z",
                "2026-01-01T01:00:01+01:00",
                "2026-01-01T00:00:02Z",
            ];
            let mut m = RecordMemory::starting_at(None);
            let mut scanned: Vec<(String, Vec<RecordIdentity>)> = Vec::new();
            for (at, n) in adds {
                let (at, id) = (AT[at], RecordIdentity::test(n));
                m.add(at, id);
                match scanned.iter().position(|(t, _)| compare_params(t, at) != Ordering::Less) {
                    Some(i) if compare_params(&scanned[i].0, at) == Ordering::Equal => scanned[i].1.push(id),
                    Some(i) => scanned.insert(i, (at.to_string(), vec![id])),
                    None => scanned.push((at.to_string(), vec![id])),
                }
            }
            proptest::prop_assert_eq!(plain(&m), scanned);
        }
    }

    #[test]
    fn identities_are_kept_in_order_of_their_instants() {
        let mut m = RecordMemory::starting_at(None);
        let id = RecordIdentity::test;
        m.add(T[2], id(0xc));
        m.add(T[0], id(0xa));
        m.add(T[1], id(0xb));
        m.add(T[2], id(0xd));
        assert_eq!(m.len(), 4);
        let order: Vec<&str> = m.held.seen.iter().map(|g| &*g.at).collect();
        assert_eq!(
            order,
            [T[0], T[1], T[2]],
            "'.' sorts before 'Z' as text; instants decide"
        );
        assert!(m.identities().contains(&id(0xd)));
        m.keep_from(T[1]);
        assert_eq!(m.len(), 3);
        assert_eq!(m.complete_from(), Some(T[1]));
    }

    #[test]
    fn forgetting_moves_where_the_memory_is_complete_only_forward() {
        let mut m = RecordMemory::starting_at(Some(T[1].into()));
        for (i, t) in T.into_iter().enumerate() {
            m.add(t, RecordIdentity::test(i as u128));
        }
        m.forget_before(T[0]);
        assert_eq!((m.len(), m.complete_from()), (4, Some(T[1])));
        m.forget_before(T[2]);
        assert_eq!((m.len(), m.complete_from()), (2, Some(T[2])));
    }

    #[test]
    fn a_bound_forgets_whole_instants_and_moves_where_the_memory_is_complete() {
        let mut m = RecordMemory::starting_at(None);
        for (i, t) in T.iter().enumerate() {
            for k in 0..=i {
                m.add(t, RecordIdentity::test((i * 10 + k) as u128));
            }
        }
        assert_eq!(m.len(), 10);
        m.bound(8);
        assert_eq!(m.len(), 7, "the oldest two instants went whole");
        assert_eq!(m.complete_from(), Some(T[2]));
        assert_eq!(
            m.next_start(T[0].into()),
            T[2],
            "never re-read what is not remembered"
        );
        assert_eq!(m.next_start(T[3].into()), T[3]);
        m.bound(1);
        assert_eq!(m.len(), 4, "the newest instant stays whole");
    }
}

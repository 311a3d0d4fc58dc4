//! The lookback memory as the audit trail records it. A page's
//! `page_committed` line carries what the page changed in the memory
//! ([`MemoryChange`]: the identities it added, and how many of the oldest
//! cursor values were forgotten) and a seal of the whole memory after it
//! ([`Seal`]: where it is complete from, how many identities it holds, and
//! the SHA-256 of its JSON as the cursor file holds it), never the memory
//! itself: a line grows by the page, not by the memory (a memory of 20,000
//! identities is about a megabyte, and every line used to copy it).
//!
//! The cursor file (or row) keeps the whole memory and is proven by the
//! seal: the start-up proof compares the seal of what the cursor holds
//! with the line's. A cursor rolled forward, repaired or rebuilt from the
//! trail replays the changes from a memory it trusts and must arrive at
//! the line's seal, or the run stops naming the line.
//!
//! Every change to the memory is a set of additions followed by dropping
//! a prefix of its cursor values (forgetting the oldest, bounding it,
//! keeping a new window's span): `memory.rs` keeps its values sorted, so
//! "the first `dropped` values" says exactly what went.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::memory::{Group, RecordMemory};

/// The whole memory, by its digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Seal {
    /// Where the memory is complete from (`null`: since the stream began).
    pub complete_from: Option<String>,
    /// How many identities it holds.
    pub identities: usize,
    /// SHA-256 of the memory's JSON as the cursor holds it
    /// (`{"complete_from":…,"seen":[[cursor value,[identity,…]],…]}`).
    pub sha256: String,
}

/// What one page changed in the memory: `added` first (each identity
/// remembered at its cursor value, in order), then the `dropped` oldest
/// cursor values forgotten whole; the seal says where it is complete from
/// after.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MemoryChange {
    pub added: Vec<Group>,
    pub dropped: usize,
}

impl MemoryChange {
    /// The change that adds `landed` (each record at its cursor value, in
    /// order; records of one value in a row written once); nothing
    /// dropped yet.
    pub(crate) fn added(landed: &[crate::record::identity::RecordKey]) -> MemoryChange {
        let mut added: Vec<Group> = Vec::new();
        for key in landed {
            match added.last_mut() {
                Some(group) if group.at() == key.at => group.push(key.identity),
                _ => added.push(Group::new(&key.at, key.identity)),
            }
        }
        MemoryChange { added, dropped: 0 }
    }
}

/// A memory as a line records it: sealed (this version), or whole (the
/// lines of versions before seals).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub(crate) enum LineMemory {
    Sealed(Seal),
    Whole(RecordMemory),
}

impl RecordMemory {
    /// The memory's seal.
    pub(crate) fn seal(&self) -> Seal {
        let sha256 = self.sha256_once(|memory| {
            crate::digest::sha256_hex(serde_json::to_string(memory).unwrap_or_default().as_bytes())
        });
        Seal {
            complete_from: self.complete_from().map(str::to_string),
            identities: self.len(),
            sha256: sha256.to_string(),
        }
    }

    /// `change` made to this memory, which is then complete from where
    /// `after` says, unchecked: the caller holds the result to a seal.
    pub(super) fn apply(&mut self, change: &MemoryChange, after: &Seal) -> Result<(), String> {
        for group in &change.added {
            for id in group.ids() {
                self.add(group.at(), *id);
            }
        }
        self.drop_oldest(change.dropped)?;
        self.set_complete_from(after.complete_from.clone());
        Ok(())
    }

    /// The memory `change` makes of this one, which must then have the
    /// seal `after`; `Err` says how it does not.
    pub(crate) fn changed(mut self, change: &MemoryChange, after: &Seal) -> Result<RecordMemory, String> {
        self.apply(change, after)?;
        let seal = self.seal();
        if &seal != after {
            return Err(format!(
                "the lookback memory rebuilt from the trail ({} identities, sha256 {}) is not the one the line \
                 seals ({} identities, sha256 {})",
                seal.identities, seal.sha256, after.identities, after.sha256
            ));
        }
        Ok(self)
    }
}

/// The lookback memory of a stream rebuilt from its `page_committed`
/// lines, replayed in trail order from its first: what `--repair-state`
/// and a torn cursor file take, when no cursor holds a memory to start
/// from. A line follows the one before when its `cursor_before` is that
/// line's `cursor_after`; one that does not starts from no memory (the
/// stream started over), and one whose change does not reach its seal from
/// there (a run that had lost the stream's lock) is passed over. The
/// caller holds the result to the seal of the line it takes.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    at: Option<Value>,
    memory: Option<RecordMemory>,
}

impl Replay {
    /// One more commit line of the stream (a dry run's is passed over).
    pub(crate) fn line(&mut self, line: &Value) {
        if line["dry_run"] == true {
            return;
        }
        let before = &line["cursor_before"];
        let chained = self.at.as_ref().is_none_or(|at| at == before);
        let base = if chained { self.memory.as_ref() } else { None };
        if let Ok(memory) = super::memory_after(base, before["window_start"].as_str(), line) {
            self.memory = memory;
            self.at = Some(line["cursor_after"].clone());
        }
    }

    /// The memory after the last line that followed.
    pub(crate) fn memory(self) -> Option<RecordMemory> {
        self.memory
    }
}

/// `state` (a cursor state as a line records it, or as a cursor file holds
/// it) with its lookback memory sealed: the form every comparison of a
/// cursor with a line is made in, whichever version wrote the line.
pub(crate) fn sealed(mut state: Value) -> Value {
    let whole = state
        .get("lookback")
        .filter(|l| l.get("seen").is_some())
        .and_then(|l| serde_json::from_value::<RecordMemory>(l.clone()).ok());
    if let Some(memory) = whole {
        state["lookback"] = serde_json::to_value(memory.seal()).unwrap_or_default();
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::identity::RecordIdentity;

    const T: [&str; 3] = [
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:01Z",
        "2026-01-01T00:00:02Z",
    ];

    #[test]
    fn a_change_replayed_reaches_the_seal_and_a_wrong_one_does_not() {
        let mut before = RecordMemory::starting_at(None);
        before.add(T[0], RecordIdentity::test(1));
        before.add(T[1], RecordIdentity::test(2));
        let mut after = before.clone();
        after.add(T[2], RecordIdentity::test(3));
        after.forget_before(T[1]);
        let change = MemoryChange {
            added: vec![Group::new(T[2], RecordIdentity::test(3))],
            dropped: 1,
        };
        let rebuilt = before.clone().changed(&change, &after.seal()).unwrap();
        assert_eq!(rebuilt, after);
        let wrong = MemoryChange {
            added: vec![Group::new(T[2], RecordIdentity::test(4))],
            dropped: 1,
        };
        assert!(before
            .clone()
            .changed(&wrong, &after.seal())
            .unwrap_err()
            .contains("is not the one the line seals"));
        let too_many = MemoryChange {
            added: Vec::new(),
            dropped: 9,
        };
        assert!(before.changed(&too_many, &after.seal()).is_err());
    }

    #[test]
    fn a_whole_memory_and_its_seal_compare_equal_once_sealed() {
        let mut memory = RecordMemory::starting_at(Some(T[0].into()));
        memory.add(T[1], RecordIdentity::test(7));
        let whole = serde_json::json!({"window_start": T[0], "lookback": memory});
        let seal = serde_json::json!({"window_start": T[0], "lookback": memory.seal()});
        assert_eq!(sealed(whole), seal);
        assert_eq!(sealed(seal.clone()), seal);
        let line: LineMemory = serde_json::from_value(seal["lookback"].clone()).unwrap();
        assert_eq!(line, LineMemory::Sealed(memory.seal()));
        let line: LineMemory = serde_json::from_value(serde_json::to_value(&memory).unwrap()).unwrap();
        assert_eq!(line, LineMemory::Whole(memory));
    }
}

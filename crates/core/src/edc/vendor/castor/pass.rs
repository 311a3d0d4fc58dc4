//! A collection's pass (`delta.collection`): one read of a live collection
//! from page 1 to the `page_count` its pages state, judged consistent only
//! when its last page states the same `total_items` as its first.
//!
//! Castor's HAL collections are paged by number over live data: an item
//! inserted or deleted while pages 2..n are read shifts every later page,
//! so a pass may miss an item or list one twice. The item count on the
//! first and last page is the server's own word on whether that happened;
//! a pass whose count moved is read again from page 1 (its pages already
//! landed are recognised by their hash and not landed twice), at most
//! `max_passes` times a run. A consistent pass is the run's snapshot: its
//! pages' SHA-256s and the count, which the cursor keeps.

/// The pass in progress.
#[derive(Debug)]
pub(crate) struct Pass {
    /// Passes begun this run, from 1.
    number: u32,
    /// The item count the pass's first page stated (`None` before it).
    first_total: Option<u64>,
    /// The SHA-256 of each page with items so far, in order.
    pages: Vec<String>,
    /// Pages whose bytes are landed already: the last snapshot's, and
    /// every page with items this run read.
    known: std::collections::HashSet<String>,
    /// Set when the page just committed ended an inconsistent pass: its
    /// counts, for the audit line the loop writes before the next pass.
    changed: Option<Changed>,
}

/// A pass whose last page stated another item count than its first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Changed {
    /// The pass that changed (from 1).
    pub pass: u32,
    pub first_total: u64,
    pub last_total: u64,
}

/// What a page does to its pass.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// More pages follow.
    Going,
    /// The last page of a consistent pass: the window is complete; the
    /// pass's pages with items (their SHA-256s, in order) and its count.
    Consistent { pages: Vec<String>, total: u64 },
    /// The last page of a pass whose item count moved: page 1 is next.
    ReadAgain,
}

impl Pass {
    /// The first pass of a run after the last snapshot, whose pages had
    /// the SHA-256s `last` (none for a first run).
    pub(crate) fn new(last: &[String]) -> Pass {
        Pass {
            number: 1,
            first_total: None,
            pages: Vec::new(),
            known: last.iter().cloned().collect(),
            changed: None,
        }
    }

    /// Whether a page of these bytes is landed already (unchanged since
    /// the last snapshot, or read by an earlier pass of this run): it is
    /// not landed or listed again.
    pub(crate) fn knows(&self, sha256: &str) -> bool {
        self.known.contains(sha256)
    }

    /// A page of the pass: its items, the item count it states (a page
    /// that states none is refused before it gets here), its SHA-256, and
    /// whether the page count says it is the last.
    pub(crate) fn page(&mut self, records: u64, total: u64, sha256: &str, last: bool) -> Step {
        let first_total = *self.first_total.get_or_insert(total);
        if records > 0 {
            self.pages.push(sha256.to_string());
            self.known.insert(sha256.to_string());
        }
        if !last {
            return Step::Going;
        }
        if first_total == total {
            return Step::Consistent {
                pages: std::mem::take(&mut self.pages),
                total,
            };
        }
        self.changed = Some(Changed {
            pass: self.number,
            first_total,
            last_total: total,
        });
        self.number += 1;
        self.first_total = None;
        self.pages.clear();
        Step::ReadAgain
    }

    /// The change that ended the last pass, once (the loop audits it and
    /// starts the next pass).
    pub(crate) fn take_changed(&mut self) -> Option<Changed> {
        self.changed.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(c: char) -> String {
        c.to_string().repeat(64)
    }

    #[test]
    fn a_pass_whose_count_held_is_a_snapshot_of_its_pages_with_items() {
        let mut pass = Pass::new(&[]);
        assert_eq!(pass.page(3, 5, &sha('a'), false), Step::Going);
        assert_eq!(
            pass.page(2, 5, &sha('b'), true),
            Step::Consistent {
                pages: vec![sha('a'), sha('b')],
                total: 5
            }
        );
        assert_eq!(pass.take_changed(), None);
    }

    #[test]
    fn a_pass_whose_count_moved_is_read_again_and_said_once() {
        let mut pass = Pass::new(&[]);
        pass.page(3, 5, &sha('a'), false);
        assert_eq!(pass.page(3, 6, &sha('b'), true), Step::ReadAgain);
        let changed = Changed {
            pass: 1,
            first_total: 5,
            last_total: 6,
        };
        assert_eq!(pass.take_changed(), Some(changed));
        assert_eq!(pass.take_changed(), None);
        // The second pass starts afresh: its own first count and pages.
        pass.page(3, 6, &sha('c'), false);
        assert_eq!(
            pass.page(3, 6, &sha('d'), true),
            Step::Consistent {
                pages: vec![sha('c'), sha('d')],
                total: 6
            }
        );
    }

    #[test]
    fn pages_of_the_last_snapshot_and_of_earlier_passes_are_known() {
        let mut pass = Pass::new(&[sha('a')]);
        assert!(pass.knows(&sha('a')) && !pass.knows(&sha('b')));
        pass.page(3, 4, &sha('b'), true);
        assert!(pass.knows(&sha('b')), "read by the pass that changed");
    }

    #[test]
    fn an_empty_collection_is_a_snapshot_of_no_pages() {
        let mut pass = Pass::new(&[]);
        assert_eq!(
            pass.page(0, 0, &sha('e'), true),
            Step::Consistent {
                pages: Vec::new(),
                total: 0
            }
        );
    }
}

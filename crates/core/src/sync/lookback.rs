//! A page read again in a lookback's span: which of its records were
//! landed before (the cursor's memory of them, `crate::store`'s lookback memory)
//! and which are new. Pure, so the rule is tested without a server.

use crate::config::{Delta, PayloadFormat};
use crate::edc::payload::identity::odm_record_keys;
use crate::edc::payload::{InvalidPayload, PageSummary};
use crate::ledger::{Cursor, LandingTemp, StoreError};
use crate::record::identity::{IdentitySet, Occurrences, RecordIdentity, RecordKey};
use crate::record::order::earlier;

/// Where the window after one that ended at `mark` (its high-water mark,
/// or the second after a date window's end) starts: `mark` less the
/// delta's lookback, when it has one and the memory of landed records
/// reaches back that far. The benchmarks and the OQ check cursors with it.
pub fn restart_at(delta: &Delta, mark: &str) -> String {
    delta
        .lookback
        .as_ref()
        .and_then(|l| earlier(mark, l.span.as_secs()))
        .unwrap_or_else(|| mark.to_string())
}

/// Where a stream of `vendor` in the policy file `config` whose last
/// record is `high_water` has its cursor once everything is landed: the
/// high-water mark less the policy's lookback ([`restart_at`]). The OQ,
/// the benchmarks and the tests judge a finished sync's cursor by it.
pub fn settled_window_start(
    config: &std::path::Path,
    vendor: &str,
    high_water: &str,
) -> Result<String, crate::config::ConfigError> {
    let loaded = crate::config::load(config)?;
    Ok(match &loaded.vendor(vendor)?.delta {
        Some(delta) => restart_at(delta, high_water),
        None => high_water.to_string(),
    })
}

/// A page's records, told apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Split {
    /// Records no earlier page landed: this page lands them.
    pub new: Vec<RecordKey>,
    /// Positions of the records an earlier page landed, or an earlier
    /// position of this page (a vendor listing one record twice).
    pub repeated: Vec<u32>,
    /// With `identical_records: distinct`: the content identity of every
    /// record on the page, in order, for the window's count of twins once
    /// the page commits (empty otherwise).
    pub counted: Vec<RecordIdentity>,
}

/// A received page's records told apart, when there is anything to tell
/// apart them from (a lookback's memory, or `backfill --missing-only`'s
/// records landed before). A JSON page's keys were learned while it
/// streamed in (`summary.keys`); an ODM page's are read once more from the
/// temp file, a record at a time. The inner error is a page whose records
/// cannot be identified (quarantined like any invalid page).
pub(super) fn split_page(
    delta: &Delta,
    cursor: &Cursor,
    summary: &mut PageSummary,
    temp: &mut LandingTemp,
    landed_before: Option<&IdentitySet>,
    occurrences: Option<&Occurrences>,
) -> Result<Result<Option<Split>, InvalidPayload>, StoreError> {
    if !identifies(delta, landed_before) || summary.records == 0 {
        return Ok(Ok(None));
    }
    let keys = match (summary.keys.take(), delta.format) {
        (Some(keys), _) => keys,
        (None, PayloadFormat::Json) => Err(InvalidPayload::json(
            "the page was checked without its records' identities",
        )),
        // A study dataset's records carry no time of their own: the
        // document's (its mark) stands for all of them.
        (None, PayloadFormat::Odm) => {
            let at = summary
                .high_water
                .as_ref()
                .map(|v| v.as_param())
                .unwrap_or_default();
            odm_record_keys(temp.read_back()?, &at)
        }
    };
    Ok(keys.map(|keys| Some(split(cursor, keys, landed_before, occurrences))))
}

/// Whether a page's check must learn its records' identities (JSON; an
/// ODM page is read again instead).
pub(super) fn identifies(delta: &Delta, landed_before: Option<&IdentitySet>) -> bool {
    delta.lookback.is_some() || landed_before.is_some()
}

/// Splits a page's records by the memory of the cursor before it and,
/// for `backfill --missing-only`, the records landed before elsewhere.
///
/// With `occurrences` (`identical_records: distinct`, the count of each
/// content identity on the window's pages committed before this one), a
/// record's identity is first made its occurrence's: the third of three
/// identical rows is told apart from the first two, on this page or
/// across pages, and is the same third one when the window is read again.
pub(super) fn split(
    cursor: &Cursor,
    mut keys: Vec<RecordKey>,
    landed_before: Option<&IdentitySet>,
    occurrences: Option<&Occurrences>,
) -> Split {
    let known = cursor
        .lookback_memory()
        .map(|m| m.identities())
        .unwrap_or_default();
    let elsewhere = |id: &RecordIdentity| landed_before.is_some_and(|l| l.contains(id));
    let mut on_page = IdentitySet::with_capacity_and_hasher(keys.len(), Default::default());
    let mut out = Split {
        new: Vec::new(),
        repeated: Vec::new(),
        counted: Vec::new(),
    };
    if let Some(before) = occurrences {
        let mut here = Occurrences::default();
        for key in &mut keys {
            let content = key.identity;
            let seen = here.entry(content).or_insert(0);
            let n = before.get(&content).copied().unwrap_or(0) + *seen;
            *seen += 1;
            key.identity = content.occurrence(n);
            out.counted.push(content);
        }
    }
    for key in keys {
        if known.contains(&key.identity) || elsewhere(&key.identity) || !on_page.insert(key.identity) {
            out.repeated.push(key.position);
        } else {
            out.new.push(key);
        }
    }
    out
}

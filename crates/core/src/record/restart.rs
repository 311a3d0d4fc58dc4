//! Where a completed window's next one starts, from its high-water mark:
//! a rule of cursor values alone, so the cursor store applies it without
//! knowing the vendor whose delta chose it (`crate::edc::vendor`).

use super::CursorValue;

/// How a completed window's high-water mark becomes the next window's
/// start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Restart {
    /// At the mark itself (a timestamp read again, its records recognised
    /// by the lookback).
    #[default]
    AtHighWater,
    /// At the number after it (Rave's audit records: the largest SourceID
    /// plus one, as `startid` asks).
    AfterNumber,
    /// At the second the mark falls in, in UTC (a Rave study dataset: its
    /// `CreationDateTime`, which the next `start=` reads again).
    AtItsSecond,
}

impl Restart {
    /// The next window's start after a window whose high-water mark was
    /// `high_water` (`None`: a window that saw no record starts none).
    pub(crate) fn next_start(self, high_water: Option<&CursorValue>) -> Option<String> {
        let hw = high_water?;
        match (self, hw) {
            (Restart::AfterNumber, CursorValue::Number(n)) => n.as_u64().map(|id| (id + 1).to_string()),
            (Restart::AtItsSecond, CursorValue::Text(made)) => {
                super::order::instant(made).map(|at| super::order::utc_text(at, 0))
            }
            (_, other) => Some(other.as_param()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_restarts_where_its_endpoint_reads_on() {
        let id = CursorValue::Number(2351u64.into());
        assert_eq!(
            Restart::AfterNumber.next_start(Some(&id)).as_deref(),
            Some("2352")
        );
        let ts = CursorValue::Text("2026-01-03T00:00:00Z".into());
        assert_eq!(
            Restart::AtHighWater.next_start(Some(&ts)).as_deref(),
            Some("2026-01-03T00:00:00Z")
        );
        assert_eq!(Restart::AtHighWater.next_start(None), None);
        let made = CursorValue::Text("2026-12-04T05:10:05.600+02:00".into());
        assert_eq!(
            Restart::AtItsSecond.next_start(Some(&made)).as_deref(),
            Some("2026-12-04T03:10:05Z")
        );
    }
}

//! JSON page validation as the body streams in: the push lexer
//! (`lexer.rs`) checks every byte; this handler follows only the paths
//! to the configured pointers (the records array with each record's
//! cursor field, the next-page link) and Vault's envelope members, and
//! skips everything else without materialising it.
//!
//! One concept: the page scan that the lexer drives, with the checks it
//! makes of what it finds on the way (a record's cursor value, the marks).

use super::identity::Identities;
use super::{Envelope, InvalidPayload, PageSummary, VendorMessage};
use crate::config::CursorKind;
use crate::record::order::{Mark, Seen};
use edc_json_lexer::{Handler, Kind, Lexer, Want};

/// Splits an RFC 6901 pointer into unescaped tokens.
pub(super) fn tokens(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// One pointer token: a member name, or an array index when written as
/// one (RFC 6901 §4: digits without a leading zero).
struct Token {
    name: Vec<u8>,
    index: Option<usize>,
}

fn pointer(p: &str) -> Vec<Token> {
    tokens(p)
        .into_iter()
        .map(|t| Token {
            index: t.parse::<usize>().ok().filter(|n| n.to_string() == t),
            name: t.into_bytes(),
        })
        .collect()
}

/// The targets, as bits of a mask.
const RECORDS: u8 = 1;
const NEXT: u8 = 2;
/// A collection's page count and item count (`delta.collection`).
const PAGES: u8 = 4;
const TOTAL: u8 = 8;
const TARGETS: [u8; 4] = [RECORDS, NEXT, PAGES, TOTAL];

/// The top-level members in which Vault says how a request went (Vault
/// REST API reference, "Errors": `responseStatus`, `errors[{type,
/// message}]`; WARNING responses carry `warnings` the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    Status,
    Errors,
    Warnings,
}

impl Member {
    fn of(key: &[u8]) -> Option<Member> {
        match key {
            b"responseStatus" => Some(Member::Status),
            b"errors" => Some(Member::Errors),
            b"warnings" => Some(Member::Warnings),
            _ => None,
        }
    }
}

/// The same members by path, for the test oracle.
#[cfg(test)]
pub(super) fn envelope_member(path: &[String]) -> Option<&str> {
    match path {
        [one] if Member::of(one.as_bytes()).is_some() => Some(one.as_str()),
        _ => None,
    }
}

/// An entered container.
enum Frame {
    /// On the way to a target: the targets (`mask`) whose first `depth`
    /// tokens lead here, and the next element's index in an array.
    Path {
        mask: u8,
        depth: usize,
        object: bool,
        next_index: usize,
    },
    /// The records array.
    Records {
        count: u64,
    },
    Record,
}

/// What the value after the current key is.
#[derive(Clone, Copy, Default)]
struct Slot {
    mask: u8,
    member: Option<Member>,
    /// A record's cursor field, its `record_id` field (or both).
    cursor: bool,
    id: bool,
}

/// A value asked for whole.
#[derive(Clone, Copy)]
enum Captured {
    /// A record's cursor field, its `record_id` field, or one that is both.
    Field {
        cursor: bool,
        id: bool,
    },
    Next,
    /// The page count or the item count of a collection (`PAGES`, `TOTAL`).
    Count(u8),
    Envelope(Member),
}

/// What a scan found on the way.
#[derive(Default)]
pub(super) struct Found {
    pub(super) records: Option<u64>,
    pub(super) next: Option<Option<String>>,
    pub(super) page_count: Option<u64>,
    pub(super) total_items: Option<u64>,
    pub(super) other_day: Option<String>,
    pub(super) high_water: Option<Mark>,
    pub(super) low_water: Option<Mark>,
    pub(super) envelope: Envelope,
}

impl Found {
    /// The page's summary, once the whole document was valid.
    pub(super) fn into_summary(self, records_pointer: &str) -> Result<PageSummary, InvalidPayload> {
        // A vendor's failure document has no records array; whether that
        // is an error or a vendor error is for the dialect to say.
        if self.records.is_none() && !self.envelope.reports_failure() {
            return Err(InvalidPayload::json(format!(
                "no records array at {records_pointer}"
            )));
        }
        Ok(PageSummary {
            records: self.records.unwrap_or(0),
            records_found: self.records.is_some(),
            next_link: self.next.flatten().filter(|s| !s.is_empty()),
            page_count: self.page_count,
            total_items: self.total_items,
            other_day: self.other_day,
            high_water: self.high_water.map(Mark::into_value),
            low_water: self.low_water.map(Mark::into_value),
            envelope: self.envelope,
            keys: None,
        })
    }
}

/// Why a cursor field's value is refused: its kind, never the value
/// (error messages reach the audit trail, and record content must not).
pub(super) fn not_a_cursor(field: &str, value: &serde_json::Value) -> String {
    let kind = match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Array(_) => "an array",
        _ => "an object",
    };
    format!("cursor field {field:?} must be a string or a number, got {kind}")
}

/// Follows the document towards the pointers.
struct PageScan {
    records: Vec<Token>,
    records_pointer: String,
    next: Option<Vec<Token>>,
    /// A collection's page count and item count pointers.
    counts: Option<(Vec<Token>, Vec<Token>)>,
    /// The same pointers as written, for messages.
    count_pointers: (String, String),
    cursor_field: Vec<u8>,
    /// False for a collection, whose records carry no cursor.
    has_cursor: bool,
    /// A window of whole days in this zone: each PHP DateTime's own date
    /// must be its day here too.
    day_zone: Option<crate::zone::Zone>,
    /// The zone of `server_local` cursor values.
    server_zone: Option<crate::zone::Zone>,
    /// What every record's cursor value must be; `None` takes any string
    /// or number (a check built without a policy: tests, benchmarks).
    cursor_kind: Option<CursorKind>,
    frames: Vec<Frame>,
    slot: Slot,
    capturing: Option<Captured>,
    found: Found,
    /// Asked for by a lookback: every record's identity.
    identities: Option<Identities>,
}

impl PageScan {
    /// The position of the record being read (or just ended).
    fn record_position(&self) -> usize {
        self.frames
            .iter()
            .rev()
            .find_map(|f| match f {
                Frame::Records { count } => Some(*count as usize),
                _ => None,
            })
            .unwrap_or_default()
            .saturating_sub(1)
    }

    fn target(&self, bit: u8) -> Option<&[Token]> {
        match bit {
            RECORDS => Some(&self.records),
            PAGES => self.counts.as_ref().map(|c| &c.0[..]),
            TOTAL => self.counts.as_ref().map(|c| &c.1[..]),
            _ => self.next.as_deref(),
        }
    }

    /// The targets in `mask` whose token at `depth` `matches`.
    fn narrow(&self, mask: u8, depth: usize, matches: impl Fn(&Token) -> bool) -> u8 {
        TARGETS
            .into_iter()
            .filter(|&bit| mask & bit != 0)
            .filter(|&bit| self.target(bit).and_then(|t| t.get(depth)).is_some_and(&matches))
            .fold(0, |m, bit| m | bit)
    }

    fn ends_at(&self, bit: u8, mask: u8, depth: usize) -> bool {
        mask & bit != 0 && self.target(bit).is_some_and(|t| t.len() == depth)
    }

    /// A value on the way to the targets (`mask`, `depth` tokens matched).
    fn on_path(
        &mut self,
        kind: Kind,
        mask: u8,
        depth: usize,
        member: Option<Member>,
    ) -> Result<Want, String> {
        if self.ends_at(RECORDS, mask, depth) {
            if kind != Kind::Array {
                return Err(format!(
                    "the records at {} are not an array",
                    self.records_pointer
                ));
            }
            self.frames.push(Frame::Records { count: 0 });
            return Ok(Want::Enter);
        }
        if self.ends_at(NEXT, mask, depth) {
            self.capturing = Some(Captured::Next);
            return Ok(Want::Capture);
        }
        for bit in [PAGES, TOTAL] {
            if self.ends_at(bit, mask, depth) {
                self.capturing = Some(Captured::Count(bit));
                return Ok(Want::Capture);
            }
        }
        if let Some(member) = member {
            self.capturing = Some(Captured::Envelope(member));
            return Ok(Want::Capture);
        }
        if mask != 0 && matches!(kind, Kind::Object | Kind::Array) {
            self.frames.push(Frame::Path {
                mask,
                depth,
                object: kind == Kind::Object,
                next_index: 0,
            });
            return Ok(Want::Enter);
        }
        // A scalar where the pointer goes on, or off every path: the
        // pointer does not exist here, which `finish` reports.
        Ok(Want::Skip)
    }

    /// The refusal of a cursor value (`seen`) of another kind than the
    /// policy declares, naming the record's position and never the value
    /// (record content must not reach the audit trail).
    fn kind_error(&self, kind: CursorKind, seen: &Seen<'_>) -> String {
        let expected = match kind {
            CursorKind::Timestamp => "an RFC 3339 timestamp",
            CursorKind::PhpDatetime => "a PHP DateTime object",
            CursorKind::ServerLocal => "a server-local time",
            CursorKind::Number => "a number",
            CursorKind::Text => "a string",
        };
        let held = match seen.text_value() {
            None => "a number".to_string(),
            Some(s) => format!("text of {} characters", s.chars().count()),
        };
        // Counted from 1 here, as this message always has.
        let position = self.record_position() + 1;
        format!(
            "record {position} of {}: the cursor field {:?} holds {held}, not {expected} (delta.cursor_kind: {})",
            self.records_pointer,
            String::from_utf8_lossy(&self.cursor_field),
            kind.as_str()
        )
    }

    fn cursor_value(&mut self, raw: &[u8], plain: Option<&str>) -> Result<(), String> {
        if self.cursor_kind == Some(CursorKind::PhpDatetime) {
            return self.php_datetime_value(raw);
        }
        if self.cursor_kind == Some(CursorKind::ServerLocal) {
            return self.server_local_value(raw);
        }
        // The common case, a string the lexer read plainly, needs no
        // parser and no check (the lexer has made both) and no copy unless
        // it moves a mark.
        if let Some(text) = plain {
            return self.observe(&Seen::text(text));
        }
        let Some(text) = raw.strip_prefix(b"\"").and_then(|r| r.strip_suffix(b"\"")) else {
            return self.parsed_cursor_value(raw);
        };
        match std::str::from_utf8(text) {
            Ok(text) if !text.contains('\\') => self.observe(&Seen::text(text)),
            _ => self.parsed_cursor_value(raw),
        }
    }

    /// A PHP `DateTime` object (`cursor_kind: php_datetime`): its instant,
    /// in the zone it names, is the value compared and remembered.
    fn php_datetime_value(&mut self, raw: &[u8]) -> Result<(), String> {
        let parsed: serde_json::Value = serde_json::from_slice(raw).map_err(|e| e.to_string())?;
        let position = self.record_position() + 1;
        let field = String::from_utf8_lossy(&self.cursor_field).into_owned();
        let instant = crate::zone::php_datetime(&parsed).map_err(|why| {
            format!(
                "record {position} of {}: the cursor field {field:?} is not a PHP DateTime (delta.cursor_kind: \
                 php_datetime): {why}",
                self.records_pointer
            )
        })?;
        if let (Some(zone), None) = (&self.day_zone, &self.found.other_day) {
            self.found.other_day = crate::zone::other_day(zone, &parsed, &instant)
                .map(|d| format!("record {position} of {}: {d}", self.records_pointer));
        }
        self.observe(&Seen::text(&instant))
    }

    /// A server-local wall time (`cursor_kind: server_local`): its instant
    /// in the server's zone is the value compared and remembered.
    fn server_local_value(&mut self, raw: &[u8]) -> Result<(), String> {
        let position = self.record_position() + 1;
        let field = String::from_utf8_lossy(&self.cursor_field).into_owned();
        let refused = |why: &str| {
            format!(
                "record {position} of {}: the cursor field {field:?} is not a server-local time \
                 (delta.cursor_kind: server_local): {why}",
                self.records_pointer
            )
        };
        let text: String = serde_json::from_slice(raw).map_err(|_| refused("not a string"))?;
        let zone = self
            .server_zone
            .as_ref()
            .ok_or_else(|| refused("no server_timezone to read it in"))?;
        // The message names the record and the shape, never the value.
        let instant = zone
            .instant_of_wall(&text)
            .map_err(|_| refused("not YYYY-MM-DD HH:MM[:SS]"))?;
        self.observe(&Seen::text(&instant))
    }

    /// A cursor value with escapes, or no string: through serde_json.
    fn parsed_cursor_value(&mut self, raw: &[u8]) -> Result<(), String> {
        let parsed: serde_json::Value = serde_json::from_slice(raw).map_err(|e| e.to_string())?;
        match &parsed {
            serde_json::Value::Number(n) => self.observe(&Seen::number(n)),
            serde_json::Value::String(s) => self.observe(&Seen::text(s)),
            other => Err(not_a_cursor(&String::from_utf8_lossy(&self.cursor_field), other)),
        }
    }

    /// A record's cursor value: its kind checked, then compared with the
    /// page's marks where it lies, and copied only into a mark it moves.
    fn observe(&mut self, seen: &Seen<'_>) -> Result<(), String> {
        if let Some(ids) = &mut self.identities {
            ids.cursor(seen.as_param());
        }
        if let Some(kind) = self.cursor_kind {
            let fits = match kind {
                CursorKind::Timestamp | CursorKind::PhpDatetime | CursorKind::ServerLocal => {
                    seen.is_instant()
                }
                CursorKind::Number => seen.text_value().is_none(),
                CursorKind::Text => seen.text_value().is_some(),
            };
            if !fits {
                return Err(self.kind_error(kind, seen));
            }
        }
        let found = &mut self.found;
        let higher = match &found.high_water {
            None => true,
            Some(hw) => seen.against(hw)? == std::cmp::Ordering::Greater,
        };
        // Records mostly come in order: above the high-water mark is never
        // below the low one (once there is one).
        let lower = match &found.low_water {
            None => true,
            Some(_) if higher => false,
            Some(lw) => seen.against(lw)? == std::cmp::Ordering::Less,
        };
        for (moves, mark) in [(lower, &mut found.low_water), (higher, &mut found.high_water)] {
            match mark {
                Some(mark) if moves => mark.set(seen),
                None if moves => *mark = Some(seen.to_mark()),
                _ => {}
            }
        }
        Ok(())
    }

    /// [`Handler::begin`] for everything but a plain member of a record.
    #[inline(never)]
    fn begin_elsewhere(&mut self, kind: Kind, slot: Slot) -> Result<Want, String> {
        match self.frames.last_mut() {
            None => {
                let all = RECORDS
                    | if self.next.is_some() { NEXT } else { 0 }
                    | if self.counts.is_some() { PAGES | TOTAL } else { 0 };
                self.on_path(kind, all, 0, None)
            }
            Some(Frame::Records { count }) => {
                if kind != Kind::Object {
                    return Err(format!("a record in {} is not an object", self.records_pointer));
                }
                *count += 1;
                self.frames.push(Frame::Record);
                match &mut self.identities {
                    Some(ids) => {
                        ids.begin_record();
                        Ok(if ids.by_content() {
                            Want::EnterKept
                        } else {
                            Want::Enter
                        })
                    }
                    None => Ok(Want::Enter),
                }
            }
            Some(Frame::Record) if slot.cursor || slot.id => {
                self.capturing = Some(Captured::Field {
                    cursor: slot.cursor,
                    id: slot.id,
                });
                Ok(Want::Capture)
            }
            Some(Frame::Record) => Ok(Want::Skip),
            Some(Frame::Path {
                mask,
                depth,
                object,
                next_index,
            }) => {
                let (parent, depth) = (*mask, *depth + 1);
                if *object {
                    // A member: its key set the slot.
                    return self.on_path(kind, slot.mask, depth, slot.member);
                }
                let index = *next_index;
                *next_index += 1;
                let mask = self.narrow(parent, depth - 1, |t| t.index == Some(index));
                self.on_path(kind, mask, depth, None)
            }
        }
    }

    /// [`Handler::key`] for a key that is not a record's.
    #[inline(never)]
    fn key_elsewhere(&mut self, key: &[u8]) -> Result<(), String> {
        self.slot = match self.frames.last() {
            Some(&Frame::Path { mask, depth, .. }) => Slot {
                mask: self.narrow(mask, depth, |t| t.name == key),
                member: if depth == 0 { Member::of(key) } else { None },
                ..Slot::default()
            },
            _ => Slot::default(),
        };
        Ok(())
    }
}

impl Handler for PageScan {
    // A member of a record that is neither its cursor nor its `record_id`
    // field is most of a page's values: answered here, inline in the
    // lexer's loop; everything else in `begin_elsewhere`.
    #[inline]
    fn begin(&mut self, kind: Kind) -> Result<Want, String> {
        let slot = std::mem::take(&mut self.slot);
        if !(slot.cursor || slot.id) && matches!(self.frames.last(), Some(Frame::Record)) {
            return Ok(Want::Skip);
        }
        self.begin_elsewhere(kind, slot)
    }

    // A record's key is most of a page's keys: two comparisons, inline.
    #[inline]
    fn key(&mut self, key: &[u8]) -> Result<(), String> {
        if let Some(Frame::Record) = self.frames.last() {
            self.slot = Slot {
                cursor: self.has_cursor && key == self.cursor_field.as_slice(),
                id: self.identities.as_ref().is_some_and(|ids| ids.is_id(key)),
                ..Slot::default()
            };
            return Ok(());
        }
        self.key_elsewhere(key)
    }

    fn end(&mut self) -> Result<(), String> {
        match self.frames.pop() {
            Some(Frame::Records { count }) => self.found.records = Some(count),
            // By `record_id`, a record's key is known at its end; by
            // content, once its bytes are handed over (`kept`).
            Some(Frame::Record) if self.identities.as_ref().is_some_and(|ids| !ids.by_content()) => {
                let position = self.record_position();
                if let Some(ids) = &mut self.identities {
                    ids.end_record(position, None);
                }
            }
            _ => {}
        }
        Ok(())
    }

    // Records are alike: a member is captured for its key alone (the
    // cursor field, the `record_id` field), and a skipped one leaves
    // nothing behind (`begin` takes the slot its key set).
    fn alike(&self) -> bool {
        matches!(self.frames.last(), Some(Frame::Record))
    }

    fn kept(&mut self, raw: &[u8]) -> Result<(), String> {
        let position = self.record_position();
        if let Some(ids) = &mut self.identities {
            ids.end_record(position, Some(raw));
        }
        Ok(())
    }

    fn captured(&mut self, raw: &[u8], plain: Option<&str>) -> Result<(), String> {
        match self.capturing.take() {
            Some(Captured::Field { cursor, id }) => {
                if let (true, Some(ids)) = (id, &mut self.identities) {
                    ids.id_value(raw);
                }
                if cursor {
                    self.cursor_value(raw, plain)?;
                }
                Ok(())
            }
            Some(Captured::Next) => {
                let next: Option<String> = serde_json::from_slice(raw)
                    .map_err(|_| "the next-page value must be a string or null".to_string())?;
                self.found.next = Some(next);
                Ok(())
            }
            Some(Captured::Count(bit)) => {
                let (name, pointer) = match bit {
                    PAGES => ("page count", &self.count_pointers.0),
                    _ => ("item count", &self.count_pointers.1),
                };
                let n: u64 = serde_json::from_slice(raw)
                    .map_err(|_| format!("the collection's {name} at {pointer} is not a whole number"))?;
                match bit {
                    PAGES => self.found.page_count = Some(n),
                    _ => self.found.total_items = Some(n),
                }
                Ok(())
            }
            Some(Captured::Envelope(member)) => {
                let value: serde_json::Value = serde_json::from_slice(raw).map_err(|e| e.to_string())?;
                let envelope = &mut self.found.envelope;
                match member {
                    Member::Status => envelope.status = value.as_str().map(|s| s.chars().take(32).collect()),
                    Member::Errors => envelope.errors = messages(value),
                    Member::Warnings => envelope.warnings = messages(value),
                }
                Ok(())
            }
            None => Ok(()),
        }
    }
}

/// A JSON page being validated as it arrives.
pub struct JsonCheck {
    lexer: Lexer<PageScan>,
}

impl JsonCheck {
    /// A check for pages whose records sit at `records_pointer` (RFC 6901),
    /// whose next-page link (if paging says so) at `next_pointer`, and whose
    /// records carry the cursor in `cursor_field`.
    pub fn new(records_pointer: &str, next_pointer: Option<&str>, cursor_field: &str) -> JsonCheck {
        JsonCheck::build(records_pointer, next_pointer, cursor_field, None)
    }

    /// The same, with every record's cursor value checked against `kind`
    /// (the policy's `delta.cursor_kind`): what a sync runs.
    pub fn of_kind(
        records_pointer: &str,
        next_pointer: Option<&str>,
        cursor_field: &str,
        kind: CursorKind,
    ) -> JsonCheck {
        JsonCheck::build(records_pointer, next_pointer, cursor_field, Some(kind))
    }

    fn build(
        records_pointer: &str,
        next_pointer: Option<&str>,
        cursor_field: &str,
        cursor_kind: Option<CursorKind>,
    ) -> JsonCheck {
        JsonCheck {
            lexer: Lexer::new(PageScan {
                records: pointer(records_pointer),
                // "" is the whole document (RFC 6901): REDCap's bare array.
                records_pointer: match records_pointer {
                    "" => "the document".to_string(),
                    p => p.to_string(),
                },
                next: next_pointer.map(pointer),
                counts: None,
                count_pointers: Default::default(),
                cursor_field: cursor_field.as_bytes().to_vec(),
                has_cursor: true,
                day_zone: None,
                server_zone: None,
                cursor_kind,
                frames: Vec::new(),
                slot: Slot::default(),
                capturing: None,
                found: Found::default(),
                identities: None,
            }),
        }
    }

    /// The same check, learning every record's identity as it goes (a
    /// delta with a lookback): by its `record_id` field and cursor value,
    /// or by its content when `record_id` is `None` (`identity.rs`).
    pub fn identifying(mut self, record_id: Option<&str>) -> JsonCheck {
        let scan = self.lexer.handler_mut();
        scan.identities = Some(Identities::new(
            record_id,
            &String::from_utf8_lossy(&scan.cursor_field),
        ));
        self
    }

    /// A collection's page (`delta.collection`): its records carry no
    /// cursor, and the page count and item count are read at these
    /// pointers (a page without them is refused when it is paged).
    pub fn counting(mut self, page_count_pointer: &str, total_items_pointer: &str) -> JsonCheck {
        let scan = self.lexer.handler_mut();
        scan.has_cursor = false;
        scan.counts = Some((pointer(page_count_pointer), pointer(total_items_pointer)));
        scan.count_pointers = (page_count_pointer.to_string(), total_items_pointer.to_string());
        self
    }

    /// A page whose records carry no cursor (REDCap's records, found by
    /// their window's date range).
    pub fn without_cursor(mut self) -> JsonCheck {
        self.lexer.handler_mut().has_cursor = false;
        self
    }

    /// Every record's identity is remembered at `at` (records that carry
    /// no time: the window's end stands for them).
    pub(crate) fn stamp_all(&mut self, at: &str) {
        if let Some(ids) = &mut self.lexer.handler_mut().identities {
            ids.stamp_all(at);
        }
    }

    /// A page of a window of whole days in `zone`: the first record whose
    /// PHP DateTime falls on another day there than in its own zone is
    /// noted (`PageSummary::other_day`), for the commit to refuse.
    pub fn in_days_of(mut self, zone: &crate::zone::Zone) -> JsonCheck {
        self.lexer.handler_mut().day_zone = Some(zone.clone());
        self
    }

    /// Server-local cursor values (`cursor_kind: server_local`) are read
    /// as wall-clock times in `zone`.
    pub fn in_zone(mut self, zone: &crate::zone::Zone) -> JsonCheck {
        self.lexer.handler_mut().server_zone = Some(zone.clone());
        self
    }

    /// The next chunk of the body. An error is kept for [`JsonCheck::finish`].
    pub fn feed(&mut self, chunk: &[u8]) {
        let _ = self.lexer.feed(chunk);
    }

    /// The whole body was fed: the page's summary, or why it is not one.
    pub fn finish(self) -> Result<PageSummary, InvalidPayload> {
        let scan = self.lexer.finish().map_err(InvalidPayload::json)?;
        let keys = scan.identities.map(Identities::finish);
        let mut summary = scan.found.into_summary(&scan.records_pointer)?;
        summary.keys = keys;
        Ok(summary)
    }
}

/// Validates a whole JSON page held in memory and summarises it.
pub fn scan(
    bytes: &[u8],
    records_pointer: &str,
    next_pointer: Option<&str>,
    cursor_field: &str,
) -> Result<PageSummary, InvalidPayload> {
    let mut check = JsonCheck::new(records_pointer, next_pointer, cursor_field);
    check.feed(bytes);
    check.finish()
}

/// The keys of every record of a JSON page held in memory (a landed page,
/// read for `backfill --missing-only`), in page order.
pub(crate) fn record_keys(
    page: &[u8],
    records_pointer: &str,
    cursor_field: &str,
    record_id: Option<&str>,
) -> Result<Vec<crate::record::identity::RecordKey>, InvalidPayload> {
    let mut check = JsonCheck::new(records_pointer, None, cursor_field).identifying(record_id);
    check.feed(page);
    let summary = check.finish()?;
    if !summary.records_found {
        return Err(InvalidPayload::json(format!(
            "no records array at {records_pointer}"
        )));
    }
    summary.keys.unwrap_or_else(|| Ok(Vec::new()))
}

/// The envelope of a small error document (an HTTP 4xx/5xx body, already
/// capped in size); `None` when it is not a JSON object.
pub(crate) fn envelope_of(bytes: &[u8]) -> Option<Envelope> {
    let serde_json::Value::Object(mut map) = serde_json::from_slice(bytes).ok()? else {
        return None;
    };
    Some(Envelope {
        status: map
            .get("responseStatus")
            .and_then(serde_json::Value::as_str)
            .map(|s| s.chars().take(32).collect()),
        errors: map.remove("errors").map(messages).unwrap_or_default(),
        warnings: map.remove("warnings").map(messages).unwrap_or_default(),
        ..Envelope::default()
    })
}

/// Vendor messages are short; longer ones are cut, never quoted whole.
const MESSAGE_MAX: usize = 200;

pub(super) fn messages(value: serde_json::Value) -> Vec<VendorMessage> {
    let serde_json::Value::Array(items) = value else {
        return Vec::new();
    };
    items
        .into_iter()
        .take(20)
        .map(|item| {
            let text = |k: &str| {
                item.get(k)
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .chars()
                    .take(MESSAGE_MAX)
                    .collect::<String>()
            };
            VendorMessage {
                kind: text("type"),
                message: text("message"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;

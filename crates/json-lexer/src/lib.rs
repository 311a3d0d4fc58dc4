//! A push JSON lexer: a document is validated chunk by chunk as it streams
//! in, from the same buffers a hash reads, so nothing is read back. edc-sync
//! checks every landed JSON page with it (`edc-core`'s page check is its
//! [`Handler`]); it knows nothing of pages, records or cursors.
//!
//! It is strict where parsers disagree (RFC 8259 plus what the page
//! validator has always refused): invalid UTF-8, control characters in
//! strings, lone surrogates, a key twice in one object, numbers outside
//! binary64, nesting deeper than 127, anything after the document. Every
//! string is checked, not only the ones read. The state survives any cut
//! between chunks, down to one byte at a time.
//!
//! A [`Handler`] sees the structure: it is asked at each value whether to
//! enter it (see its keys and elements), skip it, or receive its raw bytes.
//! Skipped values are still validated in full.
//!
//! Its verdicts are held to serde_json's, read strictly ([`oracle`]): by
//! property tests over every cut of generated documents (`tests.rs`) and by
//! a corpus of accept and reject cases for every class of the grammar, in
//! the manner of JSONTestSuite (`tests/corpus.rs`).
//!
//! One concept: the lexer is one state machine over one set of fields; its
//! general path, fast path, strings and numbers are sections of one `impl`
//! because each hands the others its position and state mid-token. The
//! pure pieces they share live beside it (`fast.rs`: scanning a plain
//! member; `numbers.rs`: the number grammar; `stops.rs`: where a chunk's
//! plain string content stops; `text.rs`: other text and UTF-8;
//! `keys.rs`: duplicate keys, and the members an alike object skips).

mod fast;
mod keys;
mod numbers;
mod stops;
mod text;

use fast::{plain_string, scalar_after_key, skip_ws};
use keys::Keys;
use numbers::{fits_binary64, step, Num, Step};
use stops::Stops;
use text::{Completed, Utf8Tail};

/// What kind of value begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Object,
    Array,
    String,
    Number,
    Literal,
}

/// What the handler wants of a value that begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Validate it; report nothing inside it.
    Skip,
    /// Report its keys, elements and end (containers only).
    Enter,
    /// Hand over its raw bytes once it is complete.
    Capture,
    /// Enter it, and hand over its raw bytes too once it is complete
    /// (containers only: a record whose identity is its content).
    EnterKept,
}

/// Receives the structure of the document. Errors stop the scan.
pub trait Handler {
    /// A value begins (the root, an element, or a member's value).
    fn begin(&mut self, kind: Kind) -> Result<Want, String>;
    /// A key of an entered object, decoded (valid UTF-8).
    fn key(&mut self, key: &[u8]) -> Result<(), String>;
    /// An entered container ends.
    fn end(&mut self) -> Result<(), String>;
    /// The raw bytes of a value asked for with [`Want::Capture`]; with
    /// `plain`, the text of a string the lexer read plainly (printable
    /// ASCII, no escape), which therefore needs no decoding and no UTF-8
    /// check: a page's cursor value arrives so in nearly every record.
    fn captured(&mut self, raw: &[u8], plain: Option<&str>) -> Result<(), String>;
    /// The raw bytes of a container asked for with [`Want::EnterKept`],
    /// right after its [`Handler::end`].
    fn kept(&mut self, raw: &[u8]) -> Result<(), String>;
    /// Asked when an object was just entered: whether it is alike, one of
    /// the objects (a page's records) in which the handler wants of a
    /// member what it wants of that key in every other alike object, and
    /// nothing else changes when it skips one. The lexer then skips,
    /// without reporting its key or its value, a scalar member whose key
    /// the handler skipped at the same position of the previous alike
    /// object at the same depth: most of a page's members, each spared two
    /// calls.
    fn alike(&self) -> bool {
        false
    }
}

/// Containers nested deeper than this are refused, as serde_json does
/// (its recursion limit), so no page is accepted that it would refuse.
pub const MAX_DEPTH: usize = 127;
/// The longest key, and the largest captured value, kept in memory.
pub const KEY_MAX: usize = 64 * 1024;
pub const CAPTURE_MAX: usize = 1024 * 1024;

/// The refusal of a value asked for whole that is over [`CAPTURE_MAX`].
fn too_large() -> String {
    format!(
        "a value the page is read for is larger than {} KiB",
        CAPTURE_MAX / 1024
    )
}

/// Where in the grammar the next byte falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// A value (the root, after `:` or after `,` in an array).
    Value,
    /// Right after `[`: a value or `]`.
    ValueOrClose,
    /// Right after `{`: a key or `}`.
    KeyOrClose,
    /// After `,` in an object.
    Key,
    Colon,
    CommaOrClose,
    /// Inside a string; `key` when it is an object's key.
    Str {
        key: bool,
    },
    Num(Num),
    Lit {
        word: &'static [u8],
        matched: usize,
    },
    /// After the root value: only whitespace may follow.
    Done,
}

/// Where in an escape sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Esc {
    None,
    Backslash,
    Hex {
        n: u8,
        v: u32,
    },
    /// A high surrogate was read: a `\u` low surrogate must follow.
    High(u32),
    HighBackslash(u32),
    Low {
        hi: u32,
        n: u8,
        v: u32,
    },
}

/// An open container.
#[derive(Debug, Clone, Copy)]
struct Frame {
    object: bool,
    /// The handler entered it (it gets its keys and end).
    entered: bool,
    /// An entered object the handler called alike ([`Handler::alike`]).
    alike: bool,
}

/// A value whose bytes the handler asked for.
struct Capture {
    /// The stack depth the value began at.
    depth: usize,
    bytes: Vec<u8>,
    /// Where this chunk's share of it starts.
    from: usize,
}

/// The lexer with its handler.
pub struct Lexer<H> {
    handler: H,
    at: At,
    stack: Vec<Frame>,
    /// Open containers below the innermost entered one.
    quiet: usize,
    keys: Keys,
    /// Where the chunk being scanned has string content stop.
    stops: Stops,
    key: Vec<u8>,
    esc: Esc,
    utf8: Utf8Tail,
    /// A number's bytes so far (for the range check), and where they
    /// start in this chunk.
    number: Vec<u8>,
    number_from: usize,
    capture: Option<Capture>,
    /// A container kept whole while it is entered (one at a time), and
    /// the buffer it is kept in between two of them.
    tape: Option<Capture>,
    tape_buf: Vec<u8>,
    /// Bytes before this chunk, for error positions.
    offset: u64,
    seen_any: bool,
    failed: Option<String>,
}

impl<H: Handler> Lexer<H> {
    pub fn new(handler: H) -> Self {
        Lexer {
            handler,
            at: At::Value,
            stack: Vec::new(),
            quiet: 0,
            keys: Keys::default(),
            stops: Stops::default(),
            key: Vec::new(),
            esc: Esc::None,
            utf8: Utf8Tail::default(),
            number: Vec::new(),
            number_from: 0,
            capture: None,
            tape: None,
            tape_buf: Vec::new(),
            offset: 0,
            seen_any: false,
            failed: None,
        }
    }

    pub fn handler_mut(&mut self) -> &mut H {
        &mut self.handler
    }

    /// Scans the next chunk. After an error every later call returns it.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), String> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        match self.scan(chunk) {
            Ok(()) => {
                self.carry(chunk);
                self.offset += chunk.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    /// The end of the body: the handler, once the document is complete.
    pub fn finish(mut self) -> Result<H, String> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if let At::Num(num) = self.at {
            if !matches!(num, Num::Zero | Num::Int | Num::Frac | Num::Exp) {
                return Err(format!("a number is cut off at byte {}", self.offset));
            }
            self.end_number(&[], 0)?;
        }
        match self.at {
            At::Done => Ok(self.handler),
            _ if !self.seen_any => Err("the body holds no JSON value".into()),
            _ => Err(format!("the document ends early, at byte {}", self.offset)),
        }
    }

    fn error<T>(&self, i: usize, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.offset + i as u64))
    }

    /// What of this chunk an open token or capture still needs.
    fn carry(&mut self, chunk: &[u8]) {
        if let At::Num(_) = self.at {
            self.number.extend_from_slice(&chunk[self.number_from..]);
            self.number_from = 0;
        }
        for kept in [&mut self.capture, &mut self.tape].into_iter().flatten() {
            kept.bytes.extend_from_slice(&chunk[kept.from..]);
            kept.from = 0;
        }
        if let Some(c) = &self.capture {
            if c.bytes.len() > CAPTURE_MAX {
                self.failed = Some(too_large());
            }
        }
    }

    fn scan(&mut self, c: &[u8]) -> Result<(), String> {
        self.stops.index(c);
        let mut i = 0;
        while i < c.len() {
            i = match self.at {
                At::Str { key } => self.string(c, i, key)?,
                At::Num(num) => self.number(c, i, num)?,
                At::Lit { word, matched } => self.literal(c, i, word, matched)?,
                at @ (At::Key | At::KeyOrClose) => match self.members(c, i)? {
                    // No progress: the general path takes this byte.
                    j if j == i => self.byte(c, i, at)?,
                    j => j,
                },
                at => self.byte(c, i, at)?,
            };
        }
        Ok(())
    }

    /// Whitespace or a structural byte, one at a time.
    fn byte(&mut self, c: &[u8], i: usize, at: At) -> Result<usize, String> {
        let b = c[i];
        if matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
            Ok(i + 1)
        } else {
            self.structural(c, i, at, b)
        }
    }

    fn structural(&mut self, c: &[u8], i: usize, at: At, b: u8) -> Result<usize, String> {
        match (at, b) {
            (At::Value | At::ValueOrClose, _) if b != b']' => self.value(i, b),
            (At::ValueOrClose | At::CommaOrClose, b']') if self.top_is(false) => self.close(c, i),
            (At::KeyOrClose | At::CommaOrClose, b'}') if self.top_is(true) => self.close(c, i),
            (At::KeyOrClose | At::Key, b'"') => {
                self.key.clear();
                self.at = At::Str { key: true };
                Ok(i + 1)
            }
            (At::Colon, b':') => {
                self.at = At::Value;
                Ok(i + 1)
            }
            (At::CommaOrClose, b',') => {
                self.at = if self.top_is(true) { At::Key } else { At::Value };
                Ok(i + 1)
            }
            (At::KeyOrClose | At::Key, _) => self.error(i, "expected a key"),
            (At::Colon, _) => self.error(i, "expected ':'"),
            (At::CommaOrClose, _) if self.top_is(true) => self.error(i, "expected ',' or '}'"),
            (At::CommaOrClose, _) => self.error(i, "expected ',' or ']'"),
            (At::Done, _) => self.error(i, "unexpected characters after the document"),
            _ => self.error(i, "expected a value"),
        }
    }

    fn top_is(&self, object: bool) -> bool {
        self.stack.last().is_some_and(|f| f.object == object)
    }

    /// A value begins at `c[i] == b`.
    fn value(&mut self, i: usize, b: u8) -> Result<usize, String> {
        let kind = match b {
            b'{' => Kind::Object,
            b'[' => Kind::Array,
            b'"' => Kind::String,
            b'-' | b'0'..=b'9' => Kind::Number,
            b't' | b'f' | b'n' => Kind::Literal,
            _ => return self.error(i, "expected a value"),
        };
        self.seen_any = true;
        let want = if self.quiet == 0 {
            self.handler.begin(kind)?
        } else {
            Want::Skip
        };
        if want == Want::Capture && self.capture.is_none() {
            self.capture = Some(Capture {
                depth: self.stack.len(),
                bytes: Vec::new(),
                from: i,
            });
        }
        let kept = want == Want::EnterKept && matches!(kind, Kind::Object | Kind::Array);
        if kept && self.tape.is_none() {
            let mut bytes = std::mem::take(&mut self.tape_buf);
            bytes.clear();
            self.tape = Some(Capture {
                depth: self.stack.len(),
                bytes,
                from: i,
            });
        }
        match kind {
            Kind::Object | Kind::Array => {
                if self.stack.len() >= MAX_DEPTH {
                    return self.error(i, "nesting deeper than 127 levels");
                }
                let object = kind == Kind::Object;
                let entered = matches!(want, Want::Enter | Want::EnterKept) && self.quiet == 0;
                if !entered {
                    self.quiet += 1;
                }
                let alike = entered && object && self.handler.alike();
                self.stack.push(Frame {
                    object,
                    entered,
                    alike,
                });
                if object {
                    self.keys.open(self.stack.len());
                    self.at = At::KeyOrClose;
                } else {
                    self.at = At::ValueOrClose;
                }
                Ok(i + 1)
            }
            Kind::String => {
                self.at = At::Str { key: false };
                Ok(i + 1)
            }
            Kind::Number => {
                self.number.clear();
                self.number_from = i;
                self.at = At::Num(numbers::first(b));
                Ok(i + 1)
            }
            Kind::Literal => {
                let word: &'static [u8] = match b {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                self.at = At::Lit { word, matched: 1 };
                Ok(i + 1)
            }
        }
    }

    /// `c[i]` closes the innermost container.
    fn close(&mut self, c: &[u8], i: usize) -> Result<usize, String> {
        let Some(frame) = self.stack.pop() else {
            return self.error(i, "unexpected close");
        };
        if frame.object {
            self.keys.close(self.stack.len() + 1);
        }
        if frame.entered {
            self.handler.end()?;
        } else {
            self.quiet -= 1;
        }
        if self.tape.as_ref().is_some_and(|t| t.depth == self.stack.len()) {
            if let Some(mut tape) = self.tape.take() {
                // A container that began in this chunk is handed over
                // where it lies; one that began in an earlier chunk is
                // completed in the buffer its start was carried in.
                let kept = if tape.bytes.is_empty() {
                    self.handler.kept(&c[tape.from..=i])
                } else {
                    tape.bytes.extend_from_slice(&c[tape.from..=i]);
                    self.handler.kept(&tape.bytes)
                };
                self.tape_buf = tape.bytes;
                kept?;
            }
        }
        self.after_value(c, i + 1)?;
        Ok(i + 1)
    }

    /// A value ended just before `c[end]`.
    fn after_value(&mut self, c: &[u8], end: usize) -> Result<(), String> {
        if self
            .capture
            .as_ref()
            .is_some_and(|cap| cap.depth == self.stack.len())
        {
            if let Some(mut cap) = self.capture.take() {
                cap.bytes.extend_from_slice(&c[cap.from..end]);
                if cap.bytes.len() > CAPTURE_MAX {
                    return Err(too_large());
                }
                self.handler.captured(&cap.bytes, None)?;
            }
        }
        self.at = if self.stack.is_empty() {
            At::Done
        } else {
            At::CommaOrClose
        };
        Ok(())
    }

    fn literal(
        &mut self,
        c: &[u8],
        mut i: usize,
        word: &'static [u8],
        mut matched: usize,
    ) -> Result<usize, String> {
        while matched < word.len() {
            let Some(&b) = c.get(i) else {
                self.at = At::Lit { word, matched };
                return Ok(i);
            };
            if b != word[matched] {
                return self.error(i, "invalid literal");
            }
            matched += 1;
            i += 1;
        }
        self.after_value(c, i)?;
        Ok(i)
    }
}

// ---- the fast path ----------------------------------------
// The fast path for what most of a page is: object members whose key is
// plain ASCII and whose value is a scalar, all within the chunk at hand.
// One member is read whole (key, colon, value, separator) with no state
// stored between its tokens; anything else (an escape, non-ASCII text, a
// container, a chunk boundary, an error) stops the fast path before the
// member's key, and the general path takes it from there, byte by byte.
// Both paths make the same calls to the handler in the same order (but
// for the members of an alike object the handler skipped in the one
// before, which the fast path reads without a call), and the lexer tests
// cut every document at every point to prove they reach one verdict.

impl<H: Handler> Lexer<H> {
    /// Members of the innermost object, from `c[i]` where a key (or `}`)
    /// is expected. Returns where the general path takes over.
    fn members(&mut self, c: &[u8], mut i: usize) -> Result<usize, String> {
        let depth = self.stack.len();
        let alike = self.stack.last().is_some_and(|f| f.alike);
        loop {
            i = skip_ws(c, i);
            let skipped = match alike {
                true => self.skipped_member(c, i, depth)?,
                false => None,
            };
            let value_end = match skipped {
                Some(end) => end,
                None => match self.member(c, i, depth, alike)? {
                    Some(end) => end,
                    None => return Ok(i),
                },
            };
            self.seen_any = true;
            self.at = At::CommaOrClose;
            i = skip_ws(c, value_end);
            match c.get(i) {
                Some(b',') => {
                    self.at = At::Key;
                    i += 1;
                }
                Some(b'}') => {
                    i = self.close(c, i)?;
                    // A page's next record, `,{` at once in the records
                    // array: opened here, its members read on.
                    let next =
                        alike && c.get(i) == Some(&b',') && c.get(i + 1) == Some(&b'{') && self.top_is(false);
                    if !next {
                        return Ok(i);
                    }
                    self.at = At::Value;
                    i = self.value(i + 1, b'{')?;
                    if !(self.stack.len() == depth && self.stack.last().is_some_and(|f| f.alike)) {
                        return Ok(i);
                    }
                }
                _ => return Ok(i),
            }
        }
    }

    /// One member from `c[i]`, reported to the handler (unless the
    /// object is quiet): where its value ends, or `None` when the general
    /// path is to take it. Read first, committed only if it is all here.
    #[inline]
    fn member(&mut self, c: &[u8], i: usize, depth: usize, alike: bool) -> Result<Option<usize>, String> {
        if c.get(i) != Some(&b'"') {
            return Ok(None);
        }
        let Some(key_end) = plain_string(&self.stops, c, i) else {
            return Ok(None);
        };
        let Some((value, value_end, kind)) = scalar_after_key(&self.stops, c, key_end) else {
            return Ok(None);
        };
        let key = &c[i + 1..key_end - 1];
        if key.len() > KEY_MAX {
            return Ok(None);
        }
        let Some(position) = self.keys.insert(depth, key) else {
            return Err(format!(
                "the key {:?} appears twice in one object",
                String::from_utf8_lossy(key)
            ));
        };
        let raw = &c[value..value_end];
        if kind == Kind::Number && !numbers::fits_binary64(raw) {
            return self.error(value_end, "a number out of binary64 range");
        }
        if self.quiet == 0 {
            self.handler.key(key)?;
            let want = self.handler.begin(kind)?;
            if alike {
                self.keys.learn(depth, position, want == Want::Skip);
            }
            if want == Want::Capture {
                if raw.len() > CAPTURE_MAX {
                    return Err(too_large());
                }
                let plain = (kind == Kind::String).then(|| {
                    let text = &raw[1..raw.len() - 1];
                    // SAFETY: `scalar_after_key` read this string with
                    // `plain_string`, which ends it at the first stop of the
                    // chunk's index after its opening quote, and requires that
                    // stop to be its closing quote: no byte between is a
                    // stop, so none is a backslash, a control character or
                    // of 0x80 and above (`stops.rs`). Printable ASCII is UTF-8.
                    unsafe { std::str::from_utf8_unchecked(text) }
                });
                self.handler.captured(raw, plain)?;
            }
        }
        Ok(Some(value_end))
    }

    /// A member of an alike object whose key, written plainly, is the one
    /// the handler skipped at this position of the previous alike object
    /// (`Keys::skipped_next`), with a scalar value: its key read by one
    /// comparison, neither reported. Where its value ends, or `None` when
    /// [`Lexer::member`] is to read it.
    #[inline]
    fn skipped_member(&mut self, c: &[u8], i: usize, depth: usize) -> Result<Option<usize>, String> {
        let Some(key) = self.keys.skipped_next(depth) else {
            return Ok(None);
        };
        let close = i + 1 + key.len();
        let same = c.get(i) == Some(&b'"') && c.get(i + 1..close) == Some(key) && c.get(close) == Some(&b'"');
        if !same {
            return Ok(None);
        }
        let Some((value, value_end, kind)) = scalar_after_key(&self.stops, c, close + 1) else {
            return Ok(None);
        };
        if kind == Kind::Number && !numbers::fits_binary64(&c[value..value_end]) {
            return self.error(value_end, "a number out of binary64 range");
        }
        self.keys.follow(depth);
        Ok(Some(value_end))
    }
}

// ---- strings ----------------------------------------
// Strings: plain runs scanned a block at a time (`text.rs`), UTF-8
// checked wherever a byte is not ASCII, escapes decoded for keys (so
// `"a"` and `"\u0061"` are the same key) and checked everywhere, and
// surrogates paired.

impl<H: Handler> Lexer<H> {
    /// Inside a string from `c[i]`.
    fn string(&mut self, c: &[u8], mut i: usize, key: bool) -> Result<usize, String> {
        loop {
            if self.esc != Esc::None {
                i = self.escape(c, i, key)?;
                if self.esc != Esc::None {
                    return Ok(i);
                }
            }
            if !self.utf8.is_empty() {
                // The character began in an earlier chunk: errors name its first byte.
                let began = (self.offset + i as u64).saturating_sub(self.utf8.held() as u64);
                let (taken, done) = self.utf8.complete(&c[i..]);
                match done {
                    Completed::NeedMore => return Ok(i + taken),
                    Completed::Invalid => return Err(format!("invalid UTF-8 at byte {began}")),
                    Completed::Char(bytes, len) => {
                        if key {
                            self.key_bytes(&bytes[..len], i)?;
                        }
                        i += taken;
                    }
                }
            }
            let run = self.stops.next(i) - i;
            if key {
                self.key_bytes(&c[i..i + run], i)?;
            }
            i += run;
            let Some(&b) = c.get(i) else {
                return Ok(i);
            };
            match b {
                b'"' => {
                    i += 1;
                    self.end_string(c, i, key)?;
                    return Ok(i);
                }
                b'\\' => {
                    self.esc = Esc::Backslash;
                    i += 1;
                }
                0..=0x1f => return self.error(i, "a control character in a string"),
                _ => {
                    // Non-ASCII: check the run of text up to the next
                    // quote, backslash or control character as UTF-8.
                    let span = &c[i..i + text::text_run(&c[i..])];
                    let valid = match std::str::from_utf8(span) {
                        Ok(_) => span.len(),
                        Err(e) if e.error_len().is_none() && i + span.len() == c.len() => {
                            self.utf8.keep(&span[e.valid_up_to()..]);
                            e.valid_up_to()
                        }
                        Err(e) => return self.error(i + e.valid_up_to(), "invalid UTF-8"),
                    };
                    if key {
                        self.key_bytes(&span[..valid], i)?;
                    }
                    i += span.len();
                }
            }
        }
    }

    fn key_bytes(&mut self, bytes: &[u8], i: usize) -> Result<(), String> {
        if self.key.len() + bytes.len() > KEY_MAX {
            return self.error(i, "a key longer than 64 KiB");
        }
        self.key.extend_from_slice(bytes);
        Ok(())
    }

    fn end_string(&mut self, c: &[u8], end: usize, key: bool) -> Result<(), String> {
        if !key {
            return self.after_value(c, end);
        }
        if self.keys.insert(self.stack.len(), &self.key).is_none() {
            return Err(format!(
                "the key {:?} appears twice in one object",
                String::from_utf8_lossy(&self.key)
            ));
        }
        if self.quiet == 0 {
            self.handler.key(&self.key)?;
        }
        self.at = At::Colon;
        Ok(())
    }

    /// One escape sequence, as far as this chunk goes.
    fn escape(&mut self, c: &[u8], mut i: usize, key: bool) -> Result<usize, String> {
        while let Some(&b) = c.get(i) {
            let hex = |b: u8| (b as char).to_digit(16);
            self.esc = match (self.esc, b) {
                (Esc::Backslash, b'u') => Esc::Hex { n: 0, v: 0 },
                (Esc::Backslash, _) => {
                    let decoded = match b {
                        b'"' | b'\\' | b'/' => b,
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        _ => return self.error(i, "an invalid escape"),
                    };
                    if key {
                        self.key_bytes(&[decoded], i)?;
                    }
                    Esc::None
                }
                (Esc::Hex { n, v }, _) | (Esc::Low { n, v, .. }, _) => {
                    let Some(d) = hex(b) else {
                        return self.error(i, "an invalid \\u escape");
                    };
                    let (n, v) = (n + 1, v * 16 + d);
                    match (self.esc, n) {
                        (Esc::Hex { .. }, 4) => match v {
                            0xD800..=0xDBFF => Esc::High(v),
                            0xDC00..=0xDFFF => return self.error(i, "a lone surrogate"),
                            _ => {
                                self.escaped_char(v, key, i)?;
                                Esc::None
                            }
                        },
                        (Esc::Low { hi, .. }, 4) => {
                            if !(0xDC00..=0xDFFF).contains(&v) {
                                return self.error(i, "a lone surrogate");
                            }
                            self.escaped_char(0x10000 + ((hi - 0xD800) << 10) + (v - 0xDC00), key, i)?;
                            Esc::None
                        }
                        (Esc::Low { hi, .. }, _) => Esc::Low { hi, n, v },
                        _ => Esc::Hex { n, v },
                    }
                }
                (Esc::High(hi), b'\\') => Esc::HighBackslash(hi),
                (Esc::HighBackslash(hi), b'u') => Esc::Low { hi, n: 0, v: 0 },
                (Esc::High(_) | Esc::HighBackslash(_), _) => return self.error(i, "a lone surrogate"),
                (Esc::None, _) => return Ok(i),
            };
            i += 1;
            if self.esc == Esc::None {
                return Ok(i);
            }
        }
        Ok(i)
    }

    fn escaped_char(&mut self, v: u32, key: bool, i: usize) -> Result<(), String> {
        if key {
            let ch = char::from_u32(v).ok_or_else(|| format!("an invalid \\u escape at byte {i}"))?;
            let mut buf = [0u8; 4];
            self.key_bytes(ch.encode_utf8(&mut buf).as_bytes(), i)?;
        }
        Ok(())
    }
}

// ---- numbers ----------------------------------------
// Numbers (RFC 8259 §6), one byte at a time across chunks, and the
// binary64 range check serde_json applies.

impl<H: Handler> Lexer<H> {
    fn number(&mut self, c: &[u8], mut i: usize, mut num: Num) -> Result<usize, String> {
        while let Some(&b) = c.get(i) {
            num = match step(num, b) {
                Step::Next(next) => next,
                Step::End => {
                    self.end_number(c, i)?;
                    return Ok(i);
                }
                Step::Invalid => return self.error(i, "invalid number"),
            };
            i += 1;
        }
        self.at = At::Num(num);
        Ok(i)
    }

    /// A number ended before `c[end]`.
    fn end_number(&mut self, c: &[u8], end: usize) -> Result<(), String> {
        let text: &[u8] = if self.number.is_empty() {
            &c[self.number_from..end]
        } else {
            self.number.extend_from_slice(&c[self.number_from..end]);
            &self.number
        };
        if !fits_binary64(text) {
            return self.error(end, "a number out of binary64 range");
        }
        self.number.clear();
        self.after_value(c, end)
    }
}

#[cfg(any(test, feature = "oracle"))]
pub mod oracle;
#[cfg(test)]
mod tests;

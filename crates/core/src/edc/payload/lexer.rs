//! A push JSON lexer: the page is validated chunk by chunk as it streams
//! in, from the same buffers SHA-256 reads, so nothing is read back from
//! the temp file (issue 13, item 3).
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

#[path = "lexer/fast.rs"]
mod fast;
#[path = "lexer/keys.rs"]
mod keys;
#[path = "lexer/numbers.rs"]
mod numbers;
#[path = "lexer/strings.rs"]
mod strings;
#[path = "lexer/text.rs"]
mod text;

use keys::Keys;
use numbers::Num;
use text::Utf8Tail;

/// What kind of value begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Object,
    Array,
    String,
    Number,
    Literal,
}

/// What the handler wants of a value that begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Want {
    /// Validate it; report nothing inside it.
    Skip,
    /// Report its keys, elements and end (containers only).
    Enter,
    /// Hand over its raw bytes once it is complete.
    Capture,
}

/// Receives the structure of the document. Errors stop the scan.
pub(super) trait Handler {
    /// A value begins (the root, an element, or a member's value).
    fn begin(&mut self, kind: Kind) -> Result<Want, String>;
    /// A key of an entered object, decoded (valid UTF-8).
    fn key(&mut self, key: &[u8]) -> Result<(), String>;
    /// An entered container ends.
    fn end(&mut self) -> Result<(), String>;
    /// The raw bytes of a value asked for with [`Want::Capture`].
    fn captured(&mut self, raw: &[u8]) -> Result<(), String>;
}

/// Containers nested deeper than this are refused, as serde_json does
/// (its recursion limit), so no page is accepted that it would refuse.
pub(super) const MAX_DEPTH: usize = 127;
/// The longest key, and the largest captured value, kept in memory.
pub(super) const KEY_MAX: usize = 64 * 1024;
pub(super) const CAPTURE_MAX: usize = 1024 * 1024;

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
pub(super) struct Lexer<H> {
    handler: H,
    at: At,
    stack: Vec<Frame>,
    /// Open containers below the innermost entered one.
    quiet: usize,
    keys: Keys,
    key: Vec<u8>,
    esc: Esc,
    utf8: Utf8Tail,
    /// A number's bytes so far (for the range check), and where they
    /// start in this chunk.
    number: Vec<u8>,
    number_from: usize,
    capture: Option<Capture>,
    /// Bytes before this chunk, for error positions.
    offset: u64,
    seen_any: bool,
    failed: Option<String>,
}

impl<H: Handler> Lexer<H> {
    pub(super) fn new(handler: H) -> Self {
        Lexer {
            handler,
            at: At::Value,
            stack: Vec::new(),
            quiet: 0,
            keys: Keys::default(),
            key: Vec::new(),
            esc: Esc::None,
            utf8: Utf8Tail::default(),
            number: Vec::new(),
            number_from: 0,
            capture: None,
            offset: 0,
            seen_any: false,
            failed: None,
        }
    }

    /// Scans the next chunk. After an error every later call returns it.
    pub(super) fn feed(&mut self, chunk: &[u8]) -> Result<(), String> {
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
    pub(super) fn finish(mut self) -> Result<H, String> {
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
        if let Some(c) = &mut self.capture {
            c.bytes.extend_from_slice(&chunk[c.from..]);
            c.from = 0;
        }
        if let Some(c) = &self.capture {
            if c.bytes.len() > CAPTURE_MAX {
                self.failed = Some(format!(
                    "a value the page is read for is larger than {} KiB",
                    CAPTURE_MAX / 1024
                ));
            }
        }
    }

    fn scan(&mut self, c: &[u8]) -> Result<(), String> {
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
        match kind {
            Kind::Object | Kind::Array => {
                if self.stack.len() >= MAX_DEPTH {
                    return self.error(i, "nesting deeper than 127 levels");
                }
                let object = kind == Kind::Object;
                let entered = want == Want::Enter && self.quiet == 0;
                if !entered {
                    self.quiet += 1;
                }
                self.stack.push(Frame { object, entered });
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
                    return Err(format!(
                        "a value the page is read for is larger than {} KiB",
                        CAPTURE_MAX / 1024
                    ));
                }
                self.handler.captured(&cap.bytes)?;
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

#[cfg(test)]
#[path = "lexer/tests.rs"]
mod tests;

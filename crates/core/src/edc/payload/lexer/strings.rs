//! Strings: plain runs scanned a block at a time (`text.rs`), UTF-8
//! checked wherever a byte is not ASCII, escapes decoded for keys (so
//! `"a"` and `"\u0061"` are the same key) and checked everywhere, and
//! surrogates paired.

use super::text::{self, Completed};
use super::{At, Esc, Handler, Lexer, KEY_MAX};

impl<H: Handler> Lexer<H> {
    /// Inside a string from `c[i]`.
    pub(super) fn string(&mut self, c: &[u8], mut i: usize, key: bool) -> Result<usize, String> {
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
            let run = text::plain_run(&c[i..]);
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
        if !self.keys.insert(self.stack.len(), &self.key) {
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

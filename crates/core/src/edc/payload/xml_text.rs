//! The characters of an XML document, as XML 1.0 defines them (§2.2, §4.3.3).
//!
//! CDISC ships ODM in UTF-8, UTF-16 and ISO-8859-1. The page is always
//! landed byte for byte; this reader only decides how to *read* it: it finds
//! the encoding from the byte order mark or the first bytes (Appendix F),
//! checks that the declaration in `<?xml ... encoding="..."?>` agrees with
//! the bytes, and hands the parser UTF-8, refusing any character outside the
//! `Char` production (control characters, U+FFFE, U+FFFF, lone surrogates,
//! invalid UTF-8). A document whose declared encoding does not match its
//! bytes is not well-formed; an encoding other than these three (and
//! US-ASCII) is refused by name.

use std::io::Read;

/// How the bytes are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    Utf8,
    Utf16Le,
    Utf16Be,
    Latin1,
}

impl Encoding {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Encoding::Utf8 => "UTF-8",
            Encoding::Utf16Le => "UTF-16LE",
            Encoding::Utf16Be => "UTF-16BE",
            Encoding::Latin1 => "ISO-8859-1",
        }
    }
}

/// XML 1.0 `Char`: what a document may contain, literally or by reference.
pub(crate) fn is_xml_char(c: char) -> bool {
    matches!(c, '\u{9}' | '\u{A}' | '\u{D}' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Reads a document's bytes and yields them as checked UTF-8.
pub(crate) struct XmlText<R> {
    inner: R,
    encoding: Encoding,
    /// Raw bytes read but not yet decoded (an incomplete sequence).
    raw: Vec<u8>,
    /// Decoded UTF-8 not yet handed out, from `out_pos`.
    out: Vec<u8>,
    out_pos: usize,
    /// Characters decoded so far (for error positions).
    chars: u64,
    eof: bool,
}

fn invalid(detail: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, detail)
}

impl<R: Read> XmlText<R> {
    /// Sniffs the encoding and checks the declaration against it.
    pub(crate) fn new(mut inner: R) -> std::io::Result<XmlText<R>> {
        // Enough for a BOM and any reasonable XML declaration.
        let mut head = vec![0u8; 512];
        let mut n = 0;
        while n < head.len() {
            let read = inner.read(&mut head[n..])?;
            if read == 0 {
                break;
            }
            n += read;
        }
        head.truncate(n);
        let (detected, bom) = sniff(&head);
        let declared = declared_encoding(&head, detected);
        let encoding = match (detected, declared.as_deref()) {
            (Encoding::Utf16Le | Encoding::Utf16Be, None) => detected,
            (Encoding::Utf16Le | Encoding::Utf16Be, Some(d)) if d.starts_with("UTF-16") => detected,
            (Encoding::Utf16Le | Encoding::Utf16Be, Some(d)) => {
                return Err(invalid(format!(
                    "the bytes are {} but the XML declaration says encoding=\"{d}\"",
                    detected.name()
                )))
            }
            (_, None | Some("UTF-8") | Some("UTF8")) => Encoding::Utf8,
            (_, Some("US-ASCII") | Some("ASCII")) => Encoding::Utf8,
            (_, Some("ISO-8859-1") | Some("LATIN1") | Some("ISO_8859-1") | Some("L1")) if bom == 0 => {
                Encoding::Latin1
            }
            (_, Some(d)) if d.starts_with("UTF-16") => {
                return Err(invalid(format!(
                    "the XML declaration says encoding=\"{d}\" but the bytes are not UTF-16 (no byte order \
                     mark, one byte per character)"
                )))
            }
            (_, Some(d)) => {
                return Err(invalid(format!(
                    "encoding \"{d}\" is not supported (UTF-8, UTF-16 and ISO-8859-1 are)"
                )))
            }
        };
        let mut text = XmlText {
            inner,
            encoding,
            raw: head[bom..].to_vec(),
            out: Vec::new(),
            out_pos: 0,
            chars: 0,
            eof: false,
        };
        text.decode()?;
        Ok(text)
    }

    /// Decodes as much of `raw` as forms whole characters into `out`.
    fn decode(&mut self) -> std::io::Result<()> {
        self.out.drain(..self.out_pos);
        self.out_pos = 0;
        let used = match self.encoding {
            Encoding::Utf8 => self.decode_utf8()?,
            Encoding::Latin1 => {
                let raw = std::mem::take(&mut self.raw);
                for &b in &raw {
                    self.push(char::from(b))?;
                }
                self.raw = raw;
                self.raw.len()
            }
            Encoding::Utf16Le | Encoding::Utf16Be => self.decode_utf16()?,
        };
        self.raw.drain(..used);
        if self.eof && !self.raw.is_empty() {
            return Err(invalid(format!(
                "the document ends inside a {} character after character {}",
                self.encoding.name(),
                self.chars
            )));
        }
        Ok(())
    }

    fn decode_utf8(&mut self) -> std::io::Result<usize> {
        let valid = match std::str::from_utf8(&self.raw) {
            Ok(_) => self.raw.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(e) => {
                let at = self.chars
                    + self.raw[..e.valid_up_to()]
                        .iter()
                        .filter(|b| (**b & 0xC0) != 0x80)
                        .count() as u64;
                return Err(invalid(format!("invalid UTF-8 after character {at}")));
            }
        };
        // Only ASCII control bytes and U+FFFE/U+FFFF can be illegal in valid UTF-8.
        let bytes = std::mem::take(&mut self.raw);
        let text = std::str::from_utf8(&bytes[..valid]).map_err(|e| invalid(e.to_string()))?;
        let suspicious = bytes[..valid]
            .iter()
            .any(|b| (*b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r')) || *b == 0xEF);
        if suspicious {
            for c in text.chars() {
                self.check(c)?;
            }
        } else {
            self.chars += text.chars().count() as u64;
        }
        self.out.extend_from_slice(&bytes[..valid]);
        self.raw = bytes;
        Ok(valid)
    }

    fn decode_utf16(&mut self) -> std::io::Result<usize> {
        let le = self.encoding == Encoding::Utf16Le;
        let units: Vec<u16> = self
            .raw
            .chunks_exact(2)
            .map(|p| {
                if le {
                    u16::from_le_bytes([p[0], p[1]])
                } else {
                    u16::from_be_bytes([p[0], p[1]])
                }
            })
            .collect();
        // A high surrogate at the very end waits for its pair.
        let whole = match units.last() {
            Some(u) if (0xD800..0xDC00).contains(u) && !self.eof => units.len() - 1,
            _ => units.len(),
        };
        for c in char::decode_utf16(units[..whole].iter().copied()) {
            match c {
                Ok(c) => self.push(c)?,
                Err(e) => {
                    return Err(invalid(format!(
                        "a lone surrogate {:#06x} after character {}",
                        e.unpaired_surrogate(),
                        self.chars
                    )))
                }
            }
        }
        Ok(whole * 2)
    }

    fn check(&mut self, c: char) -> std::io::Result<()> {
        if !is_xml_char(c) {
            return Err(invalid(format!(
                "character U+{:04X} (after character {}) is not allowed in XML",
                c as u32, self.chars
            )));
        }
        self.chars += 1;
        Ok(())
    }

    fn push(&mut self, c: char) -> std::io::Result<()> {
        self.check(c)?;
        let mut buf = [0u8; 4];
        self.out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        Ok(())
    }
}

impl<R: Read> Read for XmlText<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.out_pos == self.out.len() {
            if self.eof {
                return Ok(0);
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.inner.read(&mut chunk)?;
            if n == 0 {
                self.eof = true;
            }
            self.raw.extend_from_slice(&chunk[..n]);
            self.decode()?;
        }
        let n = buf.len().min(self.out.len() - self.out_pos);
        buf[..n].copy_from_slice(&self.out[self.out_pos..self.out_pos + n]);
        self.out_pos += n;
        Ok(n)
    }
}

/// The encoding the first bytes show (XML 1.0 Appendix F), and the length
/// of a byte order mark to skip.
fn sniff(head: &[u8]) -> (Encoding, usize) {
    match head {
        [0xFE, 0xFF, ..] => (Encoding::Utf16Be, 2),
        [0xFF, 0xFE, ..] => (Encoding::Utf16Le, 2),
        [0xEF, 0xBB, 0xBF, ..] => (Encoding::Utf8, 3),
        [0x00, b'<', 0x00, b'?', ..] => (Encoding::Utf16Be, 0),
        [b'<', 0x00, b'?', 0x00, ..] => (Encoding::Utf16Le, 0),
        _ => (Encoding::Utf8, 0),
    }
}

/// The `encoding` of the XML declaration, upper-cased; `None` without one.
fn declared_encoding(head: &[u8], detected: Encoding) -> Option<String> {
    // The declaration is ASCII: for UTF-16, take every other byte.
    let ascii: Vec<u8> = match detected {
        Encoding::Utf16Le => head
            .iter()
            .skip_while(|b| **b == 0xFF || **b == 0xFE)
            .step_by(2)
            .copied()
            .collect(),
        Encoding::Utf16Be => head
            .iter()
            .skip_while(|b| **b == 0xFF || **b == 0xFE)
            .skip(1)
            .step_by(2)
            .copied()
            .collect(),
        _ => head.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(head).to_vec(),
    };
    let rest = ascii.strip_prefix(b"<?xml")?;
    if !rest.first().is_some_and(|b| b.is_ascii_whitespace()) {
        return None;
    }
    let end = rest.windows(2).position(|w| w == b"?>")?;
    let decl = String::from_utf8_lossy(&rest[..end]);
    let at = decl.find("encoding")?;
    let after = decl[at + "encoding".len()..]
        .trim_start()
        .strip_prefix('=')?
        .trim_start();
    let quote = after.chars().next().filter(|q| *q == '"' || *q == '\'')?;
    let value = &after[1..];
    let close = value.find(quote)?;
    Some(value[..close].to_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: &[u8]) -> std::io::Result<String> {
        let mut out = String::new();
        XmlText::new(bytes)?.read_to_string(&mut out)?;
        Ok(out)
    }

    fn utf16(text: &str, le: bool) -> Vec<u8> {
        let mut bytes = if le { vec![0xFF, 0xFE] } else { vec![0xFE, 0xFF] };
        for u in text.encode_utf16() {
            bytes.extend_from_slice(&if le { u.to_le_bytes() } else { u.to_be_bytes() });
        }
        bytes
    }

    #[test]
    fn utf16_and_latin1_with_matching_declarations_read_as_their_text() {
        let doc = "<?xml version=\"1.0\" encoding=\"UTF-16\"?><a>é 𝄞</a>";
        assert_eq!(read_all(&utf16(doc, true)).unwrap(), doc);
        assert_eq!(read_all(&utf16(doc, false)).unwrap(), doc);
        let latin = b"<?xml version='1.0' encoding='ISO-8859-1'?><a>caf\xe9</a>";
        assert_eq!(
            read_all(latin).unwrap(),
            "<?xml version='1.0' encoding='ISO-8859-1'?><a>café</a>"
        );
    }

    #[test]
    fn a_declaration_that_does_not_match_the_bytes_is_refused() {
        let err = read_all(b"<?xml version=\"1.0\" encoding=\"utf-16\"?><a/>").unwrap_err();
        assert!(err.to_string().contains("not UTF-16"), "{err}");
        let doc = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><a/>";
        assert!(read_all(&utf16(doc, true))
            .unwrap_err()
            .to_string()
            .contains("UTF-16LE"));
        let err = read_all(b"<?xml version=\"1.0\" encoding=\"windows-1252\"?><a/>").unwrap_err();
        assert!(err.to_string().contains("WINDOWS-1252"), "{err}");
    }

    #[test]
    fn characters_outside_xml_char_are_refused() {
        for bad in [
            &b"<a>\x01</a>"[..],
            b"<a>\xef\xbf\xbe</a>",
            b"<a>\xff</a>",
            b"<a>\xc3",
        ] {
            assert!(read_all(bad).is_err(), "{bad:?}");
        }
        let mut lone = utf16("<a>x</a>", true);
        lone.truncate(lone.len() - 4);
        lone.extend_from_slice(&[0x00, 0xD8, b'>', 0]);
        assert!(read_all(&lone).is_err());
        assert!(read_all("<a>\t\r\n é</a>".as_bytes()).is_ok());
    }
}

//! The bytes inside JSON strings that are not plain ASCII (plain runs
//! end where the chunk's index says, `stops.rs`): text that may hold
//! UTF-8 scanned in 64-byte blocks the compiler vectorises, and a
//! character cut by the end of a chunk carried to the next.

/// Bytes compared per step; the loop over one block compiles to vector
/// compares.
const BLOCK: usize = 64;

/// A byte that ends a run of string content that may hold UTF-8.
#[inline]
fn ends_text(b: u8) -> bool {
    (b == b'"') | (b == b'\\') | (b < 0x20)
}

#[inline]
fn run(s: &[u8], ends: impl Fn(u8) -> bool) -> usize {
    let mut i = 0;
    while let Some(block) = s.get(i..i + BLOCK) {
        // No early exit inside the block: that is what lets it vectorise.
        if block.iter().fold(false, |any, &b| any | ends(b)) {
            break;
        }
        i += BLOCK;
    }
    while i < s.len() && !ends(s[i]) {
        i += 1;
    }
    i
}

/// The length of the leading run of `s` up to a quote, backslash or
/// control character (UTF-8 is checked separately).
#[inline]
pub(super) fn text_run(s: &[u8]) -> usize {
    run(s, ends_text)
}

/// Up to three bytes of a UTF-8 character cut by the end of a chunk.
#[derive(Default)]
pub(super) struct Utf8Tail {
    bytes: [u8; 4],
    len: usize,
}

/// How a cut character continued.
pub(super) enum Completed {
    /// It is complete and valid: these are its bytes.
    Char([u8; 4], usize),
    /// The chunk ended again before it did.
    NeedMore,
    /// Not UTF-8.
    Invalid,
}

impl Utf8Tail {
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held from earlier chunks.
    pub(super) fn held(&self) -> usize {
        self.len
    }

    pub(super) fn keep(&mut self, tail: &[u8]) {
        self.bytes[..tail.len()].copy_from_slice(tail);
        self.len = tail.len();
    }

    /// Takes bytes from `s` until the character is complete; returns how
    /// many were taken.
    pub(super) fn complete(&mut self, s: &[u8]) -> (usize, Completed) {
        let mut taken = 0;
        while self.len < 4 {
            let Some(&b) = s.get(taken) else {
                return (taken, Completed::NeedMore);
            };
            self.bytes[self.len] = b;
            self.len += 1;
            taken += 1;
            match std::str::from_utf8(&self.bytes[..self.len]) {
                Ok(_) => {
                    let done = Completed::Char(self.bytes, self.len);
                    self.len = 0;
                    return (taken, done);
                }
                Err(e) if e.error_len().is_some() => return (taken, Completed::Invalid),
                Err(_) => {}
            }
        }
        (taken, Completed::Invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_stop_exactly_where_a_byte_by_byte_scan_does() {
        for (s, pos, special) in crate::tests::one_special_byte(&[0, 1, 31, 32, 33, 64, 100]) {
            let len = s.len();
            let text = s.iter().position(|&b| ends_text(b)).unwrap_or(len);
            assert_eq!(text_run(&s), text, "text: len {len} pos {pos} byte {special:#x}");
        }
        // DEL (0x7f) is allowed unescaped in JSON strings, like any other
        // character from U+0020 on.
        assert!(!ends_text(0x7f));
    }

    #[test]
    fn a_character_cut_by_a_chunk_is_completed_or_refused() {
        let euro = "€".as_bytes();
        let mut tail = Utf8Tail::default();
        tail.keep(&euro[..1]);
        assert!(matches!(tail.complete(&euro[1..2]), (1, Completed::NeedMore)));
        assert!(matches!(tail.complete(&euro[2..]), (1, Completed::Char(_, 3))));
        assert!(tail.is_empty());
        tail.keep(&euro[..2]);
        assert!(matches!(tail.complete(b"a"), (1, Completed::Invalid)));
    }
}

//! Where a chunk's plain string content stops, found for the whole chunk
//! before it is scanned: one bit a byte, set on a quote, a backslash, a
//! control character or a non-ASCII byte (what ends a run of plain ASCII
//! string content).
//!
//! Why: scanning a string byte run by byte run makes every token's end
//! wait for the load of the bytes it ends in, and the next token's start
//! for that end: on a dense page (a key or a value every dozen bytes) the
//! scan was a chain of dependent loads. Marking the stops is work on each
//! 64-byte block independent of every other, done at the speed of vector
//! compares; a string's end is then one shift and one count of trailing
//! zeros in a word already in cache.

/// A byte that ends a run of plain ASCII string content: a quote, a
/// backslash, a control character (RFC 8259 §7) or a non-ASCII byte.
/// DEL (0x7f) is allowed unescaped, like any character from U+0020 on.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn ends_plain(b: u8) -> bool {
    (b == b'"') | (b == b'\\') | (b.wrapping_sub(0x20) >= 0x60)
}

/// Bytes a word of the index covers.
const WORD: usize = 64;

/// The stops of one chunk, a bit a byte.
#[derive(Default)]
pub(super) struct Stops {
    words: Vec<u64>,
    len: usize,
}

impl Stops {
    /// Indexes `chunk`, replacing the previous chunk's index.
    pub(super) fn index(&mut self, chunk: &[u8]) {
        self.len = chunk.len();
        self.words.clear();
        let mut blocks = chunk.chunks_exact(WORD);
        self.words.extend(blocks.by_ref().map(block));
        let tail = blocks.remainder();
        if !tail.is_empty() {
            let mut padded = [b'a'; WORD];
            padded[..tail.len()].copy_from_slice(tail);
            self.words.push(block(&padded));
        }
    }

    /// The first stop at or after `from`, or the chunk's length when
    /// there is none.
    #[inline]
    pub(super) fn next(&self, from: usize) -> usize {
        let mut w = from / WORD;
        let Some(&first) = self.words.get(w) else {
            return self.len;
        };
        let mut bits = first >> (from % WORD) << (from % WORD);
        loop {
            if bits != 0 {
                return (w * WORD + bits.trailing_zeros() as usize).min(self.len);
            }
            w += 1;
            match self.words.get(w) {
                Some(&next) => bits = next,
                None => return self.len,
            }
        }
    }
}

/// The stops of 64 bytes, bit `j` for byte `j`: sixteen bytes at a time
/// with SSE2, which every x86-64 processor has (three byte compares and a
/// mask of their sign bits).
#[cfg(target_arch = "x86_64")]
#[inline]
fn block(b: &[u8]) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    debug_assert!(b.len() >= WORD);
    let mut bits = 0u64;
    for (k, lane) in b.chunks_exact(16).take(WORD / 16).enumerate() {
        // SAFETY: SSE2 is part of x86-64; `lane` is 16 readable bytes
        // and `loadu` reads them unaligned.
        let mask = unsafe {
            let v = _mm_loadu_si128(lane.as_ptr().cast::<__m128i>());
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            // As signed bytes, a control character (0x00-0x1f) and a
            // non-ASCII byte (0x80-0xff, negative) are the ones below 0x20.
            let low = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), low))
        };
        bits |= u64::from(mask as u16) << (16 * k);
    }
    bits
}

/// The same, a byte at a time, where there is no SSE2.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn block(b: &[u8]) -> u64 {
    b.iter()
        .take(WORD)
        .enumerate()
        .fold(0, |bits, (j, &byte)| bits | u64::from(ends_plain(byte)) << j)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_stop_is_where_a_byte_by_byte_scan_finds_it() {
        for (chunk, pos, special) in crate::tests::one_special_byte(&[0, 1, 63, 64, 65, 130, 200]) {
            let len = chunk.len();
            let mut stops = Stops::default();
            stops.index(&chunk);
            for from in 0..=len {
                let expected = chunk[from..]
                    .iter()
                    .position(|&b| ends_plain(b))
                    .map_or(len, |p| from + p);
                assert_eq!(
                    stops.next(from),
                    expected,
                    "len {len} pos {pos} byte {special:#x} from {from}"
                );
            }
        }
        // Every byte value at every lane of a block and past it: the
        // vector compares read bytes as signed.
        for pos in 0..70 {
            for special in 0..=255u8 {
                let mut chunk = vec![b'x'; 70];
                chunk[pos] = special;
                let mut stops = Stops::default();
                stops.index(&chunk);
                let expected = if ends_plain(special) { pos } else { 70 };
                assert_eq!(stops.next(0), expected, "pos {pos} byte {special:#x}");
            }
        }
    }
}

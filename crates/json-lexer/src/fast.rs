//! The fast path for what most of a page is: object members whose key is
//! plain ASCII and whose value is a scalar, all within the chunk at hand.
//! One member is read whole (key, colon, value, separator) with no state
//! stored between its tokens; anything else (an escape, non-ASCII text, a
//! container, a chunk boundary, an error) stops the fast path before the
//! member's key, and the general path takes it from there, byte by byte.
//! Both paths make the same calls to the handler in the same order, and
//! the lexer tests cut every document at every point to prove it.

use super::numbers::{self, Step};
use super::stops::Stops;
use super::Kind;

#[inline]
pub(super) fn skip_ws(c: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = c.get(i) {
        i += 1;
    }
    i
}

/// The end of the plain string starting at `c[i] == '"'`, past its
/// closing quote; `None` if it is not plain or not complete here.
/// `stops` is the chunk's index.
#[inline]
pub(super) fn plain_string(stops: &Stops, c: &[u8], i: usize) -> Option<usize> {
    let end = stops.next(i + 1);
    (c.get(end) == Some(&b'"')).then_some(end + 1)
}

/// The end of the number starting at `c[i]`, if it is valid and a byte
/// after it is here (so it is known to be complete).
#[inline]
pub(super) fn number(c: &[u8], i: usize) -> Option<usize> {
    let mut num = numbers::first(*c.get(i)?);
    let mut j = i + 1;
    loop {
        match numbers::step(num, *c.get(j)?) {
            Step::Next(next) => num = next,
            Step::End => return Some(j),
            Step::Invalid => return None,
        }
        j += 1;
    }
}

/// What follows a member's key that ends before `c[key_end]`: a colon and
/// a complete scalar, each after optional whitespace. The scalar's start,
/// end and kind.
#[inline]
pub(super) fn scalar_after_key(stops: &Stops, c: &[u8], key_end: usize) -> Option<(usize, usize, Kind)> {
    let colon = skip_ws(c, key_end);
    if c.get(colon) != Some(&b':') {
        return None;
    }
    let value = skip_ws(c, colon + 1);
    let (value_end, kind) = scalar(stops, c, value)?;
    Some((value, value_end, kind))
}

/// A complete scalar starting at `c[i]`: its end and kind.
#[inline]
fn scalar(stops: &Stops, c: &[u8], i: usize) -> Option<(usize, Kind)> {
    let word = |w: &[u8]| c.get(i..i + w.len()).is_some_and(|s| s == w);
    match *c.get(i)? {
        b'"' => plain_string(stops, c, i).map(|end| (end, Kind::String)),
        b'-' | b'0'..=b'9' => number(c, i).map(|end| (end, Kind::Number)),
        b't' if word(b"true") => Some((i + 4, Kind::Literal)),
        b'f' if word(b"false") => Some((i + 5, Kind::Literal)),
        b'n' if word(b"null") => Some((i + 4, Kind::Literal)),
        _ => None,
    }
}

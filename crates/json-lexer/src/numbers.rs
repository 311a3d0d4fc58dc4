//! Numbers (RFC 8259 §6), one byte at a time across chunks, and the
//! binary64 range check serde_json applies.

/// Where in a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    E,
    ESign,
    Exp,
}

/// What a byte does to a number.
pub(super) enum Step {
    Next(Num),
    /// The number ended before this byte.
    End,
    Invalid,
}

#[inline]
pub(super) fn step(num: Num, b: u8) -> Step {
    Step::Next(match (num, b) {
        (Num::Minus, b'0') => Num::Zero,
        (Num::Minus, b'1'..=b'9') | (Num::Int, b'0'..=b'9') => Num::Int,
        (Num::Zero | Num::Int, b'.') => Num::Dot,
        (Num::Dot | Num::Frac, b'0'..=b'9') => Num::Frac,
        (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Num::E,
        (Num::E, b'+' | b'-') => Num::ESign,
        (Num::E | Num::ESign | Num::Exp, b'0'..=b'9') => Num::Exp,
        (Num::Zero | Num::Int | Num::Frac | Num::Exp, _) => return Step::End,
        _ => return Step::Invalid,
    })
}

/// The state a number starts in from its first byte.
#[inline]
pub(super) fn first(b: u8) -> Num {
    match b {
        b'-' => Num::Minus,
        b'0' => Num::Zero,
        _ => Num::Int,
    }
}

/// A complete number's text holds a finite binary64 (parsers would read
/// anything else as infinity, or refuse it, as serde_json does).
pub(super) fn fits_binary64(text: &[u8]) -> bool {
    // Up to 308 integer digits and no exponent: always finite.
    if text.len() <= 309 && !text.iter().any(|&b| b == b'e' || b == b'E') {
        return true;
    }
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .is_some_and(f64::is_finite)
}

//! A corpus in the manner of JSONTestSuite: for every class of the grammar
//! (structure, numbers, strings and escapes, UTF-8, literals, whitespace,
//! nesting), documents that must be accepted (`y_`), refused (`n_`), and
//! those RFC 8259 leaves to the implementation (`i_`), with the choice this
//! lexer makes. Each verdict is the expected one, is serde_json's read
//! strictly (the oracle), and holds however the document is cut into
//! chunks: at every byte, and byte by byte.

use edc_json_lexer::oracle::Skip;
use edc_json_lexer::{Handler, Kind, Lexer, Want};

/// Validates and enters every container: the same verdict either way.
struct Enter;

impl Handler for Enter {
    fn begin(&mut self, kind: Kind) -> Result<Want, String> {
        Ok(match kind {
            Kind::Object | Kind::Array => Want::Enter,
            _ => Want::Capture,
        })
    }
    fn key(&mut self, _: &[u8]) -> Result<(), String> {
        Ok(())
    }
    fn end(&mut self) -> Result<(), String> {
        Ok(())
    }
    fn captured(&mut self, _: &[u8], _: Option<&str>) -> Result<(), String> {
        Ok(())
    }
    fn kept(&mut self, _: &[u8]) -> Result<(), String> {
        Ok(())
    }
}

fn lex<H: Handler>(handler: H, chunks: &[&[u8]]) -> bool {
    let mut lexer = Lexer::new(handler);
    for chunk in chunks {
        if lexer.feed(chunk).is_err() {
            return false;
        }
    }
    lexer.finish().is_ok()
}

/// `y_`: accepted; `n_`: refused; `i_`: implementation-defined, and this
/// lexer's choice (the same as the strict oracle's) is the expectation.
const CORPUS: &[(&str, &[u8])] = &[
    // Structure.
    ("y_structure_lonely_true", b"true"),
    ("y_structure_whitespace_around", b" \t\r\n[1] \n"),
    ("y_object_empty", b"{}"),
    ("y_array_empty", b"[]"),
    ("y_array_nested", b"[[[]],[{}]]"),
    (
        "y_object_basic",
        br#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
    ),
    ("y_object_empty_key", br#"{"":0}"#),
    ("y_structure_lonely_string", br#""asd""#),
    ("n_structure_empty", b""),
    ("n_structure_whitespace_only", b"  \n"),
    ("n_array_trailing_comma", b"[1,]"),
    ("n_array_comma_only", b"[,]"),
    ("n_array_double_comma", b"[1,,2]"),
    ("n_array_unclosed", b"[1"),
    ("n_array_extra_close", b"[1]]"),
    ("n_array_missing_comma", b"[1 2]"),
    ("n_object_trailing_comma", br#"{"a":1,}"#),
    ("n_object_unclosed", br#"{"a":1"#),
    ("n_object_missing_colon", br#"{"a" 1}"#),
    ("n_object_missing_value", br#"{"a":}"#),
    ("n_object_single_quote_key", b"{'a':1}"),
    ("n_object_unquoted_key", b"{a:1}"),
    ("n_object_number_key", b"{1:1}"),
    ("n_object_comma_instead_of_colon", br#"{"a",1}"#),
    ("n_structure_two_values", b"[][]"),
    ("n_structure_close_first", b"]"),
    ("n_structure_trailing_garbage", b"[1]x"),
    ("n_structure_null_byte_after", b"[1]\0"),
    ("n_structure_comment", b"[1]//c"),
    // Numbers.
    ("y_number_int", b"[123]"),
    ("y_number_negative", b"[-1]"),
    ("y_number_zero", b"[0]"),
    ("y_number_minus_zero", b"[-0]"),
    ("y_number_fraction", b"[0.5]"),
    ("y_number_exponent", b"[1E22]"),
    ("y_number_negative_exponent", b"[1e-2]"),
    ("y_number_signed_exponent", b"[1.0e+5]"),
    ("y_number_big_integer", b"[123456789012345678901234567890]"),
    ("y_number_lonely", b"42"),
    ("y_number_smallest_subnormal", b"[5e-324]"),
    ("n_number_leading_zero", b"[01]"),
    ("n_number_plus", b"[+1]"),
    ("n_number_dot_first", b"[.5]"),
    ("n_number_dot_last", b"[1.]"),
    ("n_number_exponent_missing", b"[1e]"),
    ("n_number_exponent_sign_only", b"[1e+]"),
    ("n_number_hex", b"[0x1]"),
    ("n_number_nan", b"[NaN]"),
    ("n_number_infinity", b"[Infinity]"),
    ("n_number_minus_only", b"[-]"),
    ("n_number_minus_space", b"[- 1]"),
    ("i_number_huge_exponent", b"[1e400]"),
    ("i_number_negative_huge_exponent", b"[-1e400]"),
    // Strings, escapes and UTF-8.
    ("y_string_empty", br#"[""]"#),
    ("y_string_escapes", br#"["\"\\\/\b\f\n\r\t"]"#),
    ("y_string_unicode_escape", br#"["\u00e9"]"#),
    ("y_string_surrogate_pair", br#"["\ud83d\ude00"]"#),
    ("y_string_utf8", "[\"é ✓ 😀\"]".as_bytes()),
    ("y_string_escaped_null", br#"["\u0000"]"#),
    ("n_string_unescaped_control", b"[\"a\x01b\"]"),
    ("n_string_unescaped_newline", b"[\"a\nb\"]"),
    ("n_string_unescaped_tab", b"[\"a\tb\"]"),
    ("n_string_bad_escape", br#"["\x"]"#),
    ("n_string_short_unicode_escape", br#"["\u12"]"#),
    ("n_string_unicode_escape_not_hex", br#"["\u12g4"]"#),
    ("n_string_unclosed", br#"["abc"#),
    ("n_string_single_quote", b"['a']"),
    ("i_string_lone_high_surrogate", br#"["\ud800"]"#),
    ("i_string_lone_low_surrogate", br#"["\udc00"]"#),
    ("i_string_high_then_not_low", br#"["\ud800\u0041"]"#),
    ("i_string_invalid_utf8", b"[\"\xff\"]"),
    ("i_string_overlong_utf8", b"[\"\xc0\x80\"]"),
    ("i_string_utf8_surrogate", b"[\"\xed\xa0\x80\"]"),
    ("i_string_truncated_utf8", b"[\"\xe2\x82\"]"),
    ("i_object_key_invalid_utf8", b"{\"\xff\":1}"),
    // Literals.
    ("y_literals", b"[null,true,false]"),
    ("n_literal_truncated_true", b"[tru]"),
    ("n_literal_truncated_null", b"[nul]"),
    ("n_literal_capitalised", b"[True]"),
    ("n_literal_trailing_letter", b"truex"),
    // Whitespace.
    ("n_whitespace_form_feed", b"[1\x0c]"),
    ("n_whitespace_no_break_space", "[1\u{a0}]".as_bytes()),
    ("i_structure_utf8_bom", b"\xef\xbb\xbf{}"),
    // Keys.
    ("i_object_duplicate_key", br#"{"a":1,"a":2}"#),
    ("i_object_duplicate_key_nested", br#"[{"b":{"a":1,"a":1}}]"#),
    ("y_object_same_key_in_two_objects", br#"[{"a":1},{"a":2}]"#),
];

fn expected(name: &str) -> bool {
    match &name[..2] {
        "y_" => true,
        "n_" => false,
        // The implementation's choice: refuse what parsers disagree on
        // (duplicate keys, lone surrogates, invalid UTF-8, numbers beyond
        // binary64, a byte-order mark), as the strict oracle does.
        "i_" => false,
        _ => panic!("{name}: a case is y_, n_ or i_"),
    }
}

#[test]
fn every_case_has_its_verdict_and_serde_jsons_at_every_cut() {
    let mut classes = std::collections::BTreeSet::new();
    for (name, doc) in CORPUS {
        let want = expected(name);
        classes.insert(name.split('_').nth(1).unwrap_or_default());
        assert_eq!(
            edc_json_lexer::oracle::verdict(doc).is_ok(),
            want,
            "{name}: the oracle"
        );
        assert_eq!(lex(Skip, &[doc]), want, "{name}: whole");
        assert_eq!(lex(Enter, &[doc]), want, "{name}: entered");
        for cut in 0..=doc.len() {
            let (a, b) = doc.split_at(cut);
            assert_eq!(lex(Skip, &[a, b]), want, "{name}: cut at {cut}");
        }
        let bytes: Vec<&[u8]> = doc.chunks(1).collect();
        assert_eq!(lex(Enter, &bytes), want, "{name}: byte by byte");
    }
    for class in [
        "structure",
        "array",
        "object",
        "number",
        "string",
        "literal",
        "whitespace",
        "literals",
    ] {
        assert!(classes.contains(class), "no case of {class}");
    }
}

/// Nesting: as deep as serde_json reads, and no deeper.
#[test]
fn nesting_is_accepted_to_serde_jsons_limit_and_refused_past_it() {
    for (depth, want) in [
        (edc_json_lexer::MAX_DEPTH, true),
        (edc_json_lexer::MAX_DEPTH + 1, false),
    ] {
        for open in ["[", "{\"a\":"] {
            let close = if open == "[" { "]" } else { "}" };
            let doc = format!("{}0{}", open.repeat(depth), close.repeat(depth));
            assert_eq!(
                edc_json_lexer::oracle::verdict(doc.as_bytes()).is_ok(),
                want,
                "oracle, {depth}"
            );
            assert_eq!(lex(Skip, &[doc.as_bytes()]), want, "{open} {depth}");
        }
    }
}

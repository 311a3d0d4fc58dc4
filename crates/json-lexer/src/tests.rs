//! The lexer held to its oracle, serde_json read strictly ([`crate::oracle`]):
//! the same verdict on every document however it is cut into chunks, and
//! a handler that enters everything sees the document serde_json reads.

use crate::oracle::Skip;
use crate::{Handler, Kind, Lexer, Want};

/// Runs of `x` of each length in `lens`, each with one byte at one place
/// replaced by one that ends plain text or nearly does (a quote, a
/// backslash, control characters, DEL, non-ASCII, a blank, a letter):
/// every such run, with the place and the byte. The scans that read many
/// bytes at a time are held with it to a byte-at-a-time scan.
pub(crate) fn one_special_byte(lens: &[usize]) -> impl Iterator<Item = (Vec<u8>, usize, u8)> + '_ {
    const SPECIALS: [u8; 10] = [b'"', b'\\', 0x00, 0x1f, 0x7f, 0x80, 0xc3, 0xff, b' ', b'a'];
    lens.iter().flat_map(|&len| {
        (0..len).flat_map(move |pos| {
            SPECIALS.iter().map(move |&special| {
                let mut run = vec![b'x'; len];
                run[pos] = special;
                (run, pos, special)
            })
        })
    })
}

/// A handler that enters every container and captures every scalar, and
/// rebuilds the document as a serde_json value from what it is told.
#[derive(Default)]
struct Rebuild {
    stack: Vec<(serde_json::Value, Option<String>)>,
    key: Option<String>,
    done: Option<serde_json::Value>,
}

impl Rebuild {
    fn put(&mut self, v: serde_json::Value) -> Result<(), String> {
        match self.stack.last_mut() {
            None => self.done = Some(v),
            Some((serde_json::Value::Array(a), _)) => a.push(v),
            Some((serde_json::Value::Object(o), _)) => {
                let key = self.key.take().ok_or("a member without a key")?;
                o.insert(key, v);
            }
            Some(_) => return Err("a scalar container".into()),
        }
        Ok(())
    }
}

impl Handler for Rebuild {
    fn begin(&mut self, kind: Kind) -> Result<Want, String> {
        Ok(match kind {
            Kind::Object => {
                self.stack
                    .push((serde_json::Value::Object(Default::default()), self.key.take()));
                Want::Enter
            }
            Kind::Array => {
                self.stack
                    .push((serde_json::Value::Array(Vec::new()), self.key.take()));
                Want::Enter
            }
            _ => Want::Capture,
        })
    }
    fn key(&mut self, key: &[u8]) -> Result<(), String> {
        self.key = Some(String::from_utf8(key.to_vec()).map_err(|e| e.to_string())?);
        Ok(())
    }
    fn end(&mut self) -> Result<(), String> {
        let (v, key) = self.stack.pop().ok_or("an end without a begin")?;
        self.key = key;
        self.put(v)
    }
    fn captured(&mut self, raw: &[u8], plain: Option<&str>) -> Result<(), String> {
        let v: serde_json::Value = serde_json::from_slice(raw).map_err(|e| e.to_string())?;
        if let Some(text) = plain {
            assert_eq!(
                v,
                serde_json::Value::String(text.into()),
                "a plain string is its text"
            );
        }
        self.put(v)
    }
    fn kept(&mut self, _: &[u8]) -> Result<(), String> {
        Ok(())
    }
}

fn lex<H: Handler>(handler: H, doc: &[u8], cuts: &[usize]) -> Result<H, String> {
    let mut lexer = Lexer::new(handler);
    let mut from = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (doc.len() + 1)).collect();
    cuts.sort_unstable();
    for cut in cuts {
        lexer.feed(&doc[from..cut])?;
        from = cut;
    }
    lexer.feed(&doc[from..])?;
    lexer.finish()
}

/// A JSON-like document: valid JSON most of the time, and with a byte
/// changed, inserted or removed the rest.
fn document() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    let scalar = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| f.to_string()),
        "[0-9]{1,25}(\\.[0-9]{1,4})?([eE][-+]?[0-9]{1,4})?",
        "\\PC{0,12}".prop_map(|s| serde_json::to_string(&s).unwrap_or_default()),
        Just(r#""\ud83d\ude00 \u00e9 \n \" \\ \/""#.to_string()),
    ];
    let value = scalar.prop_recursive(4, 24, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(|v| format!("[{}]", v.join(", "))),
            proptest::collection::vec(("[a-z]{0,3}", inner), 0..5).prop_map(|m| {
                let members: Vec<String> = m.into_iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    });
    (value, 0u8..4, any::<usize>(), any::<u8>()).prop_map(|(doc, damage, at, byte)| {
        let mut bytes = doc.into_bytes();
        let at = at % (bytes.len() + 1);
        match damage {
            0 if at < bytes.len() => bytes[at] = byte,
            1 => bytes.insert(at, byte),
            2 if at < bytes.len() => {
                bytes.remove(at);
            }
            _ => {}
        }
        bytes
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// The same verdict as the oracle, wherever the document is cut.
    #[test]
    fn the_verdict_is_the_oracles_at_every_cut(
        doc in document(),
        cuts in proptest::collection::vec(proptest::prelude::any::<usize>(), 0..6),
    ) {
        let oracle = crate::oracle::verdict(&doc);
        let lexed = lex(Skip, &doc, &cuts).map(drop);
        proptest::prop_assert_eq!(
            lexed.is_ok(),
            oracle.is_ok(),
            "{:?}: lexer {:?}, serde_json {:?}",
            String::from_utf8_lossy(&doc),
            lexed,
            oracle
        );
    }

    /// A handler that enters everything rebuilds the value the oracle reads.
    #[test]
    fn what_a_handler_is_told_is_the_document(
        doc in document(),
        cuts in proptest::collection::vec(proptest::prelude::any::<usize>(), 0..6),
    ) {
        if let Ok(value) = crate::oracle::value(&doc) {
            let rebuilt = lex(Rebuild::default(), &doc, &cuts).map(|h| h.done);
            proptest::prop_assert_eq!(rebuilt, Ok(Some(value)));
        }
    }
}

#[test]
fn nesting_stops_where_serde_json_stops() {
    for depth in [1, super::MAX_DEPTH, super::MAX_DEPTH + 1, 400] {
        let doc = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(
            lex(Skip, doc.as_bytes(), &[]).is_ok(),
            crate::oracle::verdict(doc.as_bytes()).is_ok(),
            "depth {depth}"
        );
    }
}

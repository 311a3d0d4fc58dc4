//! How two cursor states differ, in the few words an error line can hold.
//!
//! A refusal names what differs between the cursor it found and the one
//! the trail records. Printing both whole put the lookback memory (every
//! identity of the window, kilobytes to megabytes) into one error line; the
//! fields that differ, each value shown when short, say the same to the
//! operator, and both states stay in the trail's `state_repaired` line
//! when the operator repairs.

use serde_json::Value;

/// A value longer than this is summarised, not shown.
const SHOWN_MAX: usize = 80;

/// The top-level fields in which `found` and `recorded` differ, as
/// `field: found X, trail Y`, joined by `; `.
pub(crate) fn differences(found: &Value, recorded: &Value) -> String {
    let (Value::Object(a), Value::Object(b)) = (found, recorded) else {
        return format!("found {}, trail {}", shown(found), shown(recorded));
    };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let null = Value::Null;
    let parts: Vec<String> = keys
        .into_iter()
        .filter_map(|k| {
            let (x, y) = (a.get(k).unwrap_or(&null), b.get(k).unwrap_or(&null));
            (x != y).then(|| format!("{k}: cursor {}, trail {}", shown(x), shown(y)))
        })
        .collect();
    match parts.is_empty() {
        true => "no field differs".into(),
        false => parts.join("; "),
    }
}

/// `value` as JSON when short; else its kind and size.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    if text.len() <= SHOWN_MAX {
        return text;
    }
    match value {
        Value::Array(items) => format!("[{} items]", items.len()),
        Value::Object(fields) => format!("{{{} fields, {} bytes}}", fields.len(), text.len()),
        _ => format!(
            "{}… ({} bytes)",
            text.chars().take(SHOWN_MAX / 2).collect::<String>(),
            text.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::differences;
    use serde_json::json;

    #[test]
    fn only_the_differing_fields_are_named_and_large_values_summarised() {
        let seen: Vec<String> = (0..500).map(|i| format!("id-{i}")).collect();
        let found =
            json!({"next_page": "?offset=140", "window_start": "2026-01-01", "lookback": {"seen": seen}});
        let recorded =
            json!({"next_page": "?offset=100", "window_start": "2026-01-01", "lookback": {"seen": []}});
        let said = differences(&found, &recorded);
        assert_eq!(
            said,
            "lookback: cursor {1 fields, 4400 bytes}, trail {\"seen\":[]}; next_page: cursor \"?offset=140\", trail \"?offset=100\""
        );
        assert_eq!(differences(&found, &found), "no field differs");
        assert!(differences(&json!({"a": 1}), &json!({})).contains("a: cursor 1, trail null"));
    }
}

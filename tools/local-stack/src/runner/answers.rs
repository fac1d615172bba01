//! One line about an answer, whatever its function: its JSON, long strings
//! and arrays cut short, the line at most [`LINE`] characters.

use serde_json::Value;

/// Most characters of a summary line.
const LINE: usize = 300;
/// Most characters kept of a string inside an answer.
const STRING: usize = 40;
/// Most elements shown of an array inside an answer.
const ELEMENTS: usize = 4;

/// One line about `answer`: a function error as `ERROR <errorType>:
/// <errorMessage>`, anything else as its shortened JSON.
pub(super) fn summarize(answer: &Value) -> String {
    let line = match answer.get("errorType") {
        Some(kind) => format!("ERROR {kind}: {}", answer["errorMessage"]),
        None => shortened(answer).to_string(),
    };
    cut(&line, LINE)
}

/// `value` with each string past [`STRING`] characters cut, and each array
/// past [`ELEMENTS`] elements cut to its first ones and how many more.
fn shortened(value: &Value) -> Value {
    match value {
        Value::String(text) => Value::String(cut(text, STRING)),
        Value::Array(items) if items.len() > ELEMENTS => {
            let mut kept: Vec<Value> = items.iter().take(ELEMENTS - 1).map(shortened).collect();
            kept.push(Value::String(format!(
                "... {} more",
                items.len() - (ELEMENTS - 1)
            )));
            Value::Array(kept)
        }
        Value::Array(items) => Value::Array(items.iter().map(shortened).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, value)| (key.clone(), shortened(value)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `text`, cut to `max` characters (the last one `…`) if longer.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(max.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_strings_and_arrays_are_cut_short() {
        let hash = format!("$2b$10${}", "x".repeat(53));
        let answer = json!({"hashes": [hash, "$2b$04$short"], "workers": 2});
        let line = summarize(&answer);
        assert!(
            line.contains(&format!("{}…", &hash[..STRING - 1])),
            "{line}"
        );
        assert!(line.contains("\"$2b$04$short\""), "{line}");
        assert!(line.contains("\"workers\":2"), "{line}");
        let many = json!({"groups": [1, 2, 3, 4, 5, 6]});
        assert_eq!(summarize(&many), r#"{"groups":[1,2,3,"... 3 more"]}"#);
        assert_eq!(summarize(&json!([1, 2, 3, 4])), "[1,2,3,4]");
    }

    #[test]
    fn a_function_error_is_named_and_the_line_is_bounded() {
        let error = json!({"errorType": "InvalidRequest", "errorMessage": "no operation"});
        assert_eq!(
            summarize(&error),
            r#"ERROR "InvalidRequest": "no operation""#
        );
        let wide: serde_json::Map<String, Value> =
            (0..100).map(|i| (format!("k{i}"), json!(i))).collect();
        let line = summarize(&Value::Object(wide));
        assert_eq!(line.chars().count(), LINE);
        assert!(line.ends_with('…'));
        assert_eq!(cut("héllo", 3), "hé…");
    }
}

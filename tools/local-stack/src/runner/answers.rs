//! One line about an answer, whatever its function: its fields as
//! `key=value`, plain values first, nested ones cut short (an array as its
//! length and first elements, an object two levels down as `{…}`), the line
//! at most [`LINE`] characters.

use serde_json::{Map, Value};

/// Most characters of a summary line.
const LINE: usize = 300;
/// Most characters kept of a string inside an answer.
const STRING: usize = 40;
/// Most elements shown of an array inside an answer.
const ELEMENTS: usize = 2;
/// Objects this deep (the answer's fields are at depth 1) show as `{…}`.
const DEPTH: usize = 3;

/// One line about `answer`: a function error as `ERROR <errorType>:
/// <errorMessage>`, an object as its fields, anything else as it is.
pub(super) fn summarize(answer: &Value) -> String {
    let line = match answer.get("errorType") {
        Some(kind) => format!("ERROR {kind}: {}", answer["errorMessage"]),
        None => match answer {
            Value::Object(fields) => fields_of(fields, 1),
            other => render(other, 1),
        },
    };
    cut(&line, LINE)
}

/// `fields` at `depth` as `key=value`, plain values first.
fn fields_of(fields: &Map<String, Value>, depth: usize) -> String {
    let nested = |v: &Value| matches!(v, Value::Array(_) | Value::Object(_));
    let plain = fields.iter().filter(|(_, v)| !nested(v));
    let parts: Vec<String> = plain
        .chain(fields.iter().filter(|(_, v)| nested(v)))
        .map(|(key, value)| format!("{key}={}", render(value, depth + 1)))
        .collect();
    parts.join(", ")
}

/// `value` at `depth`, cut short.
fn render(value: &Value, depth: usize) -> String {
    match value {
        Value::String(text) => Value::String(cut(text, STRING)).to_string(),
        Value::Number(n) if n.is_f64() => n
            .as_f64()
            .map_or_else(|| n.to_string(), |f| format!("{f:.1}")),
        Value::Array(items) if items.is_empty() => "[]".to_owned(),
        Value::Array(items) => {
            let mut shown: Vec<String> = items
                .iter()
                .take(ELEMENTS)
                .map(|item| render(item, depth + 1))
                .collect();
            if items.len() > ELEMENTS {
                shown.push("…".to_owned());
            }
            format!("[{}: {}]", items.len(), shown.join(", "))
        }
        Value::Object(fields) if fields.is_empty() => "{}".to_owned(),
        Value::Object(_) if depth >= DEPTH => "{…}".to_owned(),
        Value::Object(fields) => format!("{{{}}}", fields_of(fields, depth)),
        other => other.to_string(),
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
    fn plain_fields_come_first_and_nested_ones_are_cut_short() {
        let hash = format!("$2b$10${}", "x".repeat(53));
        let answer = json!({
            "hashes": [hash, "$2b$04$short", "$2b$04$third"],
            "workers": 2,
            "duration_ms": 21.938,
            "memory": {"rss_bytes": 9, "deep": {"er": 1}},
        });
        assert_eq!(
            summarize(&answer),
            format!(
                "duration_ms=21.9, workers=2, hashes=[3: \"{}…\", \"$2b$04$short\", …], memory={{rss_bytes=9, deep={{…}}}}",
                &hash[..STRING - 1]
            )
        );
        assert_eq!(
            summarize(&json!({"groups": [], "rows": {}, "ok": true})),
            "ok=true, groups=[], rows={}"
        );
        assert_eq!(summarize(&json!([1, 2, 3])), "[3: 1, 2, …]");
    }

    #[test]
    fn a_function_error_is_named_and_the_line_is_bounded() {
        let error = json!({"errorType": "InvalidRequest", "errorMessage": "no operation"});
        assert_eq!(
            summarize(&error),
            r#"ERROR "InvalidRequest": "no operation""#
        );
        let wide: Map<String, Value> = (0..100).map(|i| (format!("k{i}"), json!(i))).collect();
        let line = summarize(&Value::Object(wide));
        assert_eq!(line.chars().count(), LINE);
        assert!(line.ends_with('…'));
        assert_eq!(cut("héllo", 3), "hé…");
    }
}

//! Requests: parsed from JSON by hand, so no error message can quote a value
//! (serde's messages do, and a value here may be a password).
//!
//! ```json
//! {"operation": "hash", "cost": 10, "passwords": ["correct horse battery staple"]}
//! {"operation": "verify", "items": [{"password": "…", "hash": "$2b$10$…"}]}
//! ```

use crate::config::Limits;
use crate::secret::Secret;
use serde_json::{Map, Value};

/// Longest password bcrypt uses in full, in bytes. Longer ones are refused,
/// never silently truncated.
pub const MAX_PASSWORD_BYTES: usize = 72;

/// A valid request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Hash every password at `cost`.
    Hash {
        /// The passwords.
        passwords: Vec<Secret>,
        /// bcrypt cost (log2 of the rounds).
        cost: u32,
    },
    /// Check each password against its hash.
    Verify {
        /// `(password, hash)` pairs; hashes are checked one by one later.
        items: Vec<(Secret, String)>,
    },
}

impl Request {
    /// Items in the batch.
    pub fn len(&self) -> usize {
        match self {
            Request::Hash { passwords, .. } => passwords.len(),
            Request::Verify { items } => items.len(),
        }
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A request that cannot be served; the message never contains a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

fn invalid(message: impl Into<String>) -> Invalid {
    Invalid(message.into())
}

/// Parse and validate a request body.
pub fn parse(body: &[u8], limits: &Limits) -> Result<Request, Invalid> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        // Syntax errors name a position, never the text.
        invalid(format!(
            "request is not valid JSON (line {}, column {})",
            e.line(),
            e.column()
        ))
    })?;
    let object = value
        .as_object()
        .ok_or_else(|| invalid("request must be a JSON object"))?;
    let operation = object
        .get("operation")
        .ok_or_else(|| invalid("missing field \"operation\" (\"hash\" or \"verify\")"))?
        .as_str()
        .ok_or_else(|| invalid("\"operation\" must be a string: \"hash\" or \"verify\""))?;
    match operation {
        "hash" => parse_hash(object, limits),
        "verify" => parse_verify(object, limits),
        _ => Err(invalid(
            "unknown operation: expected \"hash\" or \"verify\"",
        )),
    }
}

fn only_fields(object: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), Invalid> {
    match object.keys().find(|k| !allowed.contains(&k.as_str())) {
        // Field names are echoed only if they look like field names.
        Some(key)
            if key.len() <= 32 && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
        {
            Err(invalid(format!(
                "unknown field \"{key}\" in {what}; allowed: {}",
                allowed.join(", ")
            )))
        }
        Some(_) => Err(invalid(format!(
            "unknown field in {what}; allowed: {}",
            allowed.join(", ")
        ))),
        None => Ok(()),
    }
}

fn batch<'a>(
    object: &'a Map<String, Value>,
    field: &str,
    limits: &Limits,
) -> Result<&'a Vec<Value>, Invalid> {
    let list = object
        .get(field)
        .ok_or_else(|| invalid(format!("missing field \"{field}\"")))?
        .as_array()
        .ok_or_else(|| invalid(format!("\"{field}\" must be an array")))?;
    if list.is_empty() {
        return Err(invalid(format!("\"{field}\" is empty")));
    }
    if list.len() > limits.batch {
        return Err(invalid(format!(
            "\"{field}\" has {} entries; at most {} per request",
            list.len(),
            limits.batch
        )));
    }
    Ok(list)
}

fn password(value: &Value, place: &str) -> Result<Secret, Invalid> {
    let text = value
        .as_str()
        .ok_or_else(|| invalid(format!("{place} must be a string")))?;
    if text.is_empty() {
        return Err(invalid(format!("{place} is empty")));
    }
    if text.len() > MAX_PASSWORD_BYTES {
        return Err(invalid(format!(
            "{place} is {} bytes; bcrypt uses at most {MAX_PASSWORD_BYTES} (longer passwords are refused, not truncated)",
            text.len()
        )));
    }
    if text.contains('\0') {
        return Err(invalid(format!("{place} contains a NUL byte")));
    }
    Ok(Secret::new(text.to_owned()))
}

fn parse_hash(object: &Map<String, Value>, limits: &Limits) -> Result<Request, Invalid> {
    only_fields(
        object,
        &["operation", "cost", "passwords"],
        "a hash request",
    )?;
    let cost = object
        .get("cost")
        .ok_or_else(|| invalid("missing field \"cost\""))?
        .as_u64()
        .ok_or_else(|| invalid("\"cost\" must be a whole number"))?;
    if !(u64::from(limits.min_cost)..=u64::from(limits.max_cost)).contains(&cost) {
        return Err(invalid(format!(
            "cost {cost} is outside the allowed range {} to {}",
            limits.min_cost, limits.max_cost
        )));
    }
    let passwords = batch(object, "passwords", limits)?
        .iter()
        .enumerate()
        .map(|(i, p)| password(p, &format!("passwords[{i}]")))
        .collect::<Result<_, _>>()?;
    Ok(Request::Hash {
        passwords,
        cost: u32::try_from(cost).unwrap_or(limits.max_cost),
    })
}

fn parse_verify(object: &Map<String, Value>, limits: &Limits) -> Result<Request, Invalid> {
    only_fields(object, &["operation", "items"], "a verify request")?;
    let items = batch(object, "items", limits)?
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let item = item.as_object().ok_or_else(|| {
                invalid(format!(
                    "items[{i}] must be an object with \"password\" and \"hash\""
                ))
            })?;
            only_fields(item, &["password", "hash"], &format!("items[{i}]"))?;
            let secret = password(
                item.get("password")
                    .ok_or_else(|| invalid(format!("items[{i}]: missing field \"password\"")))?,
                &format!("items[{i}].password"),
            )?;
            let hash = item
                .get("hash")
                .ok_or_else(|| invalid(format!("items[{i}]: missing field \"hash\"")))?
                .as_str()
                .ok_or_else(|| invalid(format!("items[{i}].hash must be a string")))?;
            Ok((secret, hash.to_owned()))
        })
        .collect::<Result<_, _>>()?;
    Ok(Request::Verify { items })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &str = "hunter2-do-not-leak";

    fn parse_value(v: Value) -> Result<Request, Invalid> {
        parse(v.to_string().as_bytes(), &Limits::default())
    }

    #[test]
    fn valid_requests() {
        let r = parse_value(json!({"operation": "hash", "cost": 4, "passwords": ["a", "b"]}))
            .expect("hash");
        assert!(matches!(r, Request::Hash { cost: 4, ref passwords } if passwords.len() == 2));
        let r =
            parse_value(json!({"operation": "verify", "items": [{"password": "a", "hash": "x"}]}))
                .expect("verify");
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn limits_are_enforced_at_their_edges() {
        let hash = |cost: u64, passwords: Value| {
            parse_value(json!({"operation": "hash", "cost": cost, "passwords": passwords}))
        };
        assert!(hash(4, json!(["a"])).is_ok());
        assert!(hash(14, json!(["a"])).is_ok());
        assert!(hash(3, json!(["a"])).unwrap_err().0.contains("cost 3"));
        assert!(hash(15, json!(["a"])).is_err());
        assert!(hash(32, json!(["a"])).is_err());
        assert!(hash(4, json!(["x".repeat(72)])).is_ok());
        assert!(
            hash(4, json!(["x".repeat(73)]))
                .unwrap_err()
                .0
                .contains("73 bytes")
        );
        // 72 bytes, but in 36 two-byte characters: bytes count, not characters.
        assert!(hash(4, json!(["é".repeat(36)])).is_ok());
        assert!(hash(4, json!(["é".repeat(37)])).is_err());
        assert!(hash(4, json!([""])).unwrap_err().0.contains("empty"));
        assert!(hash(4, json!(["a\u{0}b"])).unwrap_err().0.contains("NUL"));
        assert!(hash(4, json!(vec!["a"; 1_000])).is_ok());
        assert!(
            hash(4, json!(vec!["a"; 1_001]))
                .unwrap_err()
                .0
                .contains("at most 1000")
        );
        assert!(hash(4, json!([])).is_err());
    }

    #[test]
    fn bad_inputs_get_clear_errors() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"{not json".to_vec(), "not valid JSON"),
            (b"[1]".to_vec(), "JSON object"),
            (br#"{"cost": 4}"#.to_vec(), "missing field \"operation\""),
            (br#"{"operation": 7}"#.to_vec(), "must be a string"),
            (br#"{"operation": "encrypt"}"#.to_vec(), "unknown operation"),
            (
                br#"{"operation": "hash", "passwords": ["a"]}"#.to_vec(),
                "missing field \"cost\"",
            ),
            (
                br#"{"operation": "hash", "cost": "10", "passwords": ["a"]}"#.to_vec(),
                "whole number",
            ),
            (
                br#"{"operation": "hash", "cost": 10.5, "passwords": ["a"]}"#.to_vec(),
                "whole number",
            ),
            (
                br#"{"operation": "hash", "cost": -1, "passwords": ["a"]}"#.to_vec(),
                "whole number",
            ),
            (
                br#"{"operation": "hash", "cost": 10}"#.to_vec(),
                "missing field \"passwords\"",
            ),
            (
                br#"{"operation": "hash", "cost": 10, "passwords": "a"}"#.to_vec(),
                "must be an array",
            ),
            (
                br#"{"operation": "hash", "cost": 10, "passwords": [1]}"#.to_vec(),
                "passwords[0] must be a string",
            ),
            (
                br#"{"operation": "hash", "cost": 10, "passwords": ["a"], "salt": "x"}"#.to_vec(),
                "unknown field \"salt\"",
            ),
            (
                br#"{"operation": "verify"}"#.to_vec(),
                "missing field \"items\"",
            ),
            (
                br#"{"operation": "verify", "items": ["a"]}"#.to_vec(),
                "items[0] must be an object",
            ),
            (
                br#"{"operation": "verify", "items": [{"hash": "x"}]}"#.to_vec(),
                "missing field \"password\"",
            ),
            (
                br#"{"operation": "verify", "items": [{"password": "a"}]}"#.to_vec(),
                "missing field \"hash\"",
            ),
            (
                br#"{"operation": "verify", "items": [{"password": "a", "hash": 5}]}"#.to_vec(),
                "hash must be a string",
            ),
        ];
        for (body, expected) in cases {
            let err = parse(&body, &Limits::default()).expect_err(expected);
            assert!(
                err.0.contains(expected),
                "{}: {}",
                String::from_utf8_lossy(&body),
                err.0
            );
        }
    }

    #[test]
    fn no_error_message_quotes_a_password() {
        let bodies = [
            json!({"operation": "hash", "cost": SECRET, "passwords": [SECRET]}),
            json!({"operation": SECRET}),
            json!({"operation": "hash", "cost": 4, "passwords": [SECRET.repeat(10)]}),
            json!({"operation": "hash", "cost": 4, "passwords": [format!("{SECRET}\u{0}")]}),
            json!({"operation": "hash", "cost": 4, "passwords": ["a"], SECRET: 1}),
            json!({"operation": "verify", "items": [{"password": SECRET, "hash": SECRET, SECRET: 1}]}),
            json!({"operation": "verify", "items": [{"password": [SECRET], "hash": "x"}]}),
        ];
        for body in bodies {
            let err = parse_value(body.clone()).expect_err("invalid");
            assert!(!err.0.contains("hunter2"), "{body}: {}", err.0);
        }
        let truncated = format!("{{\"operation\": \"hash\", \"passwords\": [\"{SECRET}");
        assert!(
            !parse(truncated.as_bytes(), &Limits::default())
                .expect_err("eof")
                .0
                .contains("hunter2")
        );
    }
}

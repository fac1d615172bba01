//! Requests: parsed from JSON by hand, so no error message can quote a value
//! (serde's messages do, and a value here may be a password).
//!
//! ```json
//! {"operation": "hash", "cost": 10, "passwords": ["correct horse battery staple"]}
//! {"operation": "verify", "items": [{"password": "…", "hash": "$2b$10$…"}]}
//! ```
//!
//! Each request is parsed once, into a [`Request`] holding [`Secret`]s: a
//! direct invocation's payload is the JSON value the runtime already decoded
//! ([`from_value`]); a Function URL's body is decoded (base64 when flagged)
//! and parsed into a value once ([`from_function_url`], [`parse`]), then read
//! by the same code. Passwords are moved out of the value into secrets, never
//! copied; whatever else the value held is wiped ([`wipe_json`]), as are the
//! URL's body and its decoded bytes, on success and on refusal alike.
//!
//! What this cannot wipe: the Lambda runtime's own buffers (the HTTP response
//! of the Runtime API that carried the event, and the JSON it decoded it
//! from), and inside `serde_json`, its scratch buffer for strings with escape
//! sequences and the pieces of a value it drops when the JSON turns out to be
//! invalid half-way.
//!
//! Parsing runs on the tokio thread that serves the invocation: it is linear
//! in the payload, which Lambda bounds at 6 MB.

use crate::config::Limits;
use crate::secret::{Secret, wipe_json};
use base64::Engine;
use serde_json::{Map, Value};
use zeroize::Zeroizing;

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

/// JSON that came from outside: wiped when dropped, whatever is left in it.
struct Incoming(Value);

impl Drop for Incoming {
    fn drop(&mut self) {
        wipe_json(self.0.take());
    }
}

/// Parse and validate a request that is already JSON (a direct invocation's
/// payload), taking it whole: passwords move into the request, the rest of
/// the value is wiped.
pub fn from_value(value: Value, limits: &Limits) -> Result<Request, Invalid> {
    let mut value = Incoming(value);
    parse_object(&mut value.0, limits)
}

/// Parse and validate a request body (JSON bytes), reading it into a value
/// once. The caller owns, and wipes, `body`.
pub fn parse(body: &[u8], limits: &Limits) -> Result<Request, Invalid> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        // Syntax errors name a position, never the text.
        invalid(format!(
            "request is not valid JSON (line {}, column {})",
            e.line(),
            e.column()
        ))
    })?;
    from_value(value, limits)
}

/// Parse and validate the request in a Function URL event (payload format
/// 2.0): its `body`, base64-decoded when `isBase64Encoded`. The event, its
/// body and the decoded bytes are wiped.
pub fn from_function_url(event: Value, limits: &Limits) -> Result<Request, Invalid> {
    let mut event = Incoming(event);
    let body = match event.0.get_mut("body") {
        Some(Value::String(body)) => Zeroizing::new(std::mem::take(body)),
        _ => return Err(invalid("the request has no body")),
    };
    if event.0.get("isBase64Encoded").and_then(Value::as_bool) == Some(true) {
        parse(&decode_base64(&body)?, limits)
    } else {
        parse(body.as_bytes(), limits)
    }
}

/// Decode base64 into a buffer that is wiped when dropped (also when the text
/// turns out not to be base64 half-way).
fn decode_base64(text: &str) -> Result<Zeroizing<Vec<u8>>, Invalid> {
    let mut bytes = Zeroizing::new(vec![0; base64::decoded_len_estimate(text.len())]);
    let len = base64::engine::general_purpose::STANDARD
        .decode_slice(text, &mut bytes)
        .map_err(|_| invalid("the body is not valid base64"))?;
    bytes.truncate(len);
    Ok(bytes)
}

fn parse_object(value: &mut Value, limits: &Limits) -> Result<Request, Invalid> {
    let object = value
        .as_object_mut()
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
    object: &'a mut Map<String, Value>,
    field: &str,
    limits: &Limits,
) -> Result<&'a mut Vec<Value>, Invalid> {
    let list = object
        .get_mut(field)
        .ok_or_else(|| invalid(format!("missing field \"{field}\"")))?
        .as_array_mut()
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

/// Move the password out of `value` (leaving an empty string) into a secret,
/// then check it: a refused password is wiped with the secret.
fn password(value: &mut Value, place: &str) -> Result<Secret, Invalid> {
    let Value::String(text) = value else {
        return Err(invalid(format!("{place} must be a string")));
    };
    let secret = Secret::new(std::mem::take(text));
    let bytes = secret.expose();
    if bytes.is_empty() {
        return Err(invalid(format!("{place} is empty")));
    }
    if bytes.len() > MAX_PASSWORD_BYTES {
        return Err(invalid(format!(
            "{place} is {} bytes; bcrypt uses at most {MAX_PASSWORD_BYTES} (longer passwords are refused, not truncated)",
            bytes.len()
        )));
    }
    if bytes.contains(&0) {
        return Err(invalid(format!("{place} contains a NUL byte")));
    }
    Ok(secret)
}

fn parse_hash(object: &mut Map<String, Value>, limits: &Limits) -> Result<Request, Invalid> {
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
        .iter_mut()
        .enumerate()
        .map(|(i, p)| password(p, &format!("passwords[{i}]")))
        .collect::<Result<_, _>>()?;
    Ok(Request::Hash {
        passwords,
        cost: u32::try_from(cost).unwrap_or(limits.max_cost),
    })
}

fn parse_verify(object: &mut Map<String, Value>, limits: &Limits) -> Result<Request, Invalid> {
    only_fields(object, &["operation", "items"], "a verify request")?;
    let items = batch(object, "items", limits)?
        .iter_mut()
        .enumerate()
        .map(|(i, item)| {
            let item = item.as_object_mut().ok_or_else(|| {
                invalid(format!(
                    "items[{i}] must be an object with \"password\" and \"hash\""
                ))
            })?;
            only_fields(item, &["password", "hash"], &format!("items[{i}]"))?;
            let secret = password(
                item.get_mut("password")
                    .ok_or_else(|| invalid(format!("items[{i}]: missing field \"password\"")))?,
                &format!("items[{i}].password"),
            )?;
            // A hash is no secret: moved out as it is.
            let hash = match item.get_mut("hash") {
                None => return Err(invalid(format!("items[{i}]: missing field \"hash\""))),
                Some(Value::String(hash)) => std::mem::take(hash),
                Some(_) => return Err(invalid(format!("items[{i}].hash must be a string"))),
            };
            Ok((secret, hash))
        })
        .collect::<Result<_, _>>()?;
    Ok(Request::Verify { items })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &str = "hunter2-do-not-leak";

    /// Both roads in, the value itself and its bytes, with the same verdict.
    fn parse_value(v: Value) -> Result<Request, Invalid> {
        let from_bytes = parse(v.to_string().as_bytes(), &Limits::default());
        let from_value = from_value(v, &Limits::default());
        assert_eq!(from_bytes, from_value);
        from_value
    }

    fn url_event(body: &str, base64: Option<bool>) -> Value {
        let mut event =
            json!({"version": "2.0", "requestContext": {"http": {"method": "POST"}}, "body": body});
        if let Some(base64) = base64 {
            event["isBase64Encoded"] = json!(base64);
        }
        event
    }

    #[test]
    fn function_url_bodies_as_text_or_base64() {
        let body = r#"{"operation":"hash","cost":4,"passwords":["pw"]}"#;
        let limits = Limits::default();
        let expected = parse(body.as_bytes(), &limits).expect("valid");
        assert_eq!(
            from_function_url(url_event(body, None), &limits),
            Ok(expected.clone())
        );
        assert_eq!(
            from_function_url(url_event(body, Some(false)), &limits),
            Ok(expected.clone())
        );
        let encoded = base64::engine::general_purpose::STANDARD.encode(body);
        assert_eq!(
            from_function_url(url_event(&encoded, Some(true)), &limits),
            Ok(expected)
        );
        for (event, message) in [
            (
                url_event("not base64!", Some(true)),
                "the body is not valid base64",
            ),
            (
                url_event("", Some(true)),
                "request is not valid JSON (line 1, column 0)",
            ),
            (
                json!({"requestContext": {"http": {"method": "POST"}}}),
                "the request has no body",
            ),
            (json!({"body": 7}), "the request has no body"),
        ] {
            assert_eq!(from_function_url(event, &limits), Err(invalid(message)));
        }
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

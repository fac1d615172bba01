//! Requests: parsed from JSON by hand, so no error message can quote a value
//! or a field name the caller chose (serde's messages do, and either may be a
//! password).
//!
//! ```json
//! {"operation": "hash", "cost": 10, "passwords": ["correct horse battery staple"]}
//! {"operation": "verify", "items": [{"password": "…", "hash": "$2b$10$…"}]}
//! ```
//!
//! Every invocation's payload arrives as the runtime's unparsed text
//! ([`payload`] parses it into a value once and wipes the text); a Function
//! URL's body is then decoded (base64 when flagged) and parsed into a value
//! once ([`from_function_url`], [`parse`]); both values are read by the same
//! code ([`from_value`]). Passwords are moved out of the value into
//! [`Secret`]s, never copied; whatever else the value held is wiped
//! ([`wipe_json`]), as are the URL's body and its decoded bytes, on success
//! and on refusal alike. The README's "Secrets" lists the copies this cannot
//! reach.
//!
//! A key that appears twice in one object, at any depth, refuses the request
//! while it is parsed, before the second value is read: `serde_json`'s own
//! value would keep the last one and free the first (maybe a password)
//! unwiped. The error names the key only if it is one of this API's field
//! names. Whatever was parsed before any error is wiped.
//!
//! A request whose shape is wrong (a missing or unknown field, a value of the
//! wrong type) is refused whole. So is a `hash` request with one password
//! that breaks the password rule ([`check_password`]): its hashes are stored
//! by position, and a partial answer would leave holes. In a `verify`
//! request such a password is that pair's error ([`Pair`]), and the other
//! pairs are checked.
//!
//! Parsing runs on the tokio thread that serves the invocation: it is linear
//! in the payload, which Lambda bounds at 6 MB.

use crate::config::Config;
use crate::secret::{Secret, wipe_json};
use base64::Engine;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};
use std::cell::Cell;
use std::fmt;
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
        /// The pairs; hashes are checked one by one later.
        items: Vec<Pair>,
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

    /// The batch cut into requests of at most `size` items (at least 1), in
    /// order; the items are moved, never copied.
    pub fn into_rounds(self, size: usize) -> Vec<Request> {
        fn cut<T>(mut items: Vec<T>, size: usize) -> Vec<Vec<T>> {
            let mut rounds = Vec::with_capacity(items.len().div_ceil(size));
            while items.len() > size {
                let rest = items.split_off(size);
                rounds.push(std::mem::replace(&mut items, rest));
            }
            rounds.push(items);
            rounds
        }
        let size = size.max(1);
        match self {
            Request::Hash { passwords, cost } => cut(passwords, size)
                .into_iter()
                .map(|passwords| Request::Hash { passwords, cost })
                .collect(),
            Request::Verify { items } => cut(items, size)
                .into_iter()
                .map(|items| Request::Verify { items })
                .collect(),
        }
    }
}

/// One pair of a verify request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    /// The password, or why this pair alone gets no verdict.
    pub password: Result<Secret, PasswordProblem>,
    /// The bcrypt hash to check it against (no secret).
    pub hash: String,
}

impl Pair {
    /// A pair whose password has passed, or failed, [`check_password`].
    pub fn new(password: Secret, hash: String) -> Self {
        Self {
            password: check_password(password),
            hash,
        }
    }
}

/// Why a password cannot be hashed as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PasswordProblem {
    /// No bytes.
    Empty,
    /// More bytes than bcrypt uses ([`MAX_PASSWORD_BYTES`]).
    TooLong(usize),
    /// A NUL byte, where C implementations of bcrypt end the password.
    Nul,
}

impl fmt::Display for PasswordProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PasswordProblem::Empty => f.write_str("is empty"),
            PasswordProblem::TooLong(bytes) => write!(
                f,
                "is {bytes} bytes; bcrypt uses at most {MAX_PASSWORD_BYTES} (longer passwords are refused, not truncated)"
            ),
            PasswordProblem::Nul => f.write_str("contains a NUL byte"),
        }
    }
}

/// The password rule: 1 to [`MAX_PASSWORD_BYTES`] bytes, no NUL byte. A
/// refused password is dropped, so wiped, here.
pub fn check_password(password: Secret) -> Result<Secret, PasswordProblem> {
    let bytes = password.expose();
    if bytes.is_empty() {
        Err(PasswordProblem::Empty)
    } else if bytes.len() > MAX_PASSWORD_BYTES {
        Err(PasswordProblem::TooLong(bytes.len()))
    } else if bytes.contains(&0) {
        Err(PasswordProblem::Nul)
    } else {
        Ok(password)
    }
}

/// A request that cannot be served; the message never contains a password
/// nor a field name the caller chose.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

fn invalid(message: impl Into<String>) -> Invalid {
    Invalid(message.into())
}

/// JSON that came from outside, a whole value or an array or object still
/// being parsed: wiped when dropped, whatever is left in it.
struct Incoming<T = Value>(T)
where
    T: Default,
    Value: From<T>;

impl<T> Drop for Incoming<T>
where
    T: Default,
    Value: From<T>,
{
    fn drop(&mut self) {
        wipe_json(Value::from(std::mem::take(&mut self.0)));
    }
}

/// Parse an invocation's payload, which the runtime hands over as text
/// (checked to be one JSON value, not parsed), into a value; the text is
/// wiped. The runtime is given no value to parse because its error messages
/// name the keys on the way to a syntax error, and a key may be a password.
pub fn payload(raw: Box<RawValue>) -> Result<Value, Invalid> {
    let text = Zeroizing::new(String::from(Box::<str>::from(raw)));
    json(text.as_bytes())
}

/// Parse and validate a request that is already JSON (a direct invocation's
/// payload), taking it whole: passwords move into the request, the rest of
/// the value is wiped.
pub fn from_value(value: Value, limits: &Config) -> Result<Request, Invalid> {
    let mut value = Incoming(value);
    parse_object(&mut value.0, limits)
}

/// Parse and validate a request body (JSON bytes), reading it into a value
/// once. The caller owns, and wipes, `body`.
pub fn parse(body: &[u8], limits: &Config) -> Result<Request, Invalid> {
    from_value(json(body)?, limits)
}

/// JSON bytes into a value, refusing a key that appears twice in one object
/// ([`Unique`]). A syntax error names a position, never the text; a duplicate
/// key is named only when it is one of [`FIELD_NAMES`], and with no position
/// (the runtime's text of a payload leaves out the whitespace around it, and
/// both roads give the same verdict). What was parsed before an error is
/// wiped.
fn json(bytes: &[u8]) -> Result<Value, Invalid> {
    let duplicate = Cell::new(None);
    let mut parser = serde_json::Deserializer::from_slice(bytes);
    let parsed = Unique {
        duplicate: &duplicate,
    }
    .deserialize(&mut parser)
    .map(Incoming)
    .and_then(|value| parser.end().map(|()| value));
    match parsed {
        Ok(mut value) => Ok(value.0.take()),
        Err(e) => Err(match duplicate.get() {
            Some(Some(field)) => invalid(format!(
                "duplicate field \"{field}\": a field may appear only once in an object"
            )),
            Some(None) => invalid(
                "duplicate field: a field may appear only once in an object (field names are not echoed)",
            ),
            None => invalid(format!(
                "request is not valid JSON (line {}, column {})",
                e.line(),
                e.column()
            )),
        }),
    }
}

/// The field names a duplicate-key error may quote: those of the request and
/// of the Function URL event that this crate reads. Any other key is the
/// caller's choice, and may be a password.
const FIELD_NAMES: &[&str] = &[
    "operation",
    "cost",
    "passwords",
    "items",
    "password",
    "hash",
    "body",
    "isBase64Encoded",
    "requestContext",
    "http",
    "method",
];

/// Parses one JSON value as `serde_json`'s `Value` does, but stops at the
/// second occurrence of a key in one object, before its value is read (the
/// first one's value is wiped with the rest). The key is then reported in
/// `duplicate`, as its name in [`FIELD_NAMES`] or as `None`; the error itself
/// says nothing.
///
/// Arrays and objects are built in [`Incoming`]s, so whatever was parsed
/// before any error is wiped too.
#[derive(Clone, Copy)]
struct Unique<'a> {
    duplicate: &'a Cell<Option<Option<&'static str>>>,
}

impl<'de> DeserializeSeed<'de> for Unique<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut array = Incoming(Vec::new());
        while let Some(item) = items.next_element_seed(self)? {
            array.0.push(item);
        }
        Ok(Value::Array(std::mem::take(&mut array.0)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<Value, A::Error> {
        let mut object = Incoming(Map::new());
        while let Some(key) = fields.next_key::<String>()? {
            let mut key = Zeroizing::new(key);
            if object.0.contains_key(key.as_str()) {
                let named = FIELD_NAMES.iter().find(|name| **name == key.as_str());
                self.duplicate.set(Some(named.copied()));
                return Err(de::Error::custom("duplicate field"));
            }
            let value = fields.next_value_seed(self)?;
            object.0.insert(std::mem::take(&mut *key), value);
        }
        Ok(Value::Object(std::mem::take(&mut object.0)))
    }
}

/// Parse and validate the request in a Function URL event (payload format
/// 2.0): its `body`, base64-decoded when `isBase64Encoded`. The event, its
/// body and the decoded bytes are wiped.
pub fn from_function_url(event: Value, limits: &Config) -> Result<Request, Invalid> {
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

fn parse_object(value: &mut Value, limits: &Config) -> Result<Request, Invalid> {
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

/// Refuse any field but `allowed`, naming none: a caller's key may be a
/// password sent in the wrong place.
fn only_fields(object: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), Invalid> {
    if object.keys().all(|k| allowed.contains(&k.as_str())) {
        return Ok(());
    }
    Err(invalid(format!(
        "unknown field in {what} (field names are not echoed); allowed: {}",
        allowed.join(", ")
    )))
}

fn batch<'a>(
    object: &'a mut Map<String, Value>,
    field: &str,
    limits: &Config,
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

/// Move the password out of `value` (leaving an empty string) into a secret.
fn secret(value: &mut Value, place: &str) -> Result<Secret, Invalid> {
    match value {
        Value::String(text) => Ok(Secret::new(std::mem::take(text))),
        _ => Err(invalid(format!("{place} must be a string"))),
    }
}

fn parse_hash(object: &mut Map<String, Value>, limits: &Config) -> Result<Request, Invalid> {
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
        .map(|(i, p)| {
            let place = format!("passwords[{i}]");
            check_password(secret(p, &place)?)
                .map_err(|problem| invalid(format!("{place} {problem}")))
        })
        .collect::<Result<_, _>>()?;
    Ok(Request::Hash {
        passwords,
        cost: u32::try_from(cost).unwrap_or(limits.max_cost),
    })
}

fn parse_verify(object: &mut Map<String, Value>, limits: &Config) -> Result<Request, Invalid> {
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
            let password = secret(
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
            Ok(Pair::new(password, hash))
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
        let from_bytes = parse(v.to_string().as_bytes(), &Config::default());
        let from_value = from_value(v, &Config::default());
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
        let limits = Config::default();
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
                "unknown field in a hash request (field names are not echoed); allowed: operation, cost, passwords",
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
            let err = parse(&body, &Config::default()).expect_err(expected);
            assert!(
                err.0.contains(expected),
                "{}: {}",
                String::from_utf8_lossy(&body),
                err.0
            );
        }
    }

    #[test]
    fn a_verify_password_that_breaks_the_rule_is_that_pairs_problem() {
        let items = json!([
            {"password": "ok", "hash": "h0"},
            {"password": "x".repeat(73), "hash": "h1"},
            {"password": "a\u{0}b", "hash": "h2"},
            {"password": "", "hash": "h3"},
        ]);
        let Ok(Request::Verify { items }) =
            parse_value(json!({"operation": "verify", "items": items}))
        else {
            panic!("a verify request");
        };
        let problems: Vec<_> = items.iter().map(|p| p.password.as_ref().err()).collect();
        assert_eq!(
            problems,
            [
                None,
                Some(&PasswordProblem::TooLong(73)),
                Some(&PasswordProblem::Nul),
                Some(&PasswordProblem::Empty)
            ]
        );
        assert_eq!(items[3].hash, "h3");
        // In a hash request the same password refuses the whole request.
        let err = parse_value(
            json!({"operation": "hash", "cost": 4, "passwords": ["ok", "x".repeat(73)]}),
        )
        .expect_err("refused");
        assert_eq!(
            err.0,
            "passwords[1] is 73 bytes; bcrypt uses at most 72 (longer passwords are refused, not truncated)"
        );
    }

    #[test]
    fn payloads_are_parsed_once_and_name_no_key() {
        let raw = |text: &str| RawValue::from_string(text.to_owned()).expect("one JSON value");
        assert_eq!(
            payload(raw(r#"{"operation": "hash"}"#)),
            Ok(json!({"operation": "hash"}))
        );
        // JSON the runtime passes as one value but that is no valid text: a
        // lone surrogate, nesting deeper than serde_json's limit.
        let deep = format!(r#"{{"{SECRET}": {}{}}}"#, "[".repeat(200), "]".repeat(200));
        for text in [format!(r#"{{"{SECRET}": "\ud800"}}"#), deep] {
            let err = payload(raw(&text)).expect_err("not valid");
            assert!(
                err.0
                    .starts_with("request is not valid JSON (line 1, column "),
                "{}",
                err.0
            );
            assert!(!err.0.contains("hunter2"), "{}", err.0);
        }
    }

    #[test]
    fn no_error_names_a_caller_supplied_key() {
        // Short word-shaped keys too: a password may look like a field name.
        for key in ["salt", "hunter2", "hunter2_do_not_leak", "x"] {
            for body in [
                json!({"operation": "hash", "cost": 4, "passwords": ["a"], key: 1}),
                json!({"operation": "verify", "items": [{"password": "a", "hash": "x", key: 1}]}),
            ] {
                let err = parse_value(body.clone()).expect_err("unknown field");
                assert!(
                    err.0.contains("unknown field in ")
                        && err.0.contains("(field names are not echoed)"),
                    "{body}: {}",
                    err.0
                );
                let quoted = format!("\"{key}\"");
                assert!(!err.0.contains(&quoted), "{body}: {}", err.0);
                assert!(!err.0.contains("hunter2"), "{body}: {}", err.0);
            }
        }
    }

    /// Passwords in the duplicate-key tests: neither may appear in an error.
    const FIRST: &str = "first-secret-Qx7w";
    const SECOND: &str = "second-secret-Zk9v";

    /// `text` down every road a request takes: a direct invocation's payload,
    /// and a Function URL event's body, as text and in base64.
    fn every_road(text: &str) -> Vec<Result<Request, Invalid>> {
        let limits = Config::default();
        let raw = RawValue::from_string(text.to_owned()).expect("one JSON value");
        let encoded = base64::engine::general_purpose::STANDARD.encode(text);
        vec![
            payload(raw).and_then(|value| from_value(value, &limits)),
            from_function_url(url_event(text, None), &limits),
            from_function_url(url_event(&encoded, Some(true)), &limits),
        ]
    }

    /// Assert that `err` is the refusal of a duplicate `key`, naming it and
    /// neither password.
    fn assert_duplicate(err: &Invalid, key: &str) {
        let message = &err.0;
        assert!(
            message.starts_with(&format!("duplicate field \"{key}\": ")),
            "{key}: {message}"
        );
        for shown in [message.clone(), format!("{err:?}")] {
            assert!(!shown.contains(FIRST) && !shown.contains(SECOND), "{shown}");
            assert!(!shown.contains("secret"), "{shown}");
        }
        let error = crate::error::Error::from(err.clone());
        assert_eq!(error.error_type(), "InvalidRequest");
        assert_eq!(error.http_status(), 400);
    }

    #[test]
    fn a_duplicate_key_is_refused_at_any_level_naming_the_key() {
        let pair = |fields: &str| format!(r#"{{"operation":"verify","items":[{fields}]}}"#);
        let cases = [
            (
                "passwords",
                format!(
                    r#"{{"operation":"hash","cost":4,"passwords":["{FIRST}"],"passwords":["{SECOND}"]}}"#
                ),
            ),
            (
                "operation",
                format!(
                    r#"{{"operation":"verify","operation":"hash","cost":4,"passwords":["{FIRST}"]}}"#
                ),
            ),
            (
                "cost",
                format!(r#"{{"operation":"hash","cost":4,"cost":5,"passwords":["{FIRST}"]}}"#),
            ),
            (
                "items",
                format!(
                    r#"{{"operation":"verify","items":[{{"password":"{FIRST}","hash":"x"}}],"items":[{{"password":"{SECOND}","hash":"y"}}]}}"#
                ),
            ),
            (
                "password",
                pair(&format!(
                    r#"{{"password":"{FIRST}","password":"{SECOND}","hash":"x"}}"#
                )),
            ),
            (
                "hash",
                pair(&format!(
                    r#"{{"password":"ok","hash":"x"}},{{"password":"{FIRST}","hash":"x","hash":"{SECOND}"}}"#
                )),
            ),
        ];
        for (key, text) in cases {
            // Whitespace around the JSON (which the runtime's text of a
            // payload leaves out) changes nothing.
            let padded = parse(format!("\n  {text} ").as_bytes(), &Config::default());
            for result in every_road(&text) {
                let err = result.expect_err(key);
                assert_duplicate(&err, key);
                assert_eq!(padded.as_ref(), Err(&err));
            }
        }
    }

    #[test]
    fn the_second_value_of_a_duplicate_key_is_never_read() {
        // Refused at the key: the value after it (unclosed, and nested past
        // serde_json's limit) would be a syntax error, were it parsed.
        let text = format!(
            r#"{{"operation":"hash","cost":4,"passwords":["{FIRST}"],"passwords":{}"#,
            "[".repeat(1_000)
        );
        let limits = Config::default();
        for result in [
            parse(text.as_bytes(), &limits),
            from_function_url(url_event(&text, None), &limits),
        ] {
            let err = result.expect_err("duplicate");
            assert_duplicate(&err, "passwords");
            assert_eq!(
                err.0,
                "duplicate field \"passwords\": a field may appear only once in an object"
            );
        }
    }

    #[test]
    fn a_duplicate_key_the_caller_chose_is_refused_unnamed() {
        let cases = [
            format!(r#"{{"operation":"hash","cost":4,"passwords":["a"],"{FIRST}":1,"{FIRST}":2}}"#),
            format!(
                r#"{{"operation":"verify","items":[{{"password":"a","hash":"x","{SECOND}":1,"{SECOND}":[]}}]}}"#
            ),
            // Deep inside a field the request does not even have.
            format!(
                r#"{{"operation":"hash","cost":4,"passwords":["a"],"extra":[{{"k":{{"{FIRST}":1,"{FIRST}":2}}}}]}}"#
            ),
        ];
        for text in cases {
            for result in every_road(&text) {
                let err = result.expect_err("duplicate");
                assert!(
                    err.0
                        == "duplicate field: a field may appear only once in an object (field names are not echoed)",
                    "{}",
                    err.0
                );
                for shown in [err.0.clone(), format!("{err:?}")] {
                    assert!(!shown.contains("secret"), "{shown}");
                }
            }
        }
    }

    #[test]
    fn the_same_key_in_different_objects_is_no_duplicate() {
        let text = r#"{"operation":"verify","items":[{"password":"a","hash":"x"},{"password":"b","hash":"y"}]}"#;
        for result in every_road(text) {
            assert_eq!(result.expect("valid").len(), 2);
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
            !parse(truncated.as_bytes(), &Config::default())
                .expect_err("eof")
                .0
                .contains("hunter2")
        );
    }
}

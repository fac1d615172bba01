//! Passwords in memory: never printed, wiped when dropped; and [`wipe_json`]
//! for the JSON a request arrived in.

use serde_json::Value;
use std::fmt;
use zeroize::Zeroizing;

/// A password. `Debug` prints `***`; there is no `Display`; the bytes are
/// zeroed on drop.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Zeroizing<String>);

impl Secret {
    /// Take ownership of a password (its buffer is wiped when the secret drops).
    pub fn new(password: String) -> Self {
        Self(Zeroizing::new(password))
    }

    /// The bytes, for hashing only.
    pub fn expose(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Free `value`, zeroing every string in it first (object keys too): whatever
/// a request carried is gone from memory, wherever the password was.
///
/// Iterative, so nesting depth costs heap, not stack.
pub fn wipe_json(value: Value) {
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::String(text) => drop(Zeroizing::new(text)),
            Value::Array(items) => pending.extend(items),
            Value::Object(fields) => {
                for (name, value) in fields {
                    drop(Zeroizing::new(name));
                    pending.push(value);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn debug_never_shows_the_password() {
        let s = Secret::new("hunter2".into());
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(s.expose(), b"hunter2");
    }

    #[test]
    fn wiping_takes_any_shape_and_depth() {
        wipe_json(json!({"a": ["x", {"hunter2": "y"}, 1, null, true]}));
        let mut deep = json!("bottom");
        for _ in 0..100_000 {
            deep = Value::Array(vec![deep]);
        }
        wipe_json(deep);
    }
}

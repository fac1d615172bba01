//! A password in memory: never printed, wiped when dropped.

use std::fmt;
use zeroize::Zeroizing;

/// A password. `Debug` prints `***`; there is no `Display`; the bytes are
/// zeroed on drop.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Zeroizing<String>);

impl Secret {
    /// Take ownership of a password.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_password() {
        let s = Secret::new("hunter2".into());
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(s.expose(), b"hunter2");
    }
}

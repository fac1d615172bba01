//! bcrypt's hash strings: `$2b$10$` then 22 characters of salt and 31 of
//! hash, in bcrypt's own base64 alphabet (`./A-Za-z0-9`, no padding).

use base64::Engine;
use base64::alphabet::BCRYPT;
use base64::engine::GeneralPurpose;
use base64::engine::general_purpose::NO_PAD;

/// bcrypt's base64. Unused bits in the last character must be zero (as the
/// `bcrypt` crate requires), so each hash has one spelling.
const BASE64: GeneralPurpose = GeneralPurpose::new(&BCRYPT, NO_PAD);

/// The bytes of the computed hash a hash string keeps (of 24).
pub const HASH_BYTES: usize = 23;

/// A hash string taken apart.
pub struct Parsed {
    /// The letter after `$2`: `a`, `b`, `x` or `y`.
    pub version: u8,
    /// The cost (two digits, not checked against any range here).
    pub cost: u32,
    /// The raw salt.
    pub salt: [u8; 16],
    /// The first [`HASH_BYTES`] bytes of the computed hash.
    pub hash: [u8; HASH_BYTES],
}

/// The version letter, the cost and the 53 characters of salt and hash of
/// `text`, or `None` when it is not in bcrypt's shape (`$2a$`, `$2b$`,
/// `$2x$` or `$2y$`, two cost digits, 53 characters). Their encoding is not
/// checked here: a caller can judge version and cost first.
pub fn shape(text: &str) -> Option<(u8, u32, &[u8])> {
    let rest = text.strip_prefix("$2")?.as_bytes();
    let (&version, rest) = rest.split_first()?;
    let rest = rest.strip_prefix(b"$")?;
    let (cost, tail) = rest.split_at_checked(2)?;
    let cost = cost.iter().try_fold(0, |n, d| {
        d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
    })?;
    let tail = tail.strip_prefix(b"$")?;
    (matches!(version, b'a' | b'b' | b'x' | b'y') && tail.len() == 53)
        .then_some((version, cost, tail))
}

/// Take `text` apart, or `None` when it is not in bcrypt's [`shape`] or its
/// salt and hash are not in bcrypt's base64.
pub fn parse(text: &str) -> Option<Parsed> {
    let (version, cost, tail) = shape(text)?;
    let (salt_text, hash_text) = tail.split_at(22);
    let mut salt = [0u8; 16];
    let mut hash = [0u8; HASH_BYTES];
    let salt_len = BASE64.decode_slice(salt_text, &mut salt).ok()?;
    let hash_len = BASE64.decode_slice(hash_text, &mut hash).ok()?;
    (salt_len == salt.len() && hash_len == hash.len()).then_some(Parsed {
        version,
        cost,
        salt,
        hash,
    })
}

/// The `$2b$` hash string of a hash computed at `cost` with `salt`.
pub fn format(cost: u32, salt: &[u8; 16], hash: &[u8; 24]) -> String {
    let mut text = format!("$2b${cost:02}$");
    BASE64.encode_string(salt, &mut text);
    BASE64.encode_string(&hash[..HASH_BYTES], &mut text);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const VECTOR: &str = "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW";

    #[test]
    fn parse_then_format_gives_the_string_back() {
        let parsed = parse(VECTOR).expect("a hash");
        assert_eq!((parsed.version, parsed.cost), (b'a', 5));
        let mut hash = [0u8; 24];
        hash[..HASH_BYTES].copy_from_slice(&parsed.hash);
        assert_eq!(
            format(parsed.cost, &parsed.salt, &hash),
            VECTOR.replacen("$2a$", "$2b$", 1)
        );
    }

    #[test]
    fn a_character_with_unused_bits_set_is_malformed() {
        // The salt's last character carries 2 unused bits ('.' is 0, '/' is 1).
        assert!(parse(&VECTOR.replacen("C.E5", "C/E5", 1)).is_none());
        // So does the hash's (31 characters for 23 bytes: 2 unused bits).
        assert!(parse(&VECTOR.replacen("OeW", "OeX", 1)).is_none());
    }
}

//! Interoperability with an independent bcrypt: the system's `crypt(3)`
//! (libxcrypt), reached through Python's `crypt` module so that no FFI code is
//! needed here. Plus published test vectors (crypt_blowfish's), checked against
//! libxcrypt too.

use password_hasher::hashing::{self, VerifyError};
use password_hasher::request::Pair;
use password_hasher::secret::Secret;
use std::process::Command;

/// `crypt(3)` of `password` with `setting` (a salt or a whole hash).
fn crypt(password: &str, setting: &str) -> String {
    let output = Command::new("python3")
        .args([
            "-W",
            "ignore",
            "-c",
            "import crypt, sys; print(crypt.crypt(sys.argv[1], sys.argv[2]) or 'ERROR')",
            password,
            setting,
        ])
        .output()
        .expect("python3 with the crypt module (libxcrypt)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Verify one pair, without the password rule that requests go through: the
/// vectors include an empty password and one longer than 72 bytes, which show
/// how bcrypt itself treats them.
fn verify(password: &str, hash: &str) -> Result<bool, VerifyError> {
    let pair = Pair {
        password: Ok(Secret::new(password.into())),
        hash: hash.into(),
    };
    hashing::verify_all(&[pair], 31).remove(0)
}

const LONG: &str = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789chars after 72 are ignored";

/// Published vectors (crypt_blowfish's test suite): (password, hash).
const VECTORS: &[(&str, &str)] = &[
    (
        "U*U",
        "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW",
    ),
    (
        "U*U*",
        "$2a$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK",
    ),
    (
        "U*U*U",
        "$2a$05$XXXXXXXXXXXXXXXXXXXXXOAcXxm9kjPGEMsLznoKqmqw7tc8WCx4a",
    ),
    (
        "",
        "$2a$05$CCCCCCCCCCCCCCCCCCCCC.7uG0VCzI2bS7j6ymqJi9CdcdxiRTWNy",
    ),
    (
        LONG,
        "$2a$05$abcdefghijklmnopqrstuu5s2v8.iXieOjg/.AySBTTZIIVFJeBui",
    ),
];

#[test]
fn published_vectors_verify_here_and_in_libxcrypt() {
    for (password, hash) in VECTORS {
        assert_eq!(verify(password, hash), Ok(true), "{hash}");
        assert_eq!(verify(&format!("x{password}"), hash), Ok(false), "{hash}");
        assert_eq!(
            &crypt(password, hash),
            hash,
            "libxcrypt disagrees on {hash}"
        );
        // The same hash under the $2b$ and $2y$ prefixes (ASCII passwords hash
        // alike under all three).
        for prefix in ["$2b$", "$2y$"] {
            let renamed = hash.replacen("$2a$", prefix, 1);
            assert_eq!(verify(password, &renamed), Ok(true), "{renamed}");
            assert_eq!(crypt(password, &renamed), renamed);
        }
    }
}

#[test]
fn the_72_byte_boundary() {
    // bcrypt uses the first 72 bytes: the API refuses longer passwords rather
    // than truncate them, and the 72-byte prefix hashes like the long vector.
    let prefix = &LONG[..72];
    let (_, long_hash) = VECTORS[4];
    assert_eq!(verify(prefix, long_hash), Ok(true));
    assert_eq!(verify(&LONG[..71], long_hash), Ok(false));
    let hashes = hashing::hash_all(&[Secret::new(prefix.into())], 5).expect("hash");
    assert_eq!(crypt(prefix, &hashes[0]), hashes[0]);
    assert_eq!(
        crypt(LONG, &hashes[0]),
        hashes[0],
        "libxcrypt truncates at 72 too"
    );
}

#[test]
fn our_hashes_verify_with_crypt3() {
    let passwords = [
        "correct horse battery staple",
        "Tr0ub4dor&3",
        "ünïcödé pässwörd",
        "a",
    ];
    let secrets: Vec<_> = passwords.iter().map(|p| Secret::new((*p).into())).collect();
    let hashes = hashing::hash_all(&secrets, 5).expect("hashes");
    for (password, hash) in passwords.iter().zip(&hashes) {
        assert!(hash.starts_with("$2b$05$"), "{hash}");
        assert_eq!(&crypt(password, hash), hash);
        assert_ne!(&crypt("wrong", hash), hash);
    }
}

#[test]
fn crypt3_hashes_verify_here() {
    for (password, salt) in [
        (
            "correct horse battery staple",
            "$2b$05$0123456789abcdefghijkl",
        ),
        ("Tr0ub4dor&3", "$2y$06$ABCDEFGHIJKLMNOPQRSTUu"),
        ("ünïcödé", "$2b$04$./././././././././././."),
    ] {
        let hash = crypt(password, salt);
        assert_eq!(hash.len(), 60, "{hash}");
        assert_eq!(verify(password, &hash), Ok(true), "{hash}");
        assert_eq!(verify("wrong", &hash), Ok(false), "{hash}");
    }
}

/// crypt_blowfish's vector for its `$2x$` mode (the old sign-extension bug
/// kept for compatibility): "ё", bytes d1 91.
const TWO_X: &str = "$2x$05$6bNw2HLQYeqHYyBfLMsv/OiwqTymGIGzFsA4hOTWebfehXHNprcAS";

#[test]
fn a_genuine_2x_hash_is_refused_not_answered_false() {
    // libxcrypt implements `$2x$` exactly: the vector is a real one.
    assert_eq!(crypt("ё", TWO_X), TWO_X);
    assert_eq!(verify("ё", TWO_X), Err(VerifyError::TwoX));
    // The same password under the corrected prefixes: one hash for all
    // three, which libxcrypt and this function agree on.
    let salt = &TWO_X[..29];
    let hash = crypt("ё", &salt.replacen("$2x$", "$2b$", 1));
    assert_ne!(&hash[29..], &TWO_X[29..], "the bug changes this hash");
    for prefix in ["$2a$", "$2b$", "$2y$"] {
        let renamed = hash.replacen("$2b$", prefix, 1);
        assert_eq!(crypt("ё", &renamed), renamed);
        assert_eq!(verify("ё", &renamed), Ok(true), "{renamed}");
        assert_eq!(verify("е", &renamed), Ok(false), "{renamed}");
    }
}

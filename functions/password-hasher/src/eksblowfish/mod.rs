//! bcrypt's EksBlowfish, several hashes per core at once.
//!
//! [`hash_many`] runs a group of up to [`LANES`] hashes in lockstep
//! (`lanes.rs`): independent hashes fill the issue slots one hash leaves
//! idle while it waits for its S-box loads. What goes in is what bcrypt
//! defines: the password's first 72 bytes with a terminating NUL when it is
//! shorter, a 16-byte salt, a cost of 4 to 31; what comes out is the 24
//! encrypted bytes (the hash string keeps 23).

mod lanes;
mod pi;

use zeroize::{Zeroize, Zeroizing};

/// The bytes of a password bcrypt uses; the rest is ignored.
pub const MAX_PASSWORD_BYTES: usize = 72;

/// The costs bcrypt defines (log2 of the key-schedule rounds).
pub const COSTS: std::ops::RangeInclusive<u32> = 4..=31;

/// Hashes run in lockstep on one thread. x86-64: 6, the fastest of 1, 2, 3,
/// 4, 6 and 8 measured (the lab's bcrypt section, `cargo xtask lab bcrypt`; 8 lanes spill
/// registers). Other architectures (arm64): 4, not measured on the hardware.
pub const LANES: usize = if cfg!(target_arch = "x86_64") { 6 } else { 4 };

/// One hash to compute: the password and its salt.
pub struct Input<'a> {
    /// The password (bytes past [`MAX_PASSWORD_BYTES`] are ignored).
    pub password: &'a [u8],
    /// The raw salt.
    pub salt: [u8; 16],
}

/// A cost outside [`COSTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("bcrypt cost {0} is outside 4 to 31")]
pub struct CostOutOfRange(pub u32);

/// The 24 bytes bcrypt computes for each input, in order, all at `cost`;
/// [`LANES`] at a time in lockstep on this thread.
pub fn hash_many(inputs: &[Input<'_>], cost: u32) -> Result<Vec<[u8; 24]>, CostOutOfRange> {
    hash_many_in::<LANES>(inputs, cost)
}

/// [`hash_many`] with `N` lanes (the lab compares lane counts with it).
pub fn hash_many_in<const N: usize>(
    inputs: &[Input<'_>],
    cost: u32,
) -> Result<Vec<[u8; 24]>, CostOutOfRange> {
    if !COSTS.contains(&cost) {
        return Err(CostOutOfRange(cost));
    }
    let mut out = Vec::with_capacity(inputs.len());
    for group in inputs.chunks(N) {
        match group.len() {
            1 => out.extend(group_of::<1>(group, cost)),
            2 => out.extend(group_of::<2>(group, cost)),
            3 => out.extend(group_of::<3>(group, cost)),
            4 => out.extend(group_of::<4>(group, cost)),
            // Up to N; when N is more than 5, a smaller group leaves lanes
            // spare (they repeat its last input).
            _ => out.extend(group_of::<N>(group, cost)),
        }
    }
    Ok(out)
}

/// Hash `group` (1 to `N` inputs) in `N` lanes; lanes past the group repeat
/// its last input.
fn group_of<const N: usize>(group: &[Input<'_>], cost: u32) -> Vec<[u8; 24]> {
    let input = |k: usize| &group[k.min(group.len() - 1)];
    let mut key: Zeroizing<[[u32; 18]; N]> =
        Zeroizing::new(std::array::from_fn(|k| key_words(input(k).password)));
    let salt: [[u32; 4]; N] = std::array::from_fn(|k| salt_words(&input(k).salt));
    let mut hashes = lanes::eks_blowfish::<N>(cost, &key, &salt);
    key.zeroize();
    let out = hashes[..group.len()].to_vec();
    hashes.zeroize();
    out
}

/// The password as bcrypt's key: its first 72 bytes and a NUL when shorter,
/// read cyclically as 18 big-endian words.
fn key_words(password: &[u8]) -> [u32; 18] {
    let mut key = Zeroizing::new([0u8; MAX_PASSWORD_BYTES]);
    let used = password.len().min(MAX_PASSWORD_BYTES);
    key[..used].copy_from_slice(&password[..used]);
    let len = (used + 1).min(MAX_PASSWORD_BYTES);
    let mut next = 0;
    std::array::from_fn(|_| {
        let mut word = 0u32;
        for _ in 0..4 {
            word = (word << 8) | u32::from(key[next]);
            next = (next + 1) % len;
        }
        word
    })
}

/// The salt as four big-endian words.
fn salt_words(salt: &[u8; 16]) -> [u32; 4] {
    std::array::from_fn(|i| {
        u32::from_be_bytes([
            salt[4 * i],
            salt[4 * i + 1],
            salt[4 * i + 2],
            salt[4 * i + 3],
        ])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    const BCRYPT_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
        &base64::alphabet::BCRYPT,
        base64::engine::general_purpose::NO_PAD,
    );

    /// The 31 hash characters of `password` under the 22 salt characters.
    fn hash23(password: &[u8], salt: &str, cost: u32) -> String {
        let mut raw = [0u8; 16];
        BCRYPT_BASE64.decode_slice(salt, &mut raw).expect("salt");
        let out = hash_many(
            &[Input {
                password,
                salt: raw,
            }],
            cost,
        )
        .expect("cost");
        BCRYPT_BASE64.encode(&out[0][..23])
    }

    #[test]
    fn openbsd_vectors() {
        assert_eq!(
            hash23(b"U*U", "CCCCCCCCCCCCCCCCCCCCC.", 5),
            "E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"
        );
        assert_eq!(
            hash23(b"", "CCCCCCCCCCCCCCCCCCCCC.", 5),
            "7uG0VCzI2bS7j6ymqJi9CdcdxiRTWNy"
        );
    }
}

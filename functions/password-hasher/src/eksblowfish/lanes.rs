//! EksBlowfish for `N` independent hashes in lockstep.
//!
//! One hash is a chain of dependent Blowfish rounds: each round waits for its
//! four S-box loads, so a core running one hash idles most of its issue
//! width. Here every step is done for `N` hashes (lanes) before the next, so
//! the core has `N` independent chains to overlap; `N = 1` is the single-hash
//! path, the same code.
//!
//! The round is organised as crypt_blowfish's `BF_ROUND`: the P-array word is
//! xored into the other half together with `F`, with no swap (the halves trade
//! roles from one round to the next). The four S-boxes are one array of 1,024
//! words per lane, indexed by `byte as usize + 256 * box`: the index is
//! provably in range, so there are no bounds checks, and all lanes' state is
//! one stack array addressed from the stack pointer.

use super::pi;
use zeroize::Zeroize;

/// "OrpheanBeholderScryDoubt", the text bcrypt encrypts, as six big-endian words.
const MAGIC: [u32; 6] = [
    0x4f72_7068,
    0x6561_6e42,
    0x6568_6f6c,
    0x6465_7253,
    0x6372_7944,
    0x6f75_6274,
];

/// Times the final encryption runs over [`MAGIC`].
const MAGIC_ROUNDS: usize = 64;

/// The Blowfish state of `N` lanes: each lane's P-array and four S-boxes.
/// Wiped on drop: it is derived from the passwords.
struct State<const N: usize> {
    p: [[u32; 18]; N],
    s: [[u32; 1024]; N],
}

impl<const N: usize> Drop for State<N> {
    fn drop(&mut self) {
        self.p.zeroize();
        self.s.zeroize();
    }
}

/// Blowfish's round function `((S0[a] + S1[b]) ^ S2[c]) + S3[d]`, bytes
/// `a` to `d` from the most significant.
#[inline(always)]
fn f(s: &[u32; 1024], x: u32) -> u32 {
    let a = s[(x >> 24) as usize];
    let b = s[256 + usize::from((x >> 16) as u8)];
    let c = s[512 + usize::from((x >> 8) as u8)];
    let d = s[768 + usize::from(x as u8)];
    (a.wrapping_add(b) ^ c).wrapping_add(d)
}

impl<const N: usize> State<N> {
    fn new() -> Self {
        Self {
            p: [pi::P; N],
            s: [pi::S; N],
        }
    }

    /// Encrypt each lane's block `(l, r)` in place under its own state: the
    /// 16 rounds unrolled, so every P-array word is at a fixed offset.
    #[inline(always)]
    fn encrypt(&self, l: &mut [u32; N], r: &mut [u32; N]) {
        for (l, p) in l.iter_mut().zip(&self.p) {
            *l ^= p[0];
        }
        macro_rules! two_rounds {
            ($($i:literal)*) => {$(
                self.round(r, l, $i);
                self.round(l, r, $i + 1);
            )*};
        }
        two_rounds!(1 3 5 7 9 11 13 15);
        for k in 0..N {
            let left = r[k] ^ self.p[k][17];
            r[k] = l[k];
            l[k] = left;
        }
    }

    /// One round for every lane: `half ^= P[i] ^ F(other)`.
    ///
    /// For one lane the round is a latency chain, and its end is what
    /// counts: `half ^ P[i]` is ready early (`half` was computed a round
    /// before), so only one xor should follow `F`. The compiler reassociates
    /// the three-way xor into `(F ^ P[i]) ^ half`, one more step after the
    /// loads; [`std::hint::black_box`] keeps `half ^ P[i]` whole. With more
    /// lanes the rounds are limited by throughput, not latency, and the
    /// barrier's store and load would only add work.
    #[inline(always)]
    fn round(&self, half: &mut [u32; N], other: &[u32; N], i: usize) {
        for k in 0..N {
            let early = half[k] ^ self.p[k][i];
            let early = if N == 1 {
                std::hint::black_box(early)
            } else {
                early
            };
            half[k] = early ^ f(&self.s[k], other[k]);
        }
    }

    /// Encrypt a running block 521 times, overwriting the P-array and then
    /// the S-boxes two words at a time: the block stays `(0, 0)` before each
    /// encryption, or with `salt` is first xored with the next two salt
    /// words (the salt read as one endless stream).
    #[inline(always)]
    fn rewrite(&mut self, salt: Option<&[[u32; 4]; N]>) {
        let mut l = [0u32; N];
        let mut r = [0u32; N];
        for i in 0..(18 + 1024) / 2 {
            if let Some(salt) = salt {
                let next = (i & 1) * 2;
                for k in 0..N {
                    l[k] ^= salt[k][next];
                    r[k] ^= salt[k][next + 1];
                }
            }
            self.encrypt(&mut l, &mut r);
            for k in 0..N {
                if i < 9 {
                    self.p[k][2 * i] = l[k];
                    self.p[k][2 * i + 1] = r[k];
                } else {
                    self.s[k][2 * i - 18] = l[k];
                    self.s[k][2 * i - 17] = r[k];
                }
            }
        }
        l.zeroize();
        r.zeroize();
    }

    /// Blowfish's key schedule on the current state, as bcrypt runs it: xor
    /// `key` (18 words per lane) into the P-array, then [`State::rewrite`].
    #[inline(always)]
    fn expand(&mut self, key: &[[u32; 18]; N], salt: Option<&[[u32; 4]; N]>) {
        for (p, key) in self.p.iter_mut().zip(key) {
            for (p, w) in p.iter_mut().zip(key) {
                *p ^= w;
            }
        }
        self.rewrite(salt);
    }

    /// The key schedule with the salt (four words) as the key, cycled over
    /// the 18 P-array words.
    #[inline(always)]
    fn expand_with_salt_as_key(&mut self, salt: &[[u32; 4]; N]) {
        for (p, salt) in self.p.iter_mut().zip(salt) {
            for (i, p) in p.iter_mut().enumerate() {
                *p ^= salt[i % 4];
            }
        }
        self.rewrite(None);
    }
}

/// bcrypt's EksBlowfish for `N` passwords at once: lane `k` hashes the key
/// words `key[k]` (the password's key bytes, cycled to 18 words) with the
/// salt words `salt[k]`, `2^cost` rounds, and gives the 24 bytes of the
/// encrypted magic text.
pub fn eks_blowfish<const N: usize>(
    cost: u32,
    key: &[[u32; 18]; N],
    salt: &[[u32; 4]; N],
) -> [[u8; 24]; N] {
    let mut state = State::<N>::new();
    state.expand(key, Some(salt));
    for _ in 0..1u64 << cost {
        state.expand(key, None);
        state.expand_with_salt_as_key(salt);
    }
    let mut text = [MAGIC; N];
    for pair in 0..3 {
        let mut l: [u32; N] = std::array::from_fn(|k| text[k][2 * pair]);
        let mut r: [u32; N] = std::array::from_fn(|k| text[k][2 * pair + 1]);
        for _ in 0..MAGIC_ROUNDS {
            state.encrypt(&mut l, &mut r);
        }
        for k in 0..N {
            text[k][2 * pair] = l[k];
            text[k][2 * pair + 1] = r[k];
        }
    }
    let out = text.map(|words| {
        let mut bytes = [0u8; 24];
        for (chunk, word) in bytes.chunks_exact_mut(4).zip(words) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        bytes
    });
    text.zeroize();
    out
}

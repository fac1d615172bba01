//! Differential tests: this crate's multi-lane EksBlowfish against two
//! independent bcrypts, libxcrypt's `crypt(3)` (through Python's `ctypes`,
//! so no FFI code here) and the `bcrypt` crate, on random passwords (1 to 72
//! bytes and a few longer, ASCII and multi-byte UTF-8), random salts, costs 4
//! to 6, `$2a$`, `$2b$` and `$2y$`; in groups of every size from 1 to
//! 3 × `LANES` + 1, so every lane position and every uneven tail is
//! compared. The hashes are checked both ways: computed here they must equal
//! the other two; computed by libxcrypt they must verify here, through the
//! function's verify batch path (mixed costs, lanes split over the pool).
//!
//! `differential_short` runs in the suite. The long run (100,000 passwords,
//! about 10 minutes on one core):
//! `cargo test --release -p password-hasher --test differential -- --ignored`
//! (`DIFFERENTIAL_SEED=n` repeats a run; each run prints its seed).

use password_hasher::eksblowfish::{Input, LANES, hash_many, hash_many_in};
use password_hasher::hash_text;
use password_hasher::hashing;
use password_hasher::request::Pair;
use password_hasher::secret::Secret;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

/// `crypt(3)` of each (password, setting), by one Python process calling
/// libxcrypt through `ctypes` (bytes in, so any password goes through).
fn crypt3(items: &[(Vec<u8>, String)]) -> Vec<String> {
    let script = "import ctypes, ctypes.util, sys\n\
                  lib = ctypes.CDLL(ctypes.util.find_library('crypt'))\n\
                  lib.crypt.restype = ctypes.c_char_p\n\
                  for line in sys.stdin:\n\
                  \x20   setting, password = line.split()\n\
                  \x20   out = lib.crypt(bytes.fromhex(password[1:]), setting.encode())\n\
                  \x20   print(out.decode() if out else 'ERROR', flush=False)\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 with ctypes and libxcrypt");
    let mut stdin = child.stdin.take().expect("stdin");
    let input: String = items
        .iter()
        .map(|(password, setting)| {
            // "x" first, so that an empty password is a field too.
            let hex: String = password.iter().map(|b| format!("{b:02x}")).collect();
            format!("{setting} x{hex}\n")
        })
        .collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let stdout = child.stdout.take().expect("stdout");
    let lines: Vec<String> = BufReader::new(stdout)
        .lines()
        .map(|l| l.expect("line"))
        .collect();
    writer.join().expect("writer").expect("write");
    assert!(child.wait().expect("python3").success());
    assert_eq!(lines.len(), items.len());
    lines
}

/// A random password: 1 to 72 bytes (sometimes exactly 72, sometimes up to
/// 100 to show truncation), ASCII or mixed with 2-, 3- and 4-byte UTF-8.
fn password(rng: &mut fastrand::Rng) -> String {
    let limit = match rng.u8(0..10) {
        0 => 72,
        1 => rng.usize(73..=100),
        _ => rng.usize(1..=72),
    };
    let multi_byte = rng.bool();
    let mut text = String::new();
    loop {
        let c = if multi_byte && rng.u8(0..3) == 0 {
            match rng.u8(0..3) {
                0 => rng.char('\u{80}'..='\u{7ff}'),
                1 => rng.char('\u{800}'..='\u{ffff}'),
                _ => rng.char('\u{10000}'..='\u{10ffff}'),
            }
        } else {
            rng.char('\u{1}'..='\u{7f}')
        };
        if text.len() + c.len_utf8() > limit {
            // Up to the limit exactly when possible: pad with ASCII.
            while text.len() < limit {
                text.push('x');
            }
            return text;
        }
        text.push(c);
    }
}

/// One case: a password, its setting (`$2?$cc$` and 22 salt characters) and
/// the raw salt.
struct Case {
    password: String,
    setting: String,
    cost: u32,
    salt: [u8; 16],
}

fn cases(rng: &mut fastrand::Rng, count: usize, costs: std::ops::RangeInclusive<u32>) -> Vec<Case> {
    (0..count)
        .map(|_| {
            let mut salt = [0u8; 16];
            rng.fill(&mut salt);
            let cost = rng.u32(costs.clone());
            let version = ["2a", "2b", "2y"][rng.usize(0..3)];
            let full = hash_text::format(cost, &salt, &[0; 24]);
            let setting = format!("${version}{}", &full[3..29]);
            Case {
                password: password(rng),
                setting,
                cost,
                salt,
            }
        })
        .collect()
}

fn seed() -> u64 {
    let seed = std::env::var("DIFFERENTIAL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    println!("DIFFERENTIAL_SEED={seed}");
    seed
}

/// Hash `cases` here in groups of every size from 1 to 3 × LANES + 1 (each
/// group at one cost), and compare with libxcrypt and the `bcrypt` crate;
/// then verify libxcrypt's hashes here, all in one batch.
fn compare(cases: &[Case]) {
    let theirs = crypt3(
        &cases
            .iter()
            .map(|c| (c.password.as_bytes().to_vec(), c.setting.clone()))
            .collect::<Vec<_>>(),
    );
    let mut at = 0;
    let mut size = 1;
    while at < cases.len() {
        let group = at..(at + size).min(cases.len());
        for cost in 4..=6 {
            let of_cost: Vec<usize> = group.clone().filter(|&i| cases[i].cost == cost).collect();
            let inputs: Vec<Input<'_>> = of_cost
                .iter()
                .map(|&i| Input {
                    password: cases[i].password.as_bytes(),
                    salt: cases[i].salt,
                })
                .collect();
            let ours = hash_many(&inputs, cost).expect("cost in range");
            assert_eq!(ours.len(), of_cost.len());
            for (&i, hash) in of_cost.iter().zip(&ours) {
                let case = &cases[i];
                let text = hash_text::format(cost, &case.salt, hash);
                let ours = format!("{}{}", &case.setting[..3], &text[3..]);
                assert_eq!(
                    ours, theirs[i],
                    "libxcrypt differs for password {:?} at {}",
                    case.password, case.setting
                );
                let crate_hash = bcrypt::hash_with_salt(&case.password, cost, case.salt)
                    .expect("bcrypt crate")
                    .format_for_version(bcrypt::Version::TwoB);
                assert_eq!(
                    text, crate_hash,
                    "bcrypt crate differs for {:?}",
                    case.password
                );
            }
        }
        at = group.end;
        size = size % (3 * LANES + 1) + 1;
    }
    // libxcrypt's hashes verify here (right password), one batch of mixed
    // costs; a changed password does not.
    let pairs: Vec<Pair> = cases
        .iter()
        .zip(&theirs)
        .flat_map(|(case, hash)| {
            [
                pair(case.password.clone(), hash),
                pair(format!("{}!", case.password), hash),
            ]
        })
        .collect();
    let verdicts = hashing::verify_all(&pairs, 31);
    for (i, verdict) in verdicts.iter().enumerate() {
        let case = &cases[i / 2];
        // A password of 72 bytes or more is truncated: the "!" is ignored.
        let expected = i % 2 == 0 || case.password.len() >= 72;
        assert_eq!(
            *verdict,
            Ok(expected),
            "{:?} at {}",
            case.password,
            theirs[i / 2]
        );
    }
}

/// A pair without the password rule (so passwords past 72 bytes reach bcrypt).
fn pair(password: String, hash: &str) -> Pair {
    Pair {
        password: Ok(Secret::new(password)),
        hash: hash.to_owned(),
    }
}

#[test]
fn differential_short() {
    let mut rng = fastrand::Rng::with_seed(seed());
    compare(&cases(
        &mut rng,
        3 * (3 * LANES + 1) * (3 * LANES + 2) / 2,
        4..=5,
    ));
}

#[test]
#[ignore = "long: about 10 minutes on one core (see the module doc)"]
fn differential_long() {
    let mut rng = fastrand::Rng::with_seed(seed());
    compare(&cases(&mut rng, 100_000, 4..=6));
}

/// Published vectors (crypt_blowfish's and OpenBSD's), as bytes: (setting
/// and hash, password). Each is also checked against libxcrypt here.
const VECTORS: &[(&str, &[u8])] = &[
    ("$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW", b"U*U"),
    ("$2a$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK", b"U*U*"),
    ("$2a$05$XXXXXXXXXXXXXXXXXXXXXOAcXxm9kjPGEMsLznoKqmqw7tc8WCx4a", b"U*U*U"),
    (
        "$2a$05$abcdefghijklmnopqrstuu5s2v8.iXieOjg/.AySBTTZIIVFJeBui",
        b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789chars after 72 are ignored",
    ),
    ("$2a$05$CCCCCCCCCCCCCCCCCCCCC.7uG0VCzI2bS7j6ymqJi9CdcdxiRTWNy", b""),
    ("$2b$05$/OK.fbVrR/bpIqNJ5ianF.CE5elHaaO4EbggVDjb8P19RukzXSM3e", b"\xff\xff\xa3"),
    ("$2y$05$/OK.fbVrR/bpIqNJ5ianF.CE5elHaaO4EbggVDjb8P19RukzXSM3e", b"\xff\xff\xa3"),
    ("$2y$05$/OK.fbVrR/bpIqNJ5ianF.Sa7shbm4.OzKpvFnX1pQLmQW96oUlCq", b"\xa3"),
    ("$2a$05$/OK.fbVrR/bpIqNJ5ianF.Sa7shbm4.OzKpvFnX1pQLmQW96oUlCq", b"\xa3"),
    ("$2y$05$/OK.fbVrR/bpIqNJ5ianF.o./n25XVfn6oAPaUvHe.Csk4zRfsYPi", b"\xff\xa334\xff\xff\xff\xa3345"),
    ("$2y$05$/OK.fbVrR/bpIqNJ5ianF.nRht2l/HRhr6zmCp9vYUvvsqynflf9e", b"\xff\xa3345"),
    ("$2a$05$/OK.fbVrR/bpIqNJ5ianF.nRht2l/HRhr6zmCp9vYUvvsqynflf9e", b"\xff\xa3345"),
    ("$2a$05$/OK.fbVrR/bpIqNJ5ianF.6IflQkJytoRVc1yuaNtHfiuq.FRlSIS", b"\xa3ab"),
    ("$2y$05$/OK.fbVrR/bpIqNJ5ianF.6IflQkJytoRVc1yuaNtHfiuq.FRlSIS", b"\xa3ab"),
    (
        "$2a$05$/OK.fbVrR/bpIqNJ5ianF.swQOIzjOiJ9GHEPuhEkvqrUyvWhEMx6",
        b"\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaachars after 72 are ignored as usual",
    ),
    (
        "$2a$05$/OK.fbVrR/bpIqNJ5ianF.R9xrDjiycxMbQE2bp.vgqlYpW5wx2yy",
        b"\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU\xaaU",
    ),
    (
        "$2a$05$/OK.fbVrR/bpIqNJ5ianF.9tQZzcJfm3uj2NvJ/n5xkhpqLrMpWCe",
        b"U\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xffU\xaa\xff",
    ),
];

#[test]
fn published_vectors_in_every_lane() {
    let items: Vec<(Vec<u8>, String)> = VECTORS
        .iter()
        .map(|(hash, password)| (password.to_vec(), (*hash).to_owned()))
        .collect();
    for ((hash, _), from_libxcrypt) in VECTORS.iter().zip(crypt3(&items)) {
        assert_eq!(*hash, from_libxcrypt, "libxcrypt disagrees with the vector");
    }
    let parsed: Vec<_> = VECTORS
        .iter()
        .map(|(hash, _)| hash_text::parse(hash).expect("a vector parses"))
        .collect();
    // Each vector in each lane position of a full group (the others filled
    // with the next vectors), for lane counts 1 to 8.
    fn check<const N: usize>(parsed: &[hash_text::Parsed]) {
        for first in 0..VECTORS.len() {
            let group: Vec<usize> = (0..N).map(|k| (first + k) % VECTORS.len()).collect();
            let inputs: Vec<Input<'_>> = group
                .iter()
                .map(|&i| Input {
                    password: VECTORS[i].1,
                    salt: parsed[i].salt,
                })
                .collect();
            let hashes = hash_many_in::<N>(&inputs, 5).expect("cost 5");
            for (&i, hash) in group.iter().zip(&hashes) {
                assert_eq!(
                    &hash[..23],
                    &parsed[i].hash,
                    "{} in {N} lanes",
                    VECTORS[i].0
                );
            }
        }
    }
    check::<1>(&parsed);
    check::<2>(&parsed);
    check::<3>(&parsed);
    check::<4>(&parsed);
    check::<6>(&parsed);
    check::<8>(&parsed);
}

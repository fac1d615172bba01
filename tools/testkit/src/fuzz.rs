//! A stable fuzzing engine (proptest) for any parser of outside input: a
//! function's fuzz test gives a [`Target`] (its checks, defined once in the
//! function's own test crate and shared with the coverage-guided engine of
//! `functions/<name>/fuzz/`) and [`fuzz`] generates the inputs and bounds each call.
//!
//! Inputs per target: its seeds (from `events/` and its own), its edge inputs
//! (see [`zeros`], [`padded`]), then `FUZZ_CASES` generated inputs per round:
//! seeds mutated (bit flips, insertions, deletions, truncation, splicing,
//! tokens of the target's vocabulary, growth to the size limit, and,
//! structure-aware, one JSON node replaced by another value), arbitrary
//! bytes, arbitrary JSON. With `FUZZ_SECONDS` set, rounds go on until that
//! many seconds have passed: the same test is the long run. A failure is kept
//! in the `proptest-regressions` file beside the test's source and replayed
//! first.
//!
//! Every input must: not panic, return within [`HANG_BOUND`], and leave the
//! process's peak RSS under [`PEAK_RSS_BOUND`].

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use serde_json::{Map, Number, Value};
use std::io::Write;
use std::panic::resume_unwind;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// A call that takes longer is a hang, or work that grows faster than its
/// input. The slowest legitimate input (a body at the size limit, or a hash
/// request the handler accepts and hashes) was measured at 0.2 s in this debug
/// build, and at 0.9 s with the four targets in parallel on a loaded two-core
/// machine; 10 s is ten times that, so a busy machine does not fail the suite,
/// while work quadratic in a 64 KiB input would still cross it.
pub const HANG_BOUND: Duration = Duration::from_secs(10);
/// Peak RSS of this test process (all four targets in parallel, and the
/// Lambda-sized payloads): a bound a leak or an amplification would cross.
pub const PEAK_RSS_BOUND: u64 = 512 << 20;
/// The edge input of the parsers without a size limit of their own.
pub const UNLIMITED_EDGE_BYTES: usize = 64 * 1024;
/// Lambda's largest synchronous invocation payload (and Function URL body):
/// the size limit of the parsers without one of their own.
pub const LAMBDA_PAYLOAD_BYTES: usize = 6 * 1024 * 1024;
/// Generated inputs per target and round, unless `FUZZ_CASES` says otherwise.
const DEFAULT_CASES: u32 = 500;

/// One parser under test.
pub struct Target {
    pub name: &'static str,
    /// The test's source file (`file!()`): its failures are kept beside it.
    pub source_file: &'static str,
    pub seeds: Vec<Vec<u8>>,
    pub edges: Vec<Vec<u8>>,
    /// The parser's own size limit, for the growth mutation.
    pub size_limit: Option<usize>,
    pub vocabulary: &'static [&'static str],
    /// Whether arbitrary JSON is a useful input.
    pub json: bool,
    /// The checks: `Err(what)` when a property is broken; a panic is left
    /// to propagate.
    pub check: fn(&[u8]) -> Result<(), String>,
}

/// A JSON array of zeros `len` bytes long (at least 3): the most values per byte.
pub fn zeros(len: usize) -> Vec<u8> {
    let mut body = b"[0".to_vec();
    while body.len() + 3 <= len {
        body.extend_from_slice(b",0");
    }
    body.resize(len - 1, b' ');
    body.push(b']');
    body
}

/// A valid seed padded with leading spaces to exactly `len` bytes.
pub fn padded(seed: &[u8], len: usize) -> Vec<u8> {
    let mut body = vec![b' '; len.saturating_sub(seed.len())];
    body.extend_from_slice(seed);
    body
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
        })
        .unwrap_or(default)
}

/// Run the seeds, the edges, then rounds of generated inputs.
pub fn fuzz(target: &Target) {
    let cases = u32::try_from(env_number("FUZZ_CASES", DEFAULT_CASES.into())).expect("FUZZ_CASES");
    let seconds = Duration::from_secs(env_number("FUZZ_SECONDS", 0));
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    for input in target.seeds.iter().chain(&target.edges) {
        slowest = slowest.max(bounded(target, input).unwrap_or_else(|e| panic!("{e}")));
    }
    let slowest = std::cell::Cell::new(slowest);
    let strategy = inputs(target);
    let mut rounds = 0;
    loop {
        let mut runner = TestRunner::new(Config {
            cases,
            source_file: Some(target.source_file),
            failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
                "proptest-regressions",
            ))),
            ..Config::default()
        });
        runner
            .run(&strategy, |input| {
                let took = bounded(target, &input).map_err(TestCaseError::fail)?;
                slowest.set(slowest.get().max(took));
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{}: {e}", target.name));
        rounds += 1;
        if started.elapsed() >= seconds {
            break;
        }
    }
    let peak = shared::memory::snapshot().peak_rss_bytes;
    println!(
        "{}: {} seeds, {} edge inputs, {} generated inputs in {:.1} s; slowest {:.1} ms; process peak RSS {:.1} MiB",
        target.name,
        target.seeds.len(),
        target.edges.len(),
        u64::from(cases) * rounds,
        started.elapsed().as_secs_f64(),
        slowest.get().as_secs_f64() * 1e3,
        shared::memory::mib(peak)
    );
    assert!(
        peak < PEAK_RSS_BOUND,
        "{}: peak RSS {peak} bytes, bound {PEAK_RSS_BOUND}",
        target.name
    );
}

/// One call of the target's checks, bounded in time and peak RSS. The call
/// runs on a thread of its own, so a call that never returns is caught too
/// (see [`hung`]); a panic in it is raised again here, for proptest to see.
fn bounded(target: &Target, input: &[u8]) -> Result<Duration, String> {
    let shown = || {
        let head = String::from_utf8_lossy(&input[..input.len().min(200)]).into_owned();
        format!("{}: input of {} bytes {head:?}", target.name, input.len())
    };
    let (done, finished) = mpsc::channel();
    let (check, data) = (target.check, input.to_vec());
    let call = std::thread::spawn(move || {
        let started = Instant::now();
        let checked = check(&data);
        let took = started.elapsed();
        // The receiver is gone only after a timeout, which already failed.
        let _ = done.send(());
        (checked, took)
    });
    if let Err(RecvTimeoutError::Timeout) = finished.recv_timeout(HANG_BOUND) {
        hung(&shown(), input);
    }
    let (checked, took) = call.join().unwrap_or_else(|panic| resume_unwind(panic));
    checked.map_err(|e| format!("{}: {e}", shown()))?;
    if took > HANG_BOUND {
        return Err(format!("{}: took {took:?}, bound {HANG_BOUND:?}", shown()));
    }
    let peak = shared::memory::snapshot().peak_rss_bytes;
    if peak >= PEAK_RSS_BOUND {
        return Err(format!("{}: peak RSS {peak} bytes afterwards", shown()));
    }
    Ok(took)
}

/// A call gave no answer within [`HANG_BOUND`]. Shrinking would make more
/// such calls, each leaving a thread spinning: save the input, say where, and
/// end the test process now.
fn hung(what: &str, input: &[u8]) -> ! {
    let path = crate::workspace_root()
        .join("target")
        .join(format!("fuzz-hang-{}.bin", std::process::id()));
    let saved = match std::fs::write(&path, input) {
        Ok(()) => format!("saved to {}", path.display()),
        Err(e) => format!("not saved: {e}"),
    };
    // Straight to the process's stderr: the test harness's capture is lost on exit.
    let _ = writeln!(
        std::io::stderr(),
        "{what}: no answer after {HANG_BOUND:?}; the input is {saved}"
    );
    std::process::exit(101);
}

/// The generated inputs of a target.
fn inputs(target: &Target) -> BoxedStrategy<Vec<u8>> {
    let seeds = target.seeds.clone();
    let seed = select(seeds.clone());
    let mutated = (
        select(seeds.clone()),
        vec(
            mutation(target.vocabulary, target.size_limit, target.json),
            1..4,
        ),
    )
        .prop_map(move |(seed, mutations)| {
            mutations.iter().fold(seed, |data, m| m.apply(data, &seeds))
        });
    let bytes = vec(any::<u8>(), 0..512);
    if target.json {
        let json = json_value(target.vocabulary).prop_map(|v| v.to_string().into_bytes());
        prop_oneof![1 => seed, 6 => mutated, 1 => bytes, 2 => json].boxed()
    } else {
        prop_oneof![1 => seed, 6 => mutated, 2 => bytes].boxed()
    }
}

/// One change to an input.
#[derive(Debug, Clone)]
enum Mutation {
    /// Flip the bits of `mask` in one byte.
    Flip(Index, u8),
    /// Insert bytes.
    Insert(Index, Vec<u8>),
    /// Delete up to this many bytes.
    Delete(Index, usize),
    /// Cut the input short.
    Truncate(Index),
    /// Replace the tail with the tail of another seed.
    Splice(Index, Index, Index),
    /// Insert a token: JSON syntax, an odd number, a name of the schema.
    Token(Index, String),
    /// Pad with leading spaces to this length.
    Grow(usize),
    /// Replace one node (in preorder) of the input's JSON, if it is JSON.
    Replace(Index, Value),
}

/// JSON syntax and values at the edges of what parsers accept.
const TOKENS: &[&str] = &[
    "\"",
    "\\",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "null",
    "true",
    "-",
    "0",
    "-0",
    "1e999",
    "1.5",
    "18446744073709551616",
    "-9223372036854775809",
    "\\u0000",
    "\\ud800",
    "\u{feff}",
    "\u{0}",
    "é",
    "\n",
];

fn mutation(
    vocabulary: &'static [&'static str],
    size_limit: Option<usize>,
    json: bool,
) -> impl Strategy<Value = Mutation> {
    let token = prop_oneof![
        select(TOKENS).prop_map(str::to_owned),
        select(if vocabulary.is_empty() {
            TOKENS
        } else {
            vocabulary
        })
        .prop_map(|word| format!("\"{word}\"")),
    ];
    let grow = match size_limit {
        Some(limit) => (limit - 2..=limit + 2).boxed(),
        None => (0usize..4096).boxed(),
    };
    prop_oneof![
        1 => (any::<Index>(), 1u8..).prop_map(|(at, mask)| Mutation::Flip(at, mask)),
        1 => (any::<Index>(), vec(any::<u8>(), 1..16)).prop_map(|(at, b)| Mutation::Insert(at, b)),
        1 => (any::<Index>(), 1usize..64).prop_map(|(at, n)| Mutation::Delete(at, n)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        1 => (any::<Index>(), any::<Index>(), any::<Index>())
            .prop_map(|(seed, from, at)| Mutation::Splice(seed, from, at)),
        1 => (any::<Index>(), token).prop_map(|(at, token)| Mutation::Token(at, token)),
        1 => grow.prop_map(Mutation::Grow),
        // Structure-aware: only JSON targets get weight here.
        u32::from(json) * 4 => (any::<Index>(), json_leaf(vocabulary))
            .prop_map(|(at, value)| Mutation::Replace(at, value)),
        u32::from(json) * 2 => (any::<Index>(), json_value(vocabulary))
            .prop_map(|(at, value)| Mutation::Replace(at, value)),
    ]
}

impl Mutation {
    fn apply(&self, mut data: Vec<u8>, seeds: &[Vec<u8>]) -> Vec<u8> {
        let len = data.len();
        match self {
            Mutation::Flip(at, mask) if len > 0 => data[at.index(len)] ^= mask,
            Mutation::Flip(..) => {}
            Mutation::Insert(at, bytes) => {
                let at = at.index(len + 1);
                data.splice(at..at, bytes.iter().copied());
            }
            Mutation::Token(at, token) => {
                let at = at.index(len + 1);
                data.splice(at..at, token.bytes());
            }
            Mutation::Delete(at, n) if len > 0 => {
                let at = at.index(len);
                data.drain(at..(at + n).min(len));
            }
            Mutation::Delete(..) => {}
            Mutation::Truncate(at) => data.truncate(at.index(len + 1)),
            Mutation::Splice(seed, from, at) => {
                let other = &seeds[seed.index(seeds.len())];
                data.truncate(at.index(len + 1));
                data.extend_from_slice(&other[from.index(other.len() + 1)..]);
            }
            Mutation::Grow(to) => data = padded(&data, *to),
            Mutation::Replace(at, value) => {
                if let Ok(mut json) = serde_json::from_slice::<Value>(&data) {
                    let mut n = at.index(nodes(&json));
                    if let Some(node) = nth_node(&mut json, &mut n) {
                        *node = value.clone();
                    }
                    data = json.to_string().into_bytes();
                }
            }
        }
        data
    }
}

/// Nodes of a JSON value, itself included.
fn nodes(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(nodes).sum(),
        Value::Object(fields) => fields.values().map(nodes).sum(),
        _ => 0,
    }
}

/// The `n`-th node of a JSON value in preorder.
fn nth_node<'a>(value: &'a mut Value, n: &mut usize) -> Option<&'a mut Value> {
    if *n == 0 {
        return Some(value);
    }
    *n -= 1;
    match value {
        Value::Array(items) => items.iter_mut().find_map(|v| nth_node(v, n)),
        Value::Object(fields) => fields.values_mut().find_map(|v| nth_node(v, n)),
        _ => None,
    }
}

/// A JSON string, its text often from the target's vocabulary or shaped like
/// an identifier.
fn json_text(vocabulary: &'static [&'static str]) -> impl Strategy<Value = String> + Clone {
    let words = if vocabulary.is_empty() {
        TOKENS
    } else {
        vocabulary
    };
    prop_oneof![
        2 => select(words).prop_map(str::to_owned),
        2 => "[A-Za-z0-9._:-]{1,12}",
        1 => vec(any::<char>(), 0..12).prop_map(String::from_iter),
    ]
}

/// A JSON scalar: null, a boolean, a number (small, large, negative, fraction)
/// or a string.
fn json_leaf(vocabulary: &'static [&'static str]) -> impl Strategy<Value = Value> + Clone {
    let number = prop_oneof![
        (0u64..40).prop_map(Number::from),
        any::<u64>().prop_map(Number::from),
        any::<i64>().prop_map(Number::from),
        any::<f64>().prop_filter_map("finite", Number::from_f64),
    ];
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        2 => number.prop_map(Value::Number),
        3 => json_text(vocabulary).prop_map(Value::String),
    ]
}

/// Arbitrary JSON, names and strings as in [`json_text`].
fn json_value(vocabulary: &'static [&'static str]) -> impl Strategy<Value = Value> {
    let text = json_text(vocabulary);
    json_leaf(vocabulary).prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            vec((text.clone(), inner), 0..6)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A parser without a size limit of its own has Lambda's: `parse` refuses
/// a payload of [`LAMBDA_PAYLOAD_BYTES`] with the most JSON values per byte
/// (`Err` with a message), and the process's peak RSS stays under
/// [`PEAK_RSS_BOUND`]. `what` names the parser.
pub fn assert_a_lambda_sized_payload_is_refused(
    what: &str,
    parse: impl FnOnce(&[u8]) -> Result<(), String>,
) {
    let payload = zeros(LAMBDA_PAYLOAD_BYTES);
    let before = shared::memory::snapshot().peak_rss_bytes;
    let refused = parse(&payload).expect_err("an array is no request");
    assert!(!refused.is_empty(), "{what}: a refusal without a message");
    let after = shared::memory::snapshot().peak_rss_bytes;
    println!(
        "{what}, {} MiB payload: process peak RSS {:.1} MiB before, {:.1} MiB after the parse",
        shared::memory::mib(payload.len() as u64),
        shared::memory::mib(before),
        shared::memory::mib(after),
    );
    assert!(after < PEAK_RSS_BOUND, "{what}: peak RSS {after} bytes");
}

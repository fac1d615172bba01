//! Bad-input corpora: inputs a function must refuse clearly (or, at a
//! limit's edge, accept), one file each in the function's
//! `tests/bad-input/`, listed with the expected outcome in its `cases.json`,
//! plus cases generated at run time because they are large. A case:
//! `{"file": "...", "expect": "...", "says": "..."}` or
//! `{"generate": "<generator>", <parameters>, "expect": ..., "says": ...}`;
//! `says` is a part of the error message, which must also stay under
//! [`MAX_MESSAGE_BYTES`] and never repeat the input or a secret. A size
//! parameter is a number or a named limit: `"BATCH_LIMIT + 1"`. What each
//! `expect` means is the function's own (its corpus README).

use lambda_runtime::Context;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Lambda's limit on a synchronous request and on a response (6 MB).
pub const LAMBDA_PAYLOAD_BYTES: usize = local_stack::lambda_api::MAX_PAYLOAD_BYTES;
/// An error message is a line for a person, never a payload.
pub const MAX_MESSAGE_BYTES: usize = 512;
/// Every secret (a password) in a corpus contains this; nothing may echo it.
pub const SECRET_MARKER: &str = "pw-7f3a";

/// One case of the corpus: its spec (a line of `cases.json`) and its input.
pub struct Case {
    pub name: String,
    pub spec: Value,
    pub input: Vec<u8>,
}

impl Case {
    pub fn field(&self, key: &str) -> Option<&str> {
        self.spec[key].as_str()
    }

    pub fn expect(&self) -> &str {
        self.field("expect").unwrap_or_default()
    }

    pub fn input_kind(&self) -> &str {
        self.field("input").unwrap_or("request")
    }

    /// A message must name the problem (`says`), stay short and echo neither
    /// the input nor a password.
    pub fn check_message(&self, message: &str) {
        if let Some(says) = self.field("says") {
            assert!(
                message.contains(says),
                "{}: the message does not say {says:?}: {message:?}",
                self.name
            );
        }
        assert!(
            message.len() <= MAX_MESSAGE_BYTES,
            "{}: a message of {} bytes: {:.200}...",
            self.name,
            message.len(),
            message
        );
        self.check_no_echo(message);
    }

    /// No output repeats the whole input (when it is more than a word) or
    /// any part of a password.
    pub fn check_no_echo(&self, output: &str) {
        assert!(
            !output.contains(SECRET_MARKER),
            "{}: a password came back: {output:.300}",
            self.name
        );
        if self.input.len() >= 16 {
            let input = String::from_utf8_lossy(&self.input);
            assert!(
                !output.contains(input.trim()),
                "{}: the input came back: {output:.300}",
                self.name
            );
        }
    }
}

/// The cases of `function`, in `tests/bad-input/` of its crate's folder
/// `manifest_dir` (the test's `env!("CARGO_MANIFEST_DIR")`): every file of
/// the folder is listed in its `cases.json` and every listed file exists;
/// generated inputs come from `generate`.
pub fn corpus(
    function: &str,
    manifest_dir: &str,
    generate: impl Fn(&Value) -> Vec<u8>,
) -> Vec<Case> {
    let dir = Path::new(manifest_dir).join("tests").join("bad-input");
    let list = std::fs::read(dir.join("cases.json")).expect("cases.json");
    let specs: Vec<Value> = serde_json::from_slice(&list).expect("cases.json is a JSON array");
    let files: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("corpus folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name != "cases.json" && name != "README.md")
        .collect();
    let listed: BTreeSet<String> = specs
        .iter()
        .filter_map(|s| s["file"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(files, listed, "{function}: files and cases.json differ");
    specs
        .into_iter()
        .map(|spec| match spec["file"].as_str() {
            Some(file) => Case {
                name: format!("{function}/{file}"),
                input: std::fs::read(dir.join(file)).expect("case file"),
                spec,
            },
            None => Case {
                name: format!("{function}/generated {spec}"),
                input: generate(&spec),
                spec,
            },
        })
        .collect()
}

/// A number parameter of a generated case: a literal, or `NAME` / `NAME + 1`
/// with `NAME` one of `names`.
pub fn size(spec: &Value, key: &str, names: &[(&str, usize)]) -> usize {
    if let Some(n) = spec[key].as_u64() {
        return usize::try_from(n).expect("size");
    }
    let text = spec[key]
        .as_str()
        .unwrap_or_else(|| panic!("{spec}: {key}"));
    let (name, plus) = text
        .split_once(" + ")
        .map_or((text, 0), |(n, p)| (n, p.parse().expect("NAME + N")));
    let value = names
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("{spec}: unknown name {name}"))
        .1;
    value + plus
}

pub fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// A Lambda context whose deadline is `seconds` away.
pub fn context(seconds: u64) -> Context {
    let mut context = Context::default();
    context.request_id = "bad-input".into();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis();
    context.deadline = u64::try_from(now).expect("ms") + seconds * 1_000;
    context
}

/// The template's environment of `name`, as a settings table (leaked: a test
/// process reads it a few times).
pub fn template_env(name: &str) -> Vec<(&'static str, &'static str)> {
    let function = crate::function(name);
    let memory: &'static str = function.memory_mb.to_string().leak();
    function
        .env
        .into_iter()
        .map(|(k, v)| -> (&'static str, &'static str) { (k.leak(), v.leak()) })
        .chain([("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory)])
        .collect()
}

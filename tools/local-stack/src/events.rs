//! The sample events in `events/<function>/`: what the runner demonstrates
//! with, what the end-to-end suite invokes, where the fuzzers take their seeds.
//! Beside each `<event>.json`, `<event>.expect.json` says what its answer must
//! hold ([`crate::expectations`]).

use crate::expectations::{self, Expectation};
use crate::workspace_root;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// How the name of an expectation file ends (the event's is `.json`).
pub const EXPECTATION_SUFFIX: &str = ".expect.json";

/// A sample event and what its answer must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// `events/<function>/<event>.json`.
    pub path: PathBuf,
    /// Its text, as sent.
    pub text: String,
    /// Its text, parsed.
    pub event: Value,
    /// `<event>.expect.json`, beside it.
    pub expect: Expectation,
}

impl Sample {
    /// The event's file name, e.g. `hash.json`.
    pub fn file_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The state machine (logical id) this sample is the execution input of,
    /// its expectation's `state_machine`: then it is no event of its
    /// function's, and what invokes samples directly skips it.
    pub fn state_machine(&self) -> Option<&str> {
        self.expect.state_machine.as_deref()
    }

    /// The message bodies of an SQS event's records (every record's
    /// `eventSource` is `aws:sqs`), in order; none for any other event.
    pub fn sqs_bodies(&self) -> Vec<String> {
        let records = self.event["Records"].as_array();
        let sqs = records.is_some_and(|records| {
            !records.is_empty() && records.iter().all(|r| r["eventSource"] == "aws:sqs")
        });
        if !sqs {
            return Vec::new();
        }
        records
            .into_iter()
            .flatten()
            .filter_map(|r| r["body"].as_str().map(str::to_owned))
            .collect()
    }
}

/// `events/<function>/`: where the sample events of `function` are.
pub fn dir(function: &str) -> PathBuf {
    workspace_root().join("events").join(function)
}

/// The sample events of `function`, sorted, each with its expectation.
pub fn samples(function: &str) -> Result<Vec<Sample>, String> {
    samples_in(&dir(function))
}

/// The sample events in `dir`, sorted, each with its expectation: `Err`
/// naming the file if an event has none, or an expectation no event.
pub fn samples_in(dir: &Path) -> Result<Vec<Sample>, String> {
    let events = in_dir(dir)?;
    for path in json_files(dir)?.into_iter().filter(|p| is_expectation(p)) {
        let name = file_name(&path);
        let event = dir.join(name.replace(EXPECTATION_SUFFIX, ".json"));
        if !event.is_file() {
            return Err(format!(
                "{}: no event {} beside it",
                path.display(),
                file_name(&event)
            ));
        }
    }
    events
        .into_iter()
        .map(|(path, text)| {
            let event =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            let expect_path = expectation_path(&path);
            let expect_text = std::fs::read_to_string(&expect_path).map_err(|e| {
                format!(
                    "{}: {e} (every sample event needs one beside it: what its answer must hold)",
                    expect_path.display()
                )
            })?;
            let expect = expectations::parse(&expect_path, &expect_text)?;
            Ok(Sample {
                path,
                text,
                event,
                expect,
            })
        })
        .collect()
}

/// Every `events/<function>/*.json` event, sorted, with its text (each must
/// have its expectation, as for [`samples`]).
pub fn of(function: &str) -> Result<Vec<(PathBuf, String)>, String> {
    Ok(samples(function)?
        .into_iter()
        .map(|sample| (sample.path, sample.text))
        .collect())
}

/// The sample events of `function`, parsed.
pub fn json_of(function: &str) -> Result<Vec<Value>, String> {
    Ok(samples(function)?
        .into_iter()
        .map(|sample| sample.event)
        .collect())
}

/// Every `*.json` event in `dir` (expectations left out), sorted, with its text.
pub fn in_dir(dir: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    json_files(dir)?
        .into_iter()
        .filter(|path| !is_expectation(path))
        .map(|path| {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok((path, text))
        })
        .collect()
}

/// Every `*.json` event in `dir` (expectations left out), sorted, parsed.
pub fn json_in(dir: &Path) -> Result<Vec<Value>, String> {
    in_dir(dir)?
        .into_iter()
        .map(|(path, text)| {
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
        })
        .collect()
}

/// The order ids the SQS batch samples of `function` (those whose expectation
/// has `invalid_records`) leave stored, sorted, each once: the `order_id` in
/// the body of every record processed to the end
/// ([`expectations::processed_records`]), the function reaching its
/// dead-letter queue or not (`dead_letter_queue`).
pub fn stored_orders(function: &str, dead_letter_queue: bool) -> Result<Vec<String>, String> {
    stored_orders_of(samples(function)?, dead_letter_queue)
}

/// [`stored_orders`] when the records' bodies are sent again through the
/// template's standard queue (`cargo xtask run`): no message groups, the
/// dead-letter queue reachable, so every record not invalid is stored.
pub fn stored_orders_through_queue(function: &str) -> Result<Vec<String>, String> {
    stored_orders_of(through_standard_queue(samples(function)?), true)
}

/// `samples` with their records' message groups taken out, as a standard
/// queue delivers their bodies.
fn through_standard_queue(mut samples: Vec<Sample>) -> Vec<Sample> {
    for sample in &mut samples {
        for record in sample.event["Records"].as_array_mut().into_iter().flatten() {
            if let Some(attributes) = record["attributes"].as_object_mut() {
                attributes.remove("MessageGroupId");
            }
        }
    }
    samples
}

fn stored_orders_of(samples: Vec<Sample>, dead_letter_queue: bool) -> Result<Vec<String>, String> {
    let mut ids = BTreeSet::new();
    for sample in samples {
        let Some(invalid) = &sample.expect.invalid_records else {
            continue;
        };
        for record in expectations::processed_records(invalid, &sample.event, dead_letter_queue) {
            let id = record["body"]
                .as_str()
                .and_then(|body| serde_json::from_str::<Value>(body).ok())
                .and_then(|body| body["order_id"].as_str().map(str::to_owned))
                .ok_or_else(|| {
                    format!(
                        "{}: record {} is not in invalid_records, but its body names no order_id",
                        sample.path.display(),
                        record["messageId"]
                    )
                })?;
            ids.insert(id);
        }
    }
    Ok(ids.into_iter().collect())
}

/// Every `*.json` in `dir`, sorted.
fn json_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    Ok(files)
}

/// `<event>.expect.json` beside `<event>.json`.
fn expectation_path(event: &Path) -> PathBuf {
    let stem = event
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    event.with_file_name(format!("{stem}{EXPECTATION_SUFFIX}"))
}

fn is_expectation(path: &Path) -> bool {
    file_name(path).ends_with(EXPECTATION_SUFFIX)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder under the system's temporary directory.
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("local-stack-events-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    #[test]
    fn every_sample_of_the_tree_has_its_expectation() {
        let trees = [
            workspace_root().join("events"),
            crate::fixtures::dir().join("events"),
        ];
        let dirs = trees.iter().flat_map(|events| {
            std::fs::read_dir(events).unwrap_or_else(|e| panic!("{}: {e}", events.display()))
        });
        for dir in dirs.filter_map(Result::ok).map(|e| e.path()) {
            if !dir.is_dir() {
                continue;
            }
            let samples = samples_in(&dir).unwrap_or_else(|e| panic!("{e}"));
            assert!(!samples.is_empty(), "{}", dir.display());
            assert_eq!(in_dir(&dir).expect("events").len(), samples.len());
        }
    }

    #[test]
    fn expectations_are_not_events_and_each_pairs_with_one() {
        let dir = scratch("pairs");
        std::fs::write(dir.join("a.json"), "{\"x\": 1}").expect("write");
        std::fs::write(dir.join("a.expect.json"), "{\"hashes\": 1}").expect("write");
        assert_eq!(
            json_in(&dir).expect("events"),
            [serde_json::json!({"x": 1})]
        );
        let samples = samples_in(&dir).expect("samples");
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].expect.hashes, Some(1));
        assert_eq!(samples[0].file_name(), "a.json");

        std::fs::write(dir.join("b.json"), "{}").expect("write");
        let missing = samples_in(&dir).expect_err("b has no expectation");
        assert!(missing.contains("b.expect.json"), "{missing}");
        std::fs::remove_file(dir.join("b.json")).expect("remove");

        std::fs::write(dir.join("c.expect.json"), "{}").expect("write");
        let orphan = samples_in(&dir).expect_err("c has no event");
        assert!(
            orphan.contains("c.expect.json: no event c.json"),
            "{orphan}"
        );
        std::fs::remove_file(dir.join("c.expect.json")).expect("remove");

        std::fs::write(dir.join("a.expect.json"), "{\"hash\": 1}").expect("write");
        let unknown = samples_in(&dir).expect_err("unknown field");
        assert!(
            unknown.contains("a.expect.json: unknown field"),
            "{unknown}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn stored_orders_follow_from_the_expectations() {
        let samples = |function: &str| {
            samples_in(&crate::fixtures::events(function)).unwrap_or_else(|e| panic!("{e}"))
        };
        let without = stored_orders_of(samples("fixture-function"), false).expect("derived");
        assert_eq!(
            without,
            ["ord-0001", "ord-0003", "ord-0101", "ord-0201", "ord-0202"]
        );
        // A standard dead-letter queue refuses the invalid order of a FIFO
        // group, which holds its group as before.
        let with = stored_orders_of(samples("fixture-function"), true).expect("derived");
        assert_eq!(with, without);
        // Through a standard queue (no groups), every valid order is stored.
        let through_queue =
            stored_orders_of(through_standard_queue(samples("fixture-function")), true)
                .expect("derived");
        assert_eq!(
            through_queue,
            [
                "ord-0001", "ord-0003", "ord-0101", "ord-0103", "ord-0201", "ord-0202"
            ]
        );
        // No SQS batch among its samples: it stores nothing.
        assert_eq!(
            stored_orders_of(samples("fixture-reporter"), false),
            Ok(vec![])
        );
    }

    #[test]
    fn sqs_bodies_are_those_of_an_sqs_event_only() {
        let dir = scratch("bodies");
        let record = |source: &str, body: &str| serde_json::json!({"messageId": "m", "eventSource": source, "body": body});
        let events = [
            (
                "batch",
                serde_json::json!({"Records": [record("aws:sqs", "a"), record("aws:sqs", "b")]}),
            ),
            (
                "stream",
                serde_json::json!({"Records": [record("aws:sqs", "a"), record("aws:kinesis", "b")]}),
            ),
            ("empty", serde_json::json!({"Records": []})),
            ("direct", serde_json::json!({"body": "a"})),
        ];
        for (name, event) in &events {
            std::fs::write(dir.join(format!("{name}.json")), event.to_string()).expect("write");
            std::fs::write(dir.join(format!("{name}.expect.json")), "{}").expect("write");
        }
        std::fs::write(dir.join("run.json"), "{\"query\": {}}").expect("write");
        std::fs::write(dir.join("run.expect.json"), "{\"state_machine\": \"M\"}").expect("write");
        let samples = samples_in(&dir).expect("samples");
        let bodies: Vec<(String, Vec<String>)> = samples
            .iter()
            .map(|s| (s.file_name(), s.sqs_bodies()))
            .collect();
        assert_eq!(
            bodies,
            [
                (
                    "batch.json".to_owned(),
                    vec!["a".to_owned(), "b".to_owned()]
                ),
                ("direct.json".to_owned(), vec![]),
                ("empty.json".to_owned(), vec![]),
                ("run.json".to_owned(), vec![]),
                ("stream.json".to_owned(), vec![]),
            ]
        );
        let machines: Vec<Option<&str>> = samples.iter().map(Sample::state_machine).collect();
        assert_eq!(machines, [None, None, None, Some("M"), None]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! What each function's answer to a sample event must hold under `sam local
//! invoke`: the expectation beside the sample ([`crate::expectations`]).

use crate::events::{self, Sample};
use crate::expectations::{self, Context};
use serde_json::Value;
use std::path::Path;

pub use crate::expectations::no_password_in;

/// What the answer of `function` to `event`, one of its sample events, must
/// hold: what [`check_sample`] checks of that sample, without its output.
pub fn check(
    function: &str,
    event: &Value,
    answer: &Value,
    stored_orders: usize,
) -> Result<(), String> {
    check_in(&events::dir(function), event, answer, stored_orders)
}

/// [`check`] with the sample events in `dir`.
pub fn check_in(
    dir: &Path,
    event: &Value,
    answer: &Value,
    stored_orders: usize,
) -> Result<(), String> {
    let sample = events::samples_in(dir)?
        .into_iter()
        .find(|sample| sample.event == *event)
        .ok_or_else(|| format!("no sample event in {} is this event", dir.display()))?;
    check_sample(&sample, answer, "", stored_orders)
}

/// What the answer to `sample` must hold, `output` what the invocation
/// printed: its expectation, where the function reaches its dead-letter queue
/// (the template's queue URLs name the local ElasticMQ) and reports cover the
/// `stored_orders` orders stored before.
pub fn check_sample(
    sample: &Sample,
    answer: &Value,
    output: &str,
    stored_orders: usize,
) -> Result<(), String> {
    let context = Context {
        stored_orders,
        dead_letter_queue: true,
        output,
    };
    expectations::check(&sample.expect, &sample.event, answer, &context)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The fixture function's sample events (`tests/fixtures/events/`).
    fn fixtures() -> std::path::PathBuf {
        crate::fixtures::events("fixture-function")
    }

    fn sample(file: &str) -> Sample {
        events::samples_in(&fixtures())
            .expect("samples")
            .into_iter()
            .find(|s| s.file_name() == file)
            .expect("the sample")
    }

    #[test]
    fn an_event_is_checked_against_the_expectation_beside_it() {
        let hash = sample("hash.json");
        let two = json!({"hashes": ["$2b$10$x", "$2b$10$y"], "workers": 2});
        assert!(check_in(&fixtures(), &hash.event, &two, 0).is_ok());
        let one = json!({"hashes": ["$2b$10$x"]});
        assert!(check_in(&fixtures(), &hash.event, &one, 0).is_err());
        let unknown = check_in(&fixtures(), &json!({"operation": "x"}), &two, 0);
        assert!(unknown.is_err_and(|e| e.contains("no sample event")));
    }

    #[test]
    fn under_sam_local_invalid_records_are_dead_lettered_not_failed() {
        let mixed = sample("sqs-batch.json");
        let none = json!({"batchItemFailures": []});
        assert!(check_in(&fixtures(), &mixed.event, &none, 0).is_ok());
        let failed = json!({"batchItemFailures": [{"itemIdentifier": "fixture-0002"}]});
        assert!(check_in(&fixtures(), &mixed.event, &failed, 0).is_err());
        assert!(check_in(&fixtures(), &mixed.event, &json!({}), 0).is_err());
    }

    #[test]
    fn the_output_is_searched_for_passwords() {
        let verify = sample("verify.json");
        let answer = json!({"results": [{"valid": true}, {"valid": false}]});
        assert!(check_sample(&verify, &answer, "INFO verified 2", 0).is_ok());
        assert!(check_sample(&verify, &answer, "DEBUG Tr0ub4dor&3", 0).is_err());
    }
}

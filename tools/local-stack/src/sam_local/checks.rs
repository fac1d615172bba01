//! What each function's answer to a sample event must hold under `sam local
//! invoke`: the expectation beside the sample ([`crate::expectations`]).

use crate::events::{self, Sample};
use crate::expectations::{self, Context};
use serde_json::Value;

pub use crate::expectations::no_password_in;

/// What the answer of `function` to `event`, one of its sample events, must
/// hold: what [`check_sample`] checks of that sample, without its output.
pub fn check(
    function: &str,
    event: &Value,
    answer: &Value,
    stored_orders: usize,
) -> Result<(), String> {
    let sample = events::samples(function)?
        .into_iter()
        .find(|sample| sample.event == *event)
        .ok_or_else(|| format!("no sample event of {function} is this event"))?;
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

    fn sample(function: &str, file: &str) -> Sample {
        events::samples(function)
            .expect("samples")
            .into_iter()
            .find(|s| s.file_name() == file)
            .expect("the sample")
    }

    #[test]
    fn an_event_is_checked_against_the_expectation_beside_it() {
        let hash = sample("password-hasher", "hash.json");
        let two = json!({"hashes": ["$2b$10$x", "$2b$10$y"], "workers": 2});
        assert!(check("password-hasher", &hash.event, &two, 0).is_ok());
        let one = json!({"hashes": ["$2b$10$x"]});
        assert!(check("password-hasher", &hash.event, &one, 0).is_err());
        let unknown = check("password-hasher", &json!({"operation": "x"}), &two, 0);
        assert!(unknown.is_err_and(|e| e.contains("no sample event")));
    }

    #[test]
    fn under_sam_local_invalid_records_are_dead_lettered_not_failed() {
        let mixed = sample("order-processor", "sqs-mixed-batch.json");
        let none = json!({"batchItemFailures": []});
        assert!(check("order-processor", &mixed.event, &none, 0).is_ok());
        let failed = json!({"batchItemFailures": [{"itemIdentifier": "3f1a0c2e-0002-4c8e-8b6d-000000000002"}]});
        assert!(check("order-processor", &mixed.event, &failed, 0).is_err());
        assert!(check("order-processor", &mixed.event, &json!({}), 0).is_err());
    }

    #[test]
    fn the_output_is_searched_for_passwords() {
        let verify = sample("password-hasher", "verify.json");
        let answer = json!({"results": [{"valid": true}, {"valid": false}, {"error": "malformed bcrypt hash"}]});
        assert!(check_sample(&verify, &answer, "INFO verified 3", 0).is_ok());
        assert!(check_sample(&verify, &answer, "DEBUG Tr0ub4dor&3", 0).is_err());
    }
}

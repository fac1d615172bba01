//! The real function binaries under the Lambda runtime interface emulator, with
//! the memory size, timeout and environment `template.yaml` declares.

use e2e::{FUNCTIONS, events, file_name, init_duration_ms, json_lines, start};
use serde_json::Value;

#[test]
fn every_sample_event_is_answered_by_its_function() {
    let event_dirs: Vec<_> = std::fs::read_dir(e2e::workspace_root().join("events"))
        .expect("events/")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for dir in &event_dirs {
        assert!(
            FUNCTIONS.contains(&dir.as_str()),
            "events/{dir} names no function"
        );
    }
    for name in FUNCTIONS {
        let emulator = start(name, &[]);
        let samples = events(name);
        assert!(!samples.is_empty(), "events/{name}/ has no sample event");
        for (path, payload) in samples {
            let answer = emulator.invoke(&payload).expect("invoke");
            assert_eq!(
                answer.status,
                200,
                "{name} {}: {}",
                file_name(&path),
                answer.body
            );
            let body = answer.json().expect("JSON answer");
            assert!(
                body.get("errorType").is_none(),
                "{name} {}: {body}",
                file_name(&path)
            );
            check_answer(name, &payload, &body);
        }
        let logs = emulator.logs();
        match init_duration_ms(&logs) {
            Some(ms) => eprintln!("cold start of {name} under the emulator: init {ms:.1} ms"),
            None => panic!("{name}: the emulator reported no init duration:\n{logs}"),
        }
    }
}

/// What each function's answer must contain for its sample events.
fn check_answer(name: &str, payload: &str, body: &Value) {
    let event: Value = serde_json::from_str(payload).expect("event JSON");
    match name {
        "order-processor" => {
            // Until orders are stored, every record must come back failed.
            let sent: Vec<_> = event["Records"]
                .as_array()
                .expect("Records")
                .iter()
                .map(|r| &r["messageId"])
                .collect();
            let failed: Vec<_> = body["batchItemFailures"]
                .as_array()
                .expect("batchItemFailures")
                .iter()
                .map(|f| &f["itemIdentifier"])
                .collect();
            assert_eq!(sent, failed);
        }
        "password-hasher" => {
            // 3,538 MB in the template: two vCPUs' worth, capped by this machine.
            let available = std::thread::available_parallelism().map_or(1, usize::from);
            assert_eq!(body["workers"], Value::from(available.min(2)), "{body}");
            for password in event["passwords"].as_array().into_iter().flatten() {
                let password = password.as_str().expect("password");
                assert!(
                    !body.to_string().contains(password),
                    "password in response: {body}"
                );
            }
        }
        "arrow-worker" => {
            assert_eq!(body["facts"]["memory_return"], "keep", "{body}");
            assert!(
                body["facts"]["memory"]["rss_bytes"].as_u64().unwrap_or(0) > 0,
                "{body}"
            );
        }
        other => panic!("no expectations for {other}"),
    }
}

#[test]
fn cold_start_is_logged_once_with_the_init_facts() {
    let emulator = start(
        "password-hasher",
        &[("AWS_LAMBDA_LOG_FORMAT", "JSON"), ("WORKER_COUNT", "3")],
    );
    for _ in 0..3 {
        let answer = emulator
            .invoke(r#"{"operation":"unknown"}"#)
            .expect("invoke");
        assert_eq!(answer.status, 200);
    }
    let logs = emulator.logs();
    let lines = json_lines(&logs);
    let init: Vec<_> = lines
        .iter()
        .filter(|l| l["message"] == "shared init done")
        .collect();
    assert_eq!(init.len(), 1, "{logs}");
    assert_eq!(init[0]["workers"], 3);
    assert_eq!(init[0]["decided_by"], "WORKER_COUNT");
    assert_eq!(init[0]["allocator"], "mimalloc");
    let cold: Vec<_> = lines
        .iter()
        .filter(|l| l["span"]["cold_start"] == true)
        .collect();
    assert_eq!(
        cold.len(),
        1,
        "exactly the first invocation is cold:\n{logs}"
    );
    assert_eq!(cold[0]["message"], "cold start: first invocation");
    assert!(cold[0]["init_ms"].as_f64().is_some(), "{logs}");
    let request_id = cold[0]["span"]["request_id"].as_str().expect("request id");
    assert!(
        logs.contains(&format!("START RequestId: {request_id}")),
        "{logs}"
    );
}

#[test]
fn a_bad_setting_ends_cold_start_with_one_clear_line() {
    for (setting, value) in [
        ("WORKER_COUNT", "0"),
        ("WORKER_COUNT", "many"),
        ("MEMORY_RETURN", "later"),
        ("AWS_LAMBDA_LOG_LEVEL", "LOUD"),
    ] {
        let emulator = start("arrow-worker", &[(setting, value)]);
        let answer = emulator.invoke("{}").expect("invoke");
        let logs = emulator.logs();
        assert!(
            answer.body.contains("Runtime.ExitError") || answer.status >= 500,
            "{setting}={value} must fail the init: {} {}",
            answer.status,
            answer.body
        );
        let expected = format!("cold start failed: invalid {setting}={value:?}: ");
        let matching: Vec<_> = logs.lines().filter(|l| l.starts_with(&expected)).collect();
        assert_eq!(matching.len(), 1, "{setting}={value}:\n{logs}");
        assert!(!logs.contains("panicked"), "{logs}");
    }
}

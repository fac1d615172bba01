//! Concurrent invocations on the local stack, as Lambda serves them, on its
//! test function: one execution environment (an emulator process and its
//! function, in its own cgroup) per invocation in flight, each new one a cold
//! start; past reserved concurrency a `TooManyRequestsException`; the Lambda
//! Invoke API in front of it all. Several SQS pollers feeding one function
//! side by side: `functions/order-processor/tests/concurrency.rs`.

use local_stack::lambda_api::{LambdaApi, Served};
use local_stack::pool::{Overflow, Size};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An event the test function answers `ms` milliseconds later.
fn sleep_event(ms: u64) -> String {
    json!({ "sleep_ms": ms }).to_string()
}

fn size(environments: usize, overflow: Overflow) -> Size {
    Size {
        environments,
        overflow,
    }
}

#[test]
fn concurrent_invocations_get_environments_of_their_own_each_a_cold_start() {
    let pool = e2e::fixture_pool(&[], size(3, Overflow::Wait));
    let event = sleep_event(500);
    let start = std::sync::Barrier::new(3);
    let answers: Vec<Value> = std::thread::scope(|s| {
        let calls: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    pool.invoke(&event)
                })
            })
            .collect();
        calls
            .into_iter()
            .map(|c| {
                let answer = c.join().expect("thread").expect("invoke");
                assert_eq!(answer.status, 200, "{}", answer.body);
                answer.json().expect("JSON")
            })
            .collect()
    });
    for answer in &answers {
        assert_eq!(answer["invocation"], 1, "each a cold start: {answer}");
    }
    // Three at once: three processes, each reporting its own init.
    assert_eq!(pool.started(), 3);
    let cold_starts = pool.cold_starts();
    assert_eq!(cold_starts.len(), 3);
    assert!(
        cold_starts.iter().all(|ms| ms.is_some_and(|ms| ms > 0.0)),
        "{cold_starts:?}"
    );
    // Later invocations reuse them: no fourth cold start.
    for _ in 0..4 {
        assert_eq!(pool.invoke(&event).expect("invoke").status, 200);
    }
    assert_eq!(pool.started(), 3);
}

#[test]
fn past_reserved_concurrency_the_invoke_api_answers_too_many_requests() {
    let pool = Arc::new(e2e::fixture_pool(&[], size(1, Overflow::Throttle)));
    let api = LambdaApi::start(vec![Served {
        names: vec!["FixtureFunction".into()],
        pool: Arc::clone(&pool),
    }])
    .expect("Lambda API");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let url = api.invoke_url("FixtureFunction");
    let post = |body: String| {
        let response = agent.post(&url).send(body).expect("the API answers");
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let error_type = header("x-amzn-ErrorType");
        let function_error = header("X-Amz-Function-Error");
        let body: Value =
            serde_json::from_str(&response.into_body().read_to_string().expect("body"))
                .expect("JSON");
        (status, error_type, function_error, body)
    };
    std::thread::scope(|s| {
        // A slow invocation holds the only environment (cold start included)...
        let slow = s.spawn(|| post(sleep_event(2_000)));
        let waited = Instant::now();
        while pool.busy() == 0 && waited.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // ...so a second one is throttled, as Lambda throttles past reserved concurrency.
        let (status, error_type, _, body) = post(sleep_event(1));
        assert_eq!(status, 429, "{body}");
        assert_eq!(error_type.as_deref(), Some("TooManyRequestsException"));
        assert_eq!(
            body["Reason"],
            "ReservedFunctionConcurrentInvocationLimitExceeded"
        );
        let (status, _, function_error, body) = slow.join().expect("thread");
        assert_eq!(status, 200, "{body}");
        assert_eq!(function_error, None);
        assert_eq!(body["invocation"], 1, "{body}");
    });
    // A function error is marked as Lambda's API marks it.
    let (status, _, function_error, body) = post(json!({ "fail": "on purpose" }).to_string());
    assert_eq!(status, 200, "{body}");
    assert_eq!(function_error.as_deref(), Some("Unhandled"), "{body}");
    let missing = agent
        .post(api.invoke_url("NoSuchFunction"))
        .send("{}")
        .expect("the API answers");
    assert_eq!(missing.status().as_u16(), 404);
    assert_eq!(pool.started(), 1);
}

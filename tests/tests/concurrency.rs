//! Concurrent invocations on the local stack, as Lambda serves them: one
//! execution environment (an emulator process and its function, in its own
//! cgroup) per invocation in flight, each new one a cold start; past reserved
//! concurrency a `TooManyRequestsException`; several SQS pollers feeding one
//! function side by side; the Lambda Invoke API in front of it all.

use e2e::{assert_reconciled, order_source, servers, servers_env, template};
use local_stack::event_source::drain_concurrently;
use local_stack::lambda_api::{LambdaApi, Served};
use local_stack::pool::{Overflow, Size};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn hash_event(cost: u32) -> String {
    json!({ "operation": "hash", "cost": cost, "passwords": ["a password", "another one"] })
        .to_string()
}

fn size(environments: usize, overflow: Overflow) -> Size {
    Size {
        environments,
        overflow,
    }
}

#[test]
fn concurrent_invocations_get_environments_of_their_own_each_a_cold_start() {
    let pool = e2e::pool(&template(), "password-hasher", &[], size(3, Overflow::Wait));
    let event = hash_event(4);
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
        assert_eq!(
            answer["hashes"].as_array().map(Vec::len),
            Some(2),
            "{answer}"
        );
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
    let pool = Arc::new(e2e::pool(
        &template(),
        "password-hasher",
        &[],
        size(1, Overflow::Throttle),
    ));
    let api = LambdaApi::start(vec![Served {
        names: vec!["PasswordHasherFunction".into()],
        pool: Arc::clone(&pool),
    }])
    .expect("Lambda API");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let url = api.invoke_url("PasswordHasherFunction");
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
        let slow = s.spawn(|| post(hash_event(8)));
        let waited = Instant::now();
        while pool.busy() == 0 && waited.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // ...so a second one is throttled, as Lambda throttles past reserved concurrency.
        let (status, error_type, _, body) = post(hash_event(4));
        assert_eq!(status, 429, "{body}");
        assert_eq!(error_type.as_deref(), Some("TooManyRequestsException"));
        assert_eq!(
            body["Reason"],
            "ReservedFunctionConcurrentInvocationLimitExceeded"
        );
        let (status, _, function_error, body) = slow.join().expect("thread");
        assert_eq!(status, 200, "{body}");
        assert_eq!(function_error, None);
        assert_eq!(body["hashes"].as_array().map(Vec::len), Some(2), "{body}");
    });
    // A function error is marked as Lambda's API marks it.
    let (status, _, function_error, body) = post(json!({ "operation": "nope" }).to_string());
    assert_eq!(status, 200, "{body}");
    assert_eq!(function_error.as_deref(), Some("Unhandled"), "{body}");
    let missing = agent
        .post(api.invoke_url("NoSuchFunction"))
        .send("{}")
        .expect("the API answers");
    assert_eq!(missing.status().as_u16(), 404);
    assert_eq!(pool.started(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_pollers_feed_the_order_processor_side_by_side() {
    const ORDERS: u64 = 120;
    let template = template();
    let source = order_source(&template);
    let (dynamodb, queues) = servers(&template, None, 30).await;
    let (orders, dead_letters, _) = queues.with_dead_letters(&source);
    let bodies: Vec<String> = (0..ORDERS)
        .map(order_processor_testkit::orders::body)
        .collect();
    queues.send_all(orders, &bodies).await;
    let pool = e2e::pool(
        &template,
        "order-processor",
        &servers_env(&dynamodb, &queues),
        size(3, Overflow::Wait),
    );
    let endpoint = queues.server.endpoint();
    let totals = tokio::task::block_in_place(|| {
        drain_concurrently(
            &endpoint,
            orders,
            &source,
            3,
            Instant::now() + Duration::from_secs(300),
            &|event| pool.invoke(event),
        )
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", pool.logs()));
    eprintln!(
        "3 pollers: {totals:?}; {} environments started",
        pool.started()
    );
    assert_reconciled(
        &dynamodb.server.client(),
        &queues,
        orders,
        dead_letters,
        0..ORDERS,
        &[],
    )
    .await;
    assert_eq!(totals.deleted, bodies.len());
    assert_eq!(totals.whole_batch_failures, 0);
    // The pollers' batches were in flight together: more than one environment.
    assert!(pool.started() >= 2, "{} environment(s)", pool.started());
}

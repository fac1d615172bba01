//! `cargo xtask run`'s runner end to end, on the debug builds of the three
//! functions (laid out as `sam build` lays out its output): DynamoDB Local,
//! ElasticMQ, the emulator, the local event source mapping, every sample event.

use e2e::{binary, events, function, functions, scratch};
use local_stack::runner::{Options, run};
use std::collections::BTreeSet;

#[test]
fn the_local_runner_shows_the_whole_application_working() {
    // `<LogicalId>/bootstrap`, as `sam build` writes it.
    let build_dir = scratch("runner-build");
    for name in functions() {
        let dir = build_dir.join(function(&name).logical_id);
        std::fs::create_dir_all(&dir).expect("build dir");
        std::os::unix::fs::symlink(binary(&name), dir.join("bootstrap")).expect("symlink");
    }
    // What the sample orders must lead to through a standard queue: every
    // valid order stored once, every invalid message dead-lettered.
    let bodies: Vec<String> = events("order-processor")
        .into_iter()
        .flat_map(|(_, text)| {
            let event: serde_json::Value = serde_json::from_str(&text).expect("event JSON");
            event["Records"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["body"].as_str().map(str::to_owned))
                .collect::<Vec<_>>()
        })
        .collect();
    let valid: BTreeSet<String> = bodies
        .iter()
        .filter_map(|b| order_processor::order::parse(b).ok())
        .map(|o| o.order.order_id)
        .collect();
    let invalid = bodies
        .iter()
        .filter(|b| order_processor::order::parse(b).is_err())
        .count();
    assert!(
        !valid.is_empty() && invalid > 0,
        "the samples show both outcomes"
    );

    let summary = run(
        Options {
            keep: false,
            visibility_timeout_s: local_stack::runner::DEFAULT_VISIBILITY_TIMEOUT_S,
            concurrency: 2,
            limits: local_stack::cgroup::Limits::from_env().expect("LOCAL_LIMITS"),
        },
        &build_dir,
        &scratch("runner-logs"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(summary.failures, Vec::<String>::new());
    assert_eq!(summary.orders_sent, bodies.len());
    assert_eq!(summary.orders_stored, valid.len() as u64);
    assert_eq!(summary.dead_lettered, invalid as u64);
}

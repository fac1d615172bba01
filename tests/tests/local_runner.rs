//! `cargo xtask run`'s runner end to end, on the debug builds of the
//! template's functions (laid out as `sam build` lays out its output):
//! DynamoDB Local, ElasticMQ, the emulator, the local event source mappings,
//! every sample event. What the queues must lead to comes from the template's
//! SQS event sources and their functions' sample events alone.

use e2e::{binary, function, functions, scratch, template};
use local_stack::events;
use local_stack::runner::{Options, QueueFlow, run};

/// What the SQS batches of each SQS event source's function must lead to
/// through its (standard) queue: every message sent, every id their
/// expectations leave stored found stored, every record they declare invalid
/// dead-lettered.
fn expected_flows() -> Vec<QueueFlow> {
    let sources = template().sqs_sources().unwrap_or_else(|e| panic!("{e}"));
    sources
        .into_iter()
        .map(|source| {
            let samples = events::samples(&source.function).unwrap_or_else(|e| panic!("{e}"));
            let batches: Vec<_> = samples
                .iter()
                .filter(|s| s.state_machine().is_none() && !s.sqs_bodies().is_empty())
                .collect();
            let stored = events::stored_orders_through_queue(&source.function)
                .unwrap_or_else(|e| panic!("{e}"));
            let invalid: usize = batches
                .iter()
                .map(|s| s.expect.invalid_records.as_ref().map_or(0, Vec::len))
                .sum();
            QueueFlow {
                messages_sent: batches.iter().map(|s| s.sqs_bodies().len()).sum(),
                items_stored: stored.len() as u64,
                dead_lettered: invalid as u64,
                function: source.function,
                queue: source.queue,
            }
        })
        .collect()
}

#[test]
fn the_local_runner_shows_the_whole_application_working() {
    // `<LogicalId>/bootstrap`, as `sam build` writes it.
    let build_dir = scratch("runner-build");
    for name in functions() {
        let dir = build_dir.join(function(&name).logical_id);
        std::fs::create_dir_all(&dir).expect("build dir");
        std::os::unix::fs::symlink(binary(&name), dir.join("bootstrap")).expect("symlink");
    }
    let expected = expected_flows();
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
    assert_eq!(summary.queues, expected);
    let sent: usize = expected.iter().map(|q| q.messages_sent).sum();
    assert_eq!(summary.messages_sent(), sent);
}

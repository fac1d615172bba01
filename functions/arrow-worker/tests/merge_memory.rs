//! A merge of stored partials stays within the function's memory under the
//! local stack's memory limit: partials whose sum is larger than the memory
//! are merged a budget of bytes at a time, and a partial that cannot fit is
//! refused with an error type the state machine does not retry, never an
//! out-of-memory kill.
//!
//! At 256 MB rather than the template's 1,769 MB: the budget is a fraction of
//! the memory (an eighth), so the smaller size tests the same rule with
//! partials of a few hundred MB instead of gigabytes (minutes of encoding and
//! moto's memory).

mod support;

use aws_sdk_s3::Client as S3;
use aws_sdk_s3::primitives::ByteStream;
use local_stack::emulator::Emulator;
use local_stack::local_aws::{NO_SERVER, function_env};
use serde_json::{Value, json};
use support::{LocalAnalytics, assert_within_memory_limit, binary, mib};

use arrow_worker::answer::{Answer, Group, Money, Rows, Stats};
use arrow_worker::partial::{self, StoredPartial};
use arrow_worker::query::{GroupBy, Query, Segment};

/// The function's memory in this test.
const MEMORY_MB: u32 = 256;

/// The worker at [`MEMORY_MB`], reading the analytics bucket of `analytics`.
fn worker(analytics: &LocalAnalytics) -> Emulator {
    let mut function = support::function("arrow-worker");
    function.memory_mb = MEMORY_MB;
    let mut env = function_env(&[("AWS_ENDPOINT_URL_DYNAMODB", NO_SERVER)]);
    env.extend(analytics.env());
    let rie = local_stack::tools::emulator().unwrap_or_else(|e| panic!("{e}"));
    let log = support::scratch("merge-memory").with_extension("log");
    Emulator::start(&rie, &binary("arrow-worker"), &function, &env, &log)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn s3(analytics: &LocalAnalytics) -> S3 {
    let config = local_stack::local_aws::sdk_config(&analytics.server().endpoint());
    let config = aws_sdk_s3::config::Builder::from(&config)
        .force_path_style(true)
        .build();
    S3::from_conf(config)
}

/// `groups` customers with one order in each of `currencies` currencies.
/// Their keys are long (about 500 bytes): the budget is about bytes, and
/// fewer groups of them keep a debug build's merge short.
fn groups(groups: u64, currencies: &[&str]) -> Vec<Group> {
    let count = currencies.len() as u64;
    let long = "k".repeat(500);
    (0..groups)
        .map(|i| Group {
            key: format!("cust-{i:08}-{long}"),
            count,
            money: currencies
                .iter()
                .map(|c| Money {
                    currency: (*c).into(),
                    count: 1,
                    total_cents: Stats::new(1, 100, 100, 100),
                })
                .collect(),
            quantity: Stats::new(count, count, 1, 1),
        })
        .collect()
}

/// Store `total` partials of run `run`, each holding `groups` (the same
/// customers in every segment), as the segments would: their references.
async fn store_partials(
    analytics: &LocalAnalytics,
    run: &str,
    total: u32,
    groups: &[Group],
) -> Vec<StoredPartial> {
    let query = Query {
        group_by: GroupBy::Customer,
        from: None,
        to: None,
        limit: None,
    };
    let matched: u64 = groups.iter().map(|g| g.count).sum();
    let client = s3(analytics);
    let mut references = Vec::new();
    for segment in 0..total {
        let rows = Rows {
            scanned: matched,
            matched,
            ..Rows::default()
        };
        let at = Segment {
            segment,
            total_segments: total,
        };
        let answer = Answer::stored_partial(query.clone(), at, groups.to_vec(), rows);
        let bytes = partial::encode(&answer).unwrap_or_else(|e| panic!("{e}"));
        let reference = StoredPartial {
            segment,
            total_segments: total,
            attempt: partial::new_attempt(),
            groups: groups.len() as u64,
            bytes: bytes.len() as u64,
            sha256: partial::sha256(&bytes),
        };
        client
            .put_object()
            .bucket(&analytics.buckets()[0])
            .key(reference.key(run))
            .body(ByteStream::from(bytes))
            .send()
            .await
            .unwrap_or_else(|e| panic!("put: {e:?}"));
        references.push(reference);
    }
    references
}

fn merge(worker: &Emulator, run: &str, partials: &[StoredPartial]) -> Value {
    let payload = json!({"operation": "merge_stored", "run_id": run, "partials": partials});
    worker
        .invoke(payload.to_string())
        .and_then(|answer| answer.json())
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partials_larger_than_memory_are_merged_within_it_or_refused_clearly() {
    let mut analytics = LocalAnalytics::new();
    analytics.start(NO_SERVER);
    let worker = worker(&analytics);
    // 45,000 customers in each of 11 partials of about 26 MB: within the
    // budget (an eighth of the memory) each, more than the memory together.
    // Eight of them read at once, as before the budget, are killed for memory.
    let customers = groups(45_000, &["EUR"]);
    let references = store_partials(&analytics, "large", 11, &customers).await;
    let sum: u64 = references.iter().map(|r| r.bytes).sum();
    assert!(
        sum > u64::from(MEMORY_MB) << 20,
        "{:.0} MiB of partials",
        mib(sum)
    );
    let answer = merge(&worker, "large", &references);
    assert!(answer.get("errorType").is_none(), "{answer}");
    assert_eq!(answer["groups_total"], 45_000, "{answer}");
    assert_eq!(answer["rows"]["matched"], 11 * 45_000, "{answer}");
    assert_within_memory_limit(
        &worker,
        &format!("merge of {:.0} MiB of partials", mib(sum)),
    );

    // One partial larger than a merge holds at once: refused before reading.
    let wide = groups(60_000, &["EUR"]);
    let references = store_partials(&analytics, "wide", 2, &wide).await;
    let answer = merge(&worker, "wide", &references);
    assert_eq!(answer["errorType"], "MergeTooLarge", "{answer}");
    assert_within_memory_limit(&worker, "a refused merge");
}

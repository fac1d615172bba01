//! The Arrow worker's bad-input corpus (`tests/bad-input/`, see its README)
//! through its real handler in-process, with an in-memory store; and Lambda's
//! response limit (6 MB).

use arrow_worker::columns::Item as StoredItem;
use arrow_worker::query::MAX_LIMIT;
use lambda_runtime::LambdaEvent;
use serde_json::{Value, json};
use testkit::bad_input::{
    Case, LAMBDA_PAYLOAD_BYTES, MAX_MESSAGE_BYTES, context, corpus, nested_arrays, size,
};

/// The Arrow worker's `MAX_ROWS` in these tests (the corpus names it).
const ARROW_MAX_ROWS: usize = 25_000;

type ArrowHandler = arrow_worker::handler::Handler<arrow_worker_testkit::orders::MemoryStore>;

fn arrow_worker(items: Vec<StoredItem>) -> ArrowHandler {
    let max_rows: &'static str = ARROW_MAX_ROWS.to_string().leak();
    let env = [
        ("TABLE_NAME", "orders"),
        ("REPORTS_TABLE", "reports"),
        ("MAX_ROWS", max_rows),
        ("ARENA_MIB", "0"),
    ];
    let config = arrow_worker::config::Config::from_env(&env).expect("config");
    ArrowHandler::new(
        arrow_worker_testkit::orders::MemoryStore::new(items, 1_000),
        config,
        2,
        None,
    )
}

/// One order item per customer `cust-000000` ... (so `n` groups by customer).
fn distinct_customers(n: usize) -> Vec<StoredItem> {
    (0..n)
        .map(|i| {
            arrow_worker_testkit::orders::order_item(
                &format!("cust-{i:06}"),
                "EUR",
                arrow_worker_testkit::orders::START_MS,
                100,
                1,
            )
        })
        .collect()
}

/// The request of a generated case, and the store it needs (`None`: the default one).
fn generate_arrow_request(spec: &Value) -> (Vec<u8>, Option<Vec<StoredItem>>) {
    let names = [
        ("MAX_ROWS", ARROW_MAX_ROWS),
        ("MAX_LIMIT", MAX_LIMIT as usize),
    ];
    let n = |key: &str| size(spec, key, &names);
    let (request, items) = match spec["generate"].as_str() {
        Some("nested_arrays") => {
            let text = format!(
                r#"{{"operation":"aggregate","query":{}}}"#,
                nested_arrays(n("depth"))
            );
            return (text.into_bytes(), None);
        }
        Some("long_operation") => (json!({"operation": "x".repeat(n("bytes"))}), None),
        Some("long_from") => (
            json!({"operation": "aggregate", "query": {"group_by": "day", "from": "x".repeat(n("bytes"))}}),
            None,
        ),
        Some("merge_overflow_long_key") => {
            let key = "k".repeat(n("bytes"));
            // Ten million orders of the largest total per partial: each
            // partial's sum fits in 64 bits, the two together do not.
            let (orders, cents) = (10_000_000u64, shared::orders::MAX_AMOUNT_CENTS);
            let partial = |segment: u32| {
                let totals = json!({"sum": orders * cents, "min": cents, "max": cents, "mean": cents as f64});
                let units = json!({"sum": orders, "min": 1, "max": 1, "mean": 1.0});
                json!({"query": {"group_by": "customer"}, "segment": {"segment": segment, "total_segments": 2},
                       "groups": [{"key": key, "count": orders, "quantity": units,
                                   "money": [{"currency": "EUR", "count": orders, "total_cents": totals}]}],
                       "groups_total": 1, "truncated": false,
                       "rows": {"scanned": orders, "matched": orders, "skipped": {"missing_field": 0, "wrong_type": 0, "out_of_range": 0}}})
            };
            (
                json!({"operation": "merge", "partials": [partial(0), partial(1)]}),
                None,
            )
        }
        Some("rows") => (
            json!({"operation": "aggregate", "query": {"group_by": "currency"}}),
            Some(arrow_worker_testkit::orders::items(n("rows"), 50, 3)),
        ),
        Some("distinct_customers") => {
            let request = if spec["segment"] == true {
                json!({"operation": "aggregate", "query": {"group_by": "customer"}, "segment": 0, "total_segments": 1})
            } else {
                json!({"operation": "aggregate", "query": {"group_by": "customer", "limit": MAX_LIMIT}})
            };
            (request, Some(distinct_customers(n("groups"))))
        }
        other => panic!("unknown generator {other:?}"),
    };
    (request.to_string().into_bytes(), items)
}

async fn arrow_case(worker: &ArrowHandler, case: &Case) {
    let payload = match serde_json::from_slice::<Value>(&case.input) {
        Ok(payload) => payload,
        Err(e) => {
            assert_eq!(case.expect(), "not_json", "{}: {e}", case.name);
            case.check_message(&e.to_string());
            return;
        }
    };
    let timeout = u64::from(testkit::function("arrow-worker").timeout_s);
    match worker
        .handle(LambdaEvent::new(payload, context(timeout)))
        .await
    {
        Ok(answer) => {
            assert_eq!(case.expect(), "ok", "{}: {answer:.300}", case.name);
            let groups = answer["groups"].as_array().map_or(0, Vec::len);
            assert!(groups <= MAX_LIMIT as usize, "{}: {groups}", case.name);
            let bytes = answer.to_string().len();
            assert!(bytes < LAMBDA_PAYLOAD_BYTES, "{}: {bytes}", case.name);
            if let Some(total) = answer["groups_total"].as_u64() {
                assert_eq!(
                    answer["truncated"],
                    total > groups as u64,
                    "{}: truncated says so",
                    case.name
                );
            }
        }
        Err(diagnostic) => {
            assert_eq!(
                diagnostic.error_type,
                case.expect(),
                "{}: {:.300}",
                case.name,
                diagnostic.error_message
            );
            case.check_message(&diagnostic.error_message);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrow_worker_corpus() {
    let default = arrow_worker(arrow_worker_testkit::orders::items(2_000, 50, 7));
    let cases = corpus("arrow-worker", env!("CARGO_MANIFEST_DIR"), |spec| {
        generate_arrow_request(spec).0
    });
    for case in &cases {
        match generate_arrow_request_store(&case.spec) {
            Some(items) => arrow_case(&arrow_worker(items), case).await,
            None => arrow_case(&default, case).await,
        }
    }
    eprintln!("arrow-worker: {} cases", cases.len());
}

/// The store a case needs, if not the default one.
fn generate_arrow_request_store(spec: &Value) -> Option<Vec<StoredItem>> {
    spec.get("generate")
        .and_then(|_| generate_arrow_request(spec).1)
}

/// An answer larger than Lambda returns is refused with a clear error. The
/// answer repeats the query, and RFC 3339 times may carry any number of
/// fraction digits: a request just under 6 MB (two such times) over 5,000
/// customers would answer more than 6 MB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrow_worker_refuses_an_answer_larger_than_lambda_returns() {
    let worker = arrow_worker(distinct_customers(5_000));
    let time = |digits: usize| format!("2026-11-01T00:00:00.{}Z", "0".repeat(digits));
    let request = |digits: usize| {
        json!({"operation": "aggregate",
               "query": {"group_by": "customer", "from": time(digits), "to": "2099-01-01T00:00:00Z", "limit": MAX_LIMIT}})
    };
    let small = request(0).to_string().len();
    let request = request(LAMBDA_PAYLOAD_BYTES - small - 1);
    let request_bytes = request.to_string().len();
    assert!(request_bytes < LAMBDA_PAYLOAD_BYTES, "{request_bytes}");
    let timeout = u64::from(testkit::function("arrow-worker").timeout_s);
    let refused = match worker
        .handle(LambdaEvent::new(request, context(timeout)))
        .await
    {
        Ok(answer) => panic!(
            "an answer of {} bytes was returned",
            answer.to_string().len()
        ),
        Err(refused) => refused,
    };
    assert_eq!(
        refused.error_type, "AnswerTooLarge",
        "{}",
        refused.error_message
    );
    let bytes: usize = refused
        .error_message
        .split_once("the answer is ")
        .and_then(|(_, rest)| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", refused.error_message));
    assert!(bytes > LAMBDA_PAYLOAD_BYTES, "{}", refused.error_message);
    assert!(refused.error_message.len() < MAX_MESSAGE_BYTES);
    eprintln!(
        "arrow-worker: a request of {request_bytes} bytes would answer {bytes} bytes: refused, AnswerTooLarge"
    );
}

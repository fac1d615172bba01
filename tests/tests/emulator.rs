//! The real function binaries under the Lambda runtime interface emulator, with
//! the memory size, timeout and environment `template.yaml` declares.

use e2e::{
    LocalAnalytics, LocalDynamoDb, events, file_name, functions, init_duration_ms, json_lines,
    start, stored_hashes,
};
use order_processor::order::ValidOrder;
use serde_json::Value;
use std::collections::BTreeMap;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sample_event_is_answered_by_its_function() {
    let event_dirs: Vec<_> = std::fs::read_dir(e2e::workspace_root().join("events"))
        .expect("events/")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    // Every function of the template, the order processor first: the Arrow
    // worker reports on the orders it stored.
    let mut names = functions();
    names.sort_by_key(|name| name != "order-processor");
    for dir in &event_dirs {
        assert!(names.contains(dir), "events/{dir} names no function");
    }
    let dynamodb = LocalDynamoDb::start().await;
    // The orders the order processor stored, which the Arrow worker reports on.
    let mut written = Vec::new();
    for name in names.iter().map(String::as_str) {
        let env = dynamodb.env();
        let emulator = start(name, &env);
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
            check_answer(name, &payload, &body, &written);
        }
        if name == "order-processor" {
            let stored = stored_hashes(&dynamodb.server.client(), "OrdersTable").await;
            let ids: Vec<_> = stored.keys().map(String::as_str).collect();
            assert_eq!(ids, local_stack::events::STORED_ORDERS);
            written = sample_orders()
                .into_iter()
                .filter(|o| stored.get(&o.order.order_id) == Some(&o.hash_hex()))
                .collect();
            written.sort_by(|a, b| a.order.order_id.cmp(&b.order.order_id));
            written.dedup_by(|a, b| a.order.order_id == b.order.order_id);
            assert_eq!(
                written.len(),
                stored.len(),
                "every stored order is a sample"
            );
        }
        let logs = emulator.logs();
        match init_duration_ms(&logs) {
            Some(ms) => eprintln!("cold start of {name} under the emulator: init {ms:.1} ms"),
            None => panic!("{name}: the emulator reported no init duration:\n{logs}"),
        }
    }
}

/// Every valid order in the order processor's sample events.
fn sample_orders() -> Vec<ValidOrder> {
    events("order-processor")
        .into_iter()
        .flat_map(|(_, text)| {
            let event: Value = serde_json::from_str(&text).expect("event JSON");
            event["Records"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| order_processor::order::parse(r["body"].as_str()?).ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Per group of `group_by` ("customer", "day" or "currency") and currency: the
/// count and the sum of `total_cents` of `orders`, computed without Arrow.
fn reference_groups<'a>(
    orders: impl Iterator<Item = &'a ValidOrder>,
    group_by: &str,
) -> BTreeMap<(String, String), (u64, u64)> {
    let mut groups = BTreeMap::new();
    for o in orders {
        let key = match group_by {
            "customer" => o.order.customer_id.clone(),
            "currency" => o.order.currency.clone(),
            "day" => utc_day(o.created_at_ms),
            other => panic!("unknown group_by {other}"),
        };
        let entry = groups
            .entry((key, o.order.currency.clone()))
            .or_insert((0, 0));
        entry.0 += 1;
        entry.1 += o.order.total_cents;
    }
    groups
}

/// `YYYY-MM-DD` of a time in milliseconds since the epoch, in UTC.
fn utc_day(ms: i64) -> String {
    let at = time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1_000)).expect("in range");
    at.date().to_string()
}

/// What each function's answer must contain for its sample events; the Arrow
/// worker's reports must match `written`, the orders stored before.
fn check_answer(name: &str, payload: &str, body: &Value, written: &[ValidOrder]) {
    let event: Value = serde_json::from_str(payload).expect("event JSON");
    match name {
        "order-processor" => {
            // Exactly the invalid orders fail, and in a FIFO group everything after them.
            let mut failed_groups = Vec::new();
            let mut expected = Vec::new();
            for record in event["Records"].as_array().expect("Records") {
                let group = record["attributes"]["MessageGroupId"].as_str();
                let body = record["body"].as_str().unwrap_or_default();
                let blocked = group.is_some_and(|g| failed_groups.contains(&g));
                if blocked || order_processor::order::parse(body).is_err() {
                    expected.push(record["messageId"].clone());
                    failed_groups.extend(group);
                }
            }
            let failed: Vec<_> = body["batchItemFailures"]
                .as_array()
                .expect("batchItemFailures")
                .iter()
                .map(|f| f["itemIdentifier"].clone())
                .collect();
            assert_eq!(failed, expected, "answer: {body}");
        }
        "password-hasher" => {
            // A Function URL event gets an HTTP answer wrapping the same JSON.
            let (request, answer) = if event.get("requestContext").is_some() {
                assert_eq!(body["statusCode"], 200, "{body}");
                let inner = |v: &Value| {
                    serde_json::from_str::<Value>(v.as_str().unwrap_or_default())
                        .expect("JSON body")
                };
                (inner(&event["body"]), inner(&body["body"]))
            } else {
                (event.clone(), body.clone())
            };
            // 3,538 MB in the template: two vCPUs' worth, capped by this machine.
            let available = std::thread::available_parallelism().map_or(1, usize::from);
            assert_eq!(answer["workers"], Value::from(available.min(2)), "{answer}");
            assert!(answer["duration_ms"].as_f64().is_some(), "{answer}");
            assert!(
                answer["memory"]["rss_bytes"].as_u64().unwrap_or(0) > 0,
                "{answer}"
            );
            match request["operation"].as_str() {
                Some("hash") => {
                    let hashes = answer["hashes"].as_array().expect("hashes");
                    assert_eq!(
                        hashes.len(),
                        request["passwords"].as_array().map_or(0, Vec::len)
                    );
                    assert!(
                        hashes
                            .iter()
                            .all(|h| h.as_str().is_some_and(|h| h.starts_with("$2b$")))
                    );
                }
                Some("verify") => {
                    // The sample pairs: right password, wrong password, malformed hash.
                    let expected = serde_json::json!([{"valid": true}, {"valid": false}, {"error": "malformed bcrypt hash"}]);
                    assert_eq!(answer["results"], expected);
                }
                other => panic!("unexpected operation {other:?}"),
            }
            assert_no_password(&request, &body.to_string());
        }
        "arrow-worker" => {
            // The order processor stored 6 orders before: every event reports
            // on them, group by group; the daily report reads only that day's
            // (through the day index).
            let day = match event["operation"].as_str() {
                Some("daily_report") => {
                    assert_eq!(body["report_id"], "daily/2026-11-20", "{body}");
                    Some("2026-11-20")
                }
                _ => {
                    assert_eq!(body["rows"]["scanned"], written.len(), "{body}");
                    None
                }
            };
            let matched = written
                .iter()
                .filter(|o| day.is_none_or(|d| utc_day(o.created_at_ms) == d));
            let group_by = body["query"]["group_by"].as_str().expect("query.group_by");
            let expected = reference_groups(matched, group_by);
            let reported: BTreeMap<(String, String), (u64, u64)> = body["groups"]
                .as_array()
                .expect("groups")
                .iter()
                .flat_map(|g| {
                    let key = g["key"].as_str().expect("key");
                    g["money"].as_array().expect("money").iter().map(move |m| {
                        let currency = m["currency"].as_str().expect("currency");
                        let count = m["count"].as_u64().expect("count");
                        let sum = m["total_cents"]["sum"].as_u64().expect("sum");
                        ((key.to_owned(), currency.to_owned()), (count, sum))
                    })
                })
                .collect();
            assert_eq!(reported, expected, "{body}");
            let matched: u64 = expected.values().map(|(count, _)| count).sum();
            assert_eq!(body["rows"]["matched"], matched, "{body}");
            if day.is_some() {
                assert_eq!(matched, 4, "orders of 2026-11-20: {body}");
                assert_eq!(
                    body["rows"]["scanned"], matched,
                    "only the day read: {body}"
                );
            }
            if event.get("segment").is_some() {
                assert_eq!(body["segment"]["segment"], event["segment"], "{body}");
                assert_eq!(body["segment"]["total_segments"], event["total_segments"]);
            }
            // An on-demand cold start (what the local stack's environments
            // are, as Lambda's without provisioned concurrency): no pre-warm.
            assert_eq!(body["run"]["prewarmed"], false, "{body}");
        }
        other => panic!("no expectations for {other}"),
    }
}

/// No password of `request` appears in `text`.
fn assert_no_password(request: &Value, text: &str) {
    if let Err(e) = local_stack::sam_local::no_password_in(request, text) {
        panic!("{e}: {text}");
    }
}

#[test]
fn no_password_reaches_the_logs_even_at_trace_level() {
    let emulator = start(
        "password-hasher",
        &[
            ("AWS_LAMBDA_LOG_LEVEL", "TRACE"),
            ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
        ],
    );
    let mut requests = Vec::new();
    for (_, payload) in events("password-hasher") {
        let answer = emulator.invoke(&payload).expect("invoke");
        assert_eq!(answer.status, 200);
        let event: Value = serde_json::from_str(&payload).expect("event");
        requests.push(event.get("requestContext").map_or(event.clone(), |_| {
            serde_json::from_str(event["body"].as_str().unwrap_or_default()).expect("body")
        }));
    }
    // Refused requests too: each names a problem but must not echo the password.
    for bad in [
        r#"{"operation":"hash","cost":3,"passwords":["refused-secret-cost"]}"#,
        r#"{"operation":"hash","cost":"refused-secret-type","passwords":["refused-secret-x"]}"#,
        r#"{"operation":"verify","items":[{"password":"refused-secret-hash","hash":"refused-secret-hash"}]}"#,
    ] {
        let answer = emulator.invoke(bad).expect("invoke");
        assert!(!answer.body.contains("refused-secret"), "{}", answer.body);
        requests.push(serde_json::from_str(bad).expect("json"));
    }
    let logs = emulator.logs();
    assert!(
        logs.contains("\"level\":\"TRACE\"") || logs.contains("\"level\":\"DEBUG\""),
        "trace logging is on:\n{logs}"
    );
    for request in &requests {
        assert_no_password(request, &logs);
    }
    assert!(!logs.contains("refused-secret"), "{logs}");
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
    let marker: Vec<_> = lines
        .iter()
        .filter(|l| l["message"] == "cold start: first invocation")
        .collect();
    assert_eq!(marker.len(), 1, "{logs}");
    assert_eq!(marker[0]["span"]["cold_start"], true);
    assert!(marker[0]["init_ms"].as_f64().is_some(), "{logs}");
    let first = &marker[0]["span"]["request_id"];
    assert!(
        logs.contains(&format!(
            "START RequestId: {}",
            first.as_str().unwrap_or("?")
        )),
        "{logs}"
    );
    // Every line of the first invocation says cold_start=true, every later one false.
    let in_invocations: Vec<_> = lines
        .iter()
        .filter(|l| l["span"]["request_id"].is_string())
        .collect();
    let requests: std::collections::BTreeSet<_> = in_invocations
        .iter()
        .map(|l| l["span"]["request_id"].to_string())
        .collect();
    assert_eq!(requests.len(), 3, "{logs}");
    for line in in_invocations {
        assert_eq!(
            line["span"]["cold_start"] == true,
            line["span"]["request_id"] == *first,
            "{line}"
        );
    }
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

#[test]
fn functions_detect_the_cpu_share_of_their_memory_size() {
    use local_stack::cgroup;
    assert_eq!(cgroup::MB_PER_VCPU, shared::vcpus::MB_PER_VCPU);
    if let Err(why) = cgroup::enforced() {
        eprintln!("skipped: limits are not enforced: {why}");
        return;
    }
    // (MemorySize, the share it buys, the hasher's workers). 885 MB is a
    // quota of 50,029 µs per 100,000; 2,048 MB is 1.16 CPUs of time, shown
    // as 2 vCPUs on Lambda, so 2 workers; 3,538 MB needs two cores (this
    // machine's count, so the quota is not capped).
    for (memory_mb, share, workers) in [
        (885, 0.5, 1),
        (1_769, 1.0, 1),
        (2_048, 2_048.0 / 1_769.0, 2),
        (3_538, 2.0, 2),
    ] {
        let init = init_line_at("password-hasher", memory_mb);
        assert_eq!(init["cgroup_quota"], workers, "{memory_mb} MB: {init}");
        assert_eq!(init["workers"], workers, "{memory_mb} MB: {init}");
        let detected = init["cpu_share"].as_f64().expect("cpu_share");
        assert!(
            (detected - share).abs() < 0.001,
            "{memory_mb} MB: {detected} vCPUs"
        );
    }
}

/// The `shared init done` line of `binary` started under the emulator at
/// `memory_mb` (its memory-size variable, cgroup quota and limit follow from it).
fn init_line_at(binary: &str, memory_mb: u32) -> serde_json::Value {
    let mut function = e2e::function(binary);
    function.memory_mb = memory_mb;
    let rie = local_stack::tools::emulator().expect("emulator");
    let emulator = local_stack::emulator::Emulator::start(
        &rie,
        &e2e::binary(binary),
        &function,
        &[("AWS_LAMBDA_LOG_FORMAT", "JSON")],
        &e2e::scratch(&format!("{binary}-{memory_mb}mb.log")),
    )
    .expect("start");
    emulator
        .invoke(r#"{"operation":"unknown"}"#)
        .expect("invoke");
    let logs = emulator.logs();
    json_lines(&logs)
        .into_iter()
        .find(|l| l["message"] == "shared init done")
        .unwrap_or_else(|| panic!("no init line:\n{logs}"))
}

/// The order processor opens its DynamoDB connections during init, one per
/// write it makes at once, and its first batch writes on them: no handshake
/// is left for the first request (DynamoDB behind the TLS front counts them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_order_processor_opens_its_connections_during_init() {
    let dynamodb = LocalDynamoDb::start().await;
    let mut env = dynamodb.env();
    env.push(("WRITE_CONCURRENCY", "4"));
    let emulator = start("order-processor", &env);
    // An empty batch: the function initialises, then has nothing to write.
    let empty = emulator.invoke(r#"{"Records": []}"#).expect("invoke");
    assert_eq!(empty.status, 200, "{}", empty.body);
    assert_eq!(dynamodb.tls_handshakes(), 4, "{}", emulator.logs());
    // Four new orders, written four at a time: on the connections of init.
    let records = e2e::sample_records(0..4);
    let event = serde_json::json!({ "Records": records }).to_string();
    let answer = emulator.invoke(&event).expect("invoke");
    let body = answer.json().expect("JSON");
    assert_eq!(body["batchItemFailures"], serde_json::json!([]), "{body}");
    assert_eq!(
        dynamodb.tls_handshakes(),
        4,
        "no handshake in the first batch"
    );
    let logs = json_lines(&emulator.logs());
    let opened = logs
        .iter()
        .find(|l| l["message"] == "DynamoDB connections opened")
        .unwrap_or_else(|| panic!("no connections line:\n{}", emulator.logs()));
    assert_eq!(opened["answered"], 4, "{opened}");
}

/// The Arrow worker opens, during init, a DynamoDB connection for each reader
/// a request runs at once (a scan per worker, at least the daily report's
/// shards) and one to S3; the report then reads on them. Turned off, init
/// opens none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_arrow_worker_opens_its_connections_during_init() {
    let dynamodb = LocalDynamoDb::start().await;
    let mut analytics = LocalAnalytics::new();
    analytics.start(local_stack::local_aws::NO_SERVER);
    let mut env = dynamodb.env();
    env.extend(analytics.env());
    let readers = shared::orders::DAY_SHARDS as usize;
    let emulator = start("arrow-worker", &env);
    // A request refused before any call: the function initialises, nothing more.
    let refused = emulator.invoke("{}").expect("invoke");
    assert!(refused.body.contains("InvalidRequest"), "{}", refused.body);
    let opened: Vec<Value> = json_lines(&emulator.logs())
        .into_iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.ends_with("connections opened"))
        })
        .collect();
    assert_eq!(opened.len(), 2, "{}", emulator.logs());
    let workers = json_lines(&emulator.logs())
        .iter()
        .find(|l| l["message"] == "shared init done")
        .and_then(|l| l["workers"].as_u64())
        .expect("workers in the init line");
    let expected = readers.max(usize::try_from(workers).expect("workers"));
    assert_eq!(dynamodb.tls_handshakes(), expected, "{}", emulator.logs());
    assert_eq!(analytics.tls_handshakes(), 1, "{}", emulator.logs());
    // The daily report reads its day's shards at once: on the connections of init.
    let report = serde_json::json!({ "operation": "daily_report", "day": "2026-11-21" });
    let answer = emulator.invoke(report.to_string()).expect("invoke");
    let body = answer.json().expect("JSON");
    assert!(body.get("errorType").is_none(), "{body}");
    assert_eq!(
        dynamodb.tls_handshakes(),
        expected,
        "no handshake in the report"
    );
    emulator.stop();

    let mut off = env.clone();
    off.push((shared::connections::SETTING, "false"));
    let emulator = start("arrow-worker", &off);
    emulator.invoke("{}").expect("invoke");
    assert_eq!(dynamodb.tls_handshakes(), expected, "{}", emulator.logs());
    assert_eq!(analytics.tls_handshakes(), 1, "{}", emulator.logs());
}

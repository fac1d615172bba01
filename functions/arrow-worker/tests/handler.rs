//! The handler end to end over an in-memory table: segments + merge equal one
//! full scan, bad requests get `InvalidRequest`, an empty table and a
//! high-cardinality grouping, and the daily report saved by day.

use arrow_worker::columns::Item;
use arrow_worker::config::Config;
use arrow_worker::handler::Handler;
use arrow_worker_testkit::orders::{self as arrow, MemoryStore};
use lambda_runtime::{Diagnostic, LambdaEvent};
use serde_json::{Value, json};

/// A handler over `items`, and its store (a clone sharing the saved reports).
fn handler(items: Vec<Item>) -> (Handler<MemoryStore>, MemoryStore) {
    let env = [("TABLE_NAME", "orders"), ("REPORTS_TABLE", "reports")];
    let config = Config::from_env(&env).expect("config");
    let store = MemoryStore::new(items, 16);
    (Handler::new(store.clone(), config, 2, None), store)
}

async fn call(handler: &Handler<MemoryStore>, payload: Value) -> Result<Value, Diagnostic> {
    handler
        .handle(LambdaEvent::new(
            payload,
            lambda_runtime::Context::default(),
        ))
        .await
}

#[tokio::test]
async fn segments_then_merge_equal_one_full_scan() {
    let (w, _) = handler(arrow::items(500, 40, 9));
    let query = json!({"group_by": "customer", "from": "2026-11-05T00:00:00Z"});
    let full = call(&w, json!({"operation": "aggregate", "query": query}))
        .await
        .unwrap();
    let mut partials = Vec::new();
    for segment in (0..3).rev() {
        let p = json!({"operation": "aggregate", "query": query, "segment": segment, "total_segments": 3});
        partials.push(call(&w, p).await.unwrap());
    }
    let merged = call(&w, json!({"operation": "merge", "partials": partials}))
        .await
        .unwrap();
    assert_eq!(merged["groups"], full["groups"]);
    assert_eq!(merged["rows"], full["rows"]);
    assert_eq!(full["rows"]["scanned"], 500);
    assert!(full["rows"]["matched"].as_u64().unwrap() < 500);
}

#[tokio::test]
async fn bad_requests_get_a_clear_error_type() {
    let (w, _) = handler(Vec::new());
    for payload in [
        json!({"operation": "report"}),
        json!({"operation": "aggregate", "query": {"group_by": "day", "limit": 0}}),
        json!({"operation": "aggregate", "query": {"group_by": "day"}, "segment": 1}),
        json!({"operation": "merge", "partials": []}),
        json!({"operation": "daily_report", "day": "yesterday"}),
    ] {
        let err = call(&w, payload.clone()).await.unwrap_err();
        assert_eq!(
            err.error_type, "InvalidRequest",
            "{payload}: {}",
            err.error_message
        );
    }
}

#[tokio::test]
async fn an_empty_table_gives_an_empty_answer() {
    let (w, _) = handler(Vec::new());
    let body = call(
        &w,
        json!({"operation": "aggregate", "query": {"group_by": "day"}}),
    )
    .await
    .unwrap();
    assert_eq!(body["groups"], json!([]));
    assert_eq!(body["rows"]["scanned"], 0);
    assert_eq!(body["truncated"], false);
}

#[tokio::test]
async fn high_cardinality_is_truncated_to_the_limit_and_says_so() {
    let (w, _) = handler(arrow::items(3_000, 1_000_000, 4));
    let body = call(
        &w,
        json!({"operation": "aggregate", "query": {"group_by": "customer", "limit": 100}}),
    )
    .await
    .unwrap();
    assert_eq!(body["groups"].as_array().unwrap().len(), 100);
    assert_eq!(body["truncated"], true);
    assert!(body["groups_total"].as_u64().unwrap() > 2_900);
}

#[tokio::test]
async fn the_daily_report_is_saved_by_day() {
    let (w, store) = handler(arrow::items(200, 10, 5));
    let body = call(
        &w,
        json!({"operation": "daily_report", "day": "2026-11-03"}),
    )
    .await
    .unwrap();
    assert_eq!(body["report_id"], "daily/2026-11-03");
    let reports = store.reports();
    assert_eq!(reports.len(), 1);
    let saved: Value = serde_json::from_str(&reports[0].body).unwrap();
    assert_eq!(saved["groups"], body["groups"]);
    assert!(body["rows"]["matched"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn money_is_never_summed_across_currencies() {
    // One customer pays in EUR and in JPY, on one day; segment 0 of 2 holds
    // the EUR order, segment 1 the JPY one.
    let items = vec![
        arrow::order_item("c1", "EUR", arrow::START_MS, 100, 1),
        arrow::order_item("c1", "JPY", arrow::START_MS + 1, 5_000, 3),
    ];
    let (w, _) = handler(items);
    let stats = |v: u64| json!({"sum": v, "min": v, "max": v, "mean": v as f64});
    let expected = json!([
        {"currency": "EUR", "count": 1, "total_cents": stats(100)},
        {"currency": "JPY", "count": 1, "total_cents": stats(5_000)},
    ]);
    for group_by in ["customer", "day"] {
        let query = json!({"group_by": group_by});
        let full = call(&w, json!({"operation": "aggregate", "query": query}))
            .await
            .unwrap();
        let mut partials = Vec::new();
        for segment in 0..2 {
            let p = json!({"operation": "aggregate", "query": query, "segment": segment, "total_segments": 2});
            partials.push(call(&w, p).await.unwrap());
        }
        let merged = call(&w, json!({"operation": "merge", "partials": partials}))
            .await
            .unwrap();
        for body in [full, merged] {
            let group = &body["groups"][0];
            assert_eq!(group["count"], 2, "{group_by}: {body}");
            assert_eq!(group["money"], expected, "{group_by}: {body}");
            assert_eq!(group["quantity"]["sum"], 4);
            assert!(!body["groups"].to_string().contains("5100"), "{body}");
        }
    }
}

/// A handler with these extra settings, and its store.
fn handler_with(
    items: Vec<Item>,
    extra: &[(&'static str, &'static str)],
) -> (Handler<MemoryStore>, MemoryStore) {
    let mut env = vec![("TABLE_NAME", "orders"), ("REPORTS_TABLE", "reports")];
    env.extend_from_slice(extra);
    let config = Config::from_env(&env.as_slice()).expect("config");
    let store = MemoryStore::new(items, 64);
    (Handler::new(store.clone(), config, 2, None), store)
}

/// The references of a stored fan-out of `query` over `total` segments.
async fn stored_fan_out(
    w: &Handler<MemoryStore>,
    query: &Value,
    total: u32,
    run: &str,
) -> Vec<Value> {
    let mut refs = Vec::new();
    for segment in (0..total).rev() {
        let p = json!({"operation": "aggregate", "query": query, "segment": segment,
                       "total_segments": total, "run_id": run});
        refs.push(call(w, p).await.unwrap());
    }
    refs
}

#[tokio::test]
async fn stored_partials_merge_to_one_full_scan_at_any_cardinality() {
    // 3,000 orders of about 2,600 customers over 16 segments: inline, the
    // partials would be far past Step Functions' 256 KiB per state.
    let (w, store) = handler(arrow::items(3_000, 10_000, 11));
    let query = json!({"group_by": "customer", "limit": 20_000});
    let full = call(&w, json!({"operation": "aggregate", "query": query}))
        .await
        .unwrap();
    let mut inline_bytes = 0;
    for segment in 0..16 {
        let p = json!({"operation": "aggregate", "query": query, "segment": segment, "total_segments": 16});
        inline_bytes += call(&w, p).await.unwrap().to_string().len();
    }
    assert!(inline_bytes > 262_144, "{inline_bytes}");

    let refs = stored_fan_out(&w, &query, 16, "run-1").await;
    let ref_bytes: usize = refs.iter().map(|r| r.to_string().len()).sum();
    assert!(ref_bytes < 16 * 250, "{ref_bytes} bytes of references");
    assert_eq!(refs[0]["segment"], 15);
    let keys: Vec<String> = store.objects().into_keys().collect();
    assert_eq!(keys.len(), 16);
    assert!(
        keys[0].starts_with("partials/run-1/0000000-of-16-"),
        "{}",
        keys[0]
    );

    let merged = call(&w, merge_stored("run-1", &refs)).await.unwrap();
    assert_eq!(merged["groups"], full["groups"]);
    assert_eq!(merged["rows"], full["rows"]);
    assert!(full["groups_total"].as_u64().unwrap() > 2_000);
    eprintln!("16 segments: {inline_bytes} bytes of inline partials, {ref_bytes} of references");
}

#[tokio::test]
async fn a_stored_merge_answers_inline_only_what_fits_in_a_state() {
    // About 2,000 customers: an answer of about 0.6 MB, under Lambda's
    // response limit but past Step Functions' 256 KiB per state.
    let (w, store) = handler_with(
        arrow::items(6_000, 2_000, 15),
        &[("ANALYTICS_BUCKET", "analytics")],
    );
    let query = json!({"group_by": "customer", "limit": 20_000});
    let refs = stored_fan_out(&w, &query, 4, "big").await;
    let merged = call(&w, merge_stored("big", &refs)).await.unwrap();
    let key = merged["answer_key"]
        .as_str()
        .unwrap_or_else(|| panic!("stored: {merged}"));
    let bytes = merged["answer_bytes"].as_u64().unwrap();
    assert!((256 * 1024..6 * 1024 * 1024).contains(&bytes), "{bytes}");
    assert!(merged.to_string().len() < 2_000, "a summary only");
    assert!(store.objects().contains_key(key));
    // A small answer stays inline.
    let refs = stored_fan_out(&w, &json!({"group_by": "currency"}), 4, "small").await;
    let merged = call(&w, merge_stored("small", &refs)).await.unwrap();
    assert!(merged["answer_key"].is_null(), "{merged}");
    assert_eq!(merged["groups"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn stored_merges_refuse_missing_mixed_or_altered_partials() {
    let (w, store) = handler(arrow::items(300, 50, 12));
    let query = json!({"group_by": "day"});
    let refs = stored_fan_out(&w, &query, 3, "a").await;
    let mut altered = refs.clone();
    altered[1]["sha256"] = json!("00");
    let cases = [
        (json!([]), "none given"),
        (json!([refs[0], refs[1]]), "2 partials given for 3 segments"),
        (json!(altered), "SHA-256"),
    ];
    for (partials, expected) in cases {
        let payload = json!({"operation": "merge_stored", "run_id": "a", "partials": partials});
        let err = call(&w, payload).await.unwrap_err();
        assert!(
            err.error_message.contains(expected),
            "{expected}: {}",
            err.error_message
        );
        assert_eq!(err.error_type, "InvalidRequest");
    }
    for payload in [
        json!({"operation": "aggregate", "query": query, "run_id": "a"}),
        json!({"operation": "aggregate", "query": query, "segment": 0, "total_segments": 2, "run_id": "a\u{7}"}),
        json!({"operation": "merge_stored", "partials": refs}),
    ] {
        let err = call(&w, payload.clone()).await.unwrap_err();
        assert_eq!(err.error_type, "InvalidRequest", "{payload}");
    }
    // Another run's references, or objects that are gone (expired, a
    // redrive a day later): no retry can help, and the error says what to do.
    let (fresh, _) = handler(Vec::new());
    for (w, run) in [(&w, "b"), (&fresh, "a")] {
        let err = call(w, merge_stored(run, &refs)).await.unwrap_err();
        assert_eq!(err.error_type, "PartialMissing", "{}", err.error_message);
        assert!(
            err.error_message.contains("start a new execution"),
            "{}",
            err.error_message
        );
    }
    assert_eq!(store.objects().len(), 3);
}

/// The merge request for the references `refs` of run `run`.
fn merge_stored(run: &str, refs: &[Value]) -> Value {
    json!({"operation": "merge_stored", "run_id": run, "partials": refs})
}

#[tokio::test]
async fn any_execution_name_step_functions_allows_is_a_run_id() {
    let (w, store) = handler(arrow::items(300, 50, 12));
    let query = json!({"group_by": "currency"});
    let full = call(&w, json!({"operation": "aggregate", "query": query}))
        .await
        .unwrap();
    for run in ["report@2026+11=a(b)", "bericht-über-注文", "../.."] {
        let refs = stored_fan_out(&w, &query, 2, run).await;
        let merged = call(&w, merge_stored(run, &refs)).await.unwrap();
        assert_eq!(merged["groups"], full["groups"], "{run}");
    }
    for key in store.objects().into_keys() {
        let run = key
            .trim_start_matches("partials/")
            .split('/')
            .next()
            .unwrap_or("");
        assert!(
            run.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_~".contains(&b)),
            "{key}"
        );
    }
}

#[tokio::test]
async fn an_orphaned_attempt_never_replaces_the_partial_a_reference_names() {
    // Step Functions retries a segment whose first attempt timed out; the
    // retry stores its partial and the merge starts, then the first attempt,
    // still running on a table that changed since, stores its own.
    let (w, store) = handler(arrow::items(300, 50, 12));
    let query = json!({"group_by": "customer"});
    let refs = stored_fan_out(&w, &query, 2, "run").await;
    let changed = store.with_items(arrow::items(500, 80, 13));
    let env = [("TABLE_NAME", "orders"), ("REPORTS_TABLE", "reports")];
    let orphan = Handler::new(changed, Config::from_env(&env).expect("config"), 2, None);
    let _late = stored_fan_out(&orphan, &query, 2, "run").await;
    assert_eq!(
        store.objects().len(),
        4,
        "every attempt an object of its own"
    );
    let merged = call(&w, merge_stored("run", &refs)).await.unwrap();
    let full = call(&w, json!({"operation": "aggregate", "query": query}))
        .await
        .unwrap();
    assert_eq!(merged["groups"], full["groups"]);
}

#[tokio::test]
async fn a_merge_holds_at_most_its_byte_budget_of_partials_at_once() {
    let env = [("TABLE_NAME", "orders"), ("REPORTS_TABLE", "reports")];
    let mut config = Config::from_env(&env).expect("config");
    let store = MemoryStore::new(arrow::items(3_000, 10_000, 11), 64)
        .with_read_latency(std::time::Duration::from_millis(20));
    let w = Handler::new(store.clone(), config.clone(), 2, None);
    let query = json!({"group_by": "customer", "limit": 20_000});
    let refs = stored_fan_out(&w, &query, 16, "r").await;
    let largest = refs
        .iter()
        .filter_map(|r| r["bytes"].as_u64())
        .max()
        .unwrap_or(0);
    let full = call(&w, json!({"operation": "aggregate", "query": query}))
        .await
        .unwrap();
    // Room for two of the largest partials: two reads at once, not eight.
    config.merge_read_bytes = usize::try_from(largest * 5 / 2).unwrap_or(usize::MAX);
    let budgeted = Handler::new(store.clone(), config.clone(), 2, None);
    let merged = call(&budgeted, merge_stored("r", &refs)).await.unwrap();
    assert_eq!(merged["groups"], full["groups"]);
    let most = store.most_bytes_read_at_once();
    assert!(
        most > largest && most <= largest * 5 / 2,
        "{most} bytes read at once, budget {}",
        config.merge_read_bytes
    );
    // A partial larger than the whole budget: refused before any read, with
    // an error type the state machine does not retry.
    config.merge_read_bytes = usize::try_from(largest - 1).unwrap_or(0);
    let small = Handler::new(store.clone(), config, 2, None);
    let err = call(&small, merge_stored("r", &refs)).await.unwrap_err();
    assert_eq!(err.error_type, "MergeTooLarge", "{}", err.error_message);
}

#[tokio::test]
async fn an_answer_over_six_mb_is_stored_and_answered_by_its_key() {
    // 20,000 customers paying in up to three currencies: about 7 MB of answer.
    let items = arrow::items(80_000, 20_000, 14);
    let payload =
        json!({"operation": "aggregate", "query": {"group_by": "customer", "limit": 20_000}});
    let mut context = lambda_runtime::Context::default();
    context.request_id = "req-1".into();

    let (without, _) = handler(items.clone());
    let err = without
        .handle(LambdaEvent::new(payload.clone(), context.clone()))
        .await
        .unwrap_err();
    assert_eq!(err.error_type, "AnswerTooLarge", "{}", err.error_message);

    let (w, store) = handler_with(items, &[("ANALYTICS_BUCKET", "analytics")]);
    let body = w.handle(LambdaEvent::new(payload, context)).await.unwrap();
    assert_eq!(body["answer_key"], "answers/req-1.json");
    assert!(
        body.get("groups").is_none(),
        "the groups are in the object only"
    );
    assert!(body["answer_bytes"].as_u64().unwrap() > 6 * 1024 * 1024);
    let object = store
        .objects()
        .remove("answers/req-1.json")
        .expect("stored answer");
    let answer: Value = serde_json::from_slice(&object).unwrap();
    let groups = answer["groups"].as_array().unwrap().len() as u64;
    assert!(groups > 19_000, "{groups}");
    assert_eq!(answer["groups_total"], groups);
    assert_eq!(body["groups_total"], groups);
}

/// A partial whose write landed but whose answer was lost meets S3's 412 on
/// the SDK's retry: the object there is its own (same SHA-256), so the
/// segment succeeds and the merge reads it; another object there is
/// refused, never replaced.
#[tokio::test]
async fn a_partial_met_by_412_is_its_own_when_its_sha_256_matches() {
    use arrow_worker_testkit::orders::Occupied;
    let query = json!({"group_by": "customer"});
    let (w, _) = handler(arrow::items(300, 50, 5));
    let expected = call(&w, json!({"operation": "aggregate", "query": query}))
        .await
        .unwrap();
    let store = MemoryStore::new(arrow::items(300, 50, 5), 50)
        .with_occupied_keys(Occupied::ByItsOwnFirstAttempt);
    let env = [("TABLE_NAME", "orders"), ("REPORTS_TABLE", "reports")];
    let config = Config::from_env(&env).expect("config");
    let w = Handler::new(store.clone(), config.clone(), 2, None);
    let refs = stored_fan_out(&w, &query, 2, "run-412").await;
    let merged = call(&w, merge_stored("run-412", &refs)).await.unwrap();
    assert_eq!(merged["groups"], expected["groups"]);

    let store = MemoryStore::new(arrow::items(300, 50, 5), 50)
        .with_occupied_keys(Occupied::ByAnotherObject);
    let w = Handler::new(store.clone(), config, 2, None);
    let segment = json!({"operation": "aggregate", "query": query, "segment": 0,
                         "total_segments": 2, "run_id": "run-412"});
    let err = w
        .handle(LambdaEvent::new(
            segment,
            lambda_runtime::Context::default(),
        ))
        .await
        .unwrap_err();
    assert_eq!(err.error_type, "InternalError", "{err:?}");
    let objects = store.objects();
    assert!(objects.values().all(|bytes| bytes == b"another object"));
}

#[tokio::test]
async fn work_past_the_deadline_fails_with_deadline_too_short() {
    let (w, store) = handler(arrow::items(200, 10, 5));
    let query = json!({"group_by": "day"});
    let refs = stored_fan_out(&w, &query, 2, "run-late").await;
    // An invocation whose deadline is already past (1 ms after the epoch).
    let mut late = lambda_runtime::Context::default();
    late.deadline = 1;
    let read_before = store.items_read();
    for payload in [
        json!({"operation": "aggregate", "query": query}),
        json!({"operation": "aggregate", "query": query, "segment": 0, "total_segments": 2, "run_id": "run-2"}),
        json!({"operation": "daily_report", "day": "2026-11-12"}),
        merge_stored("run-late", &refs),
    ] {
        let err = w
            .handle(LambdaEvent::new(payload.clone(), late.clone()))
            .await
            .unwrap_err();
        assert_eq!(err.error_type, "DeadlineTooShort", "{payload}: {err:?}");
        assert!(err.error_message.contains("deadline"), "{err:?}");
    }
    assert_eq!(store.items_read(), read_before, "no page read after it");
    // A request refused as sent still says why, deadline or not.
    let bad = json!({"operation": "aggregate", "query": {"group_by": "day", "limit": 0}});
    let err = w.handle(LambdaEvent::new(bad, late)).await.unwrap_err();
    assert_eq!(err.error_type, "InvalidRequest");
}

/// The `rows.matched` of the saved report `id`, and whether it is final.
fn saved(store: &MemoryStore, id: &str) -> (u64, bool) {
    let (body, is_final) = report(store, id);
    (body["rows"]["matched"].as_u64().unwrap_or(0), is_final)
}

/// The saved body of report `id`, and whether it is final.
fn report(store: &MemoryStore, id: &str) -> (Value, bool) {
    let report = store
        .reports()
        .into_iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no report {id}"));
    let body = serde_json::from_str(&report.body).expect("JSON");
    (body, report.is_final)
}

#[tokio::test]
async fn a_scheduled_report_takes_its_day_from_the_schedule_and_computes_late_days_again() {
    // Orders over November 2026; the run scheduled for Nov 4, 00:15 UTC
    // (which the clock is long past).
    let (w, store) = handler(arrow::items(600, 10, 5));
    let scheduled = json!({"operation": "daily_report", "scheduled_time": "2026-11-04T00:15:00Z"});
    let body = call(&w, scheduled).await.unwrap();
    assert_eq!(body["report_id"], "daily/2026-11-03");
    assert_eq!(
        body["recomputed"],
        json!(["daily/2026-11-02", "daily/2026-11-01"])
    );
    assert_eq!(body["as_of"], "2026-11-04T00:15:00Z");
    assert_eq!(body["final"], false);
    let reports = store.reports();
    assert_eq!(reports.len(), 3);
    assert!(reports.iter().all(|r| r.as_of == "2026-11-04T00:15:00Z"));
    let scheduled: Vec<_> = ["01", "02", "03"]
        .map(|day| saved(&store, &format!("daily/2026-11-{day}")))
        .into();
    let finals: Vec<bool> = scheduled.iter().map(|(_, f)| *f).collect();
    assert_eq!(
        finals,
        [true, false, false],
        "Nov 1 is computed for the last time"
    );
    for (day, (matched, _)) in ["01", "02", "03"].into_iter().zip(scheduled) {
        let by_hand = json!({"operation": "daily_report", "day": format!("2026-11-{day}")});
        let by_hand = call(&w, by_hand).await.unwrap();
        assert!(matched > 0, "{day}");
        assert_eq!(by_hand["rows"]["matched"], matched, "{day}");
    }
}

#[tokio::test]
async fn an_order_stored_after_its_days_report_is_counted_by_a_later_run() {
    let items = arrow::items(600, 10, 5);
    let (w, store) = handler(items.clone());
    let run = |at: &str| json!({"operation": "daily_report", "scheduled_time": at});
    call(&w, run("2026-11-04T00:15:00Z")).await.unwrap();
    let (before, _) = saved(&store, "daily/2026-11-03");
    // An order created at 23:59:50 on Nov 3, stored after the report ran
    // (its delivery retried, a backlog, a redrive).
    let ms = arrow::START_MS + 3 * arrow::DAY_MS - 10_000;
    let mut late = arrow::order_item("cust-late", "EUR", ms, 1_234, 1);
    let id = "ord-late-1";
    let shard = shared::orders::day_shard(id, ms).expect("a day");
    late.insert(
        "day_shard".into(),
        aws_sdk_dynamodb::types::AttributeValue::S(shard),
    );
    late.insert(
        "order_id".into(),
        aws_sdk_dynamodb::types::AttributeValue::S(id.into()),
    );
    let mut stored_late = items;
    stored_late.push(late);
    let env = [("TABLE_NAME", "orders"), ("REPORTS_TABLE", "reports")];
    let later = Handler::new(
        store.with_items(stored_late),
        Config::from_env(&env).expect("config"),
        2,
        None,
    );
    call(&later, run("2026-11-05T00:15:00Z")).await.unwrap();
    assert_eq!(saved(&store, "daily/2026-11-03"), (before + 1, false));
    call(&later, run("2026-11-06T00:15:00Z")).await.unwrap();
    assert_eq!(saved(&store, "daily/2026-11-03"), (before + 1, true));
}

/// A run replayed after a later one (a dead letter redriven, a late merge)
/// leaves the later report; a final report stays final.
#[tokio::test]
async fn an_out_of_order_replay_never_replaces_a_later_or_final_report() {
    let (w, store) = handler(arrow::items(600, 10, 5));
    let run = |at: &str| json!({"operation": "daily_report", "scheduled_time": at});
    let as_of = |store: &MemoryStore| {
        let saved = store.reports();
        let report = saved
            .iter()
            .find(|r| r.id == "daily/2026-11-03")
            .expect("saved");
        (report.as_of.clone(), report.is_final)
    };
    call(&w, run("2026-11-05T00:15:00Z")).await.unwrap();
    assert_eq!(as_of(&store), ("2026-11-05T00:15:00Z".to_owned(), false));
    // The run of the day before, replayed: its report of Nov 3 is older.
    call(&w, run("2026-11-04T00:15:00Z")).await.unwrap();
    assert_eq!(as_of(&store), ("2026-11-05T00:15:00Z".to_owned(), false));
    // The last run of Nov 3 makes it final; a replay of an earlier run after
    // it changes nothing.
    call(&w, run("2026-11-06T00:15:00Z")).await.unwrap();
    assert_eq!(as_of(&store), ("2026-11-06T00:15:00Z".to_owned(), true));
    call(&w, run("2026-11-05T00:15:00Z")).await.unwrap();
    assert_eq!(as_of(&store), ("2026-11-06T00:15:00Z".to_owned(), true));
}

#[tokio::test]
async fn a_day_of_more_orders_than_max_rows_is_reported_page_by_page() {
    // About 20 orders a day, MAX_ROWS 5: a scan of them is refused, the
    // report (memory by groups, not rows) is not.
    let (w, store) = handler_with(arrow::items(600, 10, 5), &[("MAX_ROWS", "5")]);
    let body = call(
        &w,
        json!({"operation": "daily_report", "day": "2026-11-03"}),
    )
    .await
    .unwrap();
    let matched = body["rows"]["matched"].as_u64().unwrap_or(0);
    assert!(matched > 5, "{matched}");
    assert_eq!(saved(&store, "daily/2026-11-03").0, matched);
    let scan = json!({"operation": "aggregate", "query": {"group_by": "currency"}});
    assert_eq!(call(&w, scan).await.unwrap_err().error_type, "TooManyRows");
}

#[tokio::test]
async fn a_day_one_invocation_cannot_read_is_fanned_out_and_saved_by_its_merge() {
    let items = arrow::items(600, 10, 5);
    // The same days read by one invocation each, for comparison.
    let (direct, direct_store) = handler(items.clone());
    let scheduled = json!({"operation": "daily_report", "scheduled_time": "2026-11-04T00:15:00Z"});
    call(&direct, scheduled.clone()).await.unwrap();
    // No time to read a day itself: every day is handed to the state machine.
    let arn = "arn:aws:states:us-east-1:123456789012:stateMachine:local-orders-report";
    let (w, store) = handler_with(
        items,
        &[
            ("REPORT_STATE_MACHINE_ARN", arn),
            ("REPORT_DAY_SECONDS", "0"),
        ],
    );
    let started = call(&w, scheduled.clone()).await.unwrap();
    assert!(started.get("groups").is_none(), "{started}");
    assert_eq!(started["report_id"], "daily/2026-11-03");
    let fanned_out = started["fanned_out"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ids: Vec<&str> = fanned_out
        .iter()
        .filter_map(|f| f["report_id"].as_str())
        .collect();
    assert_eq!(
        ids,
        ["daily/2026-11-03", "daily/2026-11-02", "daily/2026-11-01"]
    );
    assert!(
        store.reports().is_empty(),
        "nothing saved by the run itself"
    );
    // A retry of the run starts the same executions, no others.
    call(&w, scheduled).await.unwrap();
    let executions = store.fan_outs();
    assert_eq!(executions.len(), 3, "{executions:?}");
    assert_eq!(executions[0].0, "daily-2026-11-03-20261104T001500Z");

    // What the state machine does with each input: a segment per shard and
    // slice, then the merge, which saves the report.
    for (name, input) in &executions {
        let input: Value = serde_json::from_str(input).unwrap();
        let total = input["total_segments"].as_u64().unwrap();
        assert_eq!(total, 4, "one slice per shard when no page was read");
        for total in [total, total * 3] {
            let run = format!("{name}-{total}");
            let mut refs = Vec::new();
            for segment in 0..total {
                let p = json!({"operation": "aggregate", "query": {"group_by": "currency"},
                               "day": input["report"]["day"], "segment": segment,
                               "total_segments": total, "run_id": run});
                refs.push(call(&w, p).await.unwrap());
            }
            let merge = json!({"operation": "merge_stored", "run_id": run,
                               "partials": refs, "report": input["report"]});
            let merged = call(&w, merge).await.unwrap();
            let id = merged["report_id"].as_str().unwrap().to_owned();
            assert_eq!(merged["as_of"], "2026-11-04T00:15:00Z");
            let ((body, _), (expected, _)) = (report(&store, &id), report(&direct_store, &id));
            assert_eq!(body["groups"], expected["groups"], "{id} in {total}");
            assert_eq!(body["rows"]["matched"], expected["rows"]["matched"]);
            assert_eq!(body["query"], expected["query"]);
            assert_eq!(saved(&store, &id).1, saved(&direct_store, &id).1, "final");
        }
    }
    // A segment count that does not cut the day into whole slices is refused.
    let p = json!({"operation": "aggregate", "query": {"group_by": "currency"},
                   "day": "2026-11-03", "segment": 0, "total_segments": 6, "run_id": "r"});
    assert_eq!(call(&w, p).await.unwrap_err().error_type, "InvalidRequest");
}

#[tokio::test]
async fn without_a_state_machine_the_run_reads_a_day_whatever_its_share_of_the_time() {
    let (w, store) = handler_with(arrow::items(600, 10, 5), &[("REPORT_DAY_SECONDS", "0")]);
    // Its share of the time only matters when the day can be handed on.
    let body = call(
        &w,
        json!({"operation": "daily_report", "day": "2026-11-03"}),
    )
    .await
    .unwrap();
    assert!(body["rows"]["matched"].as_u64().unwrap_or(0) > 0, "{body}");
    assert!(store.fan_outs().is_empty());
}

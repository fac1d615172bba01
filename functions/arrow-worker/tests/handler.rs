//! The handler end to end over an in-memory table: segments + merge equal one
//! full scan, bad requests get `InvalidRequest`, an empty table and a
//! high-cardinality grouping, and the daily report saved by day.

use arrow_worker::columns::Item;
use arrow_worker::config::Config;
use arrow_worker::handler::Handler;
use lambda_runtime::{Diagnostic, LambdaEvent};
use serde_json::{Value, json};
use testkit::arrow::{self, MemoryStore};

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
    let saved: Value = serde_json::from_str(&reports[0].1).unwrap();
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

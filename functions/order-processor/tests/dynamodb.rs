//! `DynamoStore` through the SDK against a canned DynamoDB on a loopback
//! port (`FakeDynamoDb`): what the handler makes of what DynamoDB answers.
//! The end-to-end files in the top-level `tests/` folder use DynamoDB Local.

use aws_lambda_events::sqs::SqsMessage;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use order_processor::config::Config;
use order_processor::dynamodb::{CONNECTION_CHECK_ID, DynamoStore};
use order_processor::handler::{BatchReport, Handler, Outcome};
use order_processor_testkit::dead_letters::{self, MemoryDeadLetters};
use serde_json::{Value, json};
use shared::invocation::Deadline;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What the fake answers a request: the operation (`PutItem`) and the JSON
/// body in, an HTTP status and a JSON body out.
type Answer = dyn Fn(&str, &Value) -> (u16, Value) + Send + Sync;

/// DynamoDB on a loopback port, one thread per connection, answering every
/// request with `answer`; it keeps the requests, in order.
struct FakeDynamoDb {
    endpoint: String,
    requests: Arc<Mutex<Vec<(String, Value)>>>,
}

impl FakeDynamoDb {
    fn start(answer: impl Fn(&str, &Value) -> (u16, Value) + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let answer: Arc<Answer> = Arc::new(answer);
        let kept = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (kept, answer) = (Arc::clone(&kept), Arc::clone(&answer));
                std::thread::spawn(move || serve(stream, &kept, answer.as_ref()));
            }
        });
        Self { endpoint, requests }
    }

    fn requests(&self) -> Vec<(String, Value)> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn client(&self) -> aws_sdk_dynamodb::Client {
        client(&self.endpoint)
    }
}

/// A client as `main.rs` builds it (the functions' HTTP client, no SDK
/// retries) for `endpoint`.
fn client(endpoint: &str) -> aws_sdk_dynamodb::Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(endpoint)
        .http_client(shared::aws::https_client())
        .retry_config(RetryConfig::disabled())
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

/// HTTP/1.1 requests on one connection, until the client closes it.
fn serve(stream: TcpStream, kept: &Mutex<Vec<(String, Value)>>, answer: &Answer) {
    let mut writer = stream.try_clone().expect("stream");
    let mut reader = BufReader::new(stream);
    loop {
        let mut headers = HashMap::new();
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let Some((name, value)) = line.trim_end().split_once(':') else {
                break;
            };
            headers.insert(name.to_ascii_lowercase(), value.trim().to_owned());
        }
        let length = headers
            .get("content-length")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let request = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let operation = headers
            .get("x-amz-target")
            .and_then(|t| t.rsplit('.').next())
            .unwrap_or_default()
            .to_owned();
        let (status, reply) = answer(&operation, &request);
        kept.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((operation, request));
        let reply = reply.to_string();
        let response = format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: {}\r\n\r\n{reply}",
            if status == 200 { "OK" } else { "Bad Request" },
            reply.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// DynamoDB's answer to a conditional write whose condition failed, with the
/// item it found (`ReturnValuesOnConditionCheckFailure=ALL_OLD`).
fn condition_failed(item: Value) -> (u16, Value) {
    (
        400,
        json!({
            "__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
            "message": "The conditional request failed",
            "Item": item,
        }),
    )
}

fn config() -> Config {
    Config::from_env(&[
        ("TABLE_NAME", "orders"),
        ("DEAD_LETTER_QUEUE_URL", dead_letters::QUEUE_URL),
    ])
    .expect("config")
}

fn order_body(id: &str) -> String {
    format!(
        r#"{{"order_id":"{id}","customer_id":"c","items":[{{"sku":"A-1","quantity":2,"unit_price_cents":250}}],"total_cents":500,"currency":"EUR","created_at":"2026-11-20T09:15:00Z"}}"#
    )
}

fn fifo_record(id: &str, body: String, group: &str) -> SqsMessage {
    let mut m = SqsMessage::default();
    m.message_id = Some(id.to_owned());
    m.body = Some(body);
    m.attributes = HashMap::from([("MessageGroupId".to_owned(), group.to_owned())]);
    m.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:orders.fifo".to_owned());
    m
}

fn class_of(report: &BatchReport, id: &str) -> Option<&'static str> {
    report.outcomes.iter().find_map(|(m, o)| match o {
        Outcome::Failed(f) if m == id => Some(f.class()),
        _ => None,
    })
}

/// After a rollback, an order a newer release stored (in a `hash_version`
/// this release does not know) is delivered again: neither "the same order"
/// nor provably a conflict. The record is reported failed, for SQS to deliver
/// it again once the newer release runs, and it holds its FIFO group; nothing
/// is dead-lettered, nothing written.
#[tokio::test]
async fn an_order_stored_by_a_newer_release_is_reported_failed_and_holds_its_group() {
    let dynamodb = FakeDynamoDb::start(|_, request| {
        let id = &request["Item"]["order_id"];
        if id["S"] != "o-a1" {
            return (200, json!({}));
        }
        condition_failed(json!({
            "order_id": id,
            "content_hash": {"S": "9".repeat(64)},
            "hash_version": {"N": "2"},
        }))
    });
    let h = Handler::new(
        DynamoStore::new(dynamodb.client(), "orders"),
        MemoryDeadLetters::new(),
        &config(),
    );
    let records = [
        fifo_record("a1", order_body("o-a1"), "A"),
        fifo_record("a2", order_body("o-a2"), "A"),
        fifo_record("b1", order_body("o-b1"), "B"),
    ];
    let deadline = Deadline::at(Instant::now() + Duration::from_secs(10));
    let report = h.process(&records, deadline).await.expect("report");
    assert_eq!(
        class_of(&report, "a1"),
        Some("unknown_hash_version"),
        "{report:?}"
    );
    assert_eq!(class_of(&report, "a2"), Some("fifo_blocked"));
    assert_eq!(report.outcomes[2], ("b1".to_owned(), Outcome::Stored));
    assert!(h.dead_letters().sent().is_empty());
    // One PutItem for o-a1, not retried; none for o-a2 (groups A and B
    // write at the same time: in either order).
    let mut written: Vec<_> = dynamodb
        .requests()
        .iter()
        .map(|(operation, request)| {
            assert_eq!(operation, "PutItem");
            request["Item"]["order_id"]["S"].as_str().map(str::to_owned)
        })
        .collect::<Option<_>>()
        .expect("order ids");
    written.sort();
    assert_eq!(written, ["o-a1", "o-b1"]);
}

/// The connections opened at init read one key no order has, the key alone:
/// a data-plane call that changes nothing. An error answer (here: access
/// denied) opened the connection all the same; no answer did not.
#[tokio::test]
async fn the_connection_check_reads_a_key_no_order_has() {
    let denied = json!({
        "__type": "com.amazon.coral.service#AccessDeniedException",
        "message": "not authorized",
    });
    let dynamodb = FakeDynamoDb::start(move |_, _| (400, denied.clone()));
    assert!(
        DynamoStore::new(dynamodb.client(), "orders")
            .answers()
            .await
    );
    assert_eq!(
        dynamodb.requests(),
        [(
            "GetItem".to_owned(),
            json!({
                "TableName": "orders",
                "Key": {"order_id": {"S": CONNECTION_CHECK_ID}},
                "ProjectionExpression": "#id",
                "ExpressionAttributeNames": {"#id": "order_id"},
            })
        )]
    );
    assert!(order_processor::order::parse(&order_body(CONNECTION_CHECK_ID)).is_err());
    // Nobody listens on a port just released.
    let closed = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let endpoint = format!("http://{}", closed.local_addr().expect("address"));
    drop(closed);
    assert!(
        !DynamoStore::new(client(&endpoint), "orders")
            .answers()
            .await
    );
}

/// DynamoDB throttles its control plane (`DescribeTable` and the like)
/// account-wide, at 2,500 requests a second: the function calls the data
/// plane only, also to open its connections at init, however many
/// environments start at once. (SQS's `GetQueueUrl` and `GetQueueAttributes`
/// are not needed either: the queue's URL is a setting.)
#[test]
fn no_control_plane_call_is_made() {
    const CONTROL_PLANE: [&str; 6] = [
        ".describe_",
        ".list_",
        ".create_",
        ".update_table",
        ".delete_table",
        ".get_queue_",
    ];
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut dirs = vec![src];
    let mut calls = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            for (n, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if !code.starts_with("//") && CONTROL_PLANE.iter().any(|c| code.contains(c)) {
                    calls.push(format!("{}:{}: {code}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(
        calls.is_empty(),
        "control-plane calls:\n{}",
        calls.join("\n")
    );
}

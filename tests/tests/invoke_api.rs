//! The local Lambda Invoke API driven by boto3's Lambda client, as a
//! developer's script or the AWS CLI drives Lambda: synchronous invocations
//! and function errors, dry runs, unknown functions and qualifiers, `Tail`
//! logs, payloads past 6 MB, throttling past reserved concurrency, concurrent
//! calls, asynchronous invocations (once on success; on failure Lambda's
//! retries, then the function's dead-letter queue with Lambda's attributes),
//! and the refusals that keep web pages out (another `Host`, any `Origin`)
//! while hundreds of idle connections stay open.

use e2e::LocalQueues;
use local_stack::async_invoke::{Config, DeadLetter};
use local_stack::elasticmq::take_all;
use local_stack::lambda_api::{LambdaApi, Served};
use local_stack::pool::{Overflow, Pool, Size};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A boto3 Lambda client in a Python process: each line in is one `Invoke`
/// (run on a thread of its own, so calls overlap), each line out its outcome.
const BOTO3_HELPER: &str = r#"
import base64, json, sys, threading
import boto3, botocore
from botocore.config import Config
client = boto3.client(
    "lambda", endpoint_url=sys.argv[1], region_name="us-east-1",
    aws_access_key_id="local", aws_secret_access_key="local",
    config=Config(retries={"total_max_attempts": 1}, read_timeout=120,
                  connect_timeout=5, max_pool_connections=32))
lock = threading.Lock()

def run(op):
    args = {"FunctionName": op["function"]}
    if "payload" in op:
        args["Payload"] = op["payload"].encode()
    if "size" in op:
        args["Payload"] = b"x" * op["size"]
    for key in ("InvocationType", "LogType", "Qualifier", "ClientContext"):
        if key in op:
            args[key] = op[key]
    try:
        r = client.invoke(**args)
        out = {"status": r["StatusCode"], "function_error": r.get("FunctionError"),
               "executed_version": r.get("ExecutedVersion"),
               "request_id": r["ResponseMetadata"].get("RequestId"),
               "payload": r["Payload"].read().decode(errors="replace")}
        if "LogResult" in r:
            out["log"] = base64.b64decode(r["LogResult"]).decode(errors="replace")
    except botocore.exceptions.ClientError as e:
        out = {"class": type(e).__name__, "code": e.response["Error"].get("Code"),
               "http_status": e.response["ResponseMetadata"].get("HTTPStatusCode"),
               "message": e.response["Error"].get("Message")}
    except Exception as e:
        out = {"exception": "%s: %s" % (type(e).__name__, e)}
    out["id"] = op["id"]
    with lock:
        print(json.dumps(out), flush=True)

for line in sys.stdin:
    threading.Thread(target=run, args=(json.loads(line),), daemon=True).start()
"#;

/// The helper process, stopped on drop.
struct Boto3 {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    /// Answers read while waiting for another.
    early: HashMap<u64, Value>,
    next: u64,
}

impl Boto3 {
    fn start(endpoint: &str) -> Self {
        let python = local_stack::tools::venv_bin().join("python");
        let mut child = Command::new(&python)
            .args(["-c", BOTO3_HELPER, endpoint])
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
            .env_remove("AWS_PROFILE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
        let input = child.stdin.take().expect("stdin");
        let output = BufReader::new(child.stdout.take().expect("stdout"));
        Self {
            child,
            input,
            output,
            early: HashMap::new(),
            next: 0,
        }
    }

    /// Start `Invoke` with `op` (`function`, `payload` or `size`, and any of
    /// `InvocationType`, `LogType`, `Qualifier`, `ClientContext`); its id.
    fn send(&mut self, mut op: Value) -> u64 {
        self.next += 1;
        op["id"] = json!(self.next);
        writeln!(self.input, "{op}").expect("to boto3");
        self.input.flush().expect("to boto3");
        self.next
    }

    /// The outcome of call `id`.
    fn wait(&mut self, id: u64) -> Value {
        loop {
            if let Some(answer) = self.early.remove(&id) {
                assert!(answer.get("exception").is_none(), "{answer}");
                return answer;
            }
            let mut line = String::new();
            let read = self.output.read_line(&mut line).expect("from boto3");
            assert!(read > 0, "the boto3 helper ended");
            let answer: Value = serde_json::from_str(&line).expect("JSON from boto3");
            let of = answer["id"].as_u64().expect("an id");
            self.early.insert(of, answer);
        }
    }

    fn call(&mut self, op: Value) -> Value {
        let id = self.send(op);
        self.wait(id)
    }
}

impl Drop for Boto3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An event the test function answers `ms` milliseconds later.
fn sleep_event(ms: u64) -> String {
    json!({ "sleep_ms": ms }).to_string()
}

/// The name the test function is served under.
const F: &str = "FixtureFunction";

/// The test function in a pool of `environments`, behind its own API.
fn served(environments: usize, overflow: Overflow) -> (Arc<Pool>, LambdaApi) {
    let pool = Arc::new(e2e::fixture_pool(
        &[],
        Size {
            environments,
            overflow,
        },
    ));
    let api = LambdaApi::start(vec![Served {
        names: vec![F.into(), "fixture_function".into()],
        pool: Arc::clone(&pool),
    }])
    .unwrap_or_else(|e| panic!("{e}"));
    (pool, api)
}

/// `REPORT` lines the pool's idle environments logged: invocations that ended.
fn reports(pool: &Pool) -> usize {
    pool.logs().matches("REPORT RequestId:").count()
}

fn until(what: &str, limit: Duration, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "not within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn boto3_gets_lambdas_answers_for_synchronous_calls_dry_runs_and_refusals() {
    let (_pool, api) = served(2, Overflow::Wait);
    let mut boto3 = Boto3::start(&api.endpoint());
    let f = F;

    let ok = boto3.call(json!({"function": f, "payload": sleep_event(1)}));
    assert_eq!(ok["status"], 200, "{ok}");
    assert_eq!(ok["function_error"], Value::Null, "{ok}");
    assert_eq!(ok["executed_version"], "$LATEST", "{ok}");
    let answer: Value =
        serde_json::from_str(ok["payload"].as_str().expect("payload")).expect("JSON");
    assert_eq!(answer["invocation"], 1, "{answer}");

    let error = boto3.call(json!({"function": f, "payload": r#"{"fail":"on purpose"}"#}));
    assert_eq!(error["status"], 200, "{error}");
    assert_eq!(error["function_error"], "Unhandled", "{error}");
    assert!(
        error["payload"]
            .as_str()
            .is_some_and(|p| p.contains("errorType")),
        "{error}"
    );

    let dry = boto3.call(json!({"function": f, "payload": "{}", "InvocationType": "DryRun"}));
    assert_eq!(dry["status"], 204, "{dry}");

    for unknown in [
        json!({"function": "NoSuchFunction", "payload": "{}"}),
        json!({"function": "NoSuchFunction", "payload": "{}", "InvocationType": "DryRun"}),
        json!({"function": f, "payload": "{}", "Qualifier": "1"}),
    ] {
        let refused = boto3.call(unknown);
        assert_eq!(refused["class"], "ResourceNotFoundException", "{refused}");
        assert_eq!(refused["http_status"], 404, "{refused}");
    }
    let latest =
        boto3.call(json!({"function": f, "payload": sleep_event(1), "Qualifier": "$LATEST"}));
    assert_eq!(latest["status"], 200, "{latest}");

    let tail = boto3.call(json!({"function": f, "payload": sleep_event(1), "LogType": "Tail"}));
    let log = tail["log"]
        .as_str()
        .unwrap_or_else(|| panic!("no LogResult: {tail}"));
    assert!(log.len() <= 4096, "{log}");
    assert!(
        log.trim_end()
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("REPORT RequestId:")),
        "{log}"
    );
    assert_eq!(
        log.matches("REPORT RequestId:").count(),
        1,
        "this invocation's only: {log}"
    );

    let big = boto3.call(json!({"function": f, "size": 7 * 1024 * 1024}));
    assert_eq!(big["http_status"], 413, "{big}");
    assert_eq!(big["code"], "RequestEntityTooLargeException", "{big}");
    assert!(
        big["message"]
            .as_str()
            .is_some_and(|m| m.contains("Request must be smaller than 6291456 bytes")),
        "{big}"
    );

    concurrent_calls_are_each_answered(&mut boto3);
}

/// Calls at once, more than the pool's environments: each answered.
fn concurrent_calls_are_each_answered(boto3: &mut Boto3) {
    let ids: Vec<u64> = (0..6)
        .map(|_| boto3.send(json!({"function": "fixture_function", "payload": sleep_event(200)})))
        .collect();
    for id in ids {
        let answer = boto3.wait(id);
        assert_eq!(answer["status"], 200, "{answer}");
        assert_eq!(answer["function_error"], Value::Null, "{answer}");
    }
}

#[test]
fn past_reserved_concurrency_boto3_gets_too_many_requests() {
    let (pool, api) = served(1, Overflow::Throttle);
    let mut boto3 = Boto3::start(&api.endpoint());
    // A slow invocation holds the only environment (cold start included)...
    let slow = boto3.send(json!({"function": F, "payload": sleep_event(3_000)}));
    until("the slow call to start", Duration::from_secs(20), || {
        pool.busy() > 0
    });
    // ...so a second one is throttled.
    let throttled = boto3.call(json!({"function": F, "payload": sleep_event(1)}));
    assert_eq!(
        throttled["class"], "TooManyRequestsException",
        "{throttled}"
    );
    assert_eq!(throttled["http_status"], 429, "{throttled}");
    let slow = boto3.wait(slow);
    assert_eq!(slow["status"], 200, "{slow}");
}

/// Lambda's default `MaximumRetryAttempts` of an asynchronous invocation.
const ASYNC_RETRIES: u32 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_event_is_retried_then_ends_in_the_dead_letter_queue_with_lambdas_attributes() {
    let queues = LocalQueues::start(30).await;
    let dlq_url = queues
        .client
        .create_queue()
        .queue_name("fixture-dead-letters")
        .send()
        .await
        .expect("CreateQueue")
        .queue_url
        .expect("a queue URL");
    let worker = Arc::new(e2e::fixture_pool(
        &[],
        Size {
            environments: 1,
            overflow: Overflow::Wait,
        },
    ));
    let api = LambdaApi::start_with(vec![(
        Served {
            names: vec![F.into()],
            pool: Arc::clone(&worker),
        },
        Config {
            retries: ASYNC_RETRIES,
            // A client of its own: the API runs on a runtime of its own.
            dead_letter: Some(DeadLetter {
                sqs: queues.server.client(),
                queue_url: dlq_url.clone(),
            }),
            delay: Duration::from_millis(50),
        },
    )])
    .unwrap_or_else(|e| panic!("{e}"));
    let mut boto3 = Boto3::start(&api.endpoint());
    let payload = json!({"fail": "every attempt"}).to_string();
    let accepted =
        boto3.call(json!({"function": F, "payload": payload, "InvocationType": "Event"}));
    assert_eq!(accepted["status"], 202, "{accepted}");
    let request_id = accepted["request_id"]
        .as_str()
        .expect("a request id")
        .to_owned();

    let started = Instant::now();
    let mut letters = Vec::new();
    while letters.is_empty() && started.elapsed() < Duration::from_secs(60) {
        letters = take_all(&queues.client, &dlq_url).await.expect("receive");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_lambdas_dead_letter(&letters[0], &payload, &request_id);
    // The first attempt and Lambda's retries, no more.
    let attempts = usize::try_from(ASYNC_RETRIES).expect("retries") + 1;
    until(
        "the attempts' REPORT lines",
        Duration::from_secs(10),
        || reports(&worker) == attempts,
    );
}

/// `letter` is `payload` as Lambda dead-letters it after the invocation
/// `request_id` failed with a function error.
fn assert_lambdas_dead_letter(
    letter: &aws_sdk_sqs::types::Message,
    payload: &str,
    request_id: &str,
) {
    assert_eq!(letter.body(), Some(payload));
    let attribute = |name: &str| {
        let value = letter
            .message_attributes()
            .and_then(|a| a.get(name))
            .unwrap_or_else(|| panic!("no attribute {name}: {letter:?}"));
        (
            value.data_type().to_owned(),
            value.string_value().unwrap_or_default().to_owned(),
        )
    };
    assert_eq!(
        attribute("RequestID"),
        ("String".into(), request_id.to_owned())
    );
    assert_eq!(attribute("ErrorCode"), ("Number".into(), "200".into()));
    let (kind, message) = attribute("ErrorMessage");
    assert_eq!(kind, "String");
    assert!(!message.is_empty() && message.len() <= 1024, "{message}");
}

#[test]
fn a_succeeding_event_is_accepted_at_once_and_runs_once() {
    let (pool, api) = served(1, Overflow::Wait);
    let mut boto3 = Boto3::start(&api.endpoint());
    let accepted = boto3.call(
        json!({"function": "fixture_function", "payload": sleep_event(1), "InvocationType": "Event"}),
    );
    assert_eq!(accepted["status"], 202, "{accepted}");
    assert_eq!(accepted["payload"], "", "{accepted}");
    until("the event to run", Duration::from_secs(20), || {
        reports(&pool) == 1
    });
    // Not retried: still one a while later.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(reports(&pool), 1);
}

/// Send a raw request and read the status code of the answer.
fn raw_status(port: u16, request: &str) -> u16 {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    stream.write_all(request.as_bytes()).expect("write");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status: {answer:?}"))
}

#[test]
fn web_pages_and_other_hosts_are_refused_and_idle_connections_do_not_starve_calls() {
    let (_pool, api) = served(1, Overflow::Wait);
    let port = api
        .endpoint()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port");
    let body = sleep_event(1);
    let request = |extra: &str| {
        format!(
            "POST /2015-03-31/functions/FixtureFunction/invocations HTTP/1.1\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let own = format!("host: 127.0.0.1:{port}\r\n");
    // A DNS-rebound page names its own host; any page sends Origin.
    assert_eq!(
        raw_status(
            port,
            &request(&format!("host: attacker.example:{port}\r\n"))
        ),
        403
    );
    assert_eq!(
        raw_status(
            port,
            &request(&format!("{own}origin: https://attacker.example\r\n"))
        ),
        403
    );
    // curl as a page's fetch would send it.
    let curl = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            "Origin: http://localhost:3000",
            "-d",
            "{}",
        ])
        .arg(api.invoke_url(F))
        .output();
    if let Ok(curl) = curl {
        assert_eq!(String::from_utf8_lossy(&curl.stdout), "403");
    }

    // Hundreds of connections held open, sending nothing...
    let idle: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connect"))
        .collect();
    // ...and one that sent half a head.
    let mut slow = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    slow.write_all(b"POST /2015-03-31/functions/Pass")
        .expect("write");
    // A call is still answered.
    assert_eq!(raw_status(port, &request(&own)), 200);
    drop(idle);
    drop(slow);
}

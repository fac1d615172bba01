use super::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Answers with the payload and client context it got; `fail` is a function
/// error; with `tail`, 5,000 bytes of log then a `REPORT` line.
#[derive(Default)]
struct Fake {
    calls: AtomicUsize,
}

impl Invoke for Fake {
    fn invoke(&self, payload: &[u8], options: &Options) -> Result<Invoked, String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let body = if payload == b"fail" {
            r#"{"errorType":"Boom","errorMessage":"failed"}"#.to_owned()
        } else {
            serde_json::json!({
                "payload": String::from_utf8_lossy(payload),
                "context": options.client_context,
            })
            .to_string()
        };
        let log = options.tail.then(|| {
            format!(
                "START\n{}\nREPORT RequestId: 1\tDuration: 1 ms\t\n",
                "x".repeat(5_000)
            )
            .into_bytes()
        });
        Ok(Invoked {
            invocation: Invocation { status: 200, body },
            log,
        })
    }
}

fn api(limits: Limits) -> (LambdaApi, Arc<Fake>) {
    let fake = Arc::new(Fake::default());
    let api = LambdaApi::serve(
        vec![Target {
            names: vec!["F".into(), "f".into()],
            invoker: Arc::clone(&fake) as Arc<dyn Invoke>,
            events: async_invoke::Config {
                retries: 2,
                dead_letter: None,
                delay: Duration::ZERO,
            },
        }],
        limits,
    )
    .expect("started");
    (api, fake)
}

/// An answer read off the wire: status, headers (lower-case names), body.
struct Wire {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Wire {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Send `head` (without `Host`, added unless `host` is empty; the
/// `Content-Length` of `body` added) and `body`; read the answer.
fn send(api: &LambdaApi, head: &str, host: &str, body: &[u8]) -> Wire {
    let mut stream = TcpStream::connect(("127.0.0.1", api.port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut request = format!(
        "{head}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    if !host.is_empty() {
        request.push_str(&format!("host: {host}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).expect("head");
    let _ = stream.write_all(body);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Wire {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn post(api: &LambdaApi, path: &str, headers: &str, body: &[u8]) -> Wire {
    let host = format!("127.0.0.1:{}", api.port);
    send(api, &format!("POST {path} HTTP/1.1{headers}"), &host, body)
}

const F: &str = "/2015-03-31/functions/F/invocations";

#[test]
fn invocations_are_answered_by_type_as_lambda_answers_them() {
    let (api, fake) = api(LIMITS);
    let ok = post(&api, F, "", b"{\"a\":1}");
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.header("x-amz-function-error"), None);
    assert_eq!(ok.header("x-amz-executed-version"), Some("$LATEST"));
    assert!(ok.body.contains(r#"{\"a\":1}"#), "{}", ok.body);

    let error = post(&api, F, "", b"fail");
    assert_eq!(error.status, 200);
    assert_eq!(error.header("x-amz-function-error"), Some("Unhandled"));

    let calls = fake.calls.load(Ordering::SeqCst);
    let dry = post(&api, F, "\r\nX-Amz-Invocation-Type: DryRun", b"{}");
    assert_eq!((dry.status, dry.body.as_str()), (204, ""));
    assert_eq!(
        fake.calls.load(Ordering::SeqCst),
        calls,
        "a dry run runs nothing"
    );

    let unknown = post(
        &api,
        "/2015-03-31/functions/Nope/invocations",
        "\r\nX-Amz-Invocation-Type: DryRun",
        b"{}",
    );
    assert_eq!(unknown.status, 404);
    assert_eq!(
        unknown.header("x-amzn-errortype"),
        Some("ResourceNotFoundException")
    );
    assert!(
        unknown
            .body
            .contains("Function not found: arn:aws:lambda:us-east-1:123456789012:function:Nope"),
        "{}",
        unknown.body
    );

    let other = post(&api, F, "\r\nX-Amz-Invocation-Type: Later", b"{}");
    assert_eq!(other.status, 400);
    assert_eq!(
        other.header("x-amzn-errortype"),
        Some("InvalidParameterValueException")
    );
    let body: serde_json::Value = serde_json::from_str(&other.body).expect("JSON");
    assert_eq!(body["Type"], "User");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("Later"))
    );

    // An event: accepted at once, run in the background; a failing one is
    // retried twice (no wait here).
    let calls = fake.calls.load(Ordering::SeqCst);
    let event = post(&api, F, "\r\nX-Amz-Invocation-Type: Event", b"fail");
    assert_eq!((event.status, event.body.as_str()), (202, ""));
    assert!(event.header("x-amzn-requestid").is_some());
    let started = Instant::now();
    while fake.calls.load(Ordering::SeqCst) < calls + 3
        && started.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        fake.calls.load(Ordering::SeqCst),
        calls + 3,
        "1 + 2 retries"
    );
}

#[test]
fn tail_returns_the_last_4_kb_of_the_invocations_log_and_client_context_passes_through() {
    let (api, _) = api(LIMITS);
    let context = base64::engine::general_purpose::STANDARD.encode(r#"{"custom":{"k":"v"}}"#);
    let answer = post(
        &api,
        &format!("{F}?Qualifier=%24LATEST"),
        &format!("\r\nX-Amz-Log-Type: Tail\r\nX-Amz-Client-Context: {context}"),
        b"{}",
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let log = base64::engine::general_purpose::STANDARD
        .decode(answer.header("x-amz-log-result").expect("a log result"))
        .expect("base64");
    assert_eq!(log.len(), LOG_TAIL_BYTES);
    assert!(log.ends_with(b"REPORT RequestId: 1\tDuration: 1 ms\t\n"));
    let body: serde_json::Value = serde_json::from_str(&answer.body).expect("JSON");
    assert_eq!(body["context"], context.as_str());
    // No tail asked, none given.
    assert_eq!(post(&api, F, "", b"{}").header("x-amz-log-result"), None);
}

#[test]
fn payloads_past_lambdas_limits_are_refused_with_413() {
    let (api, fake) = api(LIMITS);
    let big = vec![b'x'; MAX_PAYLOAD_BYTES + 1];
    let refused = post(&api, F, "", &big);
    assert_eq!(refused.status, 413);
    assert_eq!(
        refused.header("x-amzn-errortype"),
        Some("RequestEntityTooLargeException")
    );
    assert!(
        refused.body.contains(
            "Request must be smaller than 6291456 bytes for the InvokeFunction operation"
        ),
        "{}",
        refused.body
    );
    let event = post(
        &api,
        F,
        "\r\nX-Amz-Invocation-Type: Event",
        &big[..=MAX_EVENT_PAYLOAD_BYTES],
    );
    assert_eq!(event.status, 413);
    assert!(
        event.body.contains(
            "1048577 byte payload is too large for the Event invocation type (limit 1048576 bytes)"
        ),
        "{}",
        event.body
    );
    assert_eq!(fake.calls.load(Ordering::SeqCst), 0);
    // At the limit: served.
    assert_eq!(post(&api, F, "", &big[..MAX_PAYLOAD_BYTES]).status, 200);
}

#[test]
fn other_hosts_and_web_pages_are_refused() {
    let (api, fake) = api(LIMITS);
    let head = format!("POST {F} HTTP/1.1");
    for host in [
        "evil.example:80".to_owned(),
        format!("127.0.0.1.evil.example:{}", api.port),
        format!("127.0.0.1:{}", api.port + 1),
        String::new(),
    ] {
        let refused = send(&api, &head, &host, b"{}");
        assert_eq!(refused.status, 403, "{host:?}");
        assert_eq!(
            refused.header("x-amzn-errortype"),
            Some("AccessDeniedException")
        );
        assert!(serde_json::from_str::<serde_json::Value>(&refused.body).is_ok());
    }
    let localhost = send(&api, &head, &format!("localhost:{}", api.port), b"{}");
    assert_eq!(localhost.status, 200);
    let origin = post(&api, F, "\r\nOrigin: http://127.0.0.1:8000", b"{}");
    assert_eq!(origin.status, 403);
    assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
}

#[test]
fn past_the_connection_limit_a_connection_is_refused_at_once() {
    let (api, _) = api(Limits {
        connections: 2,
        events: 1,
    });
    let idle: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(("127.0.0.1", api.port)).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let refused = post(&api, F, "", b"{}");
    assert_eq!(refused.status, 429);
    assert_eq!(
        refused.header("x-amzn-errortype"),
        Some("TooManyRequestsException")
    );
    drop(idle);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(post(&api, F, "", b"{}").status, 200);
}

fn parts(uri: &str, headers: &[(&str, &str)]) -> Parts {
    let mut request = http::Request::builder()
        .method("POST")
        .uri(uri)
        .header("host", "127.0.0.1:7");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(()).expect("a request").into_parts().0
}

fn checked(uri: &str, headers: &[(&str, &str)]) -> Result<Call, u16> {
    check(&parts(uri, headers), 7).map_err(|reply| reply.status)
}

#[test]
fn heads_are_checked_as_lambda_checks_them() {
    let call = checked(F, &[]).expect("a call");
    assert_eq!(
        call,
        Call {
            name: "F".into(),
            kind: Kind::RequestResponse,
            tail: false,
            client_context: None,
            trace_header: None,
        }
    );
    let event = checked(
        F,
        &[
            ("x-amz-invocation-type", "Event"),
            ("x-amz-log-type", "Tail"),
        ],
    )
    .expect("a call");
    assert_eq!(
        (event.kind, event.tail, event.limit()),
        (Kind::Event, false, MAX_EVENT_PAYLOAD_BYTES)
    );
    assert!(
        checked(F, &[("x-amz-log-type", "Tail")])
            .expect("a call")
            .tail
    );
    assert_eq!(checked(F, &[("x-amz-log-type", "Head")]), Err(400));
    assert_eq!(checked(F, &[("x-amz-invocation-type", "event")]), Err(400));
    // Qualifiers: $LATEST only; two that differ are refused.
    assert!(checked(&format!("{F}?Qualifier=$LATEST"), &[]).is_ok());
    assert!(
        checked(
            "/2015-03-31/functions/F:$LATEST/invocations?Qualifier=%24LATEST",
            &[]
        )
        .is_ok()
    );
    assert_eq!(checked(&format!("{F}?Qualifier=1"), &[]), Err(404));
    assert_eq!(checked(&format!("{F}?Qualifier=%zz"), &[]), Err(400));
    assert_eq!(
        checked(
            "/2015-03-31/functions/F:$LATEST/invocations?Qualifier=prod",
            &[]
        ),
        Err(400)
    );
}

#[test]
fn client_contexts_methods_and_browsers_are_checked() {
    // Client contexts: base64 JSON objects, at most 3,583 bytes.
    let context = base64::engine::general_purpose::STANDARD.encode(r#"{"env":{}}"#);
    assert_eq!(
        checked(F, &[("x-amz-client-context", &context)])
            .expect("a call")
            .client_context,
        Some(context)
    );
    let array = base64::engine::general_purpose::STANDARD.encode("[1]");
    let long = base64::engine::general_purpose::STANDARD
        .encode(format!(r#"{{"k":"{}"}}"#, "v".repeat(3_000)));
    for bad in ["not base64!", array.as_str(), long.as_str()] {
        assert_eq!(
            checked(F, &[("x-amz-client-context", bad)]),
            Err(400),
            "{bad:.20}"
        );
    }
    // Only POST to the invoke path.
    assert_eq!(checked("/2015-03-31/functions/F", &[]), Err(400));
    let get = http::Request::get(F)
        .header("host", "127.0.0.1:7")
        .body(())
        .expect("a request")
        .into_parts()
        .0;
    assert_eq!(check(&get, 7).map_err(|r| r.status).err(), Some(400));
    // Browsers: an Origin, or a Host that is not this API's, is refused.
    assert_eq!(checked(F, &[("origin", "null")]), Err(403));
    let other = http::Request::post(F)
        .header("host", "localhost:8")
        .body(())
        .expect("a request")
        .into_parts()
        .0;
    let refused = check(&other, 7).expect_err("refused");
    assert_eq!(
        refused.header("x-amzn-ErrorType"),
        Some("AccessDeniedException")
    );
    let absolute = http::Request::post("http://evil.example/2015-03-31/functions/F/invocations")
        .header("host", "127.0.0.1:7")
        .body(())
        .expect("a request")
        .into_parts()
        .0;
    assert_eq!(check(&absolute, 7).map_err(|r| r.status).err(), Some(403));
}

#[tokio::test]
async fn bodies_are_read_up_to_their_limit_and_no_further_kept() {
    let body = |n: usize| Full::new(Bytes::from(vec![b'x'; n]));
    assert_eq!(read_body(body(10), 10).await.expect("within").len(), 10);
    let refused = read_body(body(11), 10).await.expect_err("past");
    assert_eq!(refused.status, 413);
    assert_eq!(refused.header("connection"), Some("close"));
    // A stream of chunks past the limit is refused too, without Content-Length.
    let chunks = futures_chunks(100, 1_000);
    let refused = read_body(chunks, 50_000).await.expect_err("past");
    assert_eq!(
        refused.header("x-amzn-ErrorType"),
        Some("RequestEntityTooLargeException")
    );
}

/// `count` chunks of `size` bytes, as a streamed body (no `Content-Length`).
fn futures_chunks(count: usize, size: usize) -> Chunks {
    Chunks { count, size }
}

struct Chunks {
    count: usize,
    size: usize,
}

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        if self.count == 0 {
            return std::task::Poll::Ready(None);
        }
        self.count -= 1;
        let chunk = Bytes::from(vec![b'y'; self.size]);
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(chunk))))
    }
}

#[test]
fn a_function_is_named_by_name_arn_or_partial_arn() {
    for (path, name, qualifier) in [
        ("ArrowWorkerFunction", "ArrowWorkerFunction", None),
        ("arrow-worker", "arrow-worker", None),
        (
            "ArrowWorkerFunction:$LATEST",
            "ArrowWorkerFunction",
            Some("$LATEST"),
        ),
        (
            "arn%3Aaws%3Alambda%3Aus-east-1%3A123456789012%3Afunction%3AArrowWorkerFunction",
            "ArrowWorkerFunction",
            None,
        ),
        (
            "arn:aws:lambda:us-east-1:000000000000:function:F:%24LATEST",
            "F",
            Some("$LATEST"),
        ),
        ("123456789012%3Afunction%3AF", "F", None),
        ("123456789012:function:F:1", "F", Some("1")),
    ] {
        assert_eq!(
            function_name(path).ok(),
            Some((name.to_owned(), qualifier.map(str::to_owned))),
            "{path}"
        );
    }
    let status = |path: &str| function_name(path).err().map(|reply| reply.status);
    // Another region's function.
    assert_eq!(
        status("arn:aws:lambda:eu-west-1:123456789012:function:F"),
        Some(404)
    );
    for bad in [
        "",
        "%",
        "%4",
        "%zz",
        "%ff",
        "%e2%82",
        "a/b",
        "F:",
        "F:1:2",
        "12345:function:F",
        "arn:aws:lambda:us-east-1:123456789012:layer:F",
        "arn:aws:lambda:us-east-1:123456789012:function:F:1:2",
        "arn:aws:lambda:us-east-1:123456789012:function:",
    ] {
        assert_eq!(status(bad), Some(400), "{bad:?}");
    }
    // A version or alias local functions lack.
    assert_eq!(
        checked("/2015-03-31/functions/F:1/invocations", &[]),
        Err(404)
    );
}

#[test]
fn function_errors_and_throttles_are_marked_as_lambda_marks_them() {
    let invoked = |body: &str| Invoked {
        invocation: Invocation {
            status: 200,
            body: body.into(),
        },
        log: None,
    };
    let error = from_invocation(invoked(r#"{"errorType":"Boom","errorMessage":"x"}"#));
    assert_eq!(error.status, 200);
    assert_eq!(error.header("X-Amz-Function-Error"), Some("Unhandled"));
    let ok = from_invocation(invoked(r#"{"hashes":[]}"#));
    assert_eq!(ok.header("X-Amz-Function-Error"), None);
    let throttled = from_invocation(Invoked {
        invocation: crate::pool::too_many_requests(),
        log: None,
    });
    assert_eq!(throttled.status, 429);
    assert_eq!(
        throttled.header("x-amzn-ErrorType"),
        Some("TooManyRequestsException")
    );
}

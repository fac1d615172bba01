//! The password hasher's Function URL on the local stack
//! (`tools/local-stack/src/function_url.rs`), driven by `curl` as a user
//! drives it: `--aws-sigv4` with the local keys is answered by the real
//! hasher; unsigned or tampered requests are refused with 403 before any
//! invocation; a binary body reaches the function base64-encoded; and the
//! event the server builds for the sample's request is the sample.

use local_stack::emulator::Invocation;
use local_stack::function_url::{
    ACCESS_KEY_ID, EventContext, FunctionUrl, Invoke, SECRET_ACCESS_KEY, event,
};
use local_stack::pool::{Overflow, Size};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::{Arc, Mutex};
use testkit::template;

const HASH: &str = r#"{"operation":"hash","cost":4,"passwords":["pw-through-the-url"]}"#;

/// The hasher's URL on one environment, and the events it was sent.
fn hasher_url() -> (FunctionUrl, Arc<Mutex<Vec<Value>>>) {
    let template = template();
    let function = template
        .function("password-hasher")
        .unwrap_or_else(|e| panic!("{e}"));
    let config = template
        .function_url(&function)
        .unwrap_or_else(|e| panic!("{e}"))
        .expect("the hasher has a FunctionUrlConfig");
    let pool = Arc::new(testkit::pool(
        &template,
        "password-hasher",
        &[],
        Size {
            environments: 1,
            overflow: Overflow::Wait,
        },
    ));
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    let invoke: Invoke = Arc::new(move |payload: Vec<u8>| -> Result<Invocation, String> {
        if let Ok(event) = serde_json::from_slice(&payload) {
            seen.lock().unwrap_or_else(|p| p.into_inner()).push(event);
        }
        pool.invoke(payload)
    });
    let url = FunctionUrl::serve(&function, &config, invoke).unwrap_or_else(|e| panic!("{e}"));
    (url, events)
}

/// `curl` with `args`: (HTTP status, body).
fn curl(args: &[&str]) -> (u16, String) {
    let output = Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "20"])
        .args(["--write-out", "\n%{http_code}"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("curl: {e}"));
    assert!(output.status.success(), "curl {args:?}: {output:?}");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

fn signing() -> Vec<String> {
    vec![
        "--aws-sigv4".into(),
        "aws:amz:us-east-1:lambda".into(),
        "--user".into(),
        format!("{ACCESS_KEY_ID}:{SECRET_ACCESS_KEY}"),
    ]
}

fn hashes(body: &str) -> usize {
    let answer: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    answer["hashes"].as_array().map_or(0, Vec::len)
}

#[test]
fn signed_requests_are_hashed_and_unsigned_or_tampered_ones_are_refused() {
    let (url, events) = hasher_url();
    let target = url.url();

    // The runner's own line, run by a shell as a user would paste it.
    let line = url.curl_command(HASH);
    let output = Command::new("sh")
        .args(["-c", &format!("{line} --silent --show-error")])
        .output()
        .unwrap_or_else(|e| panic!("sh: {e}"));
    assert!(output.status.success(), "{line}: {output:?}");
    assert_eq!(hashes(&String::from_utf8_lossy(&output.stdout)), 1);

    let json = ["-H", "content-type: application/json"];
    let mut signed: Vec<String> = signing();
    signed.extend(json.iter().map(|s| (*s).to_owned()));
    let signed: Vec<&str> = signed.iter().map(String::as_str).collect();
    let (status, body) = curl(&[&signed[..], &["--data", HASH, &target]].concat());
    assert_eq!(status, 200, "{body}");
    assert_eq!(hashes(&body), 1, "{body}");
    let seen = events.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(seen.len(), 2);
    let iam = &seen[1]["requestContext"]["authorizer"]["iam"];
    assert_eq!(iam["accessKey"], ACCESS_KEY_ID);
    assert_eq!(seen[1]["isBase64Encoded"], false);

    let (status, body) = curl(&[&json[..], &["--data", HASH, &target]].concat());
    assert_eq!((status, body.as_str()), (403, r#"{"Message":"Forbidden"}"#));

    // curl's own signed request, replayed byte for byte: accepted; with
    // one byte of the body changed: refused.
    let signed_request = capture_signed_request(HASH);
    let (status, body) = replay(&url, &signed_request);
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert_eq!(hashes(&body), 1, "{body}");
    let tampered = String::from_utf8_lossy(&signed_request).replace("-url\"", "-URL\"");
    assert_eq!(tampered.len(), signed_request.len());
    let (status, body) = replay(&url, tampered.as_bytes());
    assert_eq!(
        (status.as_str(), body.as_str()),
        ("HTTP/1.1 403 Forbidden", r#"{"Message":"Forbidden"}"#)
    );
    assert_eq!(
        events.lock().unwrap_or_else(|p| p.into_inner()).len(),
        3,
        "refused requests never reach the function"
    );
}

/// The request `curl --aws-sigv4` sends for `body`, as bytes, caught by a
/// listener that answers 204.
fn capture_signed_request(body: &str) -> Vec<u8> {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let catcher = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap_or_else(|e| panic!("{e}"));
        let mut request = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            let read = stream.read(&mut buffer).unwrap_or(0);
            request.extend_from_slice(&buffer[..read]);
            let text = String::from_utf8_lossy(&request).into_owned();
            let complete = text.split_once("\r\n\r\n").is_some_and(|(head, rest)| {
                head.to_ascii_lowercase()
                    .lines()
                    .filter_map(|l| l.strip_prefix("content-length: "))
                    .any(|n| n.trim().parse() == Ok(rest.len()))
            });
            if read == 0 || complete {
                break;
            }
        }
        let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n");
        request
    });
    let mut args = signing();
    args.extend(["-H", "content-type: application/json", "--data", body].map(str::to_owned));
    args.push(format!("http://127.0.0.1:{port}/"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(curl(&args).0, 204);
    catcher
        .join()
        .unwrap_or_else(|_| panic!("the catcher panicked"))
}

/// Send `request` as is to the URL (its `host` header names another port:
/// the signed one); the status line and the body of the answer.
fn replay(url: &FunctionUrl, request: &[u8]) -> (String, String) {
    let address = url
        .url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut stream = TcpStream::connect(address).unwrap_or_else(|e| panic!("{e}"));
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(20)));
    stream.write_all(request).unwrap_or_else(|e| panic!("{e}"));
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

#[test]
fn a_binary_body_reaches_the_function_base64_encoded() {
    let (url, events) = hasher_url();
    let path = std::env::temp_dir().join(format!("function-url-{}.bin", std::process::id()));
    std::fs::write(&path, HASH).unwrap_or_else(|e| panic!("{e}"));
    let data = format!("@{}", path.display());
    let mut args = signing();
    args.extend(
        [
            "-H",
            "content-type: application/octet-stream",
            "--data-binary",
            &data,
            &url.url(),
        ]
        .map(str::to_owned),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (status, body) = curl(&args);
    let _ = std::fs::remove_file(&path);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        hashes(&body),
        1,
        "the hasher decoded the base64 body: {body}"
    );
    let seen = events.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["isBase64Encoded"], true);
    use base64::Engine;
    let sent = seen[0]["body"].as_str().unwrap_or_default();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(sent)
        .unwrap_or_default();
    assert_eq!(decoded, HASH.as_bytes());
}

#[test]
fn the_event_for_the_samples_request_equals_the_sample_but_ids_and_times() {
    let path = local_stack::workspace_root().join("events/password-hasher/function-url-hash.json");
    let sample: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (request, ()) = http::Request::post("/")
        .header("content-type", "application/json")
        .header(
            "host",
            "abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws",
        )
        .header("user-agent", "curl/8.5.0")
        .body(())
        .unwrap_or_else(|e| panic!("{e}"))
        .into_parts();
    let body = sample["body"].as_str().unwrap_or_default();
    let context = EventContext {
        url_id: "local0url0id".into(),
        request_id: "another-request-id".into(),
        time: time::OffsetDateTime::now_utc(),
        source_ip: "203.0.113.10".parse().unwrap_or_else(|e| panic!("{e}")),
        caller: None,
    };
    let built = event(&request, body.as_bytes(), &context);
    let without_ids_and_times = |mut event: Value| {
        let context = &mut event["requestContext"];
        for key in [
            "requestId",
            "apiId",
            "domainName",
            "domainPrefix",
            "time",
            "timeEpoch",
        ] {
            assert!(context.get(key).is_some(), "{key}");
            context[key] = Value::Null;
        }
        event
    };
    assert_eq!(without_ids_and_times(built), without_ids_and_times(sample));
}

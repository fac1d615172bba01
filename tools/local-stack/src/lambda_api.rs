//! The Lambda Invoke API on a loopback port, served by the functions' pools:
//! `POST /2015-03-31/functions/{FunctionName}/invocations`, so that
//! `aws lambda invoke --endpoint-url`, an SDK client (Step Functions' Lambda
//! tasks among them), or `curl` invoke the local functions as they would on
//! AWS, concurrently, throttled as Lambda throttles. `FunctionName` is a name,
//! an ARN or a partial ARN, as Lambda takes it.
//!
//! Answers as Lambda's API does: the function's answer with HTTP 200 (a
//! function error also 200, marked by `X-Amz-Function-Error: Unhandled`);
//! `TooManyRequestsException` (429) past reserved concurrency;
//! `ResourceNotFoundException` (404) for an unknown function;
//! `RequestTooLargeException` (413) for a payload over 6 MB. Only synchronous
//! invocations (`RequestResponse`, the default) are served.

use crate::emulator::Invocation;
use crate::pool::Pool;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Lambda's limit on a synchronous invocation's payload (6 MB).
pub const MAX_PAYLOAD_BYTES: usize = 6_291_456;
/// Most bytes of a request line or header line.
const MAX_LINE: usize = 8_192;

/// A function the API serves, under its names (logical id, binary).
pub struct Served {
    /// The names it answers to.
    pub names: Vec<String>,
    /// Its environments.
    pub pool: Arc<Pool>,
}

/// The running API, stopped on drop.
pub struct LambdaApi {
    port: u16,
    stopping: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl LambdaApi {
    /// Serve `functions` on a free loopback port.
    pub fn start(functions: Vec<Served>) -> Result<Self, String> {
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(|e| format!("Lambda API: bind: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("Lambda API: {e}"))?
            .port();
        let stopping = Arc::new(AtomicBool::new(false));
        let functions = Arc::new(functions);
        let stop = Arc::clone(&stopping);
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let functions = Arc::clone(&functions);
                std::thread::spawn(move || serve(stream, &functions));
            }
        });
        Ok(Self {
            port,
            stopping,
            accept: Some(accept),
        })
    }

    /// `http://127.0.0.1:PORT`: the endpoint for `--endpoint-url` or `AWS_ENDPOINT_URL_LAMBDA`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The invoke URL of function `name`.
    pub fn invoke_url(&self, name: &str) -> String {
        format!(
            "{}/2015-03-31/functions/{name}/invocations",
            self.endpoint()
        )
    }
}

impl Drop for LambdaApi {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// An HTTP answer.
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
}

impl Reply {
    fn error(status: u16, kind: &str, message: &str) -> Self {
        Self {
            status,
            headers: vec![("x-amzn-ErrorType", kind.to_owned())],
            body: serde_json::json!({ "Type": "User", "message": message }).to_string(),
        }
    }
}

fn serve(mut stream: TcpStream, functions: &[Served]) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let reply = match stream.try_clone() {
        Ok(read) => answer(&mut BufReader::new(read), functions),
        Err(e) => Reply::error(500, "ServiceException", &e.to_string()),
    };
    let reason = match reply.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        _ => "Error",
    };
    let mut head = format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        reply.status,
        reply.body.len()
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(reply.body.as_bytes()));
    let _ = stream.shutdown(Shutdown::Both);
}

/// Read one request from `reader` and answer it.
fn answer(reader: &mut impl BufRead, functions: &[Served]) -> Reply {
    let request = match read_request(reader) {
        Ok(request) => request,
        Err(reply) => return reply,
    };
    let name = request
        .path
        .strip_prefix("/2015-03-31/functions/")
        .and_then(|rest| rest.strip_suffix("/invocations"))
        .filter(|_| request.method == "POST");
    let Some(name) = name else {
        return Reply::error(
            400,
            "InvalidRequestContentException",
            "only POST /2015-03-31/functions/{FunctionName}/invocations is served",
        );
    };
    let name = match function_name(name) {
        Ok(name) => name,
        Err(reply) => return reply,
    };
    if request
        .invocation_type
        .as_deref()
        .is_some_and(|t| t != "RequestResponse")
    {
        return Reply::error(
            400,
            "InvalidParameterValueException",
            "only the RequestResponse invocation type is served locally",
        );
    }
    let Some(function) = functions.iter().find(|f| f.names.contains(&name)) else {
        return Reply::error(
            404,
            "ResourceNotFoundException",
            &format!("Function not found: {}", truncated(&name)),
        );
    };
    match function.pool.invoke(&request.body) {
        Ok(invocation) => from_invocation(invocation),
        Err(e) => Reply::error(500, "ServiceException", &e),
    }
}

/// The function's name in the path's `{FunctionName}` (percent-encoded, as
/// SDKs send it), which Lambda takes in any of its forms: a name
/// (`my-function`), a function ARN
/// (`arn:aws:lambda:us-east-1:123456789012:function:my-function`) or a
/// partial ARN (`123456789012:function:my-function`), each with an optional
/// `:qualifier`. Local functions have one version, so the only qualifier is
/// `$LATEST`; an ARN of another region names no local function.
fn function_name(encoded: &str) -> Result<String, Reply> {
    let not_found = |what: &str| {
        Reply::error(
            404,
            "ResourceNotFoundException",
            &format!("Function not found: {}", truncated(what)),
        )
    };
    let invalid = |what: &str| {
        Reply::error(
            400,
            "InvalidParameterValueException",
            &format!("not a function name or ARN: {}", truncated(what)),
        )
    };
    let text = percent_decoded(encoded).ok_or_else(|| invalid(encoded))?;
    let parts: Vec<&str> = text.split(':').collect();
    let account = |id: &str| id.len() == 12 && id.bytes().all(|b| b.is_ascii_digit());
    let (name, qualifier) = match parts.as_slice() {
        [name] => (*name, None),
        [name, qualifier] => (*name, Some(*qualifier)),
        [id, "function", name] if account(id) => (*name, None),
        [id, "function", name, qualifier] if account(id) => (*name, Some(*qualifier)),
        ["arn", _, "lambda", region, id, "function", name, rest @ ..]
            if account(id) && rest.len() <= 1 =>
        {
            if *region != crate::local_aws::REGION {
                return Err(not_found(&text));
            }
            (*name, rest.first().copied())
        }
        _ => return Err(invalid(&text)),
    };
    let valid_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !valid_name {
        return Err(invalid(&text));
    }
    match qualifier {
        None | Some("$LATEST") => Ok(name.to_owned()),
        Some(_) => Err(not_found(&text)),
    }
}

/// `text` with its `%XX` escapes decoded; `None` for a broken escape or bytes
/// that are not UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

/// The API's answer for a pool's answer.
fn from_invocation(invocation: Invocation) -> Reply {
    if invocation.status == 429 {
        return Reply {
            status: 429,
            headers: vec![("x-amzn-ErrorType", "TooManyRequestsException".to_owned())],
            body: invocation.body,
        };
    }
    let function_error = invocation
        .json()
        .ok()
        .is_some_and(|v| v.get("errorType").is_some());
    Reply {
        status: 200,
        headers: if function_error {
            vec![("X-Amz-Function-Error", "Unhandled".to_owned())]
        } else {
            Vec::new()
        },
        body: invocation.body,
    }
}

struct Request {
    method: String,
    path: String,
    invocation_type: Option<String>,
    body: Vec<u8>,
}

fn read_request(reader: &mut impl BufRead) -> Result<Request, Reply> {
    let bad = |message: &str| Reply::error(400, "InvalidRequestContentException", message);
    let line = read_line(reader).ok_or_else(|| bad("no request line"))?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (method, path) = (
        method.to_owned(),
        path.split('?').next().unwrap_or("").to_owned(),
    );
    let mut length = 0_usize;
    let mut invocation_type = None;
    loop {
        let header = read_line(reader).ok_or_else(|| bad("the headers did not end"))?;
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            return Err(bad("a header without a colon"));
        };
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => {
                length = value
                    .trim()
                    .parse()
                    .map_err(|_| bad("Content-Length is not a number"))?;
            }
            "x-amz-invocation-type" => invocation_type = Some(value.trim().to_owned()),
            "transfer-encoding" => return Err(bad("send the payload with a Content-Length")),
            _ => {}
        }
    }
    if length > MAX_PAYLOAD_BYTES {
        return Err(Reply::error(
            413,
            "RequestTooLargeException",
            &format!(
                "Request must be smaller than {MAX_PAYLOAD_BYTES} bytes for the InvokeFunction operation"
            ),
        ));
    }
    let mut body = vec![0; length];
    reader
        .read_exact(&mut body)
        .map_err(|_| bad("the payload is shorter than its Content-Length"))?;
    Ok(Request {
        method,
        path,
        invocation_type,
        body,
    })
}

/// One CRLF- or LF-terminated line of at most [`MAX_LINE`] bytes, without its
/// end; `None` at the end of the stream, on a read error, a longer line or
/// bytes that are not UTF-8.
fn read_line(reader: &mut impl BufRead) -> Option<String> {
    let mut line = Vec::new();
    let read = reader
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut line)
        .ok()?;
    if read == 0 || !line.ends_with(b"\n") {
        return None;
    }
    let text = String::from_utf8(line).ok()?;
    Some(text.trim_end_matches(['\r', '\n']).to_owned())
}

/// At most 64 characters of a caller's value, for error messages.
fn truncated(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(request: &str) -> Reply {
        answer(&mut request.as_bytes(), &[])
    }

    #[test]
    fn requests_it_cannot_serve_get_lambdas_errors() {
        let unknown = answered(
            "POST /2015-03-31/functions/Nope/invocations HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}",
        );
        assert_eq!(unknown.status, 404);
        assert_eq!(unknown.headers[0].1, "ResourceNotFoundException");
        assert!(unknown.body.contains("Function not found: Nope"));

        let too_large = answered(&format!(
            "POST /2015-03-31/functions/F/invocations HTTP/1.1\r\ncontent-length: {}\r\n\r\n",
            MAX_PAYLOAD_BYTES + 1
        ));
        assert_eq!(too_large.status, 413);

        let event = answered(
            "POST /2015-03-31/functions/F/invocations HTTP/1.1\r\nX-Amz-Invocation-Type: Event\r\ncontent-length: 2\r\n\r\n{}",
        );
        assert_eq!(event.status, 400);

        for bad in [
            "",
            "GET / HTTP/1.1\r\n\r\n",
            "POST /2015-03-31/functions/F/invocations HTTP/1.1\r\ncontent-length: x\r\n\r\n",
            "POST /2015-03-31/functions/F/invocations HTTP/1.1\r\ncontent-length: 10\r\n\r\n{}",
            "POST /2015-03-31/functions/F/invocations HTTP/1.1\r\nno colon\r\n\r\n",
            "POST /2015-03-31/functions/F/invocations HTTP/1.1\r\ncontent-length: 2\r\n",
        ] {
            assert_eq!(answered(bad).status, 400, "{bad:?}");
        }
        let long = format!("POST /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_LINE));
        assert_eq!(answered(&long).status, 400);
    }

    #[test]
    fn a_function_is_named_by_name_arn_or_partial_arn() {
        for (path, name) in [
            ("ArrowWorkerFunction", "ArrowWorkerFunction"),
            ("arrow-worker", "arrow-worker"),
            ("ArrowWorkerFunction:$LATEST", "ArrowWorkerFunction"),
            (
                "arn%3Aaws%3Alambda%3Aus-east-1%3A123456789012%3Afunction%3AArrowWorkerFunction",
                "ArrowWorkerFunction",
            ),
            (
                "arn:aws:lambda:us-east-1:000000000000:function:F:%24LATEST",
                "F",
            ),
            ("123456789012%3Afunction%3AF", "F"),
            ("123456789012:function:F:$LATEST", "F"),
        ] {
            assert_eq!(function_name(path).ok().as_deref(), Some(name), "{path}");
        }
        let status = |path: &str| function_name(path).err().map(|reply| reply.status);
        // Another region's function, or a version or alias local functions lack.
        assert_eq!(
            status("arn:aws:lambda:eu-west-1:123456789012:function:F"),
            Some(404)
        );
        assert_eq!(status("F:1"), Some(404));
        assert_eq!(
            status("arn:aws:lambda:us-east-1:123456789012:function:F:prod"),
            Some(404)
        );
        for bad in [
            "",
            "%",
            "%4",
            "%zz",
            "%ff",
            "a/b",
            "F:1:2",
            "12345:function:F",
            "arn:aws:lambda:us-east-1:123456789012:layer:F",
            "arn:aws:lambda:us-east-1:123456789012:function:F:1:2",
            "arn:aws:lambda:us-east-1:123456789012:function:",
        ] {
            assert_eq!(status(bad), Some(400), "{bad:?}");
        }

        let served = answered(
            "POST /2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-east-1%3A123456789012%3Afunction%3ANope/invocations HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}",
        );
        assert_eq!(served.status, 404);
        assert!(
            served.body.contains("Function not found: Nope"),
            "{}",
            served.body
        );
    }

    #[test]
    fn function_errors_and_throttles_are_marked_as_lambda_marks_them() {
        let error = from_invocation(Invocation {
            status: 200,
            body: r#"{"errorType":"Boom","errorMessage":"x"}"#.into(),
        });
        assert_eq!(error.status, 200);
        assert_eq!(
            error.headers,
            vec![("X-Amz-Function-Error", "Unhandled".to_owned())]
        );
        let ok = from_invocation(Invocation {
            status: 200,
            body: r#"{"hashes":[]}"#.into(),
        });
        assert!(ok.headers.is_empty());
        let throttled = from_invocation(crate::pool::too_many_requests());
        assert_eq!(throttled.status, 429);
        assert_eq!(
            throttled.headers,
            vec![("x-amzn-ErrorType", "TooManyRequestsException".to_owned())]
        );
    }
}

//! The Lambda Invoke API on a loopback port, served by the functions' pools:
//! `POST /2015-03-31/functions/{FunctionName}/invocations`, so that
//! `aws lambda invoke --endpoint-url`, an SDK client (Step Functions' Lambda
//! tasks among them), or `curl` invoke the local functions as they would on
//! AWS, concurrently, throttled as Lambda throttles. `FunctionName` is a name,
//! an ARN or a partial ARN, as Lambda takes it; the `Qualifier` parameter, or
//! one in the name, may only be `$LATEST` (local functions have no versions).
//!
//! Answers as Lambda's API does, by `X-Amz-Invocation-Type`:
//!
//! - `RequestResponse` (the default): the function's answer with HTTP 200 (a
//!   function error also 200, marked by `X-Amz-Function-Error: Unhandled`);
//!   with `X-Amz-Log-Type: Tail`, `X-Amz-Log-Result` is the base64 of the last
//!   4 KB of what the environment logged during the invocation, up to its
//!   `REPORT` line. `X-Amz-Client-Context` reaches the runtime.
//! - `Event`: 202 with an empty body at once; the invocation runs in the
//!   background with Lambda's asynchronous retries and the function's
//!   dead-letter queue ([`crate::async_invoke`]).
//! - `DryRun`: 204, nothing run.
//!
//! Errors carry `x-amzn-ErrorType` (what botocore maps to an exception class)
//! and a JSON body `{"Type": "User", "message": ...}`:
//! `TooManyRequestsException` (429) past reserved concurrency,
//! `ResourceNotFoundException` (404) for an unknown function or qualifier,
//! `RequestEntityTooLargeException` (413, the code Lambda sends; botocore's
//! model calls the shape `RequestTooLargeException`) past 6 MB
//! (`RequestResponse`) or 1 MB (`Event`), `InvalidParameterValueException` or
//! `InvalidRequestContentException` (400) for what Lambda refuses.
//!
//! Bounded as a server must be: at most [`MAX_CONNECTIONS`] connections (past
//! them a connection is answered 429 and closed at once), request headers
//! within [`HEADER_READ_TIMEOUT`], bodies read as they arrive up to the
//! payload limit (never allocated from `Content-Length`), at most
//! [`MAX_EVENTS_IN_FLIGHT`] asynchronous events held. Only the API's own
//! loopback address may be named in `Host`, and no request may carry
//! `Origin`: a web page the developer visits cannot reach it
//! (`AccessDeniedException`, 403).

use crate::async_invoke;
use crate::emulator::{Invocation, Invoked, Options};
use crate::pool::{Environment, Pool};
use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use http::{Response, StatusCode, request::Parts};
use http_body_util::{BodyExt, Full};
use hyper::body::Body;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::{Semaphore, oneshot};

/// Lambda's limit on a synchronous invocation's payload (6 MB).
pub const MAX_PAYLOAD_BYTES: usize = 6_291_456;
/// Lambda's limit on an asynchronous invocation's payload (1 MB).
pub const MAX_EVENT_PAYLOAD_BYTES: usize = 1_048_576;
/// Most connections open at once.
pub const MAX_CONNECTIONS: usize = 1_024;
/// Most asynchronous events accepted and not yet done with; past them an
/// `Event` invocation is throttled.
pub const MAX_EVENTS_IN_FLIGHT: usize = 128;
/// How long a connection may take to send a request's headers (also: how
/// long an idle connection is kept).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a request's payload may take to arrive.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Most bytes of a request's head.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Most bytes of a payload past its limit read (and dropped) so that the
/// caller gets the 413 instead of a reset connection.
const MAX_DISCARDED_BYTES: usize = 64 * 1024 * 1024;
/// Most bytes of the log in `X-Amz-Log-Result` (Lambda's 4 KB).
const LOG_TAIL_BYTES: usize = 4 * 1024;
/// Most bytes of `X-Amz-Client-Context` (Lambda's limit, base64).
const MAX_CLIENT_CONTEXT_BYTES: usize = 3_583;
/// Most threads blocked in a pool's invoke at once.
const MAX_BLOCKING_THREADS: usize = 256;

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
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Runs one invocation (blocking): a pool, or a test's fake.
trait Invoke: Send + Sync {
    fn invoke(&self, payload: &[u8], options: &Options) -> Result<Invoked, String>;
}

impl<E: Environment> Invoke for Pool<E> {
    fn invoke(&self, payload: &[u8], options: &Options) -> Result<Invoked, String> {
        self.invoke_with(payload, options)
    }
}

/// A served function.
struct Target {
    names: Vec<String>,
    invoker: Arc<dyn Invoke>,
    events: async_invoke::Config,
}

/// The limits of one server.
#[derive(Debug, Clone, Copy)]
struct Limits {
    connections: usize,
    events: usize,
}

const LIMITS: Limits = Limits {
    connections: MAX_CONNECTIONS,
    events: MAX_EVENTS_IN_FLIGHT,
};

/// What every connection shares.
struct State {
    port: u16,
    functions: Vec<Target>,
    events: Arc<Semaphore>,
}

impl LambdaApi {
    /// Serve `functions` on a free loopback port; their asynchronous events
    /// get Lambda's defaults (2 retries, no dead-letter queue).
    pub fn start(functions: Vec<Served>) -> Result<Self, String> {
        Self::start_with(
            functions
                .into_iter()
                .map(|served| (served, async_invoke::Config::default()))
                .collect(),
        )
    }

    /// Serve `functions`, each with what Lambda does with its asynchronous
    /// events (its `EventInvokeConfig` and `DeadLetterQueue`).
    pub fn start_with(functions: Vec<(Served, async_invoke::Config)>) -> Result<Self, String> {
        let targets = functions
            .into_iter()
            .map(|(served, events)| Target {
                names: served.names,
                invoker: served.pool,
                events,
            })
            .collect();
        Self::serve(targets, LIMITS)
    }

    fn serve(functions: Vec<Target>, limits: Limits) -> Result<Self, String> {
        let listener =
            crate::process::free_listener().map_err(|e| format!("Lambda API: bind: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("Lambda API: {e}"))?
            .port();
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("Lambda API: {e}"))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(MAX_BLOCKING_THREADS)
            .thread_name("lambda-api")
            .enable_all()
            .build()
            .map_err(|e| format!("Lambda API: runtime: {e}"))?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(|e| format!("Lambda API: {e}"))?
        };
        let state = Arc::new(State {
            port,
            functions,
            events: Arc::new(Semaphore::new(limits.events)),
        });
        let (shutdown, stop) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("lambda-api".into())
            .spawn(move || {
                runtime.block_on(accept(listener, state, limits.connections, stop));
                // Invocations still running are left to end on their own.
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(|e| format!("Lambda API: thread: {e}"))?;
        Ok(Self {
            port,
            shutdown: Some(shutdown),
            thread: Some(thread),
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
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accept connections until `stop`, at most `max` at once.
async fn accept(
    listener: tokio::net::TcpListener,
    state: Arc<State>,
    max: usize,
    mut stop: oneshot::Receiver<()>,
) {
    let open = Arc::new(Semaphore::new(max));
    loop {
        let stream = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of descriptors, or a connection reset before accepted.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
            refuse(&stream);
            continue;
        };
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let state = Arc::clone(&state);
                async move {
                    let (parts, body) = request.into_parts();
                    Ok::<_, Infallible>(answer(&parts, body, &state).await.into_response())
                }
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(MAX_HEAD_BYTES)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            drop(permit);
        });
    }
}

/// Answer a connection past the limit with a 429 (if its buffer takes it at
/// once) and close it.
fn refuse(stream: &tokio::net::TcpStream) {
    let reply = Reply::error(
        429,
        "TooManyRequestsException",
        &format!("more than {MAX_CONNECTIONS} connections are open: try again later"),
    );
    let head = format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nx-amzn-ErrorType: TooManyRequestsException\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        reply.body.len()
    );
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&reply.body);
    let _ = stream.try_write(&bytes);
}

/// An HTTP answer.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Bytes,
}

impl Reply {
    /// Lambda's error shape: the code in `x-amzn-ErrorType`, `Type` and
    /// `message` in the body.
    fn error(status: u16, kind: &str, message: &str) -> Self {
        Self::error_with(status, kind, "message", message)
    }

    /// [`Reply::error`] whose body names the message `key` (Lambda's own
    /// spelling differs by error: `ResourceNotFoundException` says `Message`).
    fn error_with(status: u16, kind: &str, key: &str, message: &str) -> Self {
        let mut body = serde_json::Map::new();
        body.insert("Type".into(), "User".into());
        body.insert(key.into(), message.into());
        Self {
            status,
            headers: vec![("x-amzn-ErrorType", kind.to_owned())],
            body: Bytes::from(serde_json::Value::Object(body).to_string()),
        }
    }

    fn empty(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    #[cfg(test)]
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn into_response(self) -> Response<Full<Bytes>> {
        let mut response = Response::new(Full::new(self.body));
        *response.status_mut() =
            StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers = response.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        for (name, value) in self.headers {
            if let Ok(value) = http::HeaderValue::from_str(&value) {
                headers.append(name, value);
            }
        }
        response
    }
}

/// `X-Amz-Invocation-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    RequestResponse,
    Event,
    DryRun,
}

/// A request's head, checked: which function, how.
#[derive(Debug, PartialEq, Eq)]
struct Call {
    name: String,
    kind: Kind,
    tail: bool,
    client_context: Option<String>,
    /// `X-Amzn-Trace-Id`: the caller's trace, continued by the invocation.
    trace_header: Option<String>,
}

impl Call {
    /// The most payload bytes this call may carry.
    fn limit(&self) -> usize {
        match self.kind {
            Kind::Event => MAX_EVENT_PAYLOAD_BYTES,
            Kind::RequestResponse | Kind::DryRun => MAX_PAYLOAD_BYTES,
        }
    }
}

/// Answer one request.
async fn answer<B>(parts: &Parts, body: B, state: &State) -> Reply
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let call = match check(parts, state.port) {
        Ok(call) => call,
        Err(reply) => return reply,
    };
    let payload = match tokio::time::timeout(BODY_READ_TIMEOUT, read_body(body, call.limit())).await
    {
        Ok(Ok(payload)) => payload,
        Ok(Err(reply)) => return reply,
        Err(_) => {
            let mut reply = Reply::error(
                400,
                "InvalidRequestContentException",
                &format!(
                    "the payload did not arrive within {} s",
                    BODY_READ_TIMEOUT.as_secs()
                ),
            );
            reply.headers.push(("connection", "close".into()));
            return reply;
        }
    };
    let Some(function) = state
        .functions
        .iter()
        .find(|f| f.names.contains(&call.name))
    else {
        return not_found(&call.name);
    };
    let options = Options {
        client_context: call.client_context.clone(),
        tail: call.tail,
        trace_header: call.trace_header.clone(),
    };
    match call.kind {
        Kind::DryRun => Reply::empty(204),
        Kind::Event => event(function, payload, options, state),
        Kind::RequestResponse => {
            let invoker = Arc::clone(&function.invoker);
            let invoked =
                tokio::task::spawn_blocking(move || invoker.invoke(&payload, &options)).await;
            match invoked {
                Ok(Ok(invoked)) => from_invocation(invoked),
                Ok(Err(e)) => Reply::error_with(500, "ServiceException", "Message", &e),
                Err(e) => Reply::error_with(500, "ServiceException", "Message", &e.to_string()),
            }
        }
    }
}

/// Accept an asynchronous invocation: 202 at once, the invocation (with
/// Lambda's retries and dead-letter queue) in the background.
fn event(function: &Target, payload: Bytes, options: Options, state: &State) -> Reply {
    let Ok(permit) = Arc::clone(&state.events).try_acquire_owned() else {
        return Reply::error(
            429,
            "TooManyRequestsException",
            &format!("Rate Exceeded. (more than {MAX_EVENTS_IN_FLIGHT} events in flight locally)"),
        );
    };
    let request_id = async_invoke::request_id();
    let invoker = Arc::clone(&function.invoker);
    let config = function.events.clone();
    let name = function.names.first().cloned().unwrap_or_default();
    let id = request_id.clone();
    tokio::spawn(async move {
        let invoke = || {
            let (invoker, payload, options) =
                (Arc::clone(&invoker), payload.clone(), options.clone());
            async move {
                match tokio::task::spawn_blocking(move || invoker.invoke(&payload, &options)).await
                {
                    Ok(invoked) => invoked.map(|i| i.invocation),
                    Err(e) => Err(e.to_string()),
                }
            }
        };
        if let Err(e) = async_invoke::run(&payload, &id, &config, invoke).await {
            eprintln!("Lambda API: event {id} for {name}: {e}");
        }
        drop(permit);
    });
    let mut reply = Reply::empty(202);
    reply.headers.push(("x-amzn-RequestId", request_id));
    reply
}

/// The head of a request, checked; or the answer refusing it.
fn check(parts: &Parts, port: u16) -> Result<Call, Reply> {
    let header = |name: &str| -> Result<Option<&str>, Reply> {
        match parts.headers.get(name) {
            None => Ok(None),
            Some(value) => value.to_str().map(Some).map_err(|_| {
                Reply::error(
                    400,
                    "InvalidRequestContentException",
                    &format!("the {name} header is not text"),
                )
            }),
        }
    };
    refuse_browsers(parts, port)?;
    let path = parts.uri.path();
    let encoded = path
        .strip_prefix("/2015-03-31/functions/")
        .and_then(|rest| rest.strip_suffix("/invocations"))
        .filter(|_| parts.method == http::Method::POST)
        .ok_or_else(|| {
            Reply::error(
                400,
                "InvalidRequestContentException",
                "only POST /2015-03-31/functions/{FunctionName}/invocations is served",
            )
        })?;
    let (name, own_qualifier) = function_name(encoded)?;
    latest_only(&name, own_qualifier, parts.uri.query().unwrap_or(""))?;
    let kind = match header("x-amz-invocation-type")? {
        None | Some("RequestResponse") => Kind::RequestResponse,
        Some("Event") => Kind::Event,
        Some("DryRun") => Kind::DryRun,
        Some(other) => {
            return Err(Reply::error(
                400,
                "InvalidParameterValueException",
                &format!(
                    "Unsupported invocation type {}: use RequestResponse, Event or DryRun",
                    truncated(other)
                ),
            ));
        }
    };
    let tail = match header("x-amz-log-type")? {
        None | Some("None") => false,
        Some("Tail") => true,
        Some(other) => {
            return Err(Reply::error(
                400,
                "InvalidParameterValueException",
                &format!(
                    "Unsupported log type {}: use None or Tail",
                    truncated(other)
                ),
            ));
        }
    };
    let client_context = header("x-amz-client-context")?
        .map(|context| {
            valid_client_context(context).then(|| context.to_owned()).ok_or_else(|| {
                Reply::error(
                    400,
                    "InvalidRequestContentException",
                    &format!(
                        "Client context must be a valid Base64-encoded JSON object of at most {MAX_CLIENT_CONTEXT_BYTES} bytes."
                    ),
                )
            })
        })
        .transpose()?;
    Ok(Call {
        name,
        kind,
        // Lambda returns logs for synchronous invocations only.
        tail: tail && kind == Kind::RequestResponse,
        client_context,
        trace_header: header("x-amzn-trace-id")?.map(str::to_owned),
    })
}

/// Refuse what a web page could send: any `Origin`, or a `Host` (or an
/// absolute URI) naming another host than this API's loopback address.
fn refuse_browsers(parts: &Parts, port: u16) -> Result<(), Reply> {
    let denied = |why: &str| Reply::error(403, "AccessDeniedException", why);
    if parts.headers.contains_key(http::header::ORIGIN) {
        return Err(denied(
            "requests from web pages (with an Origin header) are refused",
        ));
    }
    let own = |host: &str| {
        host == format!("127.0.0.1:{port}")
            || host.eq_ignore_ascii_case(&format!("localhost:{port}"))
    };
    let host = parts
        .headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let authority_ok = parts.uri.authority().is_none_or(|a| own(a.as_str()));
    if !own(host) || !authority_ok {
        return Err(denied(&format!(
            "the Host must be this API's own address, 127.0.0.1:{port} or localhost:{port}"
        )));
    }
    Ok(())
}

/// Accept the function `name` only unqualified or as `$LATEST`, whether the
/// qualifier is in its name (`own`) or the `Qualifier` parameter of `query`.
fn latest_only(name: &str, own: Option<String>, query: &str) -> Result<(), Reply> {
    let qualifier = query_parameter(query, "Qualifier")?;
    let qualifier = match (own, qualifier) {
        (Some(a), Some(b)) if a != b => {
            return Err(Reply::error(
                400,
                "InvalidParameterValueException",
                "The derived qualifier from the function name does not match the specified qualifier.",
            ));
        }
        (a, b) => a.or(b),
    };
    if let Some(qualifier) = qualifier.filter(|q| q != "$LATEST") {
        return Err(not_found(&format!("{name}:{qualifier}")));
    }
    Ok(())
}

/// Whether `context` is base64 of a JSON object, within Lambda's size.
fn valid_client_context(context: &str) -> bool {
    context.len() <= MAX_CLIENT_CONTEXT_BYTES
        && base64::engine::general_purpose::STANDARD
            .decode(context)
            .ok()
            .and_then(|json| serde_json::from_slice::<serde_json::Value>(&json).ok())
            .is_some_and(|json| json.is_object())
}

/// The value of `key` in `query` (percent-decoded), if present.
fn query_parameter(query: &str, key: &str) -> Result<Option<String>, Reply> {
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k == key {
            let decoded = percent_decoded(&v.replace('+', " ")).ok_or_else(|| {
                Reply::error(
                    400,
                    "InvalidParameterValueException",
                    &format!("{key} is not percent-encoded UTF-8"),
                )
            })?;
            return Ok(Some(decoded));
        }
    }
    Ok(None)
}

/// The payload, read as it arrives, at most `limit` bytes; past it the rest
/// is read and dropped (up to [`MAX_DISCARDED_BYTES`]) and the answer is
/// Lambda's 413.
async fn read_body<B>(mut body: B, limit: usize) -> Result<Bytes, Reply>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut payload = BytesMut::new();
    let mut total = 0_usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            Reply::error(
                400,
                "InvalidRequestContentException",
                &format!("the payload could not be read: {e}"),
            )
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        total = total.saturating_add(data.len());
        if total > limit {
            // Nothing more is kept.
            payload = BytesMut::new();
            if total > MAX_DISCARDED_BYTES {
                break;
            }
        } else {
            payload.extend_from_slice(&data);
        }
    }
    if total > limit {
        return Err(too_large(limit, total));
    }
    Ok(payload.freeze())
}

/// Lambda's answer to a payload of `size` bytes past `limit`.
fn too_large(limit: usize, size: usize) -> Reply {
    let message = if limit == MAX_EVENT_PAYLOAD_BYTES {
        format!(
            "{size} byte payload is too large for the Event invocation type (limit {limit} bytes)"
        )
    } else {
        format!("Request must be smaller than {limit} bytes for the InvokeFunction operation")
    };
    let mut reply = Reply::error(413, "RequestEntityTooLargeException", &message);
    reply.headers.push(("connection", "close".into()));
    reply
}

/// Lambda's answer for a function (or qualifier) it does not have.
fn not_found(name: &str) -> Reply {
    Reply::error_with(
        404,
        "ResourceNotFoundException",
        "Message",
        &format!(
            "Function not found: arn:aws:lambda:{}:{}:function:{}",
            crate::local_aws::REGION,
            crate::local_aws::ACCOUNT_ID,
            truncated(name)
        ),
    )
}

/// The function's name and qualifier in the path's `{FunctionName}`
/// (percent-encoded, as SDKs send it), which Lambda takes in any of its
/// forms: a name (`my-function`), a function ARN
/// (`arn:aws:lambda:us-east-1:123456789012:function:my-function`) or a
/// partial ARN (`123456789012:function:my-function`), each with an optional
/// `:qualifier`. An ARN of another region names no local function.
fn function_name(encoded: &str) -> Result<(String, Option<String>), Reply> {
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
    let valid_qualifier = qualifier.is_none_or(|q| !q.is_empty());
    if !valid_name || !valid_qualifier {
        return Err(invalid(&text));
    }
    Ok((name.to_owned(), qualifier.map(str::to_owned)))
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
            rest = tail.get(2..)?;
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

/// The API's answer for a pool's answer.
fn from_invocation(invoked: Invoked) -> Reply {
    let Invoked { invocation, log } = invoked;
    if invocation.status == 429 {
        return Reply {
            status: 429,
            headers: vec![("x-amzn-ErrorType", "TooManyRequestsException".to_owned())],
            body: Bytes::from(invocation.body),
        };
    }
    let mut headers = vec![("X-Amz-Executed-Version", "$LATEST".to_owned())];
    if function_error(&invocation) {
        headers.push(("X-Amz-Function-Error", "Unhandled".to_owned()));
    }
    if let Some(log) = log {
        let tail = &log[log.len().saturating_sub(LOG_TAIL_BYTES)..];
        headers.push((
            "X-Amz-Log-Result",
            base64::engine::general_purpose::STANDARD.encode(tail),
        ));
    }
    Reply {
        status: 200,
        headers,
        body: Bytes::from(invocation.body),
    }
}

/// Whether the answer is the runtime's error object.
fn function_error(invocation: &Invocation) -> bool {
    invocation
        .json()
        .ok()
        .is_some_and(|v| v.get("errorType").is_some())
}

/// At most 64 characters of a caller's value, for error messages.
fn truncated(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests;

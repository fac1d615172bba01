//! A function's Function URL on a loopback port, served as Lambda serves
//! Function URLs: each HTTP request becomes the payload format 2.0 event
//! ([`event`]), the function's answer becomes the HTTP response ([`answer`]),
//! `AuthType: AWS_IAM` requires a SigV4 signature for the service `lambda`
//! ([`sigv4`]; the local keys are [`ACCESS_KEY_ID`] and [`SECRET_ACCESS_KEY`]),
//! and a `Cors` setting answers preflights and adds CORS headers ([`cors`]).
//!
//! Bounded: at most [`MAX_CONNECTIONS`] connections at once (more wait to be
//! accepted), one request per connection, headers within 10 s, a body read as
//! it arrives and refused with 413 past [`MAX_BODY_BYTES`] (never allocated
//! from `Content-Length` ahead), within 30 s. Bodies are never logged.
//!
//! ```no_run
//! # fn main() -> Result<(), String> {
//! # let template = local_stack::template::Template::load("template.yaml".as_ref())?;
//! # let pool: std::sync::Arc<local_stack::pool::Pool> = unimplemented!();
//! let function = template.function("my-function")?;
//! if let Some(config) = template.function_url(&function)? {
//!     let url = local_stack::function_url::FunctionUrl::start(&function, &config, pool)?;
//!     println!("{}", url.curl_command(r#"{"greeting":"hello"}"#));
//! }
//! # Ok(()) }
//! ```

pub mod sigv4;

use crate::emulator::Invocation;
use crate::local_aws::{ACCESS_KEY, ACCOUNT_ID, REGION};
use crate::pool::{Environment, Pool};
use crate::template::{AuthType, Cors, Function, FunctionUrlConfig};
use base64::Engine;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{Map, Value, json};
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use time::OffsetDateTime;

/// The access key id requests to an `AWS_IAM` URL are signed with locally.
pub const ACCESS_KEY_ID: &str = ACCESS_KEY;
/// Its secret.
pub const SECRET_ACCESS_KEY: &str = ACCESS_KEY;
/// Lambda's limit on a Function URL request's body (6 MB).
pub const MAX_BODY_BYTES: usize = crate::lambda_api::MAX_PAYLOAD_BYTES;
/// Most connections served at once; more wait to be accepted.
pub const MAX_CONNECTIONS: usize = 64;
/// Time to send the request's head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Time to send the request's body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Whatever invokes the function with an event and returns its answer.
pub type Invoke = Arc<dyn Fn(Vec<u8>) -> Result<Invocation, String> + Send + Sync>;

/// A running Function URL, stopped on drop.
pub struct FunctionUrl {
    port: u16,
    auth_type: AuthType,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What every request of one URL shares.
struct Served {
    url_id: String,
    auth_type: AuthType,
    cors: Option<Cors>,
    invoke: Invoke,
}

impl FunctionUrl {
    /// Serve `function`'s URL, configured by `config` (see
    /// [`crate::template::Template::function_url`]), with `pool`'s
    /// environments, on a free loopback port.
    pub fn start<E: Environment + 'static>(
        function: &Function,
        config: &FunctionUrlConfig,
        pool: Arc<Pool<E>>,
    ) -> Result<Self, String> {
        Self::serve(
            function,
            config,
            Arc::new(move |payload: Vec<u8>| pool.invoke(payload)),
        )
    }

    /// [`FunctionUrl::start`] with any `invoke` (a test's, say).
    pub fn serve(
        function: &Function,
        config: &FunctionUrlConfig,
        invoke: Invoke,
    ) -> Result<Self, String> {
        let context = |e: std::io::Error| format!("{} Function URL: {e}", function.logical_id);
        let listener = crate::process::free_listener().map_err(context)?;
        listener.set_nonblocking(true).map_err(context)?;
        let port = listener.local_addr().map_err(context)?.port();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(context)?;
        let served = Arc::new(Served {
            url_id: random_url_id(),
            auth_type: config.auth_type,
            cors: config.cors.clone(),
            invoke,
        });
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name(format!("url-{}", function.binary))
            .spawn(move || {
                runtime.block_on(accept(listener, served, stopped));
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(context)?;
        Ok(Self {
            port,
            auth_type: config.auth_type,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// A `curl` command line (curl 7.75 or newer) that POSTs the JSON `body`
    /// to the URL, signed with the local keys if the URL requires it.
    pub fn curl_command(&self, body: &str) -> String {
        let signing = match self.auth_type {
            AuthType::AwsIam => format!(
                "--aws-sigv4 \"aws:amz:{REGION}:{}\" --user \"{ACCESS_KEY_ID}:{SECRET_ACCESS_KEY}\" ",
                sigv4::SERVICE
            ),
            AuthType::None => String::new(),
        };
        format!(
            "curl {signing}-H 'content-type: application/json' --data {} {}",
            shell_quoted(body),
            self.url()
        )
    }
}

impl FunctionUrl {
    /// POST the JSON `body` to the URL, signed with the local keys if the URL
    /// requires it, as a caller does: the HTTP status and the body.
    pub fn post(&self, body: &str) -> Result<(u16, String), String> {
        let url = self.url();
        let host = format!("127.0.0.1:{}", self.port);
        let mut request = ureq::post(&url)
            .config()
            .http_status_as_error(false)
            .build()
            .header("content-type", "application/json");
        if self.auth_type == AuthType::AwsIam {
            let keys = sigv4::Keys {
                access_key_id: ACCESS_KEY_ID,
                secret_access_key: SECRET_ACCESS_KEY,
                region: REGION,
            };
            let signing = sigv4::signing_headers(
                &url,
                &host,
                body.as_bytes(),
                keys,
                sigv4::SERVICE,
                SystemTime::now(),
            )?;
            for (name, value) in signing {
                request = request.header(name, value);
            }
        }
        let mut response = request.send(body).map_err(|e| format!("POST {url}: {e}"))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("POST {url}: {e}"))?;
        Ok((status, text))
    }
}

impl Drop for FunctionUrl {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `text` in single quotes for a POSIX shell.
fn shell_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Accept connections until `stopped`, at most [`MAX_CONNECTIONS`] at once.
async fn accept(
    listener: std::net::TcpListener,
    served: Arc<Served>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = tokio::select! {
            _ = &mut stopped => return,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => {
                    // Out of descriptors, say: try again shortly.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let served = Arc::clone(&served);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let served = Arc::clone(&served);
                async move { Ok::<_, Infallible>(handle(request, &served, peer.ip()).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(false)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
            drop(permit);
        });
    }
}

/// One request, answered.
async fn handle(
    request: hyper::Request<Incoming>,
    served: &Served,
    source_ip: IpAddr,
) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    if let Some(cors) = &served.cors
        && cors::is_preflight(&parts)
    {
        return cors::preflight(cors, &parts.headers).into_response();
    }
    let mut reply = match read_body(&parts.headers, body).await {
        Err(reply) => reply,
        Ok(body) => invoke(&parts, body, served, source_ip).await,
    };
    if let Some(cors) = &served.cors {
        cors::add_headers(cors, &parts.headers, &mut reply);
    }
    reply.into_response()
}

/// Check the caller, build the event, invoke, map the answer.
async fn invoke(parts: &Parts, body: Vec<u8>, served: &Served, source_ip: IpAddr) -> Reply {
    let caller = match served.auth_type {
        AuthType::None => None,
        AuthType::AwsIam => {
            let keys = sigv4::Keys {
                access_key_id: ACCESS_KEY_ID,
                secret_access_key: SECRET_ACCESS_KEY,
                region: REGION,
            };
            match sigv4::verify(parts, &body, SystemTime::now(), &keys) {
                Ok(caller) => Some(caller),
                Err(_) => return Reply::message(StatusCode::FORBIDDEN, "Forbidden"),
            }
        }
    };
    let context = EventContext {
        url_id: served.url_id.clone(),
        request_id: random_request_id(),
        time: OffsetDateTime::now_utc(),
        source_ip,
        caller,
    };
    let payload = event(parts, &body, &context).to_string().into_bytes();
    drop(body);
    let invoke = Arc::clone(&served.invoke);
    match tokio::task::spawn_blocking(move || invoke(payload)).await {
        Ok(Ok(invocation)) => answer(&invocation),
        Ok(Err(_)) | Err(_) => Reply::message(StatusCode::BAD_GATEWAY, "Internal Server Error"),
    }
}

/// The body as it arrives, at most [`MAX_BODY_BYTES`], within [`BODY_TIMEOUT`].
async fn read_body(headers: &HeaderMap, mut body: Incoming) -> Result<Vec<u8>, Reply> {
    let too_large = || Reply::message(StatusCode::PAYLOAD_TOO_LARGE, "Request Entity Too Large");
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    let read = async {
        let mut bytes = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame =
                frame.map_err(|_| Reply::message(StatusCode::BAD_REQUEST, "Bad Request"))?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() + data.len() > MAX_BODY_BYTES {
                    return Err(too_large());
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok(bytes)
    };
    tokio::time::timeout(BODY_TIMEOUT, read)
        .await
        .unwrap_or_else(|_| {
            Err(Reply::message(
                StatusCode::REQUEST_TIMEOUT,
                "Request Timeout",
            ))
        })
}

/// An HTTP answer before it is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status.
    pub status: StatusCode,
    /// The headers, in order (`set-cookie` once per cookie).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Reply {
    /// `{"Message": message}` with `status`, as Lambda's own answers are.
    fn message(status: StatusCode, message: &str) -> Self {
        Self {
            status,
            headers: vec![(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body: json!({ "Message": message }).to_string().into_bytes(),
        }
    }

    /// The header `name`, if present once.
    pub fn header(&self, name: &str) -> Option<&str> {
        let mut values = self.headers.iter().filter(|(n, _)| n == name);
        let (_, value) = values.next()?;
        value.to_str().ok().filter(|_| values.next().is_none())
    }

    fn into_response(self) -> Response<Full<Bytes>> {
        let mut response = Response::new(Full::new(Bytes::from(self.body)));
        *response.status_mut() = self.status;
        for (name, value) in self.headers {
            response.headers_mut().append(name, value);
        }
        response
    }
}

/// The function's answer as Lambda turns it into an HTTP response: an object
/// with `statusCode` gives the status, `headers`, `cookies` (each a
/// `set-cookie`) and `body` (base64-decoded if `isBase64Encoded`); any other
/// JSON value is the body of a 200 with `content-type: application/json`. A
/// function error, or an answer that breaks these rules, is a 502; a throttle
/// a 429.
pub fn answer(invocation: &Invocation) -> Reply {
    let bad_gateway = || Reply::message(StatusCode::BAD_GATEWAY, "Internal Server Error");
    if invocation.status == 429 {
        return Reply::message(StatusCode::TOO_MANY_REQUESTS, "Rate Exceeded.");
    }
    let Ok(value) = serde_json::from_str::<Value>(&invocation.body) else {
        return bad_gateway();
    };
    if invocation.status != 200 {
        return bad_gateway();
    }
    match value.get("statusCode") {
        Some(_) => structured(&value).unwrap_or_else(|_| bad_gateway()),
        None if value.get("errorType").is_some() => bad_gateway(),
        None => Reply {
            status: StatusCode::OK,
            headers: vec![(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body: invocation.body.trim().as_bytes().to_vec(),
        },
    }
}

/// An answer with `statusCode`, or why it is malformed.
fn structured(value: &Value) -> Result<Reply, &'static str> {
    let status = value["statusCode"]
        .as_u64()
        .and_then(|n| u16::try_from(n).ok())
        .and_then(|n| StatusCode::from_u16(n).ok())
        .ok_or("statusCode")?;
    let mut headers = Vec::new();
    if let Some(map) = value.get("headers").filter(|h| !h.is_null()) {
        for (name, v) in map.as_object().ok_or("headers")? {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(_) | Value::Bool(_) => v.to_string(),
                _ => return Err("header value"),
            };
            headers.push((
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| "header name")?,
                HeaderValue::from_str(&text).map_err(|_| "header value")?,
            ));
        }
    }
    if let Some(cookies) = value.get("cookies").filter(|c| !c.is_null()) {
        for cookie in cookies.as_array().ok_or("cookies")? {
            let cookie = cookie.as_str().ok_or("cookie")?;
            let cookie = HeaderValue::from_str(cookie).map_err(|_| "cookie")?;
            headers.push((header::SET_COOKIE, cookie));
        }
    }
    let text = match value.get("body") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err("body"),
    };
    let body = if value.get("isBase64Encoded").and_then(Value::as_bool) == Some(true) {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|_| "base64 body")?
    } else {
        text.as_bytes().to_vec()
    };
    Ok(Reply {
        status,
        headers,
        body,
    })
}

/// What an event carries besides the request itself.
#[derive(Debug, Clone)]
pub struct EventContext {
    /// The URL's id (`<url-id>.lambda-url.<region>.on.aws`).
    pub url_id: String,
    /// This request's id.
    pub request_id: String,
    /// When the request arrived.
    pub time: OffsetDateTime,
    /// The caller's address.
    pub source_ip: IpAddr,
    /// Who signed the request (`AuthType: AWS_IAM`).
    pub caller: Option<sigv4::Caller>,
}

/// The payload format 2.0 event Lambda sends the function for the request
/// `parts` with `body`: header names lower-cased and repeated ones joined
/// with commas, `cookie` headers as `cookies`, the query both raw and
/// decoded, and a body that is not text base64-encoded.
pub fn event(parts: &Parts, body: &[u8], context: &EventContext) -> Value {
    let (headers, cookies) = headers_and_cookies(&parts.headers);
    let raw_query = parts.uri.query().unwrap_or("");
    let header_text = |name: header::HeaderName| {
        headers
            .get(name.as_str())
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let user_agent = header_text(header::USER_AGENT).unwrap_or_default();
    let content_type = header_text(header::CONTENT_TYPE);
    let mut event = json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": parts.uri.path(),
        "rawQueryString": raw_query,
        "headers": headers,
    });
    if !cookies.is_empty() {
        event["cookies"] = Value::Array(cookies);
    }
    if !raw_query.is_empty() {
        event["queryStringParameters"] = query_parameters(raw_query);
    }
    event["requestContext"] = request_context(parts, &user_agent, context);
    let text = is_text(content_type.as_deref())
        .then(|| std::str::from_utf8(body).ok())
        .flatten();
    if !body.is_empty() {
        event["body"] = match text {
            Some(text) => Value::String(text.to_owned()),
            None => Value::String(base64::engine::general_purpose::STANDARD.encode(body)),
        };
    }
    event["isBase64Encoded"] = Value::Bool(!body.is_empty() && text.is_none());
    event
}

/// The headers, names lower-case and repeated ones joined with commas, but
/// `cookie`, whose cookies are listed apart.
fn headers_and_cookies(request: &HeaderMap) -> (Map<String, Value>, Vec<Value>) {
    let mut headers: Map<String, Value> = Map::new();
    let mut cookies: Vec<Value> = Vec::new();
    for (name, value) in request {
        let text = String::from_utf8_lossy(value.as_bytes());
        if name == header::COOKIE {
            cookies.extend(
                text.split(';')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .map(|c| Value::String(c.to_owned())),
            );
            continue;
        }
        match headers.get_mut(name.as_str()) {
            Some(Value::String(joined)) => {
                joined.push(',');
                joined.push_str(&text);
            }
            _ => {
                headers.insert(name.as_str().to_owned(), Value::String(text.into_owned()));
            }
        }
    }
    (headers, cookies)
}

/// The event's `requestContext`.
fn request_context(parts: &Parts, user_agent: &str, context: &EventContext) -> Value {
    let domain = format!("{}.lambda-url.{REGION}.on.aws", context.url_id);
    let mut request_context = json!({
        "accountId": ACCOUNT_ID,
        "apiId": context.url_id,
        "domainName": domain,
        "domainPrefix": context.url_id,
        "http": {
            "method": parts.method.as_str(),
            "path": parts.uri.path(),
            "protocol": protocol(parts.version),
            "sourceIp": context.source_ip.to_string(),
            "userAgent": user_agent,
        },
        "requestId": context.request_id,
        "routeKey": "$default",
        "stage": "$default",
        "time": clf_time(context.time),
        "timeEpoch": i64::try_from(context.time.unix_timestamp_nanos() / 1_000_000).unwrap_or(0),
    });
    if let Some(caller) = &context.caller {
        request_context["authorizer"] = json!({ "iam": {
            "accessKey": caller.access_key,
            "accountId": ACCOUNT_ID,
            "callerId": local_user_id(),
            "cognitoIdentity": null,
            "principalOrgId": null,
            "userArn": format!("arn:aws:iam::{ACCOUNT_ID}:user/{}", caller.access_key),
            "userId": local_user_id(),
        }});
    }
    request_context
}

/// The local caller's IAM user id.
fn local_user_id() -> String {
    format!("AIDA{}", ACCESS_KEY_ID.to_ascii_uppercase())
}

fn protocol(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2.0",
        _ => "HTTP/1.1",
    }
}

/// Whether a body of `content_type` is passed as text (if it is UTF-8):
/// none given, `text/*`, JSON, XML, JavaScript, form data.
fn is_text(content_type: Option<&str>) -> bool {
    let Some(content_type) = content_type else {
        return true;
    };
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    media.starts_with("text/")
        || media.ends_with("+json")
        || media.ends_with("+xml")
        || [
            "application/json",
            "application/xml",
            "application/javascript",
            "application/x-www-form-urlencoded",
        ]
        .contains(&media.as_str())
}

/// `queryStringParameters`: each name's decoded values joined with commas.
fn query_parameters(raw: &str) -> Value {
    let mut parameters: Map<String, Value> = Map::new();
    for pair in raw.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (name, value) = (percent_decoded(name), percent_decoded(value));
        match parameters.get_mut(&name) {
            Some(Value::String(joined)) => {
                joined.push(',');
                joined.push_str(&value);
            }
            _ => {
                parameters.insert(name, Value::String(value));
            }
        }
    }
    Value::Object(parameters)
}

/// `%XX` escapes decoded (a malformed one kept as is).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = |i: usize| bytes.get(i).and_then(|b| (*b as char).to_digit(16));
        match (bytes[at], hex(at + 1), hex(at + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push(u8::try_from(high * 16 + low).unwrap_or(b'?'));
                at += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `22/Nov/2026:09:00:00 +0000`.
fn clf_time(time: OffsetDateTime) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let time = time.to_offset(time::UtcOffset::UTC);
    format!(
        "{:02}/{}/{}:{:02}:{:02}:{:02} +0000",
        time.day(),
        MONTHS[usize::from(u8::from(time.month())) - 1],
        time.year(),
        time.hour(),
        time.minute(),
        time.second()
    )
}

/// 64 random bits (std's hasher keys are random per process and per call).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    hasher.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

/// A URL id as Lambda makes them: 32 lower-case letters and digits.
fn random_url_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..32)
        .map(|_| {
            let index = usize::try_from(random_u64() % ALPHABET.len() as u64).unwrap_or(0);
            char::from(ALPHABET[index])
        })
        .collect()
}

/// A request id shaped as a UUID (version 4).
fn random_request_id() -> String {
    let (a, b) = (random_u64(), random_u64());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

/// CORS as Lambda applies a Function URL's `Cors` setting.
pub mod cors {
    use super::{Cors, Method, Parts, Reply};
    use http::StatusCode;
    use http::header::{self, HeaderMap, HeaderName, HeaderValue};

    /// An `OPTIONS` request with `Access-Control-Request-Method`.
    pub fn is_preflight(parts: &Parts) -> bool {
        parts.method == Method::OPTIONS
            && parts
                .headers
                .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    }

    /// The request's `Origin` if `cors` allows it.
    fn allowed_origin<'a>(cors: &Cors, headers: &'a HeaderMap) -> Option<&'a str> {
        let origin = headers.get(header::ORIGIN)?.to_str().ok()?;
        cors.allow_origins
            .iter()
            .any(|o| o == "*" || o.eq_ignore_ascii_case(origin))
            .then_some(origin)
    }

    /// `Access-Control-Allow-Origin`'s value for an allowed `origin`.
    fn allow_origin_value(cors: &Cors, origin: &str) -> Option<HeaderValue> {
        let any = cors.allow_origins.iter().any(|o| o == "*");
        if any && !cors.allow_credentials {
            Some(HeaderValue::from_static("*"))
        } else {
            HeaderValue::from_str(origin).ok()
        }
    }

    fn joined(items: &[String]) -> Option<HeaderValue> {
        (!items.is_empty())
            .then(|| HeaderValue::from_str(&items.join(",")).ok())
            .flatten()
    }

    /// The answer to a preflight, without invoking the function: 200, with
    /// the allowing headers if the origin and the method are allowed.
    pub fn preflight(cors: &Cors, headers: &HeaderMap) -> Reply {
        let mut reply = Reply {
            status: StatusCode::OK,
            headers: vec![(header::VARY, HeaderValue::from_static("Origin"))],
            body: Vec::new(),
        };
        let method = headers
            .get(header::ACCESS_CONTROL_REQUEST_METHOD)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let method_allowed = cors
            .allow_methods
            .iter()
            .any(|m| m == "*" || m.eq_ignore_ascii_case(method));
        let Some(origin) = allowed_origin(cors, headers).filter(|_| method_allowed) else {
            return reply;
        };
        let mut add = |name, value| push_header(&mut reply.headers, name, value);
        add(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            allow_origin_value(cors, origin),
        );
        add(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            joined(&cors.allow_methods),
        );
        add(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            joined(&cors.allow_headers),
        );
        add(
            header::ACCESS_CONTROL_MAX_AGE,
            cors.max_age.map(HeaderValue::from),
        );
        add(
            header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
            cors.allow_credentials
                .then_some(HeaderValue::from_static("true")),
        );
        reply
    }

    /// Replace the function's CORS headers with the URL's, if the request's
    /// origin is allowed.
    pub fn add_headers(cors: &Cors, request: &HeaderMap, reply: &mut Reply) {
        reply
            .headers
            .retain(|(name, _)| !name.as_str().starts_with("access-control-"));
        let Some(origin) = allowed_origin(cors, request) else {
            return;
        };
        let mut add = |name, value| push_header(&mut reply.headers, name, value);
        add(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            allow_origin_value(cors, origin),
        );
        add(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            joined(&cors.expose_headers),
        );
        add(
            header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
            cors.allow_credentials
                .then_some(HeaderValue::from_static("true")),
        );
        add(header::VARY, Some(HeaderValue::from_static("Origin")));
    }

    /// `value` under `name` in `headers`, if there is one.
    fn push_header(
        headers: &mut Vec<(HeaderName, HeaderValue)>,
        name: HeaderName,
        value: Option<HeaderValue>,
    ) {
        if let Some(value) = value {
            headers.push((name, value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn parts(request: http::Request<()>) -> Parts {
        request.into_parts().0
    }

    fn context(caller: Option<sigv4::Caller>) -> EventContext {
        EventContext {
            url_id: "abcdefghijklmnopqrstuvwxyz012345".into(),
            request_id: "c0a80d3a-6f5e-4b4e-9a1e-2b3c4d5e6f70".into(),
            time: OffsetDateTime::from_unix_timestamp(1_795_338_000).expect("time"),
            source_ip: "203.0.113.10".parse().expect("ip"),
            caller,
        }
    }

    #[test]
    fn the_event_for_a_request_is_lambdas_payload_2_0() {
        let path = crate::fixtures::events("fixture-function").join("function-url.json");
        let sample: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("sample")).expect("JSON");
        let request = http::Request::post("/")
            .header("content-type", "application/json")
            .header(
                "host",
                "abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws",
            )
            .header("user-agent", "curl/8.5.0")
            .body(())
            .expect("request");
        let body = br#"{"greeting": "hello from a Function URL"}"#;
        assert_eq!(event(&parts(request), body, &context(None)), sample);
    }

    /// The request the payload 2.0 event `sample` is made from, with its body
    /// and context.
    fn request_of(sample: &Value) -> (Parts, Vec<u8>, EventContext) {
        let text = |value: &Value| value.as_str().expect("text").to_owned();
        let http = &sample["requestContext"]["http"];
        let uri = match text(&sample["rawQueryString"]).as_str() {
            "" => text(&sample["rawPath"]),
            query => format!("{}?{query}", text(&sample["rawPath"])),
        };
        let mut request = http::Request::builder()
            .method(text(&http["method"]).as_str())
            .uri(uri);
        for (name, value) in sample["headers"].as_object().into_iter().flatten() {
            request = request.header(name, text(value));
        }
        for cookie in sample["cookies"].as_array().into_iter().flatten() {
            request = request.header("cookie", text(cookie));
        }
        let body = match sample["body"].as_str() {
            None => Vec::new(),
            Some(body) if sample["isBase64Encoded"] == true => {
                base64::engine::general_purpose::STANDARD
                    .decode(body)
                    .expect("base64")
            }
            Some(body) => body.as_bytes().to_vec(),
        };
        let epoch_ms = sample["requestContext"]["timeEpoch"]
            .as_i64()
            .expect("timeEpoch");
        let caller = sample["requestContext"]["authorizer"]["iam"]["accessKey"]
            .as_str()
            .map(|key| sigv4::Caller {
                access_key: key.to_owned(),
            });
        let context = EventContext {
            url_id: text(&sample["requestContext"]["domainPrefix"]),
            request_id: text(&sample["requestContext"]["requestId"]),
            time: OffsetDateTime::from_unix_timestamp_nanos(i128::from(epoch_ms) * 1_000_000)
                .expect("time"),
            source_ip: text(&http["sourceIp"]).parse().expect("source IP"),
            caller,
        };
        (parts(request.body(()).expect("request")), body, context)
    }

    /// Whichever functions the project has: each sample of `events/` that
    /// is a Function URL's event is what the local Function URL makes of the
    /// request it was made from.
    #[test]
    fn the_projects_function_url_samples_are_the_events_of_their_requests() {
        let events = crate::workspace_root().join("events");
        let dirs = std::fs::read_dir(&events).expect("events/");
        let function_url = crate::fixtures::events("fixture-function");
        for dir in dirs
            .filter_map(Result::ok)
            .map(|e| e.path())
            .chain([function_url])
        {
            if !dir.is_dir() {
                continue;
            }
            for sample in crate::events::samples_in(&dir).unwrap_or_else(|e| panic!("{e}")) {
                if sample.event["version"] != "2.0"
                    || !sample.event["requestContext"]["http"].is_object()
                {
                    continue;
                }
                let (parts, body, context) = request_of(&sample.event);
                assert_eq!(
                    event(&parts, &body, &context),
                    sample.event,
                    "{}",
                    sample.path.display()
                );
            }
        }
    }

    #[test]
    fn headers_cookies_and_query_become_the_events_fields() {
        let request = http::Request::get("/a/b?x=1&y=a%20b&x=2&flag")
            .header("X-Custom", "one")
            .header("x-custom", "two")
            .header("cookie", "a=1; b=2")
            .header("cookie", "c=3")
            .body(())
            .expect("request");
        let event = event(&parts(request), b"", &context(None));
        assert_eq!(event["headers"], json!({"x-custom": "one,two"}));
        assert_eq!(event["cookies"], json!(["a=1", "b=2", "c=3"]));
        assert_eq!(event["rawPath"], "/a/b");
        assert_eq!(event["rawQueryString"], "x=1&y=a%20b&x=2&flag");
        assert_eq!(
            event["queryStringParameters"],
            json!({"x": "1,2", "y": "a b", "flag": ""})
        );
        assert_eq!(event["requestContext"]["http"]["method"], "GET");
        assert_eq!(event["requestContext"]["http"]["userAgent"], "");
        assert_eq!(event.get("body"), None);
        assert_eq!(event["isBase64Encoded"], false);
        assert_eq!(event["requestContext"].get("authorizer"), None);
    }

    #[test]
    fn bodies_that_are_not_text_are_base64_encoded() {
        let with = |content_type: &str, body: &[u8]| {
            let request = http::Request::post("/")
                .header("content-type", content_type)
                .body(())
                .expect("request");
            let event = event(&parts(request), body, &context(None));
            (event["isBase64Encoded"].clone(), event["body"].clone())
        };
        assert_eq!(
            with("text/plain; charset=utf-8", b"hi"),
            (json!(false), json!("hi"))
        );
        assert_eq!(
            with("application/problem+json", b"{}"),
            (json!(false), json!("{}"))
        );
        assert_eq!(
            with("application/octet-stream", b"hi"),
            (json!(true), json!("aGk="))
        );
        assert_eq!(
            with("text/plain", &[0xff, 0x00]),
            (json!(true), json!("/wA="))
        );
    }

    #[test]
    fn a_signed_request_carries_its_iam_caller() {
        let request = http::Request::post("/").body(()).expect("request");
        let caller = sigv4::Caller {
            access_key: "local".into(),
        };
        let event = event(&parts(request), b"{}", &context(Some(caller)));
        assert_eq!(
            event["requestContext"]["authorizer"]["iam"],
            json!({
                "accessKey": "local",
                "accountId": "123456789012",
                "callerId": "AIDALOCAL",
                "cognitoIdentity": null,
                "principalOrgId": null,
                "userArn": "arn:aws:iam::123456789012:user/local",
                "userId": "AIDALOCAL",
            })
        );
    }

    fn invocation(body: Value) -> Invocation {
        Invocation {
            status: 200,
            body: body.to_string(),
        }
    }

    #[test]
    fn an_answer_with_a_status_code_is_used_as_is() {
        let reply = answer(&invocation(json!({
            "statusCode": 201,
            "headers": {"content-type": "text/plain", "x-n": 3},
            "cookies": ["a=1; Secure", "b=2"],
            "body": "aGVsbG8=",
            "isBase64Encoded": true,
        })));
        assert_eq!(reply.status, StatusCode::CREATED);
        assert_eq!(reply.body, b"hello");
        assert_eq!(reply.header("content-type"), Some("text/plain"));
        assert_eq!(reply.header("x-n"), Some("3"));
        let cookies: Vec<_> = reply
            .headers
            .iter()
            .filter(|(n, _)| n == header::SET_COOKIE)
            .map(|(_, v)| v.to_str().expect("text"))
            .collect();
        assert_eq!(cookies, ["a=1; Secure", "b=2"]);
        let plain = answer(&invocation(json!({"statusCode": 404, "body": "gone"})));
        assert_eq!(
            (plain.status, plain.body),
            (StatusCode::NOT_FOUND, b"gone".to_vec())
        );
    }

    #[test]
    fn any_other_answer_is_a_json_200() {
        for value in [
            json!({"hashes": ["$2b$"]}),
            json!([1, 2]),
            json!("text"),
            json!(7),
        ] {
            let reply = answer(&invocation(value.clone()));
            assert_eq!(reply.status, StatusCode::OK);
            assert_eq!(reply.header("content-type"), Some("application/json"));
            assert_eq!(
                serde_json::from_slice::<Value>(&reply.body).ok(),
                Some(value)
            );
        }
    }

    #[test]
    fn function_errors_and_malformed_answers_are_502s() {
        let gateway = |reply: Reply| {
            assert_eq!(reply.status, StatusCode::BAD_GATEWAY, "{reply:?}");
            assert_eq!(reply.body, br#"{"Message":"Internal Server Error"}"#);
        };
        gateway(answer(&invocation(
            json!({"errorType": "InternalError", "errorMessage": "boom"}),
        )));
        gateway(answer(&invocation(json!({"statusCode": "two hundred"}))));
        gateway(answer(&invocation(json!({"statusCode": 99}))));
        gateway(answer(&invocation(
            json!({"statusCode": 200, "body": "%%", "isBase64Encoded": true}),
        )));
        gateway(answer(&invocation(
            json!({"statusCode": 200, "headers": {"a b": "c"}}),
        )));
        gateway(answer(&Invocation {
            status: 200,
            body: "not json".into(),
        }));
        let throttled = answer(&crate::pool::too_many_requests());
        assert_eq!(throttled.status, StatusCode::TOO_MANY_REQUESTS);
    }

    fn cors() -> Cors {
        Cors {
            allow_credentials: true,
            allow_headers: vec!["content-type".into(), "x-custom".into()],
            allow_methods: vec!["POST".into(), "GET".into()],
            allow_origins: vec!["https://app.example.com".into()],
            expose_headers: vec!["x-request-id".into()],
            max_age: Some(300),
        }
    }

    fn preflight_request(origin: &str, method: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ORIGIN, origin.parse().expect("origin"));
        headers.insert(
            header::ACCESS_CONTROL_REQUEST_METHOD,
            method.parse().expect("method"),
        );
        headers
    }

    #[test]
    fn preflights_are_answered_from_the_cors_setting() {
        let reply = cors::preflight(
            &cors(),
            &preflight_request("https://app.example.com", "POST"),
        );
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(
            reply.header("access-control-allow-origin"),
            Some("https://app.example.com")
        );
        assert_eq!(
            reply.header("access-control-allow-methods"),
            Some("POST,GET")
        );
        assert_eq!(
            reply.header("access-control-allow-headers"),
            Some("content-type,x-custom")
        );
        assert_eq!(reply.header("access-control-max-age"), Some("300"));
        assert_eq!(
            reply.header("access-control-allow-credentials"),
            Some("true")
        );
        for (origin, method) in [
            ("https://evil.example", "POST"),
            ("https://app.example.com", "PUT"),
        ] {
            let refused = cors::preflight(&cors(), &preflight_request(origin, method));
            assert_eq!(
                refused.header("access-control-allow-origin"),
                None,
                "{origin} {method}"
            );
        }
        let any = Cors {
            allow_origins: vec!["*".into()],
            allow_credentials: false,
            ..cors()
        };
        let reply = cors::preflight(&any, &preflight_request("https://x.example", "GET"));
        assert_eq!(reply.header("access-control-allow-origin"), Some("*"));
        assert_eq!(reply.header("access-control-allow-credentials"), None);
    }

    #[test]
    fn answers_to_allowed_origins_get_the_urls_cors_headers_only() {
        let mut reply = answer(&invocation(json!({"statusCode": 200,
            "headers": {"access-control-allow-origin": "https://other.example"}})));
        let mut request = HeaderMap::new();
        request.insert(
            header::ORIGIN,
            "https://app.example.com".parse().expect("origin"),
        );
        cors::add_headers(&cors(), &request, &mut reply);
        assert_eq!(
            reply.header("access-control-allow-origin"),
            Some("https://app.example.com")
        );
        assert_eq!(
            reply.header("access-control-expose-headers"),
            Some("x-request-id")
        );
        let mut other = reply.clone();
        request.insert(
            header::ORIGIN,
            "https://evil.example".parse().expect("origin"),
        );
        cors::add_headers(&cors(), &request, &mut other);
        assert_eq!(other.header("access-control-allow-origin"), None);
    }

    /// A URL whose function answers with the event it was sent.
    fn echo(config: FunctionUrlConfig) -> FunctionUrl {
        let function = Function {
            logical_id: "EchoFunction".into(),
            binary: "echo".into(),
            memory_mb: 128,
            timeout_s: 3,
            env: Vec::new(),
            reserved_concurrency: None,
        };
        let invoke: Invoke = Arc::new(|payload: Vec<u8>| {
            Ok(Invocation {
                status: 200,
                body: String::from_utf8(payload).map_err(|e| e.to_string())?,
            })
        });
        FunctionUrl::serve(&function, &config, invoke).expect("serve")
    }

    /// Send `request` as is; the status line and the body of the answer.
    fn exchange(url: &FunctionUrl, request: &[u8]) -> (String, String) {
        let address = url
            .url()
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let mut stream = std::net::TcpStream::connect(address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let _ = stream.write_all(request);
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        (
            head.lines().next().unwrap_or("").to_owned(),
            body.to_owned(),
        )
    }

    #[test]
    fn the_server_signs_in_invokes_and_refuses_as_lambda_does() {
        let iam = echo(FunctionUrlConfig {
            auth_type: AuthType::AwsIam,
            cors: Some(cors()),
        });
        let post = b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}";
        let (status, body) = exchange(&iam, post);
        assert_eq!(
            (status.as_str(), body.as_str()),
            ("HTTP/1.1 403 Forbidden", r#"{"Message":"Forbidden"}"#)
        );
        let preflight = b"OPTIONS / HTTP/1.1\r\nhost: x\r\norigin: https://app.example.com\r\naccess-control-request-method: POST\r\n\r\n";
        assert_eq!(exchange(&iam, preflight).0, "HTTP/1.1 200 OK");
        let huge = format!(
            "POST / HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{{}}",
            MAX_BODY_BYTES + 1
        );
        assert_eq!(
            exchange(&iam, huge.as_bytes()).0,
            "HTTP/1.1 413 Payload Too Large"
        );
        assert_eq!(
            exchange(&iam, b"NONSENSE\r\n\r\n").0,
            "HTTP/1.1 400 Bad Request"
        );

        let open = echo(FunctionUrlConfig {
            auth_type: AuthType::None,
            cors: None,
        });
        let (status, body) = exchange(&open, post);
        assert_eq!(status, "HTTP/1.1 200 OK");
        let event: Value = serde_json::from_str(&body).expect("the event, echoed");
        assert_eq!(event["body"], "{}");
        assert_eq!(event["requestContext"]["http"]["sourceIp"], "127.0.0.1");
        assert!(
            open.curl_command("{}").starts_with(
                "curl -H 'content-type: application/json' --data '{}' http://127.0.0.1:"
            )
        );
    }

    #[test]
    fn chunked_bodies_past_the_limit_are_refused_as_they_arrive() {
        let open = echo(FunctionUrlConfig {
            auth_type: AuthType::None,
            cors: None,
        });
        let chunk = vec![b'a'; 1 << 20];
        let mut request =
            b"POST / HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..7 {
            request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            request.extend_from_slice(&chunk);
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"0\r\n\r\n");
        assert_eq!(
            exchange(&open, &request).0,
            "HTTP/1.1 413 Payload Too Large"
        );
    }

    #[test]
    fn the_curl_line_quotes_the_body_for_the_shell() {
        assert_eq!(shell_quoted(r#"{"a":"it's"}"#), r#"'{"a":"it'\''s"}'"#);
        let iam = echo(FunctionUrlConfig {
            auth_type: AuthType::AwsIam,
            cors: None,
        });
        assert_eq!(
            iam.curl_command("{}"),
            format!(
                "curl --aws-sigv4 \"aws:amz:us-east-1:lambda\" --user \"local:local\" -H 'content-type: application/json' --data '{{}}' {}",
                iam.url()
            )
        );
    }
}

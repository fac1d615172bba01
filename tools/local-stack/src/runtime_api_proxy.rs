//! The runtime API proxy, between the runtime interface emulator and the
//! function's runtime: it hands the runtime the trace header each invocation
//! continues, as Lambda hands it.
//!
//! Lambda answers the runtime's `GET /2018-06-01/runtime/invocation/next` with
//! `Lambda-Runtime-Trace-Id`: the caller's `X-Amzn-Trace-Id`, or an SQS
//! batch's first message's `AWSTraceHeader`. The runtime interface emulator
//! takes the header from its invoke request but hands the runtime none. This
//! proxy stands between a function and its emulator's runtime API (the
//! function is told `AWS_LAMBDA_RUNTIME_API` of the proxy), passes every
//! request and answer through, and adds the header to the `/next` answer of
//! the invocation that was given one ([`RuntimeProxy::hand_over`]). It
//! serves one environment: on demand one invocation at a time, on Managed
//! Instances several, each named by the request id the local stack gives it
//! (the `/next` answer's `Lambda-Runtime-Aws-Request-Id`).
//!
//! The runtime's first `/next` is also where its init ends (the emulator's
//! `INIT REPORT` ends there too): the proxy runs the hook it was given for
//! that moment ([`RuntimeProxy::start`]'s `at_init_end`) before passing the
//! request on, so an on-demand environment's CPU share applies from its
//! first invocation ([`crate::cgroup::Cgroup::burst_for_init`]).

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// The header Lambda hands the runtime with each invocation.
pub const RUNTIME_TRACE_HEADER: &str = "lambda-runtime-trace-id";
/// The header naming the invocation a `/next` answer hands the runtime.
const RUNTIME_REQUEST_ID: &str = "lambda-runtime-aws-request-id";
/// Largest body passed through (the emulator enforces Lambda's own limits,
/// which are smaller).
const MAX_BODY_BYTES: usize = 64 << 20;

/// Trace headers handed over and not yet taken, by the request id of their
/// invocation (`None`: the next invocation, whatever the emulator names it).
/// At most one per invocation in flight: [`RuntimeProxy::withdraw`].
type Waiting = Arc<Mutex<HashMap<Option<String>, String>>>;

/// Run once, when the runtime first asks for an invocation.
pub type InitEnd = Box<dyn FnOnce() + Send>;

/// The hook for init's end, until the first `/next` takes it.
type AtInitEnd = Arc<Mutex<Option<InitEnd>>>;

/// A running proxy, stopped on drop.
#[derive(Debug)]
pub struct RuntimeProxy {
    address: SocketAddr,
    waiting: Waiting,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl RuntimeProxy {
    /// A proxy on a free 127.0.0.1 port in front of the runtime API on
    /// `upstream`; `at_init_end` runs when the runtime first asks for an
    /// invocation, before the request is passed on.
    pub fn start(upstream: SocketAddr, at_init_end: Option<InitEnd>) -> Result<Self, String> {
        let listener =
            crate::process::free_listener().map_err(|e| format!("runtime API proxy: {e}"))?;
        let address = listener.local_addr().map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let waiting = Waiting::default();
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("runtime API proxy: {e}"))?;
        let shared = Arc::clone(&waiting);
        let at_init_end = Arc::new(Mutex::new(at_init_end));
        let thread = std::thread::Builder::new()
            .name("runtime-api-proxy".into())
            .spawn(move || {
                runtime.block_on(serve(listener, upstream, shared, at_init_end, stopped))
            })
            .map_err(|e| format!("runtime API proxy: {e}"))?;
        Ok(Self {
            address,
            waiting,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `127.0.0.1:PORT`, for the function's `AWS_LAMBDA_RUNTIME_API`.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Hand `header` to the runtime with the invocation named `request_id`
    /// (`None`: with the next one).
    pub fn hand_over(&self, request_id: Option<&str>, header: String) {
        lock(&self.waiting).insert(request_id.map(str::to_owned), header);
    }

    /// Drop the header of the invocation named `request_id` if its runtime did
    /// not take it (the invocation ended before reaching the runtime).
    pub fn withdraw(&self, request_id: Option<&str>) {
        lock(&self.waiting).remove(&request_id.map(str::to_owned));
    }
}

impl Drop for RuntimeProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock<T>(shared: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn serve(
    listener: std::net::TcpListener,
    upstream: SocketAddr,
    waiting: Waiting,
    at_init_end: AtInitEnd,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    loop {
        let stream = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
        };
        let waiting = Arc::clone(&waiting);
        let at_init_end = Arc::clone(&at_init_end);
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let waiting = Arc::clone(&waiting);
                let at_init_end = Arc::clone(&at_init_end);
                async move {
                    Ok::<_, Infallible>(answer(request, upstream, &waiting, &at_init_end).await)
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The emulator's answer to `request`, with the trace header of its
/// invocation added to a `/next` answer; a 502 naming the failure if the
/// emulator could not be asked. The first `/next` runs the hook for init's end.
async fn answer(
    request: Request<Incoming>,
    upstream: SocketAddr,
    waiting: &Waiting,
    at_init_end: &AtInitEnd,
) -> Response<Full<Bytes>> {
    let is_next = request.uri().path().ends_with("/runtime/invocation/next");
    if is_next {
        let hook = lock(at_init_end).take();
        if let Some(hook) = hook {
            hook();
        }
    }
    match relay(request, upstream).await {
        Ok(mut response) => {
            if is_next && response.status() == StatusCode::OK {
                let named = response
                    .headers()
                    .get(RUNTIME_REQUEST_ID)
                    .and_then(|id| id.to_str().ok())
                    .map(str::to_owned);
                let header = {
                    let mut waiting = lock(waiting);
                    waiting.remove(&named).or_else(|| waiting.remove(&None))
                };
                if let Some(value) = header.and_then(|h| HeaderValue::from_str(&h).ok()) {
                    response.headers_mut().insert(RUNTIME_TRACE_HEADER, value);
                }
            }
            response
        }
        Err(e) => {
            let mut response = Response::new(Full::new(Bytes::from(e)));
            *response.status_mut() = StatusCode::BAD_GATEWAY;
            response
        }
    }
}

/// `request` sent on to the emulator, and its answer.
async fn relay(
    request: Request<Incoming>,
    upstream: SocketAddr,
) -> Result<Response<Full<Bytes>>, String> {
    let (parts, body) = request.into_parts();
    let body = collect(body).await?;
    let stream = tokio::net::TcpStream::connect(upstream)
        .await
        .map_err(|e| format!("runtime API {upstream}: {e}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("runtime API {upstream}: {e}"))?;
    tokio::spawn(connection);
    let response = sender
        .send_request(Request::from_parts(parts, Full::new(body)))
        .await
        .map_err(|e| format!("runtime API {upstream}: {e}"))?;
    let (parts, body) = response.into_parts();
    Ok(Response::from_parts(parts, Full::new(collect(body).await?)))
}

async fn collect(body: Incoming) -> Result<Bytes, String> {
    Limited::new(body, MAX_BODY_BYTES)
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .map_err(|e| format!("body: {e}"))
}

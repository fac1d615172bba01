//! A loopback HTTP/1.1 proxy in front of DynamoDB Local (which never
//! throttles) that answers `PutItem`s in bursts with DynamoDB's throttling
//! errors, and counts what it did: the DynamoDB faults of `fault_injection`
//! and `managed_instances`.

use crate::lock;
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Of every `BURST_EVERY` requests reaching the proxy, the first `BURST_LENGTH`
/// are answered with a throttling error.
pub const BURST_EVERY: usize = 50;
pub const BURST_LENGTH: usize = 20;

/// What the throttling proxy did.
#[derive(Default)]
pub struct ProxyStats {
    /// Requests received.
    requests: AtomicUsize,
    /// Requests passed on to DynamoDB Local.
    forwarded: AtomicUsize,
    /// `ProvisionedThroughputExceededException` answers.
    provisioned: AtomicUsize,
    /// `ThrottlingException` answers.
    throttling: AtomicUsize,
    /// Throttling answers per `order_id`.
    per_order: Mutex<HashMap<String, usize>>,
}

/// A loopback HTTP/1.1 proxy in front of DynamoDB Local (which never
/// throttles) that answers `PutItem`s in bursts with DynamoDB's throttling
/// errors, in the AWS JSON 1.0 protocol, and forwards everything else. One
/// thread per connection; stopped (connections shut down) on drop.
pub struct ThrottlingProxy {
    endpoint: String,
    stats: Arc<ProxyStats>,
    stop: Arc<AtomicBool>,
    clients: Arc<Mutex<Vec<TcpStream>>>,
    accept: Option<JoinHandle<()>>,
}

impl ThrottlingProxy {
    /// The proxy on a free loopback port, in front of DynamoDB Local's
    /// plain port `upstream`, throttling each order at most `per_order` times.
    pub fn start(upstream: u16, per_order: usize) -> Self {
        let listener = local_stack::process::free_listener().expect("proxy listener");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("proxy address").port();
        let stats = Arc::new(ProxyStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let clients: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let accept = {
            let (stats, stop, clients) =
                (Arc::clone(&stats), Arc::clone(&stop), Arc::clone(&clients));
            std::thread::spawn(move || {
                let mut connections = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            let Ok(handle) = client.try_clone() else {
                                continue;
                            };
                            lock(&clients).push(handle);
                            let stats = Arc::clone(&stats);
                            connections.push(std::thread::spawn(move || {
                                let _ = serve(client, upstream, per_order, &stats);
                            }));
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        Err(_) => break,
                    }
                }
                for connection in connections {
                    let _ = connection.join();
                }
            })
        };
        Self {
            endpoint: format!("http://127.0.0.1:{port}"),
            stats,
            stop,
            clients,
            accept: Some(accept),
        }
    }

    /// Environment variables for a function whose DynamoDB is this proxy
    /// (plain HTTP).
    pub fn env(&self) -> Vec<(&str, &str)> {
        local_stack::local_aws::function_env(&[("AWS_ENDPOINT_URL_DYNAMODB", &self.endpoint)])
    }

    /// What it did so far.
    pub fn stats(&self) -> &ProxyStats {
        &self.stats
    }
}

impl ProxyStats {
    /// Requests passed on to DynamoDB Local.
    pub fn forwarded(&self) -> usize {
        self.forwarded.load(Ordering::SeqCst)
    }

    /// `ProvisionedThroughputExceededException` answers.
    pub fn provisioned(&self) -> usize {
        self.provisioned.load(Ordering::SeqCst)
    }

    /// `ThrottlingException` answers.
    pub fn throttling(&self) -> usize {
        self.throttling.load(Ordering::SeqCst)
    }

    /// Throttling answers of both kinds.
    pub fn throttled(&self) -> usize {
        self.provisioned() + self.throttling()
    }
}

impl Drop for ThrottlingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for client in lock(&self.clients).iter() {
            let _ = client.shutdown(std::net::Shutdown::Both);
        }
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Answer the requests of one connection, in order.
fn serve(
    client: TcpStream,
    upstream: u16,
    per_order: usize,
    stats: &ProxyStats,
) -> std::io::Result<()> {
    let mut requests = BufReader::new(client.try_clone()?);
    let mut answers = client;
    while let Some(request) = read_message(&mut requests)? {
        let answer = match throttle(&request, per_order, stats) {
            Some(body) => throttled(body),
            None => {
                stats.forwarded.fetch_add(1, Ordering::SeqCst);
                forward(&request, upstream)?
            }
        };
        answers.write_all(&answer)?;
    }
    Ok(())
}

/// The error body to answer `request` with, if it is a `PutItem` in a burst
/// and its order has not had its share of throttling yet.
fn throttle(request: &Message, per_order: usize, stats: &ProxyStats) -> Option<String> {
    let n = stats.requests.fetch_add(1, Ordering::SeqCst);
    if n % BURST_EVERY >= BURST_LENGTH
        || !request
            .head
            .to_ascii_lowercase()
            .contains("x-amz-target: dynamodb_20120810.putitem")
    {
        return None;
    }
    let item: Value = serde_json::from_slice(&request.body).ok()?;
    let order_id = item["Item"]["order_id"]["S"].as_str()?.to_owned();
    let mut throttles = lock(&stats.per_order);
    let count = throttles.entry(order_id).or_default();
    if *count >= per_order {
        return None;
    }
    *count += 1;
    let (kind, message, counter) = if n.is_multiple_of(2) {
        (
            "ProvisionedThroughputExceededException",
            "The level of configured provisioned throughput for the table was exceeded.",
            &stats.provisioned,
        )
    } else {
        (
            "ThrottlingException",
            "Rate of requests exceeds the allowed throughput.",
            &stats.throttling,
        )
    };
    counter.fetch_add(1, Ordering::SeqCst);
    Some(
        serde_json::json!({
            "__type": format!("com.amazonaws.dynamodb.v20120810#{kind}"),
            "message": message,
        })
        .to_string(),
    )
}

/// An HTTP 400 with a DynamoDB error body.
fn throttled(body: String) -> Vec<u8> {
    format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/x-amz-json-1.0\r\n\
         x-amzn-RequestId: throttled\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Send `request` to DynamoDB Local on a connection of its own; its answer.
fn forward(request: &Message, upstream: u16) -> std::io::Result<Vec<u8>> {
    let mut connection = TcpStream::connect((Ipv4Addr::LOCALHOST, upstream))?;
    connection.write_all(&request.raw)?;
    read_message(&mut BufReader::new(connection))?
        .map(|answer| answer.raw)
        .ok_or_else(|| std::io::Error::other("DynamoDB Local closed the connection"))
}

/// One HTTP/1.1 message: its bytes as received, its head, its body.
struct Message {
    raw: Vec<u8>,
    head: String,
    body: Vec<u8>,
}

/// The next message on `reader` (`None` at the end of the stream). The body
/// is delimited by `Content-Length` or chunked transfer encoding.
fn read_message(reader: &mut impl BufRead) -> std::io::Result<Option<Message>> {
    let mut raw = Vec::new();
    loop {
        let before = raw.len();
        if reader.read_until(b'\n', &mut raw)? == 0 {
            return if raw.is_empty() {
                Ok(None)
            } else {
                Err(std::io::Error::other("connection closed inside a head"))
            };
        }
        if raw[before..] == *b"\r\n" {
            break;
        }
    }
    let head = String::from_utf8_lossy(&raw).into_owned();
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut line = Vec::new();
            reader.read_until(b'\n', &mut line)?;
            raw.extend_from_slice(&line);
            let size = String::from_utf8_lossy(&line);
            let size = size.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size, 16).map_err(std::io::Error::other)?;
            if size == 0 {
                // Trailers, up to an empty line.
                loop {
                    let mut trailer = Vec::new();
                    reader.read_until(b'\n', &mut trailer)?;
                    raw.extend_from_slice(&trailer);
                    if trailer.is_empty() || trailer == b"\r\n" {
                        break;
                    }
                }
                break;
            }
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            raw.extend_from_slice(&chunk);
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = header("content-length") {
        let length: usize = length.parse().map_err(std::io::Error::other)?;
        body = vec![0; length];
        reader.read_exact(&mut body)?;
        raw.extend_from_slice(&body);
    }
    Ok(Some(Message { raw, head, body }))
}

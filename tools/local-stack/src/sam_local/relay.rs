//! A TCP relay from the containers' bridge to a server on 127.0.0.1.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Forwards each TCP connection made to its address to a server on
/// 127.0.0.1 (one thread per direction); closes its port when dropped.
pub struct Relay {
    address: SocketAddr,
    stopped: Arc<AtomicBool>,
    /// The listening socket, shut down to wake the accepting thread.
    listener: TcpListener,
    accepting: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    /// Listen on a free port of `host`, forwarding to `127.0.0.1:port`.
    pub fn start(host: IpAddr, port: u16) -> Result<Self, String> {
        let listener = TcpListener::bind((host, 0)).map_err(|e| format!("relay on {host}: {e}"))?;
        let address = listener.local_addr().map_err(|e| e.to_string())?;
        let accepting_on = listener
            .try_clone()
            .map_err(|e| format!("relay on {host}: {e}"))?;
        let stopped = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&stopped);
        let accepting = std::thread::spawn(move || {
            for inbound in accepting_on.incoming() {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                // A refused connection is closed at once, as the server's would be.
                if let Ok(inbound) = inbound
                    && let Ok(outbound) = TcpStream::connect((Ipv4Addr::LOCALHOST, port))
                {
                    pipe(inbound, outbound);
                }
            }
        });
        Ok(Self {
            address,
            stopped,
            listener,
            accepting: Some(accepting),
        })
    }

    /// `http://ADDRESS:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::Release);
        // Shutting the listening socket down makes the blocked `accept` fail
        // (Linux), so the thread sees the flag without a connection that might
        // not be made; where that is refused (macOS), a connection wakes it.
        // Once it has ended, dropping `listener` closes the port.
        let woken = socket2::SockRef::from(&self.listener)
            .shutdown(Shutdown::Both)
            .is_ok()
            || TcpStream::connect(self.address).is_ok();
        if woken && let Some(accepting) = self.accepting.take() {
            let _ = accepting.join();
        }
    }
}

/// Copy bytes both ways between `a` and `b` until each side closes.
fn pipe(a: TcpStream, b: TcpStream) {
    let (Ok(a2), Ok(b2)) = (a.try_clone(), b.try_clone()) else {
        return;
    };
    for (mut from, mut to) in [(a, b2), (b, a2)] {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from, &mut to);
            let _ = to.flush();
            let _ = to.shutdown(Shutdown::Write);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relay_forwards_both_ways_and_stops_when_dropped() {
        use std::io::{BufRead, BufReader};
        let server = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let port = server.local_addr().expect("address").port();
        std::thread::spawn(move || {
            let (stream, _) = server.accept().expect("accept");
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line).expect("read");
            (&stream)
                .write_all(format!("echo {line}").as_bytes())
                .expect("write");
        });
        let relay = Relay::start(IpAddr::V4(Ipv4Addr::LOCALHOST), port).expect("relay");
        let address = relay.address;
        assert_eq!(crate::sam_local::port_of(&relay.url()), Ok(address.port()));
        let mut client = TcpStream::connect(address).expect("connect");
        client.write_all(b"ping\n").expect("send");
        let mut answer = String::new();
        BufReader::new(&client)
            .read_line(&mut answer)
            .expect("answer");
        assert_eq!(answer, "echo ping\n");
        drop(relay);
        assert!(
            TcpListener::bind(address).is_ok(),
            "the relay's port is closed once it is dropped"
        );
    }
}

//! HTTPS in front of the local servers, as every AWS endpoint is: a function
//! that talks to DynamoDB on Lambda pays a TLS handshake and loads the
//! certificate roots, so locally it should too, or its first invocation looks
//! cheaper here than it is there.
//!
//! [`Authority`] is a certificate authority made for the run (its key never
//! leaves memory); its certificate goes to a file that functions get in
//! `SSL_CERT_FILE`, where the AWS SDK's rustls looks for roots. Each
//! [`TlsFront`] terminates TLS on a free 127.0.0.1 port with a leaf
//! certificate the authority signed (`IP:127.0.0.1`, not a CA: rustls refuses
//! a CA certificate used by a server) and relays the bytes to a plain
//! loopback port.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// The variable rustls-based clients (the AWS SDK for Rust) read extra roots from.
pub const CA_FILE_VARIABLE: &str = "SSL_CERT_FILE";

/// A certificate authority made for one run.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    certificate: CertificateDer<'static>,
    file: PathBuf,
}

impl Authority {
    /// A new authority; its certificate is written to `file` (PEM).
    pub fn new(file: &Path) -> Result<Self, String> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params
            .distinguished_name
            .push(DnType::CommonName, "local stack certificate authority");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().map_err(tls)?;
        let certificate = params.self_signed(&key).map_err(tls)?;
        std::fs::write(file, certificate.pem()).map_err(|e| format!("{}: {e}", file.display()))?;
        Ok(Self {
            issuer: Issuer::new(params, key),
            certificate: certificate.der().clone(),
            file: file.to_path_buf(),
        })
    }

    /// The PEM file of the authority's certificate (for [`CA_FILE_VARIABLE`]).
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The authority's certificate.
    pub fn certificate(&self) -> &CertificateDer<'static> {
        &self.certificate
    }

    /// A server certificate for 127.0.0.1 and `localhost`, and its key.
    fn leaf(&self) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), String> {
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .map_err(tls)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(tls)?;
        let certificate = params.signed_by(&key, &self.issuer).map_err(tls)?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Ok((certificate.der().clone(), key))
    }
}

fn tls(e: impl std::fmt::Display) -> String {
    format!("TLS front: {e}")
}

/// TLS on a loopback port, relayed to a plain one; stopped on drop.
pub struct TlsFront {
    port: u16,
    handshakes: Arc<AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TlsFront {
    /// Terminate TLS on a free 127.0.0.1 port with a certificate `authority`
    /// signed, relaying each connection to 127.0.0.1:`target_port`.
    pub fn start(authority: &Authority, target_port: u16) -> Result<Self, String> {
        let (certificate, key) = authority.leaf()?;
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(tls)?
        .with_no_client_auth()
        .with_single_cert(vec![certificate, authority.certificate.clone()], key)
        .map_err(tls)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = crate::process::free_listener().map_err(tls)?;
        listener.set_nonblocking(true).map_err(tls)?;
        let port = listener.local_addr().map_err(tls)?.port();
        let (stop, stopped) = oneshot::channel();
        let handshakes = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&handshakes);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(tls)?;
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = TcpListener::from_std(listener) else {
                    return;
                };
                tokio::select! {
                    () = accept(listener, acceptor, target_port, counted) => {}
                    _ = stopped => {}
                }
            });
            // Dropping the runtime ends every relayed connection.
        });
        Ok(Self {
            port,
            handshakes,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `https://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// TLS handshakes completed so far: the connections clients opened.
    pub fn handshakes(&self) -> usize {
        self.handshakes.load(Ordering::Relaxed)
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accept connections forever, each relayed in a task of its own, counting
/// the completed handshakes in `handshakes`.
async fn accept(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    target_port: u16,
    handshakes: Arc<AtomicUsize>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let handshakes = Arc::clone(&handshakes);
        tokio::spawn(async move {
            // A failed handshake or a closed server ends this connection only.
            let Ok(mut client) = acceptor.accept(client).await else {
                return;
            };
            handshakes.fetch_add(1, Ordering::Relaxed);
            let Ok(mut server) = TcpStream::connect(("127.0.0.1", target_port)).await else {
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A plain server on loopback answering every connection with `answer`.
    fn plain_server(answer: &'static [u8]) -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut request = [0; 1024];
                let _ = stream.read(&mut request);
                let _ = stream.write_all(answer);
            }
        });
        port
    }

    async fn request(roots: rustls::RootCertStore, port: u16) -> Result<String, String> {
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(tls)?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.map_err(tls)?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").map_err(tls)?;
        let mut stream = connector.connect(name, tcp).await.map_err(tls)?;
        stream
            .write_all(b"GET / HTTP/1.0\r\n\r\n")
            .await
            .map_err(tls)?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.map_err(tls)?;
        Ok(answer)
    }

    #[tokio::test]
    async fn a_client_trusting_the_run_authority_reaches_the_plain_server_over_tls() {
        let dir = std::env::temp_dir().join(format!("tls-front-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let authority = Authority::new(&dir.join("ca.pem")).expect("authority");
        let pem = std::fs::read_to_string(authority.file()).expect("CA file");
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
        let front = TlsFront::start(&authority, plain_server(b"HTTP/1.0 200 OK\r\n\r\nhello"))
            .expect("front");
        let port: u16 = front
            .endpoint()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port");

        let mut roots = rustls::RootCertStore::empty();
        roots.add(authority.certificate().clone()).expect("root");
        let answer = request(roots, port).await.expect("TLS request");
        assert!(answer.ends_with("hello"), "{answer}");

        // Without the run's authority the handshake fails: the certificate
        // is really checked.
        let refused = request(rustls::RootCertStore::empty(), port).await;
        assert!(refused.is_err(), "{refused:?}");
        // One completed handshake: the refused one does not count.
        assert_eq!(front.handshakes(), 1);

        // Once dropped it serves no more. Not "the port is closed": another
        // test of this binary may be given the freed port at once (seen);
        // only this front holds a certificate of this run's authority.
        drop(front);
        let mut roots = rustls::RootCertStore::empty();
        roots.add(authority.certificate().clone()).expect("root");
        let after = tokio::time::timeout(std::time::Duration::from_secs(5), request(roots, port));
        assert!(
            !matches!(after.await, Ok(Ok(_))),
            "the front still serves once dropped"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}

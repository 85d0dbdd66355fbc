//! HTTPS: TLS 1.2 and 1.3 with rustls over the same sockets.
//!
//! The certificate is verified against the system's trust store (as curl
//! and wrk do through OpenSSL), or against `--cacert FILE`; `--insecure`
//! accepts any certificate (a self-signed test server) but still does the
//! whole handshake, so its cost is measured the same. The server name goes
//! out as SNI (not for an IP address, RFC 6066 §3), and ALPN offers only
//! `http/1.1`: the requests are HTTP/1.1. Sessions are not resumed: every
//! connection's handshake is a full one.
//!
//! [`Session`] drives a connection on a non-blocking socket for the load's
//! epoll loop: ciphertext moves between the socket and rustls, plaintext
//! between rustls and the HTTP code, and every call says whether the socket
//! would block.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

/// How to trust the server.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// Accept any certificate (still encrypting, still timing the handshake).
    pub insecure: bool,
    /// Trust the certificates in this PEM file instead of the system's.
    pub cacert: Option<PathBuf>,
}

/// The client configuration for every connection of a run.
pub fn client_config(opts: &TlsOptions) -> io::Result<Arc<ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| io::Error::other(format!("TLS setup: {e}")))?;
    let mut config = if opts.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(roots(opts)?)
            .with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Every connection makes a full handshake: what a new client pays, and
    // what wrk measures (it does not resume sessions either). rustls would
    // otherwise resume from its in-memory ticket cache.
    config.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(config))
}

fn roots(opts: &TlsOptions) -> io::Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    match &opts.cacert {
        Some(path) => {
            let bad = |e: &dyn std::fmt::Display| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("--cacert {}: {e}", path.display()),
                )
            };
            for cert in CertificateDer::pem_file_iter(path).map_err(|e| bad(&e))? {
                store.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
            }
            if store.is_empty() {
                return Err(bad(&"no certificate in the file"));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A certificate the store rejects is skipped, as OpenSSL does.
                let _ = store.add(cert);
            }
            if store.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    "no trusted certificates found on this system (install ca-certificates), \
                     give --cacert FILE, or --insecure to skip verification",
                ));
            }
        }
    }
    Ok(store)
}

/// The name the certificate must carry (and SNI sends): the URL's host.
pub fn server_name(host: &str) -> io::Result<ServerName<'static>> {
    ServerName::try_from(host.to_string()).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{host}: not a server name for TLS: {e}"),
        )
    })
}

/// `--insecure`: every certificate is accepted; signatures are still checked
/// with the provider's algorithms so the handshake costs what it costs.
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// One TLS connection over a non-blocking socket.
pub struct Session {
    conn: ClientConnection,
}

/// What reading the socket gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Filled {
    /// Records arrived and were processed (plaintext may be ready).
    Some,
    /// Nothing more now: wait for the next readable edge.
    WouldBlock,
    /// The peer closed the TCP connection.
    Eof,
}

impl Session {
    pub fn new(config: &Arc<ClientConfig>, name: ServerName<'static>) -> io::Result<Session> {
        let conn = ClientConnection::new(Arc::clone(config), name)
            .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
        Ok(Session { conn })
    }

    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// The ALPN protocol the server chose, if any.
    pub fn alpn(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    /// Sends what rustls has queued. `Ok(true)`: all of it went out;
    /// `Ok(false)`: the socket would block (wait for writable).
    pub fn flush(&mut self, socket: &mut impl Write) -> io::Result<bool> {
        while self.conn.wants_write() {
            match self.conn.write_tls(socket) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Reads records from the socket until it would block or ends, and
    /// processes them. A TLS error (bad certificate, alert) is an
    /// `InvalidData` error that says what failed.
    pub fn fill(&mut self, socket: &mut impl Read) -> io::Result<Filled> {
        let mut got = false;
        loop {
            match self.conn.read_tls(socket) {
                Ok(0) => {
                    self.process()?;
                    return Ok(if got { Filled::Some } else { Filled::Eof });
                }
                Ok(_) => {
                    got = true;
                    self.process()?;
                    // rustls reads one buffer's worth at a time: go on until the
                    // socket is drained (edge-triggered readiness).
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Ok(if got {
                        Filled::Some
                    } else {
                        Filled::WouldBlock
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn process(&mut self) -> io::Result<()> {
        self.conn
            .process_new_packets()
            .map(|_| ())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, explain(&e)))
    }

    /// Decrypted bytes ready now: `None` when there are none yet,
    /// `Some(0)` when the peer has closed (with or without close_notify).
    pub fn read_plain(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match self.conn.reader().read(buf) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(Some(0)),
            Err(e) => Err(e),
        }
    }

    /// Queues plaintext for sending (then [`Session::flush`]).
    pub fn write_plain(&mut self, data: &[u8]) -> io::Result<()> {
        self.conn.writer().write_all(data)
    }
}

/// A TLS failure in words, with what to do when it is the certificate.
fn explain(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InvalidCertificate(why) => format!(
            "TLS: the server's certificate is not trusted ({why:?}); for a self-signed or \
             private-CA certificate give --cacert FILE, or -k/--insecure to skip the check"
        ),
        e => format!("TLS: {e}"),
    }
}

/// A TLS stream over a blocking socket (for requests timed one by one).
pub type Blocking<S> = rustls::StreamOwned<ClientConnection, S>;

/// Completes the handshake on a blocking socket.
pub fn handshake_blocking<S: Read + Write>(
    config: &Arc<ClientConfig>,
    name: ServerName<'static>,
    mut socket: S,
) -> io::Result<Blocking<S>> {
    let mut conn = ClientConnection::new(Arc::clone(config), name)
        .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
    while conn.is_handshaking() {
        conn.complete_io(&mut socket).map_err(|e| {
            match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                Some(tls) => io::Error::new(io::ErrorKind::InvalidData, explain(tls)),
                None => e,
            }
        })?;
    }
    Ok(rustls::StreamOwned::new(conn, socket))
}

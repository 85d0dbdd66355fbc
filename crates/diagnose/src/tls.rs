//! https:// for `diagnose`: the one-by-one requests go over TLS on a
//! blocking socket, and the first connection's setup is timed in its parts:
//! TCP connect, TLS handshake, first byte of the first response.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tcpdoctor_load::tls::{client_config, handshake_blocking, server_name, Blocking};

use crate::Plan;

/// What a TLS connection needs, made once.
pub struct Client {
    config: Arc<rustls::ClientConfig>,
    name: rustls::pki_types::ServerName<'static>,
}

/// How the first connection and request began, in milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Setup {
    /// connect(): SYN to the handshake's end, as the client sees it.
    pub connect_ms: f64,
    /// https://: ClientHello to the handshake's end (TCP established to TLS established).
    pub tls_handshake_ms: Option<f64>,
    /// The first request written to its response's first byte.
    pub first_byte_ms: Option<f64>,
    /// https://: the TLS version and the ALPN protocol agreed.
    pub tls_version: Option<String>,
    pub alpn: Option<String>,
}

/// For https://: the client, after one handshake that checks the
/// certificate (an untrusted one is an error here, before anything is
/// measured). A server that cannot be reached is left to the measurements.
pub fn prepare(plan: &Plan) -> io::Result<Option<Client>> {
    if !plan.target.tls {
        return Ok(None);
    }
    let client = Client {
        config: client_config(&plan.tls)?,
        name: server_name(&plan.target.host)?,
    };
    if let Ok(socket) = TcpStream::connect_timeout(&plan.target.addr, plan.timeout) {
        socket.set_read_timeout(Some(plan.timeout))?;
        socket.set_write_timeout(Some(plan.timeout))?;
        if let Err(e) = handshake_blocking(&client.config, client.name.clone(), socket) {
            if e.kind() == io::ErrorKind::InvalidData {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}", plan.target.url),
                ));
            }
        }
    }
    Ok(Some(client))
}

/// A connection, plain or TLS.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<Blocking<TcpStream>>),
}

impl Stream {
    /// The TCP socket under it (for TCP_INFO).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => &s.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => match s.read(buf) {
                // A peer closing without close_notify ends the response like a FIN.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                r => r,
            },
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// Connects (and for https:// completes the handshake), timing each part.
pub fn connect(
    server: SocketAddr,
    timeout: Duration,
    tls: Option<&Client>,
) -> io::Result<(Stream, Setup)> {
    let t0 = Instant::now();
    let s = TcpStream::connect_timeout(&server, timeout)?;
    let connected = t0.elapsed();
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let mut setup = Setup {
        connect_ms: connected.as_secs_f64() * 1e3,
        ..Setup::default()
    };
    let Some(client) = tls else {
        return Ok((Stream::Plain(s), setup));
    };
    // The handshake's last flight (the client's Finished) and the request
    // are two writes: with Nagle on, the request would wait for the ACK of
    // the Finished, a delayed ACK away (~40 ms on Linux). curl and browsers
    // turn Nagle off; so does the load.
    s.set_nodelay(true)?;
    let t1 = Instant::now();
    let stream = handshake_blocking(&client.config, client.name.clone(), s)?;
    setup.tls_handshake_ms = Some(t1.elapsed().as_secs_f64() * 1e3);
    setup.tls_version = stream
        .conn
        .protocol_version()
        .map(|v| format!("{v:?}").replace('_', "."));
    setup.alpn = stream
        .conn
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    Ok((Stream::Tls(Box::new(stream)), setup))
}

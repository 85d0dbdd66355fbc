//! `/metrics` over HTTP/1.1 for a Prometheus server to scrape.
//!
//! One thread, one request per connection: a scrape every few seconds is the
//! whole load. Anything but `GET /metrics` (or `/`) gets a 404, a request
//! that does not arrive within two seconds is dropped.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;

use crate::Metrics;

/// The OpenMetrics content type; Prometheus asks for it and parses it.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Binds `addr` (`host:port`, `:port` for every address) and serves the
/// registry from a background thread. Returns the bound address. Fails at
/// once, before any capture starts, if the address cannot be bound.
pub fn serve(addr: &str, registry: Arc<Registry>) -> io::Result<SocketAddr> {
    let spec = if let Some(port) = addr.strip_prefix(':') {
        format!("0.0.0.0:{port}")
    } else {
        addr.to_string()
    };
    let resolved: Vec<SocketAddr> = spec
        .to_socket_addrs()
        .map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("--prometheus {addr}: not an address (HOST:PORT or :PORT): {e}"),
            )
        })?
        .collect();
    let listener = TcpListener::bind(&resolved[..]).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("--prometheus {addr}: cannot listen there: {e}"),
        )
    })?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                // A client that misbehaves costs its own request, nothing else.
                let _ = answer(stream, &registry);
            }
        })?;
    Ok(bound)
}

fn answer(stream: TcpStream, registry: &Registry) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    // The request line, then headers up to the blank line (ignored), read
    // with a bound so a client cannot make us buffer without end.
    reader.by_ref().take(8192).read_line(&mut line)?;
    let mut header = String::new();
    let mut budget = 64usize;
    loop {
        header.clear();
        let n = reader.by_ref().take(8192).read_line(&mut header)?;
        budget -= 1;
        if n == 0 || header == "\r\n" || header == "\n" || budget == 0 {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let mut out = stream;
    if method == "GET" && (path == "/metrics" || path == "/") {
        let body = Metrics::encode(registry);
        write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
    } else {
        let body = "not found: the metrics are at /metrics\n";
        write!(
            out,
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
    }
    out.flush()
}

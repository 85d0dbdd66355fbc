//! The target URL and the request bytes, built once before the run.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

/// Where the load goes: an `http://` URL resolved to one address.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    pub addr: SocketAddr,
    /// `host[:port]` for the Host header.
    pub authority: String,
    /// Path and query, at least `/`.
    pub path: String,
    /// `https://`: TLS to the server.
    pub tls: bool,
    /// The host as written in the URL (for TLS: the certificate's name, SNI).
    pub host: String,
}

/// A URL or request that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetError(pub String);

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TargetError {}

impl Target {
    /// Parse `http[s]://host[:port][/path]` and resolve the host (first address).
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        let err = |m: &str| TargetError(format!("{url}: {m}"));
        let (rest, tls) = match url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => (rest, false),
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => (rest, true),
            Some(_) => return Err(err("only http:// and https:// URLs are supported")),
            None => (url, false),
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let path = if path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_string()
        };
        let path = match path.find('#') {
            Some(i) => path[..i].to_string(),
            None => path,
        };
        if authority.contains('@') {
            return Err(err("user information in the URL is not supported"));
        }
        let (host, port) = split_host_port(authority, if tls { 443 } else { 80 })
            .ok_or_else(|| err("malformed host or port"))?;
        if host.is_empty() {
            return Err(err("no host"));
        }
        if path
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(err("the path contains spaces or control characters"));
        }
        let addr = (host, port)
            .to_socket_addrs()
            .map_err(|e| err(&format!("cannot resolve {host}: {e}")))?
            .next()
            .ok_or_else(|| err(&format!("{host} has no address")))?;
        Ok(Target {
            url: url.to_string(),
            addr,
            authority: authority.to_string(),
            path,
            tls,
            host: host.to_string(),
        })
    }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`; the port defaults to the scheme's.
fn split_host_port(authority: &str, default: u16) -> Option<(&str, u16)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after {
            "" => default,
            p => p.strip_prefix(':')?.parse().ok()?,
        };
        return Some((host, port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host, port.parse().ok()?)),
        None => Some((authority, default)),
    }
}

/// The request sent on every connection.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub method: String,
    /// Extra header lines, `Name: value`. A `Host` header here replaces the default.
    pub headers: Vec<String>,
    pub body: Vec<u8>,
    /// Ask the server to close after each response (`Connection: close`).
    pub close: bool,
}

impl Default for RequestSpec {
    fn default() -> Self {
        RequestSpec {
            method: "GET".to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            close: false,
        }
    }
}

/// Build the request bytes once.
pub fn build_request(target: &Target, spec: &RequestSpec) -> Result<Vec<u8>, TargetError> {
    let err = |m: String| TargetError(m);
    if spec.method.is_empty()
        || !spec
            .method
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'-')
    {
        return Err(err(format!("invalid method {:?}", spec.method)));
    }
    let mut has_host = false;
    let mut has_length = false;
    for h in &spec.headers {
        let Some((name, _)) = h.split_once(':') else {
            return Err(err(format!("header {h:?} is not `Name: value`")));
        };
        if name.is_empty()
            || name
                .bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(err(format!("header {h:?} has an invalid name")));
        }
        if h.bytes().any(|b| b == b'\r' || b == b'\n') {
            return Err(err(format!("header {h:?} contains a line break")));
        }
        has_host |= name.eq_ignore_ascii_case("host");
        has_length |= name.eq_ignore_ascii_case("content-length");
    }
    let mut r = Vec::with_capacity(128 + spec.body.len());
    r.extend_from_slice(spec.method.as_bytes());
    r.push(b' ');
    r.extend_from_slice(target.path.as_bytes());
    r.extend_from_slice(b" HTTP/1.1\r\n");
    if !has_host {
        r.extend_from_slice(b"Host: ");
        r.extend_from_slice(target.authority.as_bytes());
        r.extend_from_slice(b"\r\n");
    }
    for h in &spec.headers {
        r.extend_from_slice(h.as_bytes());
        r.extend_from_slice(b"\r\n");
    }
    if (!spec.body.is_empty() || matches!(spec.method.as_str(), "POST" | "PUT" | "PATCH"))
        && !has_length
    {
        r.extend_from_slice(format!("Content-Length: {}\r\n", spec.body.len()).as_bytes());
    }
    if spec.close {
        r.extend_from_slice(b"Connection: close\r\n");
    }
    r.extend_from_slice(b"\r\n");
    r.extend_from_slice(&spec.body);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let t = Target::parse("http://127.0.0.1:8080/a/b?x=1#frag").expect("parses");
        assert_eq!(t.addr, "127.0.0.1:8080".parse().expect("addr"));
        assert_eq!(t.path, "/a/b?x=1");
        assert_eq!(t.authority, "127.0.0.1:8080");
        let t = Target::parse("http://[::1]/").expect("parses");
        assert_eq!(t.addr, "[::1]:80".parse().expect("addr"));
        let t = Target::parse("127.0.0.1:81").expect("parses");
        assert_eq!((t.addr.port(), t.path.as_str()), (81, "/"));
        let t = Target::parse("https://127.0.0.1/").expect("parses");
        assert!(t.tls);
        assert_eq!((t.addr.port(), t.host.as_str()), (443, "127.0.0.1"));
        let t = Target::parse("HTTPS://localhost:8443/x").expect("parses");
        assert_eq!(
            (t.addr.port(), t.host.as_str(), t.tls),
            (8443, "localhost", true)
        );
        assert!(Target::parse("ftp://127.0.0.1/").is_err());
        assert!(Target::parse("http://127.0.0.1:99999/").is_err());
        assert!(Target::parse("http:///x").is_err());
    }

    #[test]
    fn request_bytes() {
        let t = Target::parse("http://127.0.0.1:8080/x").expect("parses");
        let r = build_request(&t, &RequestSpec::default()).expect("builds");
        assert_eq!(r, b"GET /x HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n");
        let spec = RequestSpec {
            method: "POST".into(),
            headers: vec!["Host: example".into(), "X-A: 1".into()],
            body: b"abc".to_vec(),
            close: true,
        };
        let r = build_request(&t, &spec).expect("builds");
        assert_eq!(
            r,
            b"POST /x HTTP/1.1\r\nHost: example\r\nX-A: 1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc"
        );
        let bad = RequestSpec {
            headers: vec!["no colon".into()],
            ..RequestSpec::default()
        };
        assert!(build_request(&t, &bad).is_err());
    }
}

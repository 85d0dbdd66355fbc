//! Recognising HTTP/1.x heads in captured payload, to make a fix specific.
//!
//! Payload bytes are hostile: only the first bytes are looked at, nothing is
//! allocated from them beyond a short, sanitised string.

use std::sync::LazyLock;

use memchr::memmem::Finder;

/// Software recognisable from a response or request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Software {
    Nginx,
    /// `com.sun.net.httpserver`: it writes `Content-length` with a lower-case `l`.
    JdkHttpServer,
    OtherHttpServer,
    HttpClient,
}

/// How far into a payload a head is searched.
const HEAD_LIMIT: usize = 1024;

const METHODS: [&[u8]; 7] = [
    b"GET ",
    b"POST ",
    b"PUT ",
    b"HEAD ",
    b"DELETE ",
    b"PATCH ",
    b"OPTIONS ",
];

/// How many leading payload bytes [`classify`] may read: the head's first
/// [`HEAD_LIMIT`] bytes if the payload starts like HTTP/1.x, else none.
pub fn head_len(payload: &[u8]) -> usize {
    if payload.starts_with(b"HTTP/1.") || METHODS.iter().any(|m| payload.starts_with(m)) {
        payload.len().min(HEAD_LIMIT)
    } else {
        0
    }
}

/// The header lines [`classify`] looks for, with their searchers built once:
/// building a searcher costs more than searching a short head with it.
static NGINX: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\r\nServer: nginx"));
static JDK_LENGTH: LazyLock<Finder<'static>> =
    LazyLock::new(|| Finder::new(b"\r\nContent-length:"));

/// What kind of message a payload starts.
pub fn classify(payload: &[u8]) -> Option<Software> {
    let head = &payload[..payload.len().min(HEAD_LIMIT)];
    if head.starts_with(b"HTTP/1.") {
        if NGINX.find(head).is_some() {
            return Some(Software::Nginx);
        }
        if JDK_LENGTH.find(head).is_some() {
            return Some(Software::JdkHttpServer);
        }
        return Some(Software::OtherHttpServer);
    }
    if METHODS.iter().any(|m| head.starts_with(m)) {
        return Some(Software::HttpClient);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_servers() {
        assert_eq!(
            classify(b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\n"),
            Some(Software::Nginx)
        );
        assert_eq!(
            classify(b"HTTP/1.1 200 OK\r\nDate: x\r\nContent-length: 20\r\n"),
            Some(Software::JdkHttpServer)
        );
        assert_eq!(
            classify(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"),
            Some(Software::OtherHttpServer)
        );
        assert_eq!(classify(b"POST / HTTP/1.1\r\n"), Some(Software::HttpClient));
        assert_eq!(classify(b"\x00\xff garbage"), None);
        assert_eq!(classify(b""), None);
    }
}

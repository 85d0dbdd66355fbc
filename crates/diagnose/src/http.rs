//! Recognising HTTP/1.x heads in captured payload, to make a fix specific.
//!
//! Payload bytes are hostile: only the first bytes are looked at, nothing is
//! allocated from them beyond a short, sanitised string.

/// Software recognisable from a response or request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Software {
    Nginx,
    /// `com.sun.net.httpserver`: it writes `Content-length` with a lower-case `l`.
    JdkHttpServer,
    OtherHttpServer,
    HttpClient,
}

/// What kind of message a payload starts.
pub fn classify(payload: &[u8]) -> Option<Software> {
    let head = &payload[..payload.len().min(1024)];
    if head.starts_with(b"HTTP/1.") {
        if contains(head, b"\r\nServer: nginx") {
            return Some(Software::Nginx);
        }
        if contains(head, b"\r\nContent-length:") {
            return Some(Software::JdkHttpServer);
        }
        return Some(Software::OtherHttpServer);
    }
    const METHODS: [&[u8]; 7] = [
        b"GET ",
        b"POST ",
        b"PUT ",
        b"HEAD ",
        b"DELETE ",
        b"PATCH ",
        b"OPTIONS ",
    ];
    if METHODS.iter().any(|m| head.starts_with(m)) {
        return Some(Software::HttpClient);
    }
    None
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
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

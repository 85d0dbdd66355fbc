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
    // Called on every segment: most (ACKs, the middle of a message) are told
    // by their first byte, the initial of no method and of no status line.
    if !matches!(payload.first(), Some(b'G' | b'P' | b'H' | b'D' | b'O')) {
        return 0;
    }
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

/// The end of a head: the empty line.
static HEAD_END: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\r\n\r\n"));

/// The head's header section (without the start line), if the captured
/// bytes hold all of it (up to the empty line).
fn header_block(payload: &[u8]) -> Option<&[u8]> {
    let head = &payload[..payload.len().min(HEAD_LIMIT)];
    let end = HEAD_END.find(head)?;
    let first = memchr::memchr(b'\n', head)?;
    head.get(first + 1..end + 2)
}

/// Each header line of a block as (name, value), names trimmed. One pass,
/// no allocation: heads are read on the hot path.
fn headers(block: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    block.split(|&b| b == b'\n').filter_map(|line| {
        let colon = memchr::memchr(b':', line)?;
        Some((line[..colon].trim_ascii(), &line[colon + 1..]))
    })
}

/// Whether `value` holds `word`, in any case.
fn holds(value: &[u8], word: &[u8]) -> bool {
    value
        .windows(word.len())
        .any(|w| w.eq_ignore_ascii_case(word))
}

/// How a response head says its body ends: `Some(true)` when only the
/// connection's close delimits it (RFC 9112 §6.3: no Content-Length, not
/// chunked, a status that has a body), `Some(false)` when it is framed,
/// `None` when the payload is not a whole response head.
pub fn close_delimited(payload: &[u8]) -> Option<bool> {
    if !payload.starts_with(b"HTTP/1.") {
        return None;
    }
    let status = payload.get(9..12)?;
    let no_body = status.starts_with(b"1") || status == b"204" || status == b"304";
    // The common spelling first: one search instead of every line. A
    // Content-Length frames the body wherever the head ends.
    let head = &payload[..payload.len().min(HEAD_LIMIT)];
    if CONTENT_LENGTH.find(head) {
        return Some(false);
    }
    let block = header_block(payload)?;
    let framed = headers(block).any(|(name, value)| {
        name.eq_ignore_ascii_case(b"content-length")
            || (name.eq_ignore_ascii_case(b"transfer-encoding") && holds(value, b"chunked"))
    });
    Some(!no_body && !framed)
}

/// A header line's start `\r\nContent-Length:`, found by the searcher's
/// vectors keyed on its `L` and `:` (bytes rare at those distances in a
/// head; its own choice, `\r` and `\n`, is on every line).
struct ContentLength {
    #[cfg(target_arch = "x86_64")]
    avx2: Option<memchr::arch::x86_64::avx2::packedpair::Finder>,
    fallback: Finder<'static>,
}

impl ContentLength {
    const NEEDLE: &'static [u8] = b"\r\nContent-Length:";

    fn new() -> Self {
        ContentLength {
            #[cfg(target_arch = "x86_64")]
            avx2: memchr::arch::all::packedpair::Pair::with_indices(Self::NEEDLE, 10, 16).and_then(
                |p| memchr::arch::x86_64::avx2::packedpair::Finder::with_pair(Self::NEEDLE, p),
            ),
            fallback: Finder::new(Self::NEEDLE),
        }
    }

    fn find(&self, head: &[u8]) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Some(f) = &self.avx2 {
            if head.len() >= f.min_haystack_len() {
                return f.find(head, Self::NEEDLE).is_some();
            }
        }
        self.fallback.find(head).is_some()
    }
}

static CONTENT_LENGTH: LazyLock<ContentLength> = LazyLock::new(ContentLength::new);

/// Whether a request head asks the server for `100 Continue` before its body
/// (only requests that carry one: POST, PUT, PATCH).
pub fn expects_continue(payload: &[u8]) -> bool {
    [b"POST ".as_slice(), b"PUT ", b"PATCH "]
        .iter()
        .any(|m| payload.starts_with(m))
        && header_block(payload).is_some_and(|b| {
            headers(b).any(|(name, value)| {
                name.eq_ignore_ascii_case(b"expect") && holds(value, b"100-continue")
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_how_a_body_ends() {
        let h = |s: &str| close_delimited(s.as_bytes());
        assert_eq!(h("HTTP/1.0 200 OK\r\nServer: x\r\n\r\nbody"), Some(true));
        assert_eq!(
            h("HTTP/1.1 200 OK\r\ncontent-LENGTH: 4\r\n\r\nbody"),
            Some(false)
        );
        assert_eq!(
            h("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n"),
            Some(false)
        );
        assert_eq!(
            h("HTTP/1.1 304 Not Modified\r\nETag: x\r\n\r\n"),
            Some(false)
        );
        // A header that only mentions a length frames nothing; a length
        // after a cut frames the body all the same.
        assert_eq!(
            h("HTTP/1.1 200 OK\r\nX-Note: Content-Length: 5\r\n\r\nbody"),
            Some(true)
        );
        assert_eq!(h("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-"), Some(false));
        assert_eq!(
            h("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"),
            Some(true)
        );
        // Cut by the snaplen before the empty line: cannot tell.
        assert_eq!(h("HTTP/1.1 200 OK\r\nServer: x\r\n"), None);
        assert_eq!(h("\x00garbage"), None);
        assert!(expects_continue(
            b"POST /u HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n"
        ));
        assert!(!expects_continue(b"POST /u HTTP/1.1\r\nExpect:\r\n\r\n"));
        assert!(!expects_continue(b"HTTP/1.1 100 Continue\r\n\r\n"));
    }

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

//! A minimal HTTP/1.x response parser for the load loop.
//!
//! Hand-written rather than taken from a crate: the load generator only needs
//! the status code, where the body ends (Content-Length, chunked, or the
//! connection close) and whether the connection stays open, and it must not
//! allocate per response. Header bytes split across reads are kept in a
//! per-connection buffer allocated once; body bytes are counted and dropped.

/// Longest response head accepted (status line and headers).
pub const MAX_HEAD: usize = 64 * 1024;

/// What a response said about itself once complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// The connection may carry another request.
    pub keep_alive: bool,
}

/// Why a response could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    StatusLine,
    ContentLength,
    ChunkSize,
    HeadTooLong,
    /// Bytes after a complete response that no request asked for.
    Unsolicited,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ParseError::StatusLine => "malformed status line",
            ParseError::ContentLength => "malformed Content-Length",
            ParseError::ChunkSize => "malformed chunk size",
            ParseError::HeadTooLong => "response head longer than 64 KiB",
            ParseError::Unsolicited => "data after a complete response",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Size { size: u64, digits: u8 },
    Ext { size: u64 },
    SizeLf { size: u64 },
    Data { left: u64 },
    DataCr,
    DataLf,
    TrailerLineStart,
    TrailerLine,
    TrailerEndLf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Body { left: u64 },
    Chunked(Chunk),
    UntilClose,
}

/// Incremental parser for the responses of one connection, one at a time.
pub struct Parser {
    state: State,
    /// Head bytes seen so far when a head spans several reads.
    carry: Vec<u8>,
    status: u16,
    keep_alive: bool,
    /// The request was HEAD: responses have no body.
    head_request: bool,
    /// Bytes of the current response received (0: nothing yet).
    received: u64,
}

/// Result of feeding bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Fed {
    /// All bytes consumed; the response is not complete yet.
    Partial,
    /// The response completed.
    Done(Response),
}

impl Parser {
    pub fn new(head_request: bool) -> Parser {
        Parser {
            state: State::Head,
            carry: Vec::with_capacity(1024),
            status: 0,
            keep_alive: true,
            head_request,
            received: 0,
        }
    }

    /// Forget any partial response (the connection was replaced).
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.carry.clear();
        self.received = 0;
    }

    /// Bytes of the current response received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Whether the body runs until the peer closes (no length, not chunked).
    pub fn until_close(&self) -> bool {
        self.state == State::UntilClose
    }

    /// The response delimited by the connection close, once the peer closed.
    pub fn finish_at_close(&mut self) -> Option<Response> {
        if self.state == State::UntilClose {
            self.state = State::Head;
            self.received = 0;
            Some(Response {
                status: self.status,
                keep_alive: false,
            })
        } else {
            None
        }
    }

    /// Feed the bytes of one read. A complete response must end the data: a
    /// client sends its next request only after the response.
    pub fn feed(&mut self, mut data: &[u8]) -> Result<Fed, ParseError> {
        self.received += data.len() as u64;
        loop {
            if data.is_empty() {
                return Ok(Fed::Partial);
            }
            match self.state {
                State::Head => {
                    let used = self.head(data)?;
                    data = &data[used..];
                    if self.state == State::Head {
                        // 1xx interim response (or head incomplete, then data is empty).
                        continue;
                    }
                }
                State::Body { left } => {
                    let n = (data.len() as u64).min(left);
                    data = &data[n as usize..];
                    self.state = State::Body { left: left - n };
                }
                State::Chunked(c) => {
                    let used = self.chunked(c, data)?;
                    data = &data[used..];
                }
                State::UntilClose => return Ok(Fed::Partial),
            }
            if self.state == (State::Body { left: 0 }) {
                self.state = State::Head;
                self.received = 0;
                if !data.is_empty() {
                    return Err(ParseError::Unsolicited);
                }
                return Ok(Fed::Done(Response {
                    status: self.status,
                    keep_alive: self.keep_alive,
                }));
            }
        }
    }

    /// Consume head bytes; returns how many of `data` were used.
    fn head(&mut self, data: &[u8]) -> Result<usize, ParseError> {
        if self.carry.is_empty() {
            if let Some(end) = find_head_end(data, 0) {
                self.parse_head(&data[..end])?;
                return Ok(end);
            }
            self.stash(data)?;
            return Ok(data.len());
        }
        let old = self.carry.len();
        self.stash(data)?;
        match find_head_end(&self.carry, old.saturating_sub(3)) {
            Some(end) => {
                let head = std::mem::take(&mut self.carry);
                let r = self.parse_head(&head[..end]);
                self.carry = head;
                self.carry.clear();
                r?;
                Ok(end - old)
            }
            None => Ok(data.len()),
        }
    }

    fn stash(&mut self, data: &[u8]) -> Result<(), ParseError> {
        if self.carry.len() + data.len() > MAX_HEAD {
            return Err(ParseError::HeadTooLong);
        }
        self.carry.extend_from_slice(data);
        Ok(())
    }

    /// Parse a complete head (ending with the blank line) and set the body state.
    fn parse_head(&mut self, head: &[u8]) -> Result<(), ParseError> {
        let mut lines = head.split(|&b| b == b'\n');
        let status_line = lines.next().unwrap_or(&[]);
        // "HTTP/1.1 200 OK"
        if status_line.len() < 12 || !status_line.starts_with(b"HTTP/1.") {
            return Err(ParseError::StatusLine);
        }
        let http10 = status_line[7] == b'0';
        let code = &status_line[9..12];
        if !code.iter().all(u8::is_ascii_digit) || status_line[8] != b' ' {
            return Err(ParseError::StatusLine);
        }
        let status = code
            .iter()
            .fold(0u16, |acc, &d| acc * 10 + u16::from(d - b'0'));
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut keep_alive = !http10;
        for line in lines {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
            if name.eq_ignore_ascii_case(b"content-length") {
                let n = parse_decimal(value).ok_or(ParseError::ContentLength)?;
                if length.is_some_and(|l| l != n) {
                    return Err(ParseError::ContentLength);
                }
                length = Some(n);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                chunked = last_token(value).eq_ignore_ascii_case(b"chunked");
            } else if name.eq_ignore_ascii_case(b"connection") {
                for token in value.split(|&b| b == b',') {
                    let token = trim(token);
                    if token.eq_ignore_ascii_case(b"close") {
                        keep_alive = false;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        keep_alive = true;
                    }
                }
            }
        }
        self.status = status;
        self.keep_alive = keep_alive;
        self.state = if (100..200).contains(&status) && status != 101 {
            State::Head // interim: the final response follows
        } else if self.head_request || status == 204 || status == 304 || status == 101 {
            State::Body { left: 0 }
        } else if chunked {
            State::Chunked(Chunk::Size { size: 0, digits: 0 })
        } else if let Some(n) = length {
            State::Body { left: n }
        } else {
            self.keep_alive = false;
            State::UntilClose
        };
        Ok(())
    }

    /// Run the chunked-body state machine over `data`; returns bytes used.
    fn chunked(&mut self, mut c: Chunk, data: &[u8]) -> Result<usize, ParseError> {
        let mut i = 0;
        while i < data.len() {
            if let Chunk::Data { left } = c {
                let n = ((data.len() - i) as u64).min(left);
                i += n as usize;
                c = if left == n {
                    Chunk::DataCr
                } else {
                    Chunk::Data { left: left - n }
                };
                continue;
            }
            let b = data[i];
            i += 1;
            c = match c {
                Chunk::Size { size, digits } => match b {
                    b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                        if digits >= 15 {
                            return Err(ParseError::ChunkSize);
                        }
                        let d = (b as char).to_digit(16).unwrap_or(0);
                        Chunk::Size {
                            size: size * 16 + u64::from(d),
                            digits: digits + 1,
                        }
                    }
                    b';' | b' ' | b'\t' if digits > 0 => Chunk::Ext { size },
                    b'\r' if digits > 0 => Chunk::SizeLf { size },
                    _ => return Err(ParseError::ChunkSize),
                },
                Chunk::Ext { size } => match b {
                    b'\r' => Chunk::SizeLf { size },
                    _ => Chunk::Ext { size },
                },
                Chunk::SizeLf { size } => match (b, size) {
                    (b'\n', 0) => Chunk::TrailerLineStart,
                    (b'\n', n) => Chunk::Data { left: n },
                    _ => return Err(ParseError::ChunkSize),
                },
                Chunk::DataCr if b == b'\r' => Chunk::DataLf,
                Chunk::DataLf if b == b'\n' => Chunk::Size { size: 0, digits: 0 },
                Chunk::DataCr | Chunk::DataLf => return Err(ParseError::ChunkSize),
                Chunk::TrailerLineStart if b == b'\r' => Chunk::TrailerEndLf,
                Chunk::TrailerLineStart | Chunk::TrailerLine if b == b'\n' => {
                    Chunk::TrailerLineStart
                }
                Chunk::TrailerLineStart | Chunk::TrailerLine => Chunk::TrailerLine,
                Chunk::TrailerEndLf if b == b'\n' => {
                    self.state = State::Body { left: 0 };
                    return Ok(i);
                }
                Chunk::TrailerEndLf => return Err(ParseError::ChunkSize),
                Chunk::Data { .. } => c,
            };
        }
        self.state = State::Chunked(c);
        Ok(i)
    }
}

/// Index just past the blank line ending a head, searching from `from`.
fn find_head_end(data: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 1 < data.len() {
        match data[i + 1..].iter().position(|&b| b == b'\n') {
            None => return None,
            Some(p) => {
                let nl = i + 1 + p;
                // "\n\n" or "\n\r\n"
                if data[nl - 1] == b'\n' {
                    return Some(nl + 1);
                }
                if data[nl - 1] == b'\r' && nl >= 2 && data[nl - 2] == b'\n' {
                    return Some(nl + 1);
                }
                i = nl;
            }
        }
    }
    None
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn last_token(value: &[u8]) -> &[u8] {
    trim(value.rsplit(|&b| b == b',').next().unwrap_or(value))
}

fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 18 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        s.iter()
            .fold(0u64, |acc, &d| acc * 10 + u64::from(d - b'0')),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_in_pieces(p: &mut Parser, data: &[u8], piece: usize) -> Vec<Fed> {
        data.chunks(piece)
            .map(|c| p.feed(c).expect("parses"))
            .collect()
    }

    #[test]
    fn content_length_in_any_split() {
        let r = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 11\r\n\r\nhello world";
        for piece in 1..=r.len() {
            let mut p = Parser::new(false);
            let out = feed_in_pieces(&mut p, r, piece);
            assert_eq!(
                out.last(),
                Some(&Fed::Done(Response {
                    status: 200,
                    keep_alive: true
                })),
                "piece {piece}"
            );
            assert!(out[..out.len() - 1].iter().all(|f| *f == Fed::Partial));
        }
    }

    #[test]
    fn chunked_with_extensions_and_trailers() {
        let r = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n";
        for piece in 1..=r.len() {
            let mut p = Parser::new(false);
            let out = feed_in_pieces(&mut p, r, piece);
            assert_eq!(
                out.last(),
                Some(&Fed::Done(Response {
                    status: 404,
                    keep_alive: true
                })),
                "piece {piece}"
            );
        }
    }

    #[test]
    fn close_delimited_and_http10() {
        let mut p = Parser::new(false);
        assert_eq!(p.feed(b"HTTP/1.0 200 OK\r\n\r\nbody"), Ok(Fed::Partial));
        assert!(p.until_close());
        assert_eq!(
            p.finish_at_close(),
            Some(Response {
                status: 200,
                keep_alive: false
            })
        );
        let mut p = Parser::new(false);
        assert_eq!(
            p.feed(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"),
            Ok(Fed::Done(Response {
                status: 200,
                keep_alive: false
            }))
        );
    }

    #[test]
    fn interim_and_head_and_no_body() {
        let mut p = Parser::new(false);
        assert_eq!(
            p.feed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"),
            Ok(Fed::Done(Response {
                status: 204,
                keep_alive: true
            }))
        );
        let mut p = Parser::new(true);
        assert_eq!(
            p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n"),
            Ok(Fed::Done(Response {
                status: 200,
                keep_alive: true
            }))
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [
            &b"SSH-2.0-OpenSSH\r\n\r\n"[..],
            b"HTTP/1.1 2x0 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab",
        ] {
            let mut p = Parser::new(false);
            assert!(p.feed(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        let mut p = Parser::new(false);
        let big = vec![b'a'; MAX_HEAD + 1];
        assert_eq!(p.feed(&big), Err(ParseError::HeadTooLong));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            let mut p = Parser::new(false);
            let mut buf = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for _ in 0..64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let alphabet = b"0123456789abcdef\r\n;x ";
                buf.push(alphabet[(x % alphabet.len() as u64) as usize]);
            }
            for c in buf.chunks(7) {
                if p.feed(c).is_err() {
                    break;
                }
            }
        }
    }
}

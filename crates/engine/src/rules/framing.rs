//! How HTTP/1.x messages say where they end, and what a client waits for
//! before its body.
//!
//! A response with neither `Content-Length` nor chunked encoding ends only
//! when the server closes the connection (RFC 9112 §6.3, HTTP/1.0 style):
//! the client cannot use it until the FIN arrives, so the exchange ends
//! there, and the time from the last byte to the FIN is the server's (it
//! closed late). A request head with `Expect: 100-continue` makes the client
//! wait for the server's `100 Continue` before sending its body (RFC 9110
//! §10.1.1); a server that never sends one makes it wait out its own timeout
//! (curl: 1 s). Only the captured head is read; a head cut by the snaplen
//! tells nothing.

use tcpdoctor_flow::{Connection, Dir, Exchange, SegKind, Segment};

use crate::budget::{Claims, Part};
use crate::http;
use crate::rule;

/// Per connection: what the heads of the exchange in progress said.
#[derive(Debug, Default)]
pub struct FramingState {
    /// The response in progress ends at the connection's close.
    close_delimited: bool,
    /// The request in progress asked for `100 Continue`, and whether the
    /// server sent one.
    expect: bool,
    continued: bool,
}

impl FramingState {
    fn on_segment(&mut self, seg: &Segment<'_>) {
        if seg.len == 0 || seg.kind != SegKind::NewData || seg.payload.len() < 12 {
            return;
        }
        match seg.dir {
            Dir::ServerToClient if seg.payload.starts_with(b"HTTP/1.") => {
                if seg.payload[9..].starts_with(b"100") {
                    self.continued = true;
                } else if let Some(c) = http::close_delimited(seg.payload) {
                    self.close_delimited = c;
                }
            }
            Dir::ClientToServer if http::head_len(seg.payload) > 0 => {
                self.expect = http::expects_continue(seg.payload);
                self.continued = false;
                self.close_delimited = false;
            }
            _ => {}
        }
    }

    /// The exchange as its client saw it end, and how long the server took
    /// to close after its last byte: a close-delimited response ends at the
    /// server's FIN, and the wait for it is the server's (claimed so).
    /// `None` for any other exchange.
    pub fn extend(
        &self,
        conn: &Connection,
        ex: &Exchange,
        claims: &mut Claims,
    ) -> Option<(Exchange, i64)> {
        if !self.close_delimited {
            return None;
        }
        let (last, fin) = (ex.response_last?, conn.server.fin?);
        if fin.frame <= last.frame || fin.ts < last.ts {
            return None;
        }
        claims.claim(Part::Server, last.ts, fin.ts);
        let mut e = *ex;
        e.response_last = Some(fin);
        Some((e, fin.ts.since(last.ts)))
    }

    /// The request in progress waited for a `100 Continue` that never came.
    pub fn expect_unanswered(&self) -> bool {
        self.expect && !self.continued
    }
}

impl rule::Rule for FramingState {
    #[inline]
    fn on_segment(&mut self, _: &mut rule::SegmentCx<'_>, _: &Connection, seg: &Segment<'_>) {
        FramingState::on_segment(self, seg);
    }
}

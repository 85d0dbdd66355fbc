//! One load thread: an epoll loop (mio, edge-triggered) over its connections.
//!
//! Each socket is registered once for reading and writing; the steady state
//! makes no `epoll_ctl` calls: a response completes, the next request is
//! written at once, and the next readiness edge is its response.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::collections::BinaryHeap;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use crate::http::{Fed, Parser, Response};
use crate::tls::{Filled, Session};
use crate::{Errors, Live, LATE_AFTER};

/// Read buffer per thread: response bodies are counted and dropped.
const READ_BUF: usize = 64 * 1024;
/// How often timeouts are checked and failed connections retried.
const TICK: Duration = Duration::from_millis(10);

pub struct Plan<'a> {
    pub addr: SocketAddr,
    pub request: &'a [u8],
    pub head_request: bool,
    /// Global index of this thread's first connection, its count, and the total.
    pub first: usize,
    pub count: usize,
    pub total: usize,
    pub rate: Option<f64>,
    pub timeout: Duration,
    pub keepalive: bool,
    pub start: Instant,
    pub deadline: Instant,
    /// HTTPS: the client configuration and the server's name.
    pub tls: Option<(
        std::sync::Arc<rustls::ClientConfig>,
        rustls::pki_types::ServerName<'static>,
    )>,
}

pub struct Outcome {
    pub ended: Instant,
    pub requests: u64,
    pub bytes: u64,
    pub connects: u64,
    pub errors: Errors,
    pub status: Box<[u64; 600]>,
    pub late_sends: u64,
    pub max_late: Duration,
    pub histogram: Histogram<u64>,
    /// Errors by what happened, in words (`connection refused by ADDR`).
    pub causes: BTreeMap<String, u64>,
    /// HTTPS: each handshake's time (µs), TCP connected to TLS established.
    pub handshakes: Histogram<u64>,
    /// The first TLS failure, in words (a certificate not trusted, an alert).
    pub tls_error: Option<String>,
}

/// Distinct error descriptions kept; the rest are counted under "other".
const MAX_CAUSES: usize = 16;

/// Counts an error under its description.
fn note(causes: &mut BTreeMap<String, u64>, what: String) {
    if causes.len() < MAX_CAUSES || causes.contains_key(&what) {
        *causes.entry(what).or_default() += 1;
    } else {
        *causes.entry("other errors".to_string()).or_default() += 1;
    }
}

/// An I/O error in words, with the peer it came from.
pub fn describe(e: &io::Error, addr: SocketAddr) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => format!("connection refused by {addr}"),
        io::ErrorKind::ConnectionReset => format!("connection reset by {addr}"),
        io::ErrorKind::ConnectionAborted => format!("connection aborted ({addr})"),
        io::ErrorKind::BrokenPipe => format!("broken pipe: closed by {addr}"),
        io::ErrorKind::TimedOut => format!("timed out connecting to {addr}"),
        io::ErrorKind::HostUnreachable => format!("host unreachable: {addr}"),
        io::ErrorKind::NetworkUnreachable => format!("network unreachable: {addr}"),
        io::ErrorKind::AddrNotAvailable => {
            format!("no local address/port available to reach {addr}")
        }
        _ => format!("{e} ({addr})"),
    }
}

pub fn new_histogram() -> Histogram<u64> {
    // 1 µs to 1 hour at 3 significant digits; these bounds are valid.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No socket; reconnect at the next tick.
    Closed,
    Connecting,
    /// TCP is up; the TLS handshake is under way.
    Handshaking,
    Writing,
    Reading,
    /// Connected, waiting for the next scheduled send (rate mode).
    Idle,
    /// Connected, the next request leaves at the end of the event batch.
    Queued,
}

struct Conn {
    stream: Option<TcpStream>,
    phase: Phase,
    written: usize,
    /// Latency origin of the outstanding request.
    origin: Instant,
    /// When the current connect or request began (for the timeout).
    since: Instant,
    /// Rate mode: when the next request is due.
    due: Instant,
    /// A readable edge arrived while the request was still being written.
    readable_pending: bool,
    /// ... and it said the peer closed.
    closed_pending: bool,
    parser: Parser,
    /// HTTPS: the TLS session over `stream`.
    tls: Option<Session>,
    /// When TCP was established (the handshake's start).
    established: Instant,
}

enum ReadEnd {
    /// Wait for the next edge.
    Pending,
    Done(Response),
    /// The connection ended; `true` when that is an error.
    Closed(bool),
}

struct Worker<'a> {
    plan: &'a Plan<'a>,
    poll: Poll,
    conns: Vec<Conn>,
    buf: Box<[u8]>,
    interval: Option<Duration>,
    due_heap: BinaryHeap<Reverse<(Instant, usize)>>,
    out: Outcome,
    now: Instant,
    /// Connections whose next request leaves at the end of this batch.
    to_send: Vec<usize>,
    /// Requests and errors already added to the live counters.
    published: (u64, u64),
}

pub fn run(plan: &Plan<'_>, live: &Live) -> io::Result<Outcome> {
    let poll = Poll::new()?;
    let interval = plan
        .rate
        .map(|r| Duration::from_secs_f64(plan.total as f64 / r));
    let conns = (0..plan.count)
        .map(|k| {
            // Stagger the schedules so the connections do not send in bursts.
            let due = match interval {
                Some(iv) => plan.start + iv.mul_f64((plan.first + k) as f64 / plan.total as f64),
                None => plan.start,
            };
            Conn {
                stream: None,
                phase: Phase::Closed,
                written: 0,
                origin: plan.start,
                since: plan.start,
                due,
                readable_pending: false,
                closed_pending: false,
                parser: Parser::new(plan.head_request),
                tls: None,
                established: plan.start,
            }
        })
        .collect();
    let mut w = Worker {
        plan,
        poll,
        conns,
        buf: vec![0u8; READ_BUF].into_boxed_slice(),
        interval,
        due_heap: BinaryHeap::new(),
        out: Outcome {
            ended: plan.start,
            requests: 0,
            bytes: 0,
            connects: 0,
            errors: Errors::default(),
            status: Box::new([0; 600]),
            late_sends: 0,
            max_late: Duration::ZERO,
            histogram: new_histogram(),
            causes: BTreeMap::new(),
            handshakes: new_histogram(),
            tls_error: None,
        },
        now: Instant::now(),
        to_send: Vec::with_capacity(plan.count),
        published: (0, 0),
    };
    for i in 0..w.conns.len() {
        w.connect(i);
    }
    let mut events = Events::with_capacity(1024);
    let mut next_tick = w.now + TICK;
    // After a batch of events, look once more without sleeping before
    // blocking: responses that arrived meanwhile are handled in the same
    // wake-up, and the loop sleeps (and wakes) less often per request.
    let mut busy = false;
    loop {
        w.now = Instant::now();
        if w.now >= plan.deadline || live.stopped() {
            break;
        }
        if w.now >= next_tick {
            w.publish(live);
            w.tick();
            next_tick = w.now + TICK;
        }
        if w.interval.is_some() {
            w.send_due();
        }
        let mut wake = next_tick.min(plan.deadline);
        if let Some(Reverse((due, _))) = w.due_heap.peek() {
            wake = wake.min(*due);
        }
        let timeout = if busy {
            Duration::ZERO
        } else {
            wake.saturating_duration_since(w.now)
        };
        if let Err(e) = w.poll.poll(&mut events, Some(timeout)) {
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        w.now = Instant::now();
        busy = !events.is_empty();
        for ev in events.iter() {
            let i = ev.token().0;
            if i < w.conns.len() {
                // A close (or error) may be queued behind data already seen: drain then.
                let closed = ev.is_read_closed() || ev.is_error();
                w.event(i, ev.is_readable() || closed, closed, ev.is_writable());
            }
        }
        // Requests whose responses completed in this batch leave together, after
        // all reads: the server then finds them in one wake-up, as wrk's loop does.
        if !w.to_send.is_empty() {
            w.now = Instant::now();
            let batch = std::mem::take(&mut w.to_send);
            for &i in &batch {
                if w.conns[i].phase == Phase::Queued {
                    w.start_request(i);
                }
            }
            w.to_send = batch;
            w.to_send.clear();
        }
    }
    w.out.ended = w.now;
    w.publish(live);
    Ok(w.out)
}

impl Worker<'_> {
    /// Share the counts with the progress display (every tick, not per request:
    /// the counters are shared between threads).
    fn publish(&mut self, live: &Live) {
        use std::sync::atomic::Ordering::Relaxed;
        let errors = self.out.errors.total();
        live.requests
            .fetch_add(self.out.requests - self.published.0, Relaxed);
        live.errors.fetch_add(errors - self.published.1, Relaxed);
        self.published = (self.out.requests, errors);
    }

    fn connect(&mut self, i: usize) {
        let c = &mut self.conns[i];
        c.parser.reset();
        c.readable_pending = false;
        c.closed_pending = false;
        c.since = self.now;
        c.origin = self.now;
        match TcpStream::connect(self.plan.addr) {
            Ok(mut s) => {
                if self
                    .poll
                    .registry()
                    .register(&mut s, Token(i), Interest::READABLE | Interest::WRITABLE)
                    .is_err()
                {
                    self.out.errors.connect += 1;
                    c.phase = Phase::Closed;
                    return;
                }
                c.stream = Some(s);
                c.phase = Phase::Connecting;
            }
            Err(e) => {
                self.out.errors.connect += 1;
                c.phase = Phase::Closed;
                note(&mut self.out.causes, describe(&e, self.plan.addr));
            }
        }
    }

    fn close(&mut self, i: usize) {
        let c = &mut self.conns[i];
        // Closing the descriptor removes it from the epoll set.
        c.stream = None;
        c.tls = None;
        c.phase = Phase::Closed;
        c.parser.reset();
        c.readable_pending = false;
        c.closed_pending = false;
    }

    /// Timeouts and reconnection of failed connections.
    fn tick(&mut self) {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            match c.phase {
                Phase::Closed => self.connect(i),
                Phase::Connecting | Phase::Handshaking | Phase::Writing | Phase::Reading => {
                    if self.now.duration_since(c.since) >= self.plan.timeout {
                        self.out.errors.timeout += 1;
                        let what = if c.phase == Phase::Connecting {
                            format!("no answer to connecting to {}", self.plan.addr)
                        } else {
                            format!("no response from {} in time", self.plan.addr)
                        };
                        note(&mut self.out.causes, what);
                        self.close(i);
                        self.connect(i);
                    }
                }
                Phase::Idle | Phase::Queued => {}
            }
        }
    }

    /// Rate mode: start every idle connection whose request is due.
    fn send_due(&mut self) {
        while let Some(&Reverse((due, i))) = self.due_heap.peek() {
            if due > self.now {
                break;
            }
            self.due_heap.pop();
            let c = &self.conns[i];
            if c.phase == Phase::Idle && c.due == due {
                self.start_request(i);
            }
        }
    }

    fn event(&mut self, i: usize, readable: bool, closed: bool, writable: bool) {
        match self.conns[i].phase {
            Phase::Closed => {}
            Phase::Connecting => {
                let Some(s) = self.conns[i].stream.as_ref() else {
                    return;
                };
                match s.take_error() {
                    Ok(None) => {}
                    Ok(Some(e)) | Err(e) => {
                        self.out.errors.connect += 1;
                        note(&mut self.out.causes, describe(&e, self.plan.addr));
                        self.close(i);
                        return;
                    }
                }
                match s.peer_addr() {
                    Ok(_) => {
                        let _ = s.set_nodelay(true);
                        self.out.connects += 1;
                        if self.plan.tls.is_some() {
                            self.start_tls(i);
                        } else {
                            self.connected(i);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotConnected && !readable => {}
                    Err(_) => {
                        self.out.errors.connect += 1;
                        self.close(i);
                    }
                }
            }
            Phase::Handshaking => self.handshake(i),
            Phase::Writing => {
                if readable {
                    self.conns[i].readable_pending = true;
                }
                if closed {
                    self.conns[i].closed_pending = true;
                }
                if writable {
                    self.write(i);
                }
            }
            Phase::Reading => {
                if readable {
                    self.read(i, closed);
                }
            }
            Phase::Idle | Phase::Queued => {
                if readable {
                    // Nothing was asked: this is the server closing an idle connection.
                    match self.read_some(i, closed) {
                        ReadEnd::Pending => {}
                        ReadEnd::Done(_) | ReadEnd::Closed(true) => {
                            self.out.errors.read += 1;
                            self.close(i);
                        }
                        ReadEnd::Closed(false) => {
                            self.close(i);
                            self.connect(i);
                        }
                    }
                }
            }
        }
    }

    fn start_tls(&mut self, i: usize) {
        let Some((config, name)) = self.plan.tls.as_ref() else {
            return;
        };
        match Session::new(config, name.clone()) {
            Ok(s) => {
                let c = &mut self.conns[i];
                c.tls = Some(s);
                c.established = self.now;
                c.phase = Phase::Handshaking;
                self.handshake(i);
            }
            Err(e) => self.tls_failed(i, e),
        }
    }

    /// Moves the handshake on as far as the socket allows; when it is done,
    /// the first request leaves.
    fn handshake(&mut self, i: usize) {
        let c = &mut self.conns[i];
        let (Some(s), Some(tls)) = (c.stream.as_mut(), c.tls.as_mut()) else {
            return;
        };
        let step = (|| {
            tls.flush(s)?;
            if tls.fill(s)? == Filled::Eof {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection during the TLS handshake",
                ));
            }
            tls.flush(s)
        })();
        match step {
            Err(e) => self.tls_failed(i, e),
            Ok(_) if !tls.is_handshaking() => {
                let us = self
                    .now
                    .saturating_duration_since(c.established)
                    .as_micros();
                self.out
                    .handshakes
                    .saturating_record(u64::try_from(us).unwrap_or(u64::MAX).max(1));
                self.connected(i);
            }
            Ok(_) => {}
        }
    }

    fn tls_failed(&mut self, i: usize, e: io::Error) {
        self.out.errors.connect += 1;
        if self.out.tls_error.is_none() {
            self.out.tls_error = Some(e.to_string());
        }
        self.close(i);
    }

    fn connected(&mut self, i: usize) {
        if self.interval.is_some() && self.conns[i].due > self.now {
            self.go_idle(i);
        } else {
            self.start_request(i);
        }
    }

    fn go_idle(&mut self, i: usize) {
        let c = &mut self.conns[i];
        c.phase = Phase::Idle;
        self.due_heap.push(Reverse((c.due, i)));
    }

    fn start_request(&mut self, i: usize) {
        let now = self.now;
        let keepalive = self.plan.keepalive;
        let c = &mut self.conns[i];
        if self.interval.is_some() {
            let late = now.saturating_duration_since(c.due);
            if late > LATE_AFTER {
                self.out.late_sends += 1;
                self.out.max_late = self.out.max_late.max(late);
            }
            c.origin = c.due;
        } else if keepalive {
            c.origin = now;
        }
        // Without keep-alive the origin stays at the connect: setup is part of the latency.
        c.since = now;
        c.written = 0;
        c.phase = Phase::Writing;
        self.write(i);
    }

    fn write(&mut self, i: usize) {
        let request = self.plan.request;
        if self.conns[i].tls.is_some() {
            return self.write_tls(i);
        }
        loop {
            let c = &mut self.conns[i];
            let Some(s) = c.stream.as_mut() else { return };
            match s.write(&request[c.written..]) {
                Ok(0) => break,
                Ok(n) => {
                    c.written += n;
                    if c.written == request.len() {
                        c.phase = Phase::Reading;
                        if std::mem::take(&mut c.readable_pending) {
                            let closed = std::mem::take(&mut c.closed_pending);
                            self.read(i, closed);
                        }
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    note(&mut self.out.causes, describe(&e, self.plan.addr));
                    break;
                }
            }
        }
        self.out.errors.write += 1;
        self.close(i);
    }

    /// HTTPS: the request is handed to rustls whole, then its records go out
    /// as the socket takes them.
    fn write_tls(&mut self, i: usize) {
        let request = self.plan.request;
        let c = &mut self.conns[i];
        let (Some(s), Some(tls)) = (c.stream.as_mut(), c.tls.as_mut()) else {
            return;
        };
        if c.written < request.len() {
            if tls.write_plain(request).is_err() {
                self.out.errors.write += 1;
                return self.close(i);
            }
            c.written = request.len();
        }
        match tls.flush(s) {
            Ok(true) => {
                c.phase = Phase::Reading;
                if std::mem::take(&mut c.readable_pending) {
                    let closed = std::mem::take(&mut c.closed_pending);
                    self.read(i, closed);
                }
            }
            Ok(false) => {}
            Err(_) => {
                self.out.errors.write += 1;
                self.close(i);
            }
        }
    }

    fn read(&mut self, i: usize, drain: bool) {
        match self.read_some(i, drain) {
            ReadEnd::Pending => {}
            // The peer closed right behind the response: the connection
            // cannot carry another request.
            ReadEnd::Done(mut r) => {
                r.keep_alive &= !drain;
                self.complete(i, r)
            }
            ReadEnd::Closed(error) => {
                if error {
                    self.out.errors.read += 1;
                }
                self.close(i);
                if !error {
                    self.connect(i);
                }
            }
        }
    }

    /// Read until the socket is drained or a response completes. A short read
    /// means drained, unless the peer closed (`drain`): then read to the end.
    fn read_some(&mut self, i: usize, drain: bool) -> ReadEnd {
        let Worker {
            conns,
            buf,
            out,
            plan,
            ..
        } = self;
        let addr = plan.addr;
        let c = &mut conns[i];
        let Some(s) = c.stream.as_mut() else {
            return ReadEnd::Pending;
        };
        if let Some(tls) = c.tls.as_mut() {
            let idle = matches!(c.phase, Phase::Idle | Phase::Queued);
            loop {
                // Plaintext already decrypted first, then more records.
                loop {
                    match tls.read_plain(buf) {
                        Ok(Some(0)) => {
                            if let Some(r) = c.parser.finish_at_close() {
                                return ReadEnd::Done(r);
                            }
                            return ReadEnd::Closed(!idle || c.parser.received() > 0);
                        }
                        Ok(Some(n)) => {
                            out.bytes += n as u64;
                            match c.parser.feed(&buf[..n]) {
                                Ok(Fed::Partial) => {}
                                Ok(Fed::Done(r)) => return ReadEnd::Done(r),
                                Err(_) => return ReadEnd::Closed(true),
                            }
                        }
                        Ok(None) => break,
                        Err(_) => return ReadEnd::Closed(true),
                    }
                }
                match tls.fill(s) {
                    Ok(Filled::Some) => {
                        // Post-handshake messages may want an answer.
                        if tls.flush(s).is_err() {
                            return ReadEnd::Closed(true);
                        }
                    }
                    Ok(Filled::WouldBlock) => return ReadEnd::Pending,
                    Ok(Filled::Eof) => {
                        if let Some(r) = c.parser.finish_at_close() {
                            return ReadEnd::Done(r);
                        }
                        return ReadEnd::Closed(!idle || c.parser.received() > 0);
                    }
                    Err(_) => return ReadEnd::Closed(true),
                }
            }
        }
        loop {
            match s.read(buf) {
                Ok(0) => {
                    if let Some(r) = c.parser.finish_at_close() {
                        return ReadEnd::Done(r);
                    }
                    // A close before any byte of a response was asked for is benign
                    // only when nothing was outstanding.
                    let error =
                        !matches!(c.phase, Phase::Idle | Phase::Queued) || c.parser.received() > 0;
                    if error {
                        let what = if c.parser.received() > 0 {
                            "closed by {} in the middle of a response"
                        } else {
                            "closed by {} before a response"
                        };
                        note(&mut out.causes, what.replace("{}", &addr.to_string()));
                    }
                    return ReadEnd::Closed(error);
                }
                Ok(n) => {
                    out.bytes += n as u64;
                    match c.parser.feed(&buf[..n]) {
                        Ok(Fed::Partial) => {
                            // A short read drained the socket: the next edge brings more.
                            if n < buf.len() && !drain {
                                return ReadEnd::Pending;
                            }
                        }
                        Ok(Fed::Done(r)) => return ReadEnd::Done(r),
                        Err(_) => {
                            note(&mut out.causes, format!("unparsable response from {addr}"));
                            return ReadEnd::Closed(true);
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadEnd::Pending,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    note(&mut out.causes, describe(&e, addr));
                    return ReadEnd::Closed(true);
                }
            }
        }
    }

    fn complete(&mut self, i: usize, r: Response) {
        let c = &mut self.conns[i];
        let us = self.now.saturating_duration_since(c.origin).as_micros();
        let us = u64::try_from(us).unwrap_or(u64::MAX).max(1);
        self.out.histogram.saturating_record(us);
        self.out.requests += 1;
        if let Some(n) = self.out.status.get_mut(usize::from(r.status)) {
            *n += 1;
        }
        if r.status >= 400 {
            self.out.errors.status += 1;
        }
        if let Some(iv) = self.interval {
            c.due += iv;
        }
        if !(r.keep_alive && self.plan.keepalive) {
            self.close(i);
            self.connect(i);
            return;
        }
        if self.interval.is_none() {
            self.conns[i].phase = Phase::Queued;
            self.to_send.push(i);
        } else if self.conns[i].due > self.now {
            self.go_idle(i);
        } else {
            self.start_request(i);
        }
    }
}

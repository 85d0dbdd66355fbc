//! The built-in peers: a small HTTP/1.1 keep-alive server and client whose
//! socket behaviour each case sets (TCP_NODELAY, one or two writes per
//! message, SO_RCVBUF, think time, idle time, read pace, upload size). They
//! run as threads of this process inside the namespaces, so the lab needs no
//! other software.

use std::io::{self, Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::error::{bail, Context, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    bind, connect, listen, setsockopt, socket, sockopt, AddressFamily, Backlog, SockFlag, SockType,
    SockaddrIn,
};

use crate::ns;

const CONNECT_TIMEOUT_MS: u16 = 10_000;

/// How the server answers.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// TCP_NODELAY on accepted connections.
    pub nodelay: bool,
    /// Status line and headers in one write, the body in a second one.
    pub split_write: bool,
    pub body_bytes: usize,
    /// Time between the whole request read and the response.
    pub think: Duration,
    /// Time between writing the status line and headers and writing the body
    /// (a framework that flushes the headers first, then computes the body).
    pub think_inside: Duration,
    /// The body with `Transfer-Encoding: chunked` (one chunk, then the last).
    pub chunked: bool,
    /// SO_RCVBUF on the listening socket (inherited by accepted ones).
    pub listen_rcvbuf: Option<usize>,
    /// listen() backlog: the accept queue's length.
    pub backlog: i32,
    /// The accept loop sleeps this long after each accept() (a busy server).
    pub accept_every: Duration,
    /// Reset the connection (SO_LINGER 0, close) instead of answering the
    /// request with this number on each connection (1-based); 0: never.
    pub reset_on: usize,
    /// TCP_CORK on accepted connections, set once and left on: a response's
    /// last partial segment waits for the kernel's cork ceiling (200 ms).
    pub cork: bool,
    /// With `cork`: TCP_CORK off and on again after each response, which
    /// sends the partial tail at once.
    pub uncork_each: bool,
    /// No Content-Length (and not chunked), `Connection: close`: the body
    /// ends when the server closes the connection.
    pub close_delimited: bool,
    /// Close each connection this long after its first response (one
    /// response per connection).
    pub close_after: Option<Duration>,
    /// The body of `GET /bulk` (a large download), in bytes.
    pub bulk_bytes: usize,
    /// SO_SNDBUF on accepted connections (which turns off the kernel's
    /// autotuning of their send buffer).
    pub sndbuf: Option<usize>,
}

impl Default for ServerSpec {
    fn default() -> Self {
        ServerSpec {
            nodelay: true,
            split_write: false,
            body_bytes: 615,
            think: Duration::ZERO,
            think_inside: Duration::ZERO,
            chunked: false,
            listen_rcvbuf: None,
            backlog: 128,
            accept_every: Duration::ZERO,
            reset_on: 0,
            cork: false,
            uncork_each: false,
            close_delimited: false,
            close_after: None,
            bulk_bytes: 0,
            sndbuf: None,
        }
    }
}

/// Nanoseconds the built-in peers' threads that ended so far waited for a
/// CPU while runnable (the kernel's `run_delay`): a phase reads it before
/// and after, and a prediction checked against that phase allows for it.
static RUN_DELAY_NS: AtomicU64 = AtomicU64::new(0);

/// What [`RUN_DELAY_NS`] holds now.
pub fn run_delay_ns() -> u64 {
    RUN_DELAY_NS.load(Ordering::Relaxed)
}

/// This thread's `run_delay` so far (`/proc/thread-self/schedstat`: time
/// on the CPU, time runnable and waiting for one, time slices; ns).
fn thread_run_delay() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().nth(1)?.parse().ok()
}

/// Adds the thread's wait for a CPU, from its birth (the wait before it
/// first ran included) to the guard's drop, to [`RUN_DELAY_NS`]. Made first
/// thing in a thread the lab spawned for this phase.
struct Waits;

impl Drop for Waits {
    fn drop(&mut self) {
        if let Some(waited) = thread_run_delay() {
            RUN_DELAY_NS.fetch_add(waited, Ordering::Relaxed);
        }
    }
}

/// A running server (one thread per connection).
pub struct Server {
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<Result<()>>>,
}

impl Server {
    /// Listens on `addr` inside namespace `ns_name`.
    pub fn start(ns_name: &str, addr: SocketAddrV4, spec: ServerSpec) -> Result<Server> {
        let stop = Arc::new(AtomicBool::new(false));
        let (rcvbuf, backlog, every) = (spec.listen_rcvbuf, spec.backlog, spec.accept_every);
        let listener = ns::within(ns_name, move || listen_on(addr, rcvbuf, backlog))?;
        let spec = Arc::new(Response::new(&spec));
        let st = stop.clone();
        let accept = thread::Builder::new()
            .name("lab-server".into())
            .spawn(move || accept_loop(listener, spec, st, every))?;
        Ok(Server {
            stop,
            accept: Some(accept),
        })
    }

    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn listen_on(addr: SocketAddrV4, rcvbuf: Option<usize>, backlog: i32) -> Result<TcpListener> {
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    if let Some(n) = rcvbuf {
        // Before listen(): the window scale and first window come from it.
        setsockopt(&fd, sockopt::RcvBuf, &n)?;
    }
    bind(fd.as_raw_fd(), &SockaddrIn::from(addr)).with_context(|| format!("binding {addr}"))?;
    listen(&fd, Backlog::new(backlog)?)?;
    Ok(TcpListener::from(fd))
}

/// The prepared response.
struct Response {
    head: Vec<u8>,
    body: Vec<u8>,
    nodelay: bool,
    split: bool,
    think: Duration,
    think_inside: Duration,
    reset_on: usize,
    cork: bool,
    uncork_each: bool,
    close_after: Option<Duration>,
    /// The whole reply to `GET /bulk`.
    bulk: Vec<u8>,
    sndbuf: Option<usize>,
}

impl Response {
    fn new(spec: &ServerSpec) -> Response {
        let framing = if spec.chunked {
            "Transfer-Encoding: chunked\r\n".to_string()
        } else if spec.close_delimited {
            String::new()
        } else {
            format!("Content-Length: {}\r\n", spec.body_bytes)
        };
        let connection = if spec.close_delimited || spec.close_after.is_some() {
            "close"
        } else {
            "keep-alive"
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\nServer: tcpdoctor-lab\r\nContent-Type: text/html\r\n\
             {framing}Connection: {connection}\r\n\r\n"
        )
        .into_bytes();
        let mut bulk = Vec::new();
        if spec.bulk_bytes > 0 {
            bulk = format!(
                "HTTP/1.1 200 OK\r\nServer: tcpdoctor-lab\r\n\
                 Content-Type: application/octet-stream\r\nContent-Length: {}\r\n\
                 Connection: keep-alive\r\n\r\n",
                spec.bulk_bytes
            )
            .into_bytes();
            bulk.extend((0..spec.bulk_bytes).map(|i| b'a' + (i % 26) as u8));
        }
        let mut body: Vec<u8> = (0..spec.body_bytes)
            .map(|i| b'a' + (i % 26) as u8)
            .collect();
        if spec.chunked {
            let mut chunked = format!("{:x}\r\n", body.len()).into_bytes();
            chunked.append(&mut body);
            chunked.extend_from_slice(b"\r\n0\r\n\r\n");
            body = chunked;
        }
        Response {
            head,
            body,
            nodelay: spec.nodelay,
            split: spec.split_write,
            think: spec.think,
            think_inside: spec.think_inside,
            reset_on: spec.reset_on,
            cork: spec.cork,
            uncork_each: spec.uncork_each,
            close_after: spec.close_after,
            bulk,
            sndbuf: spec.sndbuf,
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    resp: Arc<Response>,
    stop: Arc<AtomicBool>,
    every: Duration,
) -> Result<()> {
    listener.set_nonblocking(true)?;
    let mut conns = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if !ns::readable(listener.as_fd()) {
            continue;
        }
        match listener.accept() {
            Ok((s, _)) => {
                let (resp, stop) = (resp.clone(), stop.clone());
                conns.push(thread::spawn(move || {
                    let _waits = Waits;
                    let _ = serve(s, &resp, &stop);
                }));
                if !every.is_zero() {
                    thread::sleep(every);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.into()),
        }
        conns.retain(|h| !h.is_finished());
    }
    for h in conns {
        let _ = h.join();
    }
    Ok(())
}

fn serve(mut s: TcpStream, resp: &Response, stop: &AtomicBool) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_nodelay(resp.nodelay)?;
    if let Some(n) = resp.sndbuf {
        setsockopt(&s, sockopt::SndBuf, &n)?;
    }
    if resp.cork {
        crate::sys::set_cork(&s, true)?;
    }
    s.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut buf = vec![0u8; 65536];
    let mut have = 0usize;
    let mut reply = resp.head.clone();
    reply.extend_from_slice(&resp.body);
    let mut served = 0usize;
    loop {
        // The request head.
        let head_end = loop {
            if let Some(p) = find_head_end(&buf[..have]) {
                break p;
            }
            if have == buf.len() {
                return Ok(()); // a head of 64 KiB: not our client
            }
            match s.read(&mut buf[have..]) {
                Ok(0) => return Ok(()),
                Ok(n) => have += n,
                Err(e) if timed_out(&e) => {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                }
                Err(e) => return Err(e),
            }
        };
        let bulk = !resp.bulk.is_empty() && buf.starts_with(b"GET /bulk ");
        let mut body_left = content_length(&buf[..head_end]).unwrap_or(0);
        let extra = have - head_end;
        let used = extra.min(body_left);
        body_left -= used;
        buf.copy_within(head_end + used..have, 0);
        have = extra - used;
        // The body, read as fast as it comes.
        let mut scratch = [0u8; 65536];
        while body_left > 0 {
            match s.read(&mut scratch) {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    let used = n.min(body_left);
                    body_left -= used;
                    if n > used {
                        buf[..n - used].copy_from_slice(&scratch[used..n]);
                        have = n - used;
                    }
                }
                Err(e) if timed_out(&e) => {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                }
                Err(e) => return Err(e),
            }
        }
        served += 1;
        if served == resp.reset_on {
            // An abortive close: an RST instead of a FIN (RFC 9293 §3.6).
            setsockopt(
                &s,
                sockopt::Linger,
                &libc::linger {
                    l_onoff: 1,
                    l_linger: 0,
                },
            )?;
            return Ok(());
        }
        if !resp.think.is_zero() {
            thread::sleep(resp.think);
        }
        if bulk {
            s.write_all(&resp.bulk)?;
        } else if !resp.think_inside.is_zero() {
            s.write_all(&resp.head)?;
            thread::sleep(resp.think_inside);
            s.write_all(&resp.body)?;
        } else if resp.split {
            s.write_all(&resp.head)?;
            s.write_all(&resp.body)?;
        } else {
            s.write_all(&reply)?;
        }
        if resp.cork && resp.uncork_each {
            // What a server that corks on purpose does once a response is
            // written: uncork (which sends the partial tail) and cork again.
            crate::sys::set_cork(&s, false)?;
            crate::sys::set_cork(&s, true)?;
        }
        if let Some(after) = resp.close_after {
            // The response is over only when the connection closes (when it
            // has no Content-Length): a server that closes late.
            thread::sleep(after);
            return Ok(());
        }
    }
}

fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn find_head_end(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

fn content_length(head: &[u8]) -> Option<usize> {
    let text = String::from_utf8_lossy(head);
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        if k.trim().eq_ignore_ascii_case("content-length") {
            v.trim().parse().ok()
        } else {
            None
        }
    })
}

/// A slow reader: `chunk` bytes every `interval` for the first `span` of each response.
#[derive(Debug, Clone, Copy)]
pub struct SlowRead {
    pub chunk: usize,
    pub interval: Duration,
    pub span: Duration,
}

/// What the client does.
#[derive(Debug, Clone)]
pub struct ClientSpec {
    /// Workers running at the same time (one connection each at a time).
    pub workers: usize,
    /// Connections each worker opens, one after the other.
    pub connections: usize,
    /// Requests per connection (keep-alive); 0: until `duration` is over.
    pub requests: usize,
    /// No new request after this.
    pub duration: Option<Duration>,
    /// Bytes of request body (a POST when > 0).
    pub upload: usize,
    /// Request head and body in two writes.
    pub split_write: bool,
    pub nodelay: bool,
    /// SO_RCVBUF before connect().
    pub rcvbuf: Option<usize>,
    /// Idle time after connecting, before the first request.
    pub idle_before_request: Duration,
    /// Idle time between a response and the next request on a connection
    /// (keep-alive pauses; the first request leaves at once).
    pub pause_between: Duration,
    pub slow_read: Option<SlowRead>,
    /// Give a request up when no byte of its response came for this long
    /// (a response that may never come): it counts as failed and the run
    /// goes on. None: 15 s, and a run where no request completes is an error.
    pub timeout: Option<Duration>,
    /// A download of `GET /bulk` on a connection of its own, started this
    /// long before the requests and running while they are made (not
    /// counted in the latencies).
    pub bulk_first: Option<Duration>,
}

impl Default for ClientSpec {
    fn default() -> Self {
        ClientSpec {
            workers: 1,
            connections: 1,
            requests: 1,
            duration: None,
            upload: 0,
            split_write: false,
            nodelay: false,
            rcvbuf: None,
            idle_before_request: Duration::ZERO,
            pause_between: Duration::ZERO,
            slow_read: None,
            timeout: None,
            bulk_first: None,
        }
    }
}

/// What the client measured.
#[derive(Debug, Default, Clone)]
pub struct ClientResult {
    /// Per request: from the request being due (for a connection's first
    /// request: from the start of connect()) to the last response byte.
    pub latencies: Vec<Duration>,
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub elapsed: Duration,
    pub errors: Vec<String>,
}

/// Runs the client's workers inside namespace `ns_name` against `server`.
pub fn run_client(ns_name: &str, server: SocketAddrV4, spec: &ClientSpec) -> Result<ClientResult> {
    let start = Instant::now();
    let total = Arc::new(Mutex::new(ClientResult::default()));
    let mut handles = Vec::new();
    let bulk = match spec.bulk_first {
        Some(lead) => {
            let spec = spec.clone();
            let h = ns::spawn_in(ns_name, "lab-client-bulk", move || {
                bulk_download(server, &spec)
            })?;
            thread::sleep(lead);
            Some(h)
        }
        None => None,
    };
    for i in 0..spec.workers.max(1) {
        let (spec, total) = (spec.clone(), total.clone());
        handles.push(ns::spawn_in(
            ns_name,
            &format!("lab-client-{i}"),
            move || {
                let waits = Waits;
                let r = worker(server, &spec, start);
                drop(waits);
                let mut t = total.lock().unwrap_or_else(|e| e.into_inner());
                t.latencies.extend(r.latencies);
                t.bytes_up += r.bytes_up;
                t.bytes_down += r.bytes_down;
                t.errors.extend(r.errors);
                Ok(())
            },
        )?);
    }
    for h in handles {
        ns::join(h)?;
    }
    let bulk = bulk.map(ns::join).transpose()?;
    let mut r = std::mem::take(&mut *total.lock().unwrap_or_else(|e| e.into_inner()));
    r.elapsed = start.elapsed();
    r.bytes_down += bulk.unwrap_or(0);
    if r.latencies.is_empty() && spec.timeout.is_none() {
        bail!(
            "the client completed no request: {}",
            r.errors.first().map(String::as_str).unwrap_or("no error")
        );
    }
    Ok(r)
}

/// The background download: one `GET /bulk`, read to its end; its size.
fn bulk_download(server: SocketAddrV4, spec: &ClientSpec) -> Result<u64> {
    let mut s = open(server, spec).context("connecting for the background download")?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.write_all(
        format!("GET /bulk HTTP/1.1\r\nHost: {server}\r\nUser-Agent: tcpdoctor-lab\r\n\r\n")
            .as_bytes(),
    )?;
    let mut buf = vec![0u8; 65536];
    let (n, _) = read_response(&mut s, &mut buf, None).context("the background download")?;
    Ok(n)
}

fn worker(server: SocketAddrV4, spec: &ClientSpec, start: Instant) -> ClientResult {
    let mut r = ClientResult::default();
    let over = |now: Instant| {
        spec.duration
            .is_some_and(|d| now.duration_since(start) >= d)
    };
    let head = request_head(server, spec.upload);
    let body: Vec<u8> = (0..spec.upload).map(|i| b'A' + (i % 26) as u8).collect();
    let mut whole = head.clone();
    whole.extend_from_slice(&body);
    let mut buf = vec![0u8; 65536];
    for _ in 0..spec.connections.max(1) {
        if over(Instant::now()) {
            break;
        }
        let t0 = Instant::now();
        let mut s = match open(server, spec) {
            Ok(s) => s,
            Err(e) => {
                r.errors.push(format!("connect: {e}"));
                continue;
            }
        };
        let mut n = 0usize;
        let mut due = t0;
        loop {
            if !spec.idle_before_request.is_zero() {
                thread::sleep(spec.idle_before_request);
            }
            if n > 0 && !spec.pause_between.is_zero() {
                thread::sleep(spec.pause_between);
                due = Instant::now();
            }
            let res = (|| -> io::Result<(u64, bool)> {
                if spec.split_write && !body.is_empty() {
                    s.write_all(&head)?;
                    s.write_all(&body)?;
                } else {
                    s.write_all(&whole)?;
                }
                read_response(&mut s, &mut buf, spec.slow_read)
            })();
            match res {
                Ok((down, closed)) => {
                    let now = Instant::now();
                    r.latencies.push(now - due);
                    r.bytes_up += whole.len() as u64;
                    r.bytes_down += down;
                    due = now;
                    if closed {
                        // A response delimited by the close: the connection is over.
                        break;
                    }
                }
                Err(e) => {
                    r.errors.push(format!("request: {e}"));
                    break;
                }
            }
            n += 1;
            if (spec.requests > 0 && n >= spec.requests) || over(Instant::now()) {
                break;
            }
            if spec.requests == 0 && spec.duration.is_none() {
                break;
            }
        }
    }
    r
}

fn request_head(server: SocketAddrV4, upload: usize) -> Vec<u8> {
    if upload > 0 {
        format!(
            "POST /upload HTTP/1.1\r\nHost: {server}\r\nUser-Agent: tcpdoctor-lab\r\nAccept: */*\r\n\
             Content-Type: application/octet-stream\r\nContent-Length: {upload}\r\n\r\n"
        )
        .into_bytes()
    } else {
        format!(
            "GET / HTTP/1.1\r\nHost: {server}\r\nUser-Agent: tcpdoctor-lab\r\nAccept: */*\r\n\r\n"
        )
        .into_bytes()
    }
}

fn open(server: SocketAddrV4, spec: &ClientSpec) -> io::Result<TcpStream> {
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )?;
    if let Some(n) = spec.rcvbuf {
        setsockopt(&fd, sockopt::RcvBuf, &n)?;
    }
    match connect(fd.as_raw_fd(), &SockaddrIn::from(server)) {
        Ok(()) | Err(nix::errno::Errno::EINPROGRESS) => {}
        Err(e) => return Err(e.into()),
    }
    // A SYN retried after 1 s and 3 s still connects; a dead server does
    // not hang the run for two minutes.
    let ready = {
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
        poll(&mut fds, PollTimeout::from(CONNECT_TIMEOUT_MS))?
    };
    if ready == 0 {
        return Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"));
    }
    let err = nix::sys::socket::getsockopt(&fd, sockopt::SocketError)?;
    if err != 0 {
        return Err(io::Error::from_raw_os_error(err));
    }
    let s = TcpStream::from(fd);
    s.set_nonblocking(false)?;
    s.set_nodelay(spec.nodelay)?;
    s.set_read_timeout(Some(spec.timeout.unwrap_or(Duration::from_secs(15))))?;
    s.set_write_timeout(Some(Duration::from_secs(15)))?;
    Ok(s)
}

/// Reads one response; returns its size in bytes, and whether the server
/// closed the connection to end it (a body without Content-Length or chunks
/// lasts until the close: RFC 9112 §6.3).
fn read_response(
    s: &mut TcpStream,
    buf: &mut [u8],
    slow: Option<SlowRead>,
) -> io::Result<(u64, bool)> {
    let started = Instant::now();
    let mut have = 0usize;
    let head_end = loop {
        if let Some(p) = find_head_end(&buf[..have]) {
            break p;
        }
        if have == buf.len() {
            return Err(io::Error::other("response head over 64 KiB"));
        }
        let n = s.read(&mut buf[have..])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before the response",
            ));
        }
        have += n;
    };
    if is_chunked(&buf[..head_end]) {
        let mut rest = buf[head_end..have].to_vec();
        return Ok((head_end as u64 + read_chunked(s, &mut rest)?, false));
    }
    let Some(len) = content_length(&buf[..head_end]) else {
        let mut total = have as u64;
        loop {
            match s.read(buf)? {
                0 => return Ok((total, true)),
                n => total += n as u64,
            }
        }
    };
    let mut left = len.saturating_sub(have - head_end);
    while left > 0 {
        let slow_now = slow.filter(|sr| started.elapsed() < sr.span);
        let want = match slow_now {
            Some(sr) => sr.chunk.min(left).min(buf.len()),
            None => left.min(buf.len()),
        };
        let n = s.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed in the response body",
            ));
        }
        left -= n;
        if let Some(sr) = slow_now {
            thread::sleep(sr.interval);
        }
    }
    Ok(((head_end + len) as u64, false))
}

fn is_chunked(head: &[u8]) -> bool {
    String::from_utf8_lossy(head).lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("transfer-encoding")
                && v.trim().to_ascii_lowercase().ends_with("chunked")
        })
    })
}

/// Reads a chunked body (RFC 9112 §7.1) whose first bytes are in `pending`;
/// returns its size on the wire.
fn read_chunked(s: &mut TcpStream, pending: &mut Vec<u8>) -> io::Result<u64> {
    let mut consumed = 0u64;
    let mut scratch = [0u8; 16384];
    let mut more = |s: &mut TcpStream, pending: &mut Vec<u8>| -> io::Result<()> {
        let n = s.read(&mut scratch)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed in a chunked body",
            ));
        }
        pending.extend_from_slice(&scratch[..n]);
        Ok(())
    };
    loop {
        let line_end = loop {
            if let Some(p) = pending.windows(2).position(|w| w == b"\r\n") {
                break p;
            }
            more(s, pending)?;
        };
        let line = String::from_utf8_lossy(&pending[..line_end]).to_string();
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| io::Error::other(format!("bad chunk size {size_text:?}")))?;
        if size == 0 {
            // The last chunk, then trailers up to an empty line.
            let end = loop {
                if let Some(p) = find_head_end(&pending[line_end..]) {
                    break line_end + p;
                }
                more(s, pending)?;
            };
            return Ok(consumed + end as u64);
        }
        let need = line_end + 2 + size + 2;
        while pending.len() < need {
            more(s, pending)?;
        }
        pending.drain(..need);
        consumed += need as u64;
    }
}

/// The handshake round trip from the client's namespace: the time connect()
/// takes (SYN → SYN-ACK), the least of `tries`. Waits up to 20 s for the
/// server to listen first.
pub fn measure_rtt(ns_name: &str, server: SocketAddrV4, tries: usize) -> Result<Duration> {
    ns::within(ns_name, move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match TcpStream::connect_timeout(&server.into(), Duration::from_secs(5)) {
                Ok(_) => break,
                Err(e) if Instant::now() > deadline => {
                    bail!("the server at {server} did not start listening: {e}")
                }
                Err(_) => thread::sleep(Duration::from_millis(50)),
            }
        }
        let mut v = Vec::new();
        for _ in 0..tries.max(1) {
            let t = Instant::now();
            let s = TcpStream::connect_timeout(&server.into(), Duration::from_secs(5))
                .with_context(|| format!("connecting to {server} to measure the round trip"))?;
            v.push(t.elapsed());
            drop(s);
        }
        // The least of the tries: what the path adds at best. A try can only
        // come out longer than the path (a wake-up late on a busy host), never
        // shorter, so the minimum is the path's round trip.
        Ok(v.into_iter().min().unwrap_or_default())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_and_lengths() {
        let h = b"POST / HTTP/1.1\r\ncontent-LENGTH: 12\r\n\r\nbody";
        let end = find_head_end(h).expect("head");
        assert_eq!(&h[end..], b"body");
        assert_eq!(content_length(&h[..end]), Some(12));
        assert_eq!(content_length(b"GET / HTTP/1.1\r\n\r\n"), None);
        assert!(is_chunked(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        ));
        assert!(!is_chunked(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n"));
    }

    #[test]
    fn a_body_without_length_is_read_until_the_close() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let writer = thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello")
                .expect("write");
            thread::sleep(Duration::from_millis(50));
            s.write_all(b" world").expect("write");
            thread::sleep(Duration::from_millis(150));
        });
        let mut c = TcpStream::connect(addr).expect("connect");
        let mut buf = vec![0u8; 65536];
        let t = Instant::now();
        let (n, closed) = read_response(&mut c, &mut buf, None).expect("read");
        // The head (38 bytes) and both writes, and only at the close.
        assert_eq!((n, closed), (38 + 11, true));
        assert!(
            t.elapsed() >= Duration::from_millis(190),
            "{:?}",
            t.elapsed()
        );
        writer.join().expect("writer");
        // With a Content-Length the response ends at its last byte.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let writer = thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
                .expect("write");
            thread::sleep(Duration::from_millis(300));
        });
        let mut c = TcpStream::connect(addr).expect("connect");
        let t = Instant::now();
        let (n, closed) = read_response(&mut c, &mut buf, None).expect("read");
        assert_eq!((n, closed), (38 + 5, false));
        assert!(
            t.elapsed() < Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
        writer.join().expect("writer");
    }

    #[test]
    fn chunked_bodies_are_read_to_their_last_chunk() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let writer = thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            s.write_all(b"5\r\nhello\r\n3;x=y\r\nabc").expect("write");
            thread::sleep(Duration::from_millis(20));
            s.write_all(b"\r\n0\r\n\r\nNEXT").expect("write");
        });
        let mut c = TcpStream::connect(addr).expect("connect");
        let mut pending = b"".to_vec();
        let n = read_chunked(&mut c, &mut pending).expect("read");
        assert_eq!(n, 27);
        writer.join().expect("writer");
    }
}

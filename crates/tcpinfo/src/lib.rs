//! The kernel's view of one live TCP socket: `getsockopt(TCP_INFO)`.
//!
//! The kernel's `struct tcp_info` has grown over the years; the length it
//! returns says which fields this kernel knows. The fields are read from the
//! returned bytes at their documented offsets (`linux/tcp.h`), so a newer or
//! older kernel never makes this read past what it filled in: fields the
//! kernel did not return are `None`.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use serde::Serialize;

/// What the kernel reports for one TCP socket. Times are in microseconds,
/// counts in segments unless named `bytes`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TcpInfo {
    /// `TCP_ESTABLISHED` = 1, … (`linux/tcp_states.h`).
    pub state: u8,
    /// Congestion-avoidance state: 0 open, 1 disorder, 2 CWR, 3 recovery, 4 loss.
    pub ca_state: u8,
    /// Retransmissions of the current timeout (0 unless an RTO is being
    /// recovered), and the timer's exponential backoff.
    pub retransmits: u8,
    pub backoff: u8,
    /// Retransmission timeout now.
    pub rto_us: u32,
    /// Delayed-ACK timeout now (the "ack timeout").
    pub ato_us: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    pub lost: u32,
    /// Smoothed round-trip time and its variation.
    pub rtt_us: u32,
    pub rttvar_us: u32,
    /// Milliseconds since the last data sent, data received and ACK received.
    pub last_data_sent_ms: u32,
    pub last_data_recv_ms: u32,
    pub last_ack_recv_ms: u32,
    /// The window this end is willing to advertise at most right now
    /// (grows with receive autotuning), and the MSS it advertised.
    pub rcv_ssthresh: u32,
    pub advmss: u32,
    /// Congestion window, in segments.
    pub snd_cwnd: u32,
    pub snd_ssthresh: u32,
    /// Receive-side RTT estimate and receive buffer space the kernel aims for.
    pub rcv_rtt_us: u32,
    pub rcv_space: u32,
    /// Retransmissions over the connection's life.
    pub total_retrans: u32,
    /// The pacing rate; `None` when unlimited (the kernel's ~0: no pacing)
    /// or not reported.
    pub pacing_rate_bytes_per_sec: Option<u64>,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    pub segs_out: Option<u32>,
    pub segs_in: Option<u32>,
    /// Bytes written by the application and not yet sent (what
    /// TCP_NOTSENT_LOWAT bounds).
    pub notsent_bytes: Option<u32>,
    /// Segments that carried data, each way (GSO/TSO super-segments counted
    /// per MSS, as the kernel does).
    pub data_segs_in: Option<u32>,
    pub data_segs_out: Option<u32>,
    pub min_rtt_us: Option<u32>,
    pub delivery_rate_bytes_per_sec: Option<u64>,
    /// Time with data in flight, and the parts of it the sender was limited
    /// by the peer's receive window and by its own send buffer.
    pub busy_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    /// Bytes sent, retransmissions included.
    pub bytes_sent: Option<u64>,
    pub bytes_retrans: Option<u64>,
    /// The peer's advertised window and our own, in bytes.
    pub snd_wnd: Option<u32>,
    pub rcv_wnd: Option<u32>,
}

impl TcpInfo {
    /// Reads the kernel's `tcp_info` of a TCP socket.
    pub fn of(socket: &impl AsFd) -> io::Result<TcpInfo> {
        let mut buf = [0u8; 512];
        let len = raw(socket, &mut buf)?;
        TcpInfo::parse(&buf[..len]).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("TCP_INFO returned {len} bytes, fewer than the 104 every kernel since 2.6 fills in"),
            )
        })
    }

    /// Decodes the bytes `getsockopt(TCP_INFO)` returned (native byte order).
    /// `None` when fewer than the classic 104 bytes are given.
    pub fn parse(b: &[u8]) -> Option<TcpInfo> {
        let u32_at = |off: usize| -> Option<u32> {
            let bytes = b.get(off..off + 4)?;
            Some(u32::from_ne_bytes(bytes.try_into().ok()?))
        };
        let u64_at = |off: usize| -> Option<u64> {
            let bytes = b.get(off..off + 8)?;
            Some(u64::from_ne_bytes(bytes.try_into().ok()?))
        };
        if b.len() < 104 {
            return None;
        }
        Some(TcpInfo {
            state: b[0],
            ca_state: b[1],
            retransmits: b[2],
            backoff: b[4],
            rto_us: u32_at(8)?,
            ato_us: u32_at(12)?,
            snd_mss: u32_at(16)?,
            rcv_mss: u32_at(20)?,
            unacked: u32_at(24)?,
            lost: u32_at(32)?,
            rtt_us: u32_at(68)?,
            rttvar_us: u32_at(72)?,
            last_data_sent_ms: u32_at(44)?,
            last_data_recv_ms: u32_at(52)?,
            last_ack_recv_ms: u32_at(56)?,
            rcv_ssthresh: u32_at(64)?,
            advmss: u32_at(84)?,
            snd_ssthresh: u32_at(76)?,
            snd_cwnd: u32_at(80)?,
            rcv_rtt_us: u32_at(92)?,
            rcv_space: u32_at(96)?,
            total_retrans: u32_at(100)?,
            pacing_rate_bytes_per_sec: u64_at(104).filter(|&v| v != u64::MAX),
            bytes_acked: u64_at(120),
            bytes_received: u64_at(128),
            segs_out: u32_at(136),
            segs_in: u32_at(140),
            notsent_bytes: u32_at(144),
            data_segs_in: u32_at(152),
            data_segs_out: u32_at(156),
            // ~0 until the first RTT sample.
            min_rtt_us: u32_at(148).filter(|&v| v != u32::MAX),
            delivery_rate_bytes_per_sec: u64_at(160),
            busy_us: u64_at(168),
            rwnd_limited_us: u64_at(176),
            sndbuf_limited_us: u64_at(184),
            bytes_sent: u64_at(200),
            bytes_retrans: u64_at(208),
            snd_wnd: u32_at(228),
            rcv_wnd: u32_at(232),
        })
    }
}

/// `getsockopt(fd, SOL_TCP, TCP_INFO)` into `buf`; returns the length the
/// kernel filled in.
#[allow(unsafe_code)]
fn raw(socket: &impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    let fd = socket.as_fd().as_raw_fd();
    let mut len = libc::socklen_t::try_from(buf.len()).unwrap_or(libc::socklen_t::MAX);
    // SAFETY: `fd` is a live descriptor borrowed for the call; the kernel
    // writes at most `len` bytes into `buf`, which is valid for `buf.len()`
    // bytes, and stores the length it wrote in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((len as usize).min(buf.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn short_buffers_are_refused_and_optional_fields_follow_the_length() {
        assert_eq!(TcpInfo::parse(&[0u8; 103]), None);
        let classic = TcpInfo::parse(&[0u8; 104]).expect("104 bytes parse");
        assert_eq!(classic.busy_us, None);
        let mut b = vec![0u8; 192];
        b[168..176].copy_from_slice(&1234u64.to_ne_bytes());
        b[68..72].copy_from_slice(&250u32.to_ne_bytes());
        let modern = TcpInfo::parse(&b).expect("192 bytes parse");
        assert_eq!(modern.busy_us, Some(1234));
        assert_eq!(modern.rtt_us, 250);
        assert_eq!(modern.snd_wnd, None);
        assert_eq!(modern.bytes_sent, None);
        let mut b = vec![0u8; 236];
        b[2] = 3;
        b[144..148].copy_from_slice(&714u32.to_ne_bytes());
        b[156..160].copy_from_slice(&567u32.to_ne_bytes());
        b[200..208].copy_from_slice(&269_654u64.to_ne_bytes());
        b[228..232].copy_from_slice(&65_536u32.to_ne_bytes());
        let full = TcpInfo::parse(&b).expect("236 bytes parse");
        assert_eq!(full.retransmits, 3);
        assert_eq!(full.notsent_bytes, Some(714));
        assert_eq!(full.data_segs_out, Some(567));
        assert_eq!(full.bytes_sent, Some(269_654));
        assert_eq!(full.snd_wnd, Some(65_536));
    }

    #[test]
    fn unlimited_pacing_and_no_min_rtt_sample_are_none_not_all_ones() {
        let mut b = vec![0u8; 236];
        b[104..112].copy_from_slice(&u64::MAX.to_ne_bytes());
        b[148..152].copy_from_slice(&u32::MAX.to_ne_bytes());
        let t = TcpInfo::parse(&b).expect("parse");
        assert_eq!(t.pacing_rate_bytes_per_sec, None);
        assert_eq!(t.min_rtt_us, None);
        let json = serde_json::to_string(&t).expect("json");
        assert!(
            json.contains("\"pacing_rate_bytes_per_sec\":null"),
            "{json}"
        );
        b[104..112].copy_from_slice(&1_250_000u64.to_ne_bytes());
        b[148..152].copy_from_slice(&8u32.to_ne_bytes());
        let t = TcpInfo::parse(&b).expect("parse");
        assert_eq!(t.pacing_rate_bytes_per_sec, Some(1_250_000));
        assert_eq!(t.min_rtt_us, Some(8));
    }

    #[test]
    fn a_live_loopback_connection_reports_what_it_moved() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let mut buf = [0u8; 5000];
            s.read_exact(&mut buf).expect("read");
            s.write_all(b"ok").expect("write");
            // Keep the connection open until the client has looked.
            let _ = done_rx.recv();
        });
        let mut c = TcpStream::connect(addr).expect("connect");
        c.write_all(&[7u8; 5000]).expect("write");
        let mut two = [0u8; 2];
        c.read_exact(&mut two).expect("read");
        let info = TcpInfo::of(&c).expect("tcp_info");
        done_tx.send(()).expect("server waits");
        server.join().expect("server");
        assert_eq!(info.state, 1, "established");
        assert!(info.rtt_us > 0);
        assert!(info.snd_mss > 0);
        // 5000 bytes sent and acknowledged (the kernel counts the SYN's byte
        // of sequence space in bytes_acked), 2 received.
        let acked = info.bytes_acked.expect("kernel reports bytes_acked");
        assert!((5000..=5001).contains(&acked), "bytes_acked {acked}");
        assert_eq!(info.bytes_received, Some(2));
        assert!(info.segs_out.expect("segs_out") >= 2);
        // Everything written was sent: nothing held back, and at least the
        // 5000 bytes went out in data segments.
        assert_eq!(info.notsent_bytes, Some(0));
        assert!(info.bytes_sent.expect("bytes_sent") >= 5000);
        assert!(info.data_segs_out.expect("data_segs_out") >= 1);
        assert_eq!(info.data_segs_in, Some(1), "the 2-byte answer");
    }
}

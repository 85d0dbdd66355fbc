//! Building frames, for tests and fuzz seeds: the inverse of [`crate::decode`]
//! for the fields an analyzer reads. Checksums are left zero.

use std::net::IpAddr;

/// What to put in a built TCP/IP frame.
#[derive(Debug, Clone)]
pub struct FrameSpec {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u16,
    pub window: u16,
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub payload_len: usize,
}

impl FrameSpec {
    /// The raw TCP options bytes, padded to a multiple of four.
    fn options(&self) -> Vec<u8> {
        let mut o = Vec::new();
        if let Some(m) = self.mss {
            o.extend_from_slice(&[2, 4]);
            o.extend_from_slice(&m.to_be_bytes());
        }
        if let Some(ws) = self.window_scale {
            o.extend_from_slice(&[1, 3, 3, ws]);
        }
        while o.len() % 4 != 0 {
            o.push(0);
        }
        o
    }

    /// An IP packet (v4 or v6 by address family) with a TCP header and zero payload bytes.
    pub fn ip_packet(&self) -> Vec<u8> {
        let opts = self.options();
        let tcp_len = 20 + opts.len();
        let mut tcp = Vec::with_capacity(tcp_len + self.payload_len);
        tcp.extend_from_slice(&self.src_port.to_be_bytes());
        tcp.extend_from_slice(&self.dst_port.to_be_bytes());
        tcp.extend_from_slice(&self.seq.to_be_bytes());
        tcp.extend_from_slice(&self.ack.to_be_bytes());
        let doff = ((tcp_len / 4) as u16) << 12;
        tcp.extend_from_slice(&(doff | self.flags).to_be_bytes());
        tcp.extend_from_slice(&self.window.to_be_bytes());
        tcp.extend_from_slice(&[0, 0, 0, 0]);
        tcp.extend_from_slice(&opts);
        tcp.resize(tcp_len + self.payload_len, b'x');
        let mut p = Vec::new();
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let total = (20 + tcp.len()) as u16;
                p.extend_from_slice(&[0x45, 0]);
                p.extend_from_slice(&total.to_be_bytes());
                p.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
                p.extend_from_slice(&s.octets());
                p.extend_from_slice(&d.octets());
            }
            (s, d) => {
                let to16 = |a: IpAddr| match a {
                    IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
                    IpAddr::V6(v6) => v6.octets(),
                };
                p.extend_from_slice(&[0x60, 0, 0, 0]);
                p.extend_from_slice(&(tcp.len() as u16).to_be_bytes());
                p.extend_from_slice(&[6, 64]);
                p.extend_from_slice(&to16(s));
                p.extend_from_slice(&to16(d));
            }
        }
        p.extend_from_slice(&tcp);
        p
    }

    /// An Ethernet II frame around [`FrameSpec::ip_packet`], padded to 60 bytes
    /// as a NIC would pad it.
    pub fn ethernet(&self) -> Vec<u8> {
        let ip = self.ip_packet();
        let ethertype: u16 = if ip[0] >> 4 == 4 { 0x0800 } else { 0x86DD };
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(&ip);
        if f.len() < 60 {
            f.resize(60, 0);
        }
        f
    }
}

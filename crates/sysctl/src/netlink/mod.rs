//! rtnetlink messages as checked views over bytes: no sockets here. The
//! message and attribute walk every netlink family shares is
//! `tcpdoctor-netlink`'s, re-exported here.
//!
//! What the kernel sends is parsed by pure functions, so every parser is
//! unit-tested on replies recorded from a real kernel (`fixtures/*.bin`,
//! re-recorded by `fixtures/capture.sh`) and fuzzed (`fuzz/fuzz_targets/netlink.rs`).
//! The bytes are untrusted: a length that points past the buffer ends the
//! walk with an [`Error`], never a panic.
//!
//! Netlink is in host byte order (netlink(7)); the recorded fixtures are
//! little-endian, so their tests run on little-endian hosts only.

pub mod link;
pub mod qdisc;
pub mod route;

pub use tcpdoctor_netlink::{
    align, attrs, dump_request, ip_from, messages, ne_u16, ne_u32, ne_u64, need_fixed, scan, Attr,
    Attrs, Chunk, Error, Message, Messages, HEADER_LEN, NLMSG_DONE, NLMSG_ERROR,
};

/// rtnetlink message types (linux/rtnetlink.h).
pub const RTM_NEWLINK: u16 = 16;
pub const RTM_GETLINK: u16 = 18;
pub const RTM_NEWROUTE: u16 = 24;
pub const RTM_GETROUTE: u16 = 26;
pub const RTM_NEWQDISC: u16 = 36;
pub const RTM_GETQDISC: u16 = 38;

//! What the kernel hands `tcpdoctor sockets`: a NETLINK_SOCK_DIAG reply
//! (messages, inet_diag_msg, attributes, tcp_info, skmeminfo), each socket
//! judged and rendered as a text line; and `getdents64` records of /proc.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpdoctor_sockets::netlink::{messages, Message};
use tcpdoctor_sockets::{judge, procfs, text, Context, Socket};

fuzz_target!(|data: &[u8]| {
    let cx = Context {
        tcp_rmem: Some([4096, 131_072, 6_291_456]),
        tcp_wmem: Some([4096, 16_384, 4_194_304]),
    };
    let mut sockets = Vec::new();
    for m in messages(data) {
        match m {
            Ok(Message::Socket { msg, .. }) => {
                let mut s = Socket::from_diag(&msg);
                s.flags = judge::flags(&s, &cx);
                let _ = text::line(&s);
                sockets.push(s);
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let _ = text::groups(&sockets);
    for (_, name) in procfs::dirents(data) {
        let _ = procfs::number(name.to_bytes());
    }
    let _ = procfs::parse_socket_link(data);
    let _ = procfs::parse_stat_ppid(data);
});

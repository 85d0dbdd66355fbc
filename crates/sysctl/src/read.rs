//! The only I/O of the crate: /proc/sys, /proc/self/ns/net, /run/netns and
//! rtnetlink dumps, all of the calling thread's network namespace, all
//! readable without privileges. A failed dump is recorded in
//! [`Observed::errors`] and the rest is still read.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::netlink::{self, link, qdisc, route};
use crate::qdisc::Psched;
use crate::settings::{self, Reading, Snapshot};
use crate::window::Kernel;
use crate::{Namespace, Observed, Report};
use tcpdoctor_netlink::Dumper;

/// The initial network namespace's inode on kernels that fix it
/// (PROC_NET_INIT_INO, include/linux/proc_ns.h).
const INIT_NET_INO: u64 = 0xEFFF_FFF9;

/// Reads everything and judges it.
pub fn read() -> Report {
    crate::build(&observe())
}

/// Reads everything, judges nothing.
pub fn observe() -> Observed {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string());
    let mut snapshot = Snapshot {
        kernel: release.as_deref().and_then(Kernel::parse),
        namespace: namespace(),
        ..Snapshot::default()
    };
    for name in settings::names() {
        snapshot.values.insert(name.to_string(), sysctl(name));
    }
    let mut errors = Vec::new();
    let mut keep = |what: &str, r: io::Result<tcpdoctor_netlink::Dump>| match r {
        Ok(d) => d.payloads,
        Err(e) => {
            errors.push(format!("{what}: {e}"));
            Vec::new()
        }
    };
    let dumps = Dumper::open(libc::NETLINK_ROUTE, Duration::from_secs(5));
    let (links, routes4, routes6, qdiscs) = match &dumps {
        Ok(d) => (
            keep(
                "interfaces (RTM_GETLINK)",
                d.dump(
                    netlink::RTM_GETLINK,
                    netlink::RTM_NEWLINK,
                    &[0; link::IFINFOMSG_LEN],
                ),
            ),
            keep(
                "IPv4 routes (RTM_GETROUTE)",
                d.dump(
                    netlink::RTM_GETROUTE,
                    netlink::RTM_NEWROUTE,
                    &rtmsg(route::AF_INET),
                ),
            ),
            keep(
                "IPv6 routes (RTM_GETROUTE)",
                d.dump(
                    netlink::RTM_GETROUTE,
                    netlink::RTM_NEWROUTE,
                    &rtmsg(route::AF_INET6),
                ),
            ),
            keep(
                "qdiscs (RTM_GETQDISC)",
                d.dump(
                    netlink::RTM_GETQDISC,
                    netlink::RTM_NEWQDISC,
                    &[0; qdisc::TCMSG_LEN],
                ),
            ),
        ),
        Err(e) => {
            errors.push(format!("rtnetlink socket: {e}"));
            Default::default()
        }
    };
    let mut parsed = |what: &str, e: netlink::Error| errors.push(format!("{what}: {e}"));
    let mut observed_links = Vec::new();
    for p in &links {
        match link::parse(p) {
            Ok(l) => observed_links.push(l),
            Err(e) => parsed("an interface", e),
        }
    }
    let mut observed_routes = Vec::new();
    for p in routes4.iter().chain(&routes6) {
        match route::parse(p) {
            Ok(r) => observed_routes.push(r),
            Err(e) => parsed("a route", e),
        }
    }
    let mut observed_qdiscs = Vec::new();
    for p in &qdiscs {
        match qdisc::parse(p) {
            Ok(q) => observed_qdiscs.push(q),
            Err(e) => parsed("a qdisc", e),
        }
    }
    let psched = std::fs::read_to_string("/proc/net/psched")
        .ok()
        .and_then(|t| Psched::parse(&t))
        .unwrap_or_default();
    Observed {
        snapshot,
        release,
        routes: observed_routes,
        links: observed_links,
        qdiscs: observed_qdiscs,
        psched,
        errors,
    }
}

/// One sysctl of this namespace: /proc/sys/net resolves to the reader's
/// network namespace when the file is opened.
fn sysctl(name: &str) -> Reading {
    let path = Path::new("/proc/sys").join(name.replace('.', "/"));
    match std::fs::read_to_string(&path) {
        Ok(v) => Reading::Value(v.trim().to_string()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Reading::Absent,
        Err(e) => Reading::Unreadable(e.to_string()),
    }
}

/// This thread's network namespace: its id, its `ip netns` name, whether it
/// is the host's.
fn namespace() -> Namespace {
    let id = std::fs::read_link("/proc/thread-self/ns/net")
        .or_else(|_| std::fs::read_link("/proc/self/ns/net"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ino = inode_of(&id);
    // `ip netns add NAME` bind-mounts the namespace on /run/netns/NAME: the
    // mount's inode is the namespace's.
    let name = ino.and_then(|ino| {
        let mut names: Vec<String> = std::fs::read_dir("/run/netns")
            .ok()?
            .filter_map(Result::ok)
            .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.ino() == ino))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.into_iter().next()
    });
    let initial = match ino {
        Some(INIT_NET_INO) => Some(true),
        _ => match std::fs::read_link("/proc/1/ns/net") {
            // Readable with privileges only (ptrace access to pid 1).
            Ok(p) => Some(p.to_string_lossy() == id),
            Err(_) if name.is_some() => Some(false),
            Err(_) => None,
        },
    };
    Namespace { id, name, initial }
}

/// "net:[4026532177]" → 4026532177.
fn inode_of(id: &str) -> Option<u64> {
    id.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
}

/// `struct rtmsg` selecting one family, every table.
fn rtmsg(family: u8) -> [u8; route::RTMSG_LEN] {
    let mut m = [0u8; route::RTMSG_LEN];
    m[0] = family;
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inode_from_the_link_text() {
        assert_eq!(inode_of("net:[4026532177]"), Some(4_026_532_177));
        assert_eq!(inode_of("mnt:[1]"), None);
        assert_eq!(inode_of(""), None);
    }

    /// Reading the namespace the tests run in works without privileges and
    /// finds the loopback interface and its qdisc.
    #[test]
    fn reads_this_namespace() {
        let o = observe();
        assert!(o.errors.is_empty(), "{:?}", o.errors);
        assert!(o.snapshot.namespace.id.starts_with("net:["));
        assert!(o.links.iter().any(|l| l.name == "lo"));
        assert!(o.qdiscs.iter().any(|q| q.ifindex == 1));
        assert!(matches!(
            o.snapshot.values.get("net.ipv4.tcp_rmem"),
            Some(Reading::Value(_))
        ));
    }
}

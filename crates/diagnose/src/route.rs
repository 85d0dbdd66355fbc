//! Which interface the kernel sends our packets to a destination through.
//!
//! A connected UDP socket makes the kernel do the route lookup (policy rules
//! included) without sending anything; its local address is the source the
//! kernel picked, and the interface that holds that address is where the
//! traffic shows. A destination that is one of our own addresses is reached
//! over loopback.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};

/// The interface name and our source address for traffic to `dest`.
pub fn egress(dest: SocketAddr) -> io::Result<(String, IpAddr)> {
    let bind: SocketAddr = match dest {
        SocketAddr::V4(_) => "0.0.0.0:0".parse().map_err(io::Error::other)?,
        SocketAddr::V6(_) => "[::]:0".parse().map_err(io::Error::other)?,
    };
    let probe = UdpSocket::bind(bind)?;
    probe
        .connect(dest)
        .map_err(|e| io::Error::new(e.kind(), format!("no route to {}: {e}", dest.ip())))?;
    let src = probe.local_addr()?.ip();
    let name = interface_holding(src)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no interface holds {src}, the source address for {}",
                dest.ip()
            ),
        )
    })?;
    // Traffic to one of our own addresses never leaves on that interface.
    if src == dest.ip() || dest.ip().is_loopback() {
        return Ok(("lo".to_string(), src));
    }
    Ok((name, src))
}

fn interface_holding(ip: IpAddr) -> io::Result<Option<String>> {
    let addrs = nix::ifaddrs::getifaddrs().map_err(io::Error::from)?;
    for a in addrs {
        let Some(addr) = a.address else { continue };
        let found = match ip {
            IpAddr::V4(v4) => addr.as_sockaddr_in().map(|s| s.ip()) == Some(v4),
            IpAddr::V6(v6) => addr.as_sockaddr_in6().map(|s| s.ip()) == Some(v6),
        };
        if found {
            return Ok(Some(a.interface_name));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_destinations_go_through_lo() {
        let (iface, src) = egress("127.0.0.1:80".parse().expect("addr")).expect("route");
        assert_eq!(iface, "lo");
        assert!(src.is_loopback());
    }
}

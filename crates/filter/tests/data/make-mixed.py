#!/usr/bin/env python3
"""Writes the mixed captures the tcpdump comparison test reads (tests/tcpdump.rs):
  mixed.pcap      Ethernet: IPv4 TCP/UDP/ICMP/SCTP (some with IP options, some fragments),
                  IPv6 TCP/UDP/ICMPv6 (one behind a fragment header, one behind
                  hop-by-hop options), and a non-IP frame (LLDP)
  mixed-raw.pcap  the same IP packets as raw IP (LINKTYPE_RAW, 101)
  vlan.pcap       the same frames with one 802.1Q tag
Each packet has its own timestamp (second = index). Usage: make-mixed.py [DIR]"""
import ipaddress, os, struct, sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))

A4 = ["10.0.0.1", "10.0.0.2", "10.1.2.3", "192.168.1.1", "172.16.0.9"]
A6 = ["2001:db8::1", "2001:db8::2", "2001:db8:1::1", "fe80::1"]
PORTS = [22, 53, 80, 443, 8080, 50000]

def l4(sport, dport, n=12):
    return struct.pack(">HH", sport, dport) + bytes([0x11] * 16) + bytes([0xAB] * n)

def v4(src, dst, proto, body, options=b"", frag=0x4000):
    ihl = 5 + len(options) // 4
    h = struct.pack(">BBHHHBBH4s4s", 0x40 | ihl, 0, 20 + len(options) + len(body), 0x1234, frag,
                    64, proto, 0, ipaddress.ip_address(src).packed, ipaddress.ip_address(dst).packed)
    return h + options + body

def v6(src, dst, nh, body):
    h = struct.pack(">IHBB16s16s", 0x60000000, len(body), nh, 64,
                    ipaddress.ip_address(src).packed, ipaddress.ip_address(dst).packed)
    return h + body

packets = []  # (ethertype, bytes)
i = 0
for proto in (6, 17, 132):
    for sp in PORTS:
        for dp in PORTS[::2]:
            s, d = A4[i % len(A4)], A4[(i + 1) % len(A4)]
            packets.append((0x0800, v4(s, d, proto, l4(sp, dp))))
            i += 1
for proto in (6, 17):
    for sp in PORTS[::2]:
        for dp in PORTS:
            s, d = A6[i % len(A6)], A6[(i + 2) % len(A6)]
            packets.append((0x86DD, v6(s, d, proto, l4(sp, dp))))
            i += 1
# IP options (router alert + NOPs): ports past them.
packets.append((0x0800, v4("10.0.0.1", "10.0.0.2", 6, l4(80, 50000), options=b"\x94\x04\x00\x00" + b"\x01" * 8)))
packets.append((0x0800, v4("10.1.2.3", "10.0.0.2", 17, l4(53, 443), options=b"\x01" * 4)))
# Fragments: the first (MF, offset 0) has ports; a later one does not.
packets.append((0x0800, v4("10.0.0.1", "192.168.1.1", 17, l4(53, 8080, 40), frag=0x2000)))
packets.append((0x0800, v4("10.0.0.1", "192.168.1.1", 17, bytes([0x00, 0x35, 0x1F, 0x90]) + bytes(30), frag=0x0006)))
packets.append((0x0800, v4("10.0.0.2", "10.0.0.1", 6, bytes([0x00, 0x50, 0xC3, 0x50]) + bytes(30), frag=0x0010)))
# ICMP echo.
packets.append((0x0800, v4("10.0.0.2", "10.0.0.1", 1, b"\x08\x00\x00\x00\x00\x01\x00\x01" + bytes(20))))
packets.append((0x0800, v4("192.168.1.1", "172.16.0.9", 1, b"\x00\x00\x00\x00\x00\x01\x00\x01" + bytes(20))))
# ICMPv6 echo, a fragment header before TCP, hop-by-hop options before UDP.
packets.append((0x86DD, v6("2001:db8::1", "2001:db8::2", 58, b"\x80\x00\x00\x00\x00\x01\x00\x01" + bytes(20))))
packets.append((0x86DD, v6("2001:db8::2", "fe80::1", 44, b"\x06\x00\x00\x01\x00\x00\x00\x07" + l4(80, 443))))
packets.append((0x86DD, v6("fe80::1", "2001:db8:1::1", 0, b"\x11\x00\x05\x02\x00\x00\x01\x00" + l4(53, 53))))
packets.append((0x86DD, v6("2001:db8::1", "2001:db8:1::1", 17, l4(443, 53))))

lldp = bytes.fromhex("020704") + bytes(6) + bytes.fromhex("04040500000000")

def pcap(path, linktype, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype))
        for n, fr in enumerate(frames):
            f.write(struct.pack("<IIII", 1_700_000_000 + n, 0, len(fr), len(fr)) + fr)

mac = bytes.fromhex("020000000001020000000002")
eth = [mac + struct.pack(">H", et) + p for et, p in packets] + [mac + b"\x88\xcc" + lldp]
pcap(os.path.join(out, "mixed.pcap"), 1, eth)
pcap(os.path.join(out, "mixed-raw.pcap"), 101, [p for _, p in packets])
vlan = [fr[:12] + b"\x81\x00\x00\x2a" + fr[12:] for fr in eth]
pcap(os.path.join(out, "vlan.pcap"), 1, vlan)
print(f"{len(eth)} frames in mixed.pcap and vlan.pcap, {len(packets)} in mixed-raw.pcap")

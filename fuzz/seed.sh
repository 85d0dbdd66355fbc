#!/bin/sh
# Seed the fuzz corpora from the repository's real captures.
#   capture: whole pcap/pcapng files (< 100 KB) plus examples/nginx-nagle.pcap,
#            and short heads of each (first records/blocks) that mutate faster;
#            small hostile shapes (SYN flood, port scan, one-request connections)
#            from crates/capture/examples/hostile.rs.
#   decode:  single frames, prefixed with the link selector byte
#            (1 = Ethernet, 4 = Linux SLL; see fuzz_targets/decode.rs).
#   netlink: the recorded rtnetlink dumps of crates/sysctl/fixtures, prefixed
#            with the dump selector byte (0 routes, 1 interfaces, 2 qdiscs).
#   sock_diag: the netlink dumps recorded in crates/sockets/fixtures, and their heads.
#   filter:  filter expressions, some followed by NUL and an Ethernet frame.
#   http_response: responses a server sends (length, chunked, close-delimited,
#            HEAD, 1xx, 204/304), with the piece-size selector byte.
#   top_rings: the ftrace page of crates/top/src/testdata (selector byte 0) and
#            perf records holding its events as samples (selector 1).
#   probe_reply: IPv4 TCP replies (SYN-ACK, RST), a TCP segment alone (what an
#            IPv6 raw socket delivers), ICMP time exceeded / unreachable quoting a
#            probe, their ICMPv6 counterparts.
# Usage: fuzz/seed.sh [--small]   (from anywhere; idempotent)
#   --small: into fuzz/seeds/ instead of fuzz/corpus/, inputs of at most 8 KB only:
#            the committed seed corpora that scripts/fuzz.sh starts from.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out="$here/corpus"
if [ "${1:-}" = "--small" ]; then
    out="$here/seeds"
    rm -rf "$out"
fi
cap="$out/capture"
dec="$out/decode"
flt="$out/filter"
net="$out/netlink"
diag="$out/sock_diag"
http="$out/http_response"
probe="$out/probe_reply"
rings="$out/top_rings"
mkdir -p "$cap" "$dec" "$net" "$diag" "$flt" "$http" "$probe" "$rings"

# top_rings: a page of ftrace's ring as the kernel gave it, and its events as perf samples
# (PERF_RECORD_SAMPLE: u32 pid, tid; u64 time; u32 cpu, res; u32 size; raw, padded to 8).
python3 - "$root/crates/top/src/testdata/trace_pipe_raw.page" "$rings" <<'PY'
import os, struct, sys
page, out = open(sys.argv[1], "rb").read(), sys.argv[2]
open(os.path.join(out, "page"), "wb").write(b"\0" + page)
size = struct.unpack_from("<Q", page, 8)[0] & ((1 << 27) - 1)
off, t, recs = 16, struct.unpack_from("<Q", page, 0)[0], b""
while off < 16 + size:
    h = struct.unpack_from("<I", page, off)[0]
    kind, delta = h & 31, h >> 5
    if kind == 0 or kind > 28:
        break
    raw = page[off + 4:off + 4 + 4 * kind]
    off += 4 + 4 * kind
    t += delta
    body = struct.pack("<IIQIII", 1, 1, t, 1, 0, len(raw)) + raw
    body += b"\0" * (-(len(body) + 8) % 8)
    recs += struct.pack("<IHH", 9, 0, len(body) + 8) + body
open(os.path.join(out, "perf"), "wb").write(b"\1" + recs)
PY

# sock_diag: the recorded netlink dumps, whole and cut after 1 and 3 messages.
python3 - "$root/crates/sockets/fixtures" "$diag" <<'PY'
import glob, os, struct, sys
src, out = sys.argv[1:3]
for path in sorted(glob.glob(os.path.join(src, "*.bin"))):
    buf = open(path, "rb").read()
    name = os.path.basename(path)
    open(os.path.join(out, name), "wb").write(buf)
    off, n = 0, 0
    while off + 16 <= len(buf):
        off += (struct.unpack_from("=I", buf, off)[0] + 3) & ~3
        n += 1
        if n in (1, 3):
            open(os.path.join(out, f"head{n}-{name}"), "wb").write(buf[:off])
PY

for pair in 0:route4 0:route6 1:link 2:qdisc; do
    sel=${pair%%:*} name=${pair#*:}
    { printf "\\$(printf %03o "$sel")"; cat "$root/crates/sysctl/fixtures/$name.bin"; } > "$net/$name"
done

for f in "$root"/fixtures/*.pcap*; do
    [ -f "$f" ] || continue
    if [ "$(wc -c < "$f")" -lt 102400 ]; then
        cp "$f" "$cap/"
    fi
done
cp "$root/examples/nginx-nagle.pcap" "$cap/"

# capture: small instances of the hostile shapes the benchmark builds (a SYN
# flood, a port scan, one-request connections), from the same generator.
if command -v cargo >/dev/null; then
    for shape in syn-flood:300 port-scan:200 one-request:60; do
        (cd "$root" && cargo run -q --release -p tcpdoctor-capture --example hostile -- \
            "${shape%%:*}" "$cap/hostile-${shape%%:*}.pcap" "${shape#*:}") >/dev/null 2>&1
    done
fi

python3 - "$root" "$cap" "$dec" "$flt" "$http" "$probe" <<'PY'
import glob, os, struct, sys

root, cap, dec, flt, http, probe = sys.argv[1:7]

def pcap_records(buf):
    """(linktype, endian, [(record_header, frame)]) of a classic pcap."""
    magic = buf[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = ">"
    else:
        return None
    link = struct.unpack(e + "I", buf[20:24])[0] & 0x0FFFFFFF
    recs, off = [], 24
    while off + 16 <= len(buf):
        incl = struct.unpack(e + "I", buf[off + 8:off + 12])[0]
        if off + 16 + incl > len(buf):
            break
        recs.append((buf[off:off + 16], buf[off + 16:off + 16 + incl]))
        off += 16 + incl
    return link, e, recs

def pcapng_head(buf, nblocks):
    """The first nblocks blocks of a pcapng (SHB, IDB, EPBs ...)."""
    if buf[:4] != b"\x0a\x0d\x0d\x0a":
        return None
    e = "<" if buf[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
    off = 0
    for _ in range(nblocks):
        if off + 12 > len(buf):
            break
        blen = struct.unpack(e + "I", buf[off + 4:off + 8])[0]
        if blen < 12 or off + blen > len(buf):
            break
        off += blen
    return buf[:off]

srcs = sorted(glob.glob(os.path.join(root, "fixtures", "*.pcap*")))
srcs.append(os.path.join(root, "examples", "nginx-nagle.pcap"))
for path in srcs:
    buf = open(path, "rb").read()
    name = os.path.basename(path)
    parsed = pcap_records(buf)
    if parsed:
        _, _, recs = parsed
        for n in (1, 4, 16):
            out = buf[:24] + b"".join(h + d for h, d in recs[:n])
            open(os.path.join(cap, f"head{n}-{name}"), "wb").write(out)
    else:
        for n in (3, 8, 24):
            out = pcapng_head(buf, n)
            if out:
                open(os.path.join(cap, f"head{n}-{name}"), "wb").write(out)

# decode: ~50 Ethernet frames (selector 1) spread over one fixture,
# plus a few Linux SLL frames (selector 4) for the cooked-capture path.
def frames(path, selector, count):
    link, _, recs = pcap_records(open(path, "rb").read())
    step = max(1, len(recs) // count)
    picked = recs[::step][:count]
    base = os.path.basename(path).split(".")[0]
    for i, (_, d) in enumerate(picked):
        open(os.path.join(dec, f"{base}-{link}-{i:03}"), "wb").write(bytes([selector]) + d)
    return len(picked)

n = frames(os.path.join(root, "fixtures", "client-write-write.router.pcap"), 1, 50)
m = frames(os.path.join(root, "fixtures", "nginx-nodelay-on.client.pcap"), 4, 10)
# filter: expressions (the grammar's corners), alone and with a real frame.
exprs = [
    "tcp port 8080 and host 10.0.0.2", "not (udp or icmp) and src net 10.0.0.0/8",
    "ip6 and dst host 2001:db8::1 or portrange 1-1023", "src and dst net fe80::/10",
    "tcp dst port 80 or 8080", "host 10.0.0.1 and not 10.0.0.2", "!(icmp || icmp6) && ip",
    "udp src or dst portrange 5000-6000", "ip6 net 2001:db8::/32", "sctp", "port eighty and (",
]
_, _, recs = pcap_records(open(os.path.join(root, "examples", "nginx-nagle.pcap"), "rb").read())
for i, e in enumerate(exprs):
    open(os.path.join(flt, f"expr-{i:02}"), "wb").write(e.encode())
    open(os.path.join(flt, f"expr-frame-{i:02}"), "wb").write(e.encode() + b"\0" + recs[i * 7][1])

# http_response: selector byte (low bit: a HEAD request; the rest: the piece size) + bytes.
responses = [
    b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 5\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nTrailer: t\r\n\r\n",
    b"HTTP/1.0 200 OK\r\nConnection: close\r\n\r\nclose-delimited body",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
    b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
    b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n"
    b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nno\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
]
for i, r in enumerate(responses):
    for sel in (0x02, 0x07, 0xFF):
        open(os.path.join(http, f"resp-{i:02}-{sel:02x}"), "wb").write(bytes([sel]) + r)

# probe_reply: what a raw socket delivers.
def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF
def tcp(sport, dport, seq, ack, flags, opts=b""):
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, (5 + len(opts) // 4) << 4, flags, 64240, 0, 0) + opts
def ip4(src, dst, proto, payload, ttl=64):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 1, 0x4000, ttl, proto, 0, bytes(src), bytes(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + payload
def ip6(nh, payload, hops=1):
    return struct.pack("!IHBB", 6 << 28, len(payload), nh, hops) + bytes(15) + b"\1" + bytes([0x20, 1, 0xd, 0xb8]) + bytes(11) + b"\2" + payload
a, b = [10, 0, 0, 1], [10, 0, 0, 2]
probe_tcp = tcp(40000, 80, 1000, 0, 0x02)
seeds = {
    "tcp4-synack": ip4(b, a, 6, tcp(80, 40000, 5000, 1001, 0x12, b"\x02\x04\x05\xb4")),
    "tcp4-rst": ip4(b, a, 6, tcp(81, 40000, 0, 1001, 0x14)),
    "tcp6-synack": tcp(80, 40000, 5000, 1001, 0x12, b"\x02\x04\x05\xa0"),
    "icmp4-time-exceeded": ip4([10, 0, 9, 1], a, 1, bytes([11, 0, 0, 0, 0, 0, 0, 0]) + ip4(a, b, 6, probe_tcp, ttl=1)[:28]),
    "icmp4-unreachable": ip4([10, 0, 9, 1], a, 1, bytes([3, 3, 0, 0, 0, 0, 0, 0]) + ip4(a, b, 6, probe_tcp, ttl=3)),
    "icmp6-time-exceeded": bytes([3, 0, 0, 0, 0, 0, 0, 0]) + ip6(6, probe_tcp)[:48],
    "icmp6-unreachable": bytes([1, 4, 0, 0, 0, 0, 0, 0]) + ip6(6, probe_tcp),
}
for name, b_ in seeds.items():
    open(os.path.join(probe, name), "wb").write(b_)
print(f"seeded {len(os.listdir(cap))} capture inputs, {n} Ethernet + {m} SLL decode frames, {len(os.listdir(flt))} filter inputs")
PY

# decompress: small capture seeds, gzip- and zstd-compressed (and cut short).
dz="$out/decompress"
dz_max=20000
[ "$out" = "$here/seeds" ] && dz_max=1500
mkdir -p "$dz"
for f in "$cap"/*; do
    size=$(wc -c < "$f")
    [ "$size" -lt "$dz_max" ] || continue
    b=$(basename "$f")
    gzip -9 -c "$f" > "$dz/$b.gz"
    if command -v zstd >/dev/null; then zstd -q -c "$f" > "$dz/$b.zst"; fi
    head -c 200 "$dz/$b.gz" > "$dz/$b.head.gz"
done
echo "seeded $(ls "$dz" | wc -l) decompress inputs"
if [ "$out" = "$here/seeds" ]; then
    find "$out" -type f -size +8k -delete
    echo "kept $(find "$out" -type f | wc -l) seeds of at most 8 KB, $(du -sk "$out" | cut -f1) KB"
fi

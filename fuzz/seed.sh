#!/bin/sh
# Seed the fuzz corpora from the repository's real captures.
#   capture: whole pcap/pcapng files (< 100 KB) plus examples/nginx-nagle.pcap,
#            and short heads of each (first records/blocks) that mutate faster;
#            small hostile shapes (SYN flood, port scan, one-request connections)
#            from crates/capture/examples/hostile.rs.
#   decode:  single frames, prefixed with the link selector byte
#            (1 = Ethernet, 4 = Linux SLL; see fuzz_targets/decode.rs).
#   netlink: the recorded rtnetlink dumps of crates/kernel/fixtures, prefixed
#            with the dump selector byte (0 routes, 1 interfaces, 2 qdiscs).
#   sock_diag: the netlink dumps recorded in crates/sockets/fixtures, and their heads.
#   filter:  filter expressions, some followed by NUL and an Ethernet frame.
# Usage: fuzz/seed.sh   (from anywhere; idempotent)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cap="$here/corpus/capture"
dec="$here/corpus/decode"
flt="$here/corpus/filter"
net="$here/corpus/netlink"
diag="$here/corpus/sock_diag"
mkdir -p "$cap" "$dec" "$net" "$diag" "$flt"

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
    { printf "\\$(printf %03o "$sel")"; cat "$root/crates/kernel/fixtures/$name.bin"; } > "$net/$name"
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

python3 - "$root" "$cap" "$dec" "$flt" <<'PY'
import glob, os, struct, sys

root, cap, dec, flt = sys.argv[1:5]

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
print(f"seeded {len(os.listdir(cap))} capture inputs, {n} Ethernet + {m} SLL decode frames, {len(os.listdir(flt))} filter inputs")
PY

# decompress: small capture seeds, gzip- and zstd-compressed (and cut short).
dz="$here/corpus/decompress"
mkdir -p "$dz"
for f in "$cap"/*; do
    size=$(wc -c < "$f")
    [ "$size" -lt 20000 ] || continue
    b=$(basename "$f")
    gzip -9 -c "$f" > "$dz/$b.gz"
    if command -v zstd >/dev/null; then zstd -q -c "$f" > "$dz/$b.zst"; fi
    head -c 200 "$dz/$b.gz" > "$dz/$b.head.gz"
done
echo "seeded $(ls "$dz" | wc -l) decompress inputs"

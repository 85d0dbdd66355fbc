# Writes a pcap of HTTP keep-alive exchanges whose payloads carry markup and
# terminal escapes, shaped so that Nagle + delayed ACK fires (a small head,
# a 40 ms ACK, the held body):  hostile_capture.py OUT.pcap
import struct, sys

C, S = bytes([10, 9, 0, 1]), bytes([10, 9, 0, 2])
CP, SP = 41000, 8080
HOSTILE = (b"<script>window.__pwned=1;alert(1)</script>"
           b"<img src=x onerror=\"window.__pwned=2;alert(2)\">\x1b[31mRED\x1b[0m\x1b]0;title\x07")

def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF

def frame(src, dst, sp, dp, seq, ack, flags, payload=b"", opts=b""):
    off = (20 + len(opts)) // 4
    tcp = struct.pack("!HHIIBBHHH", sp, dp, seq, ack, off << 4, flags, 65535, 0, 0) + opts + payload
    ph = src + dst + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", csum(ph + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0x4000, 64, 6, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    eth = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x08\x00"
    return eth + ip + tcp

pkts = []
t = 1_700_000_000.0
def add(dt, *a, **k):
    global t
    t += dt
    pkts.append((t, frame(*a, **k)))

SYN, ACK, PSH, FIN = 0x02, 0x10, 0x08, 0x01
mss = b"\x02\x04\x05\xb4"
cs, ss = 1000, 5000
add(0, C, S, CP, SP, cs, 0, SYN, opts=mss); cs += 1
add(0.0001, S, C, SP, CP, ss, cs, SYN | ACK, opts=mss); ss += 1
add(0.0001, C, S, CP, SP, cs, ss, ACK)
for i in range(12):
    req = b"GET /" + HOSTILE + b" HTTP/1.1\r\nHost: x\r\nUser-Agent: " + HOSTILE + b"\r\n\r\n"
    add(0.001, C, S, CP, SP, cs, ss, PSH | ACK, req); cs += len(req)
    head = (b"HTTP/1.1 200 OK\r\nServer: " + HOSTILE + b"\r\nContent-Length: 600\r\n\r\n")
    add(0.0003, S, C, SP, CP, ss, cs, PSH | ACK, head); ss += len(head)
    add(0.0415, C, S, CP, SP, cs, ss, ACK)  # delayed ACK
    body = (HOSTILE * 20)[:600]
    add(0.00003, S, C, SP, CP, ss, cs, PSH | ACK, body); ss += len(body)
    add(0.0001, C, S, CP, SP, cs, ss, ACK)
add(0.001, C, S, CP, SP, cs, ss, FIN | ACK); cs += 1
add(0.0001, S, C, SP, CP, ss, cs, FIN | ACK); ss += 1
add(0.0001, C, S, CP, SP, cs, ss, ACK)

with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for ts, data in pkts:
        sec = int(ts); usec = int(round((ts - sec) * 1e6))
        f.write(struct.pack("<IIII", sec, usec, len(data), len(data)) + data)

#!/usr/bin/env python3
"""An independent oracle: every committed capture, tcpdoctor against tshark.

For each capture committed in the repository (pcap, pcapng, gzip or zstd
compressed), `tcpdoctor analyze --format json` is compared, connection by
connection, with what tshark's own TCP analysis says about the same packets:
packets, payload bytes and retransmissions each way, SYN retransmissions,
zero windows and the smallest window each way, the handshake RTT
(tcp.analysis.initial_rtt), the duration, the endpoints and the first frame;
per capture, frames, TCP frames, connections and the TCP frames of no
connection. The public corpus (fixtures/corpus/) is compared too.
Every finding's evidence is checked by tshark too: the frames exist, belong to
the tcp.stream the evidence names, and the finding's wireshark_filter matches
them. One tshark pass per capture gives all of it (fields, plus an io,stat
table with one column per evidence filter).

A difference is either one of DEFINITION (tshark and tcpdoctor count the same
packets under other names; each kind is recognised from tshark's own flags and
written in fixtures/ORACLE.md with its count), listed in KNOWN_BUGS (a real
tcpdoctor bug, with its reason), or a failure.

Usage:
  oracle.py TCPDOCTOR --check fixtures/ORACLE.md   exit 1 on a failure or a stale table
  oracle.py TCPDOCTOR --write fixtures/ORACLE.md   write the table
  oracle.py TCPDOCTOR --only NAME...               just these captures, details printed
Python 3 standard library only; needs tshark.
"""

import argparse
import concurrent.futures
import gzip
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

MAGICS = (
    b"\xd4\xc3\xb2\xa1",  # pcap, microseconds, little-endian
    b"\xa1\xb2\xc3\xd4",
    b"\x4d\x3c\xb2\xa1",  # pcap, nanoseconds
    b"\xa1\xb2\x3c\x4d",
    b"\x0a\x0d\x0d\x0a",  # pcapng
)
GZIP = b"\x1f\x8b"
ZSTD = b"\x28\xb5\x2f\xfd"

FIELDS = [
    "frame.number",
    "frame.time_epoch",
    "tcp.stream",
    "ip.src",
    "ipv6.src",
    "tcp.srcport",
    "ip.dst",
    "ipv6.dst",
    "tcp.dstport",
    "tcp.flags",
    "tcp.len",
    "tcp.seq",
    "tcp.seq_raw",
    "tcp.ack_raw",
    "tcp.window_size_value",
    "tcp.window_size",
    "tcp.analysis.retransmission",
    "tcp.analysis.fast_retransmission",
    "tcp.analysis.spurious_retransmission",
    "tcp.analysis.out_of_order",
    "tcp.analysis.lost_segment",
    "tcp.analysis.ack_lost_segment",
    "tcp.analysis.keep_alive",
    "tcp.analysis.zero_window",
    "tcp.analysis.zero_window_probe",
    "tcp.analysis.initial_rtt",
    "tcp.hdr_len",
    "tcp.options.mss_val",
    "tcp.options.wscale.shift",
    "tcp.window_size_scalefactor",
    "icmp.type",
    "icmpv6.type",
    "ip.id",
    "tcp.options",
]
F = {name: i for i, name in enumerate(FIELDS)}

TSHARK_PREFS = [
    "tcp.analyze_sequence_numbers:TRUE",
    "tcp.relative_sequence_numbers:TRUE",
    "tcp.calculate_timestamps:TRUE",
    "tcp.desegment_tcp_streams:FALSE",
    "tcp.no_subdissector_on_error:TRUE",
]

SYN, RST, ACK, FIN = 0x002, 0x004, 0x010, 0x001


def committed_captures():
    """Every committed file that is a capture, told by its first bytes."""
    try:
        out = subprocess.run(
            ["git", "-C", ROOT, "ls-files", "-z"],
            check=True,
            capture_output=True,
        ).stdout
        names = [n for n in out.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = []
        for d, subdirs, files in os.walk(ROOT):
            subdirs[:] = [s for s in subdirs if s != ".git" and not s.startswith("target")]
            names += [os.path.relpath(os.path.join(d, f), ROOT) for f in files]
    found = []
    for n in sorted(names):
        # The fuzz targets' seeds are captures cut short on purpose (their heads, mutated
        # bytes): inputs for the decoders' robustness, not traffic to judge.
        if n.startswith("fuzz/"):
            continue
        p = os.path.join(ROOT, n)
        try:
            with open(p, "rb") as fh:
                head = fh.read(4)
        except OSError:
            continue
        if (head in MAGICS or head[:2] == GZIP and is_gzipped_capture(p)
                or head == ZSTD and is_zstd_capture(p)):
            found.append(n)
    return found


def is_gzipped_capture(path):
    try:
        with gzip.open(path, "rb") as fh:
            return fh.read(4) in MAGICS
    except OSError:
        return False


def is_zstd_capture(path):
    try:
        out = subprocess.run(["zstd", "-dc", path], capture_output=True).stdout
    except OSError:
        return False
    return out[:4] in MAGICS


def epoch_ns(text):
    whole, _, frac = text.partition(".")
    return int(whole) * 1_000_000_000 + int((frac + "000000000")[:9])


def ms_close(a, b, tol=0.0005 + 1e-9):
    return a is not None and b is not None and abs(a - b) <= tol


class Frame:
    __slots__ = (
        "no", "ts", "stream", "src", "dst", "flags", "len", "seq", "seq_raw", "ack_raw",
        "win_raw", "win", "retrans", "fast", "spurious", "ooo", "lost", "ack_lost", "keepalive",
        "zero_window", "zwp", "initial_rtt", "bogus", "icmp", "mss", "wscale", "scalefactor",
        "ident",
    )


def parse_frames(lines):
    frames = {}
    for line in lines:
        v = line.split("\t")
        if len(v) < len(FIELDS):
            continue
        fr = Frame()
        fr.no = int(v[F["frame.number"]])
        fr.ts = epoch_ns(v[F["frame.time_epoch"]])
        fr.icmp = bool(v[F["icmp.type"]] or v[F["icmpv6.type"]])
        s = v[F["tcp.stream"]]
        fr.stream = int(s) if s else None
        src_ip = v[F["ip.src"]] or v[F["ipv6.src"]]
        dst_ip = v[F["ip.dst"]] or v[F["ipv6.dst"]]
        fr.src = endpoint(src_ip, v[F["tcp.srcport"]])
        fr.dst = endpoint(dst_ip, v[F["tcp.dstport"]])
        fr.flags = int(v[F["tcp.flags"]], 16) if v[F["tcp.flags"]] else 0
        fr.len = int(v[F["tcp.len"]] or 0)
        fr.seq = int(v[F["tcp.seq"]] or 0)
        fr.seq_raw = v[F["tcp.seq_raw"]]
        fr.ack_raw = v[F["tcp.ack_raw"]]
        fr.win_raw = v[F["tcp.window_size_value"]]
        # What names one transmission: the IPv4 ID, or where it is 0 (or
        # IPv6) the option bytes (the TSval is in them), or nothing.
        ip_id = int(v[F["ip.id"]], 16) if v[F["ip.id"]] else 0
        fr.ident = ip_id or v[F["tcp.options"]] or None
        fr.win = int(v[F["tcp.window_size"]]) if v[F["tcp.window_size"]] else None
        fr.retrans = bool(v[F["tcp.analysis.retransmission"]])
        fr.fast = bool(v[F["tcp.analysis.fast_retransmission"]])
        fr.spurious = bool(v[F["tcp.analysis.spurious_retransmission"]])
        fr.ooo = bool(v[F["tcp.analysis.out_of_order"]])
        fr.lost = bool(v[F["tcp.analysis.lost_segment"]])
        fr.ack_lost = bool(v[F["tcp.analysis.ack_lost_segment"]])
        fr.keepalive = bool(v[F["tcp.analysis.keep_alive"]])
        fr.zero_window = bool(v[F["tcp.analysis.zero_window"]])
        fr.zwp = bool(v[F["tcp.analysis.zero_window_probe"]])
        rtt = v[F["tcp.analysis.initial_rtt"]]
        fr.initial_rtt = float(rtt) * 1000.0 if rtt else None
        fr.mss = int(v[F["tcp.options.mss_val"]]) if v[F["tcp.options.mss_val"]] else None
        ws = v[F["tcp.options.wscale.shift"]]
        fr.wscale = int(ws) if ws else None
        sf = v[F["tcp.window_size_scalefactor"]]
        fr.scalefactor = int(sf) if sf else None
        hdr = v[F["tcp.hdr_len"]]
        fr.bogus = bool(hdr) and int(hdr) < 20
        frames[fr.no] = fr
    return frames


def endpoint(ip, port):
    if not ip or not port:
        return None
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def or_frames(frames):
    """A display filter for a set of frames without commas (io,stat splits on
    them; `frame.number in {a, b}` needs commas in tshark 4.0)."""
    return "(" + " || ".join(f"frame.number == {n}" for n in sorted(set(frames))) + ")"


def evidence_filters(doc):
    """(label, filter, expected count) for every finding's evidence: the
    frames under their tcp.stream, and the first evidence under the finding's
    own wireshark_filter."""
    checks = []
    findings = doc.get("findings", []) + doc.get("minor_findings", [])
    for i, f in enumerate(findings):
        for j, ev in enumerate(f.get("evidence", [])):
            frames = sorted(set(ev.get("frames", [])))
            if not frames:
                continue
            label = f"{f['kind']}#{i} evidence {j}"
            stream = ev.get("tcp_stream")
            checks.append((label + " frames in its tcp.stream",
                           f"tcp.stream eq {stream} && {or_frames(frames)}", len(frames)))
            if j == 0 and f.get("wireshark_filter"):
                checks.append((label + " under wireshark_filter",
                               f"{or_frames(frames)} && ({f['wireshark_filter']})", len(frames)))
    return checks


def run_tshark(path, filters):
    """tshark's frames and, for each filter, the frames it matches: one pass,
    the counts from an io,stat table (a filter with a comma, which io,stat
    would split, gets a pass of its own)."""
    cmd = ["tshark", "-n", "-r", path]
    for p in TSHARK_PREFS:
        cmd += ["-o", p]
    cmd += ["-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"]
    for f in FIELDS:
        cmd += ["-e", f]
    plain = [flt for _, flt, _ in filters if "," not in flt]
    if plain:
        cmd += ["-z", "io,stat,0," + ",".join(plain)]
    lines = tshark_lines(cmd, path)
    counts = []
    split = len(lines)
    for k, line in enumerate(lines):
        if line.startswith("====") and split == len(lines):
            split = k
        if split < len(lines) and "<>" in line:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            cells = [c for c in cells[1:] if c]
            counts = [int(c) for c in cells[0::2]]
    if len(counts) != len(plain):
        raise RuntimeError(f"tshark io,stat gave {len(counts)} columns for {len(plain)} filters")
    counts.reverse()
    matched = []
    for _, flt, _ in filters:
        if "," in flt:
            one = ["tshark", "-n", "-r", path, "-Y", flt, "-T", "fields", "-e", "frame.number"]
            matched.append(len(tshark_lines(one, path)))
        else:
            matched.append(counts.pop())
    return parse_frames(lines[:split]), matched


def tshark_lines(cmd, path):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"tshark failed on {path}: {out.stderr.strip()}")
    return out.stdout.splitlines()


def run_tcpdoctor(binary, path):
    out = subprocess.run(
        [binary, "analyze", "--format", "json", "--max-connections", "100000000", path],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"tcpdoctor failed on {path}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def for_tshark(path, tmpdir):
    """tshark reads pcap, pcapng and gzip; a zstd capture is decompressed first."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head != ZSTD:
        return path
    out = os.path.join(tmpdir, os.path.basename(path) + ".pcap")
    with open(out, "wb") as fh:
        subprocess.run(["zstd", "-dc", path], check=True, stdout=fh)
    return out


class Ranges:
    """Disjoint byte ranges [a, b) of one sender's sequence space."""

    def __init__(self):
        self.spans = []

    def add(self, a, b):
        """Adds [a, b); returns how many of its bytes were not covered yet."""
        new = b - a
        merged = []
        for x, y in self.spans:
            if y < a or x > b:
                merged.append((x, y))
            else:
                new -= max(0, min(y, b) - max(x, a))
                a, b = min(a, x), max(b, y)
        merged.append((a, b))
        merged.sort()
        self.spans = merged
        return max(new, 0)

    def total(self):
        return sum(y - x for x, y in self.spans)


class Side:
    """What one endpoint sent in a tcp.stream, from tshark's fields."""

    __slots__ = (
        "packets", "data", "seq_lo", "seq_hi", "ranges", "first_seen_in_resent", "retrans",
        "spurious", "ooo", "lost", "keepalive", "zwp", "zero_window", "min_window", "copies",
        "acked_unseen",
        "last_data", "syn", "fin", "rst", "mss", "wscale", "scalefactor",
    )

    def __init__(self):
        self.packets = self.data = self.first_seen_in_resent = 0
        self.seq_lo = self.seq_hi = self.min_window = None
        self.last_data = []
        self.mss = self.wscale = self.scalefactor = None
        self.ranges = None  # Ranges, from the first data segment
        # Frame numbers: tshark's retransmission (or fast retransmission),
        # spurious retransmission, out-of-order, previous segment not captured,
        # keep-alive, zero window probe, zero window; capture copies.
        self.retrans, self.spurious, self.ooo, self.lost = [], [], [], []
        self.keepalive, self.zwp, self.zero_window, self.copies = [], [], [], []
        # tshark's (spurious) retransmissions whose bytes the capture had never
        # seen: the peer's ACK of them was captured first.
        self.acked_unseen = []
        self.syn = self.fin = self.rst = False

    def covered(self):
        return self.ranges.total() if self.ranges else 0


class Stream:
    def __init__(self, number):
        self.number = number
        self.frames = []
        self.sides = defaultdict(Side)
        self.syns = []  # SYN without ACK
        self.synacks = []
        self.syn_retrans = []
        self.handshake_copies = set()  # SYNs and SYN-ACKs that are capture copies
        self.initial_rtt = None
        self.initial_rtt_frame = None
        # Sender -> its frames tshark flagged `ACKed segment that wasn't captured`.
        self.ack_lost = defaultdict(list)

    @property
    def endpoints(self):
        fr = self.frames[0]
        return {fr.src, fr.dst}


def streams_of(frames):
    """tshark's frames grouped by tcp.stream (frames carrying a TCP header
    inside an ICMP error are left out, as are bogus TCP headers: returned
    apart)."""
    streams = {}
    bogus = []
    for no in sorted(frames):
        fr = frames[no]
        if fr.stream is None or fr.icmp:
            continue
        if fr.bogus:
            bogus.append(fr)
            continue
        st = streams.setdefault(fr.stream, Stream(fr.stream))
        st.frames.append(fr)
        side = st.sides[fr.src]
        side.packets += 1
        add_handshake(st, side, fr, is_copy(side, fr))
        if st.initial_rtt is None and fr.initial_rtt is not None:
            st.initial_rtt = fr.initial_rtt
            st.initial_rtt_frame = fr
        if fr.len > 0:
            add_data(side, fr)
        side.fin |= bool(fr.flags & FIN)
        side.rst |= bool(fr.flags & RST)
        if fr.lost:
            side.lost.append(fr.no)
        if fr.ack_lost:
            st.ack_lost[fr.src].append(fr.no)
        if fr.keepalive:
            side.keepalive.append(fr.no)
        if fr.zwp:
            side.zwp.append(fr.no)
        if fr.zero_window:
            side.zero_window.append(fr.no)
        if not fr.flags & (SYN | RST) and fr.win is not None:
            side.min_window = fr.win if side.min_window is None else min(side.min_window, fr.win)
            if fr.scalefactor is not None:
                side.scalefactor = fr.scalefactor
    for st in streams.values():
        st.after_finish = after_finish(st)
    return streams, bogus


def after_finish(st):
    """The frames of a stream after both its FINs were acknowledged (tshark's
    raw sequence numbers), a new SYN on the tuple excepted; [] if it never
    finished."""
    fin_end = {}  # sender -> raw sequence just past its first FIN
    acked = set()
    for i, fr in enumerate(st.frames):
        if len(acked) == 2:
            rest = st.frames[i:]
            return [] if any(f.flags & SYN for f in rest) else rest
        if fr.flags & RST:
            return []
        if fr.flags & FIN and fr.src not in fin_end and fr.seq_raw:
            fin_end[fr.src] = (int(fr.seq_raw) + fr.len + 1) % 2**32
        if fr.flags & ACK and fr.ack_raw and fr.dst in fin_end:
            if (int(fr.ack_raw) - fin_end[fr.dst]) % 2**32 < 2**31:
                acked.add(fr.dst)
    return []


def add_handshake(st, side, fr, copy):
    if not fr.flags & SYN:
        return
    if copy:
        st.handshake_copies.add(fr.no)
    if fr.flags & ACK:
        st.synacks.append(fr.no)
    else:
        st.syns.append(fr.no)
        if fr.retrans:
            st.syn_retrans.append(fr.no)
    side.syn = True
    side.wscale = fr.wscale
    if fr.mss is not None:
        side.mss = fr.mss


def add_data(side, fr):
    side.data += 1
    end = fr.seq + fr.len
    side.seq_lo = fr.seq if side.seq_lo is None else min(side.seq_lo, fr.seq)
    side.seq_hi = end if side.seq_hi is None else max(side.seq_hi, end)
    if side.ranges is None:
        side.ranges = Ranges()
    new = side.ranges.add(fr.seq, end)
    if fr.retrans or fr.fast:
        side.retrans.append(fr.no)
        if fr.spurious and new == fr.len:
            side.acked_unseen.append(fr.no)
    elif fr.spurious:
        side.spurious.append(fr.no)
    elif fr.ooo:
        side.ooo.append(fr.no)
    if fr.retrans or fr.fast or fr.spurious or fr.ooo:
        side.first_seen_in_resent += new


def is_copy(side, fr):
    """A capture's copy of a data segment or SYN, not one the sender sent: the
    same raw sequence and acknowledgment numbers, length, flags and window as
    one of the side's last 4, and either the same identity (IPv4 ID, or the
    option bytes where the ID is 0) within 20 ms, or, where either identity
    is unknown, within 200 us. Two identities that differ are two sends."""
    if fr.len == 0 and not fr.flags & SYN:
        return False
    sig = (fr.seq_raw, fr.ack_raw, fr.len, fr.flags, fr.win_raw)
    copy = False
    for (s, ts, ident) in side.last_data:
        if s != sig:
            continue
        since = fr.ts - ts
        if fr.ident is None or ident is None:
            copy = copy or since <= 200_000
        else:
            copy = copy or (ident == fr.ident and since <= 20_000_000)
    if copy:
        side.copies.append(fr.no)
        return True
    side.last_data = (side.last_data + [(sig, fr.ts, fr.ident)])[-4:]
    return False


def span(side):
    if side is None or side.seq_lo is None:
        return 0
    return side.seq_hi - side.seq_lo


def window_shifts(st, cs, ss):
    """Each side's window scale shift as tshark's SYN options give it (RFC
    7323 §2.2: on only if both SYNs carry the option; a SYN-ACK without it
    turns it off both ways), None when the SYNs do not tell."""
    if not st.synacks or ss is None:
        return None, None
    if ss.wscale is None:
        return 0, 0
    client = cs.wscale if cs is not None and cs.syn else None
    return client, ss.wscale


def end_state(st, cs, ss):
    """How the connection ended, from tshark's flags: refused (the SYN
    answered by an RST, no SYN-ACK, no data), rst, unanswered (SYNs only),
    fin (both ways) or open."""
    data = sum(s.data for s in st.sides.values())
    if any(s.rst for s in st.sides.values()):
        refused = st.syns and not st.synacks and ss is not None and ss.rst and data == 0
        return "refused" if refused else "rst"
    if st.syns and not st.synacks and data == 0 and (ss is None or ss.packets == 0):
        return "unanswered"
    if cs is not None and ss is not None and cs.fin and ss.fin:
        return "fin"
    return "open"


def field_values(st, c):
    """(field, tshark's value, tcpdoctor's value, side) for one connection."""
    client, server = c["client"], c["server"]
    cs, ss = st.sides.get(client), st.sides.get(server)
    dur = (max(f.ts for f in st.frames) - min(f.ts for f in st.frames)) / 1e6
    syn_src = next((f.src for f in st.frames if f.no in st.syns[:1]), None)
    shifts = window_shifts(st, cs, ss)
    copies = sum(len(s.copies) for s in st.sides.values())
    rows = [
        ("endpoints", sorted(st.endpoints), sorted([client, server]), None),
        ("client", syn_src or client, client, None),
        ("first_frame", st.frames[0].no, c["first_frame"], None),
        ("packets", len(st.frames), c["packets"], None),
        ("duration_ms", round(dur, 6), c["duration_ms"], None),
        ("handshake_rtt_ms", st.initial_rtt, c.get("handshake_rtt_ms"), None),
        ("syn_retransmissions", len(st.syn_retrans), c["syn_retransmissions"], None),
        ("end", end_state(st, cs, ss), c["end"], None),
        ("duplicates", copies, c["duplicates"], None),
    ]
    for i, (way, side) in enumerate((("client_to_server", cs), ("server_to_client", ss))):
        rows += [
            (f"bytes.{way}", span(side), c["bytes"][way], side),
            (f"retransmissions.{way}", len(side.retrans) if side else 0,
             c["retransmissions"][way], side),
            (f"zero_window.{way}", bool(side and side.zero_window), c["min_window"][way] == 0, side),
            (f"min_window.{way}", side.min_window if side else None, c["min_window"][way], side),
            (f"mss.{way}", side.mss if side else None, c["mss"][way], side),
            (f"window_scale.{way}", shifts[i], c["window_scale"][way], side),
        ]
        rate = (c.get("delivery_rate_mbit_s") or {}).get(way)
        if rate is not None:
            receiver = server if way == "client_to_server" else client
            rows.append((f"delivery_rate.{way}", "no faster than its ACKs",
                         delivery_check(st, receiver, c["delivery_rate_frames"][way], rate), side))
    return rows


def delivery_check(st, receiver, span, rate):
    """tcpdoctor's fastest delivery rate against tshark's frames: the two ACKs
    it names are the receiver's, in this tcp.stream, and tshark's acknowledgment
    numbers and times for them give at least that rate (tcpdoctor divides by the
    longer of the time between the ACKs and between the data they acknowledged,
    so its rate is at most the ACKs' own)."""
    by_no = {f.no: f for f in st.frames}
    a, b = (by_no.get(n) for n in span)
    if a is None or b is None or a.src != receiver or b.src != receiver:
        return f"frames {span} are not {receiver}'s ACKs in this tcp.stream"
    acked = (int(b.ack_raw) - int(a.ack_raw)) % 2**32
    elapsed = b.ts - a.ts
    if acked <= 0 or elapsed < 0:
        return f"frames {span}: {acked} bytes acknowledged in {elapsed} ns"
    if elapsed == 0:
        return "no faster than its ACKs"  # ACKs with one timestamp: no bound
    acks = acked * 8 / elapsed * 1000.0
    if rate > acks + 0.001:
        return f"{rate} Mbit/s, faster than its ACKs' {acks:.3f} Mbit/s (frames {span})"
    return "no faster than its ACKs"


def equal(field, a, b):
    if field in ("duration_ms", "handshake_rtt_ms"):
        return (a is None and b is None) or ms_close(a, b)
    return a == b


# Differences of definition: the same packets, counted under another name.
# Each is recognised from tshark's own flags for the frames concerned, never
# assumed; the table in fixtures/ORACLE.md counts them per capture.
DEFINITIONS = {
    "out_of_order": (
        "retransmissions",
        "segments",
        "tshark calls a data segment below the highest sequence already seen `TCP Out-Of-Order` "
        "(tcp.analysis.out_of_order) when it follows the previous segment within the RTT or "
        "fills a hole whose first copy the capture never saw (lost before the capture point: "
        "tshark flagged `previous segment not captured`); tcpdoctor counts every data segment "
        "entirely below the highest sequence sent as a retransmission (crates/flow, "
        "SegKind::Retransmission).",
    ),
    "spurious": (
        "retransmissions",
        "segments",
        "tshark calls a re-sent segment whose bytes the receiver had already acknowledged a "
        "`spurious retransmission`, not a retransmission; tcpdoctor counts it as one.",
    ),
    "capture_copy": (
        "retransmissions, syn_retransmissions",
        "segments",
        "the same segment (data, or a SYN) captured twice within 200 µs (a mirror port, two "
        "interfaces): tshark flags the copy as a retransmission, tcpdoctor drops it and counts "
        "it in `duplicates`.",
    ),
    "acked_before_seen": (
        "retransmissions",
        "segments",
        "the capture saw the receiver's ACK of a segment before the segment itself (two capture "
        "points merged, or a capture that reorders: tshark flagged the ACK `ACKed segment that "
        "wasn't captured`); tshark then calls the segment a (spurious) retransmission though its "
        "bytes were never seen before, tcpdoctor counts the first time bytes are seen as new data.",
    ),
    "refused_rtt": (
        "handshake_rtt_ms",
        "connections",
        "tshark sets tcp.analysis.initial_rtt on the RST-ACK that refuses a SYN; tcpdoctor's "
        "handshake_rtt_ms is the SYN, SYN-ACK, ACK round trip and is null when no SYN-ACK came.",
    ),
    "reordered_handshake": (
        "handshake_rtt_ms",
        "connections",
        "the capture put the client's ACK before the SYN-ACK it acknowledges; tshark's "
        "initial_rtt runs from the SYN to that ACK, tcpdoctor's handshake_rtt_ms would need a "
        "negative SYN-ACK-to-ACK leg and is null.",
    ),
    "handshake_legs": (
        "handshake_rtt_ms",
        "connections",
        "a SYN or SYN-ACK came more than once (sent again, or captured twice): tshark's "
        "initial_rtt runs from the last SYN, a capture's copy included, to the ACK; "
        "tcpdoctor's handshake_rtt_ms adds the SYN-to-SYN-ACK leg (the last SYN before the "
        "first SYN-ACK) and the SYN-ACK-to-ACK leg (the SYN-ACK the ACK answered), each its own "
        "round trip, capture copies left out: recomputed from tshark's frames, it is "
        "tcpdoctor's value.",
    ),
    "synack_not_captured": (
        "handshake_rtt_ms, min_window",
        "connections",
        "the SYN was captured and the SYN-ACK was not (a capture that sees one direction): "
        "tshark's initial_rtt still runs from the SYN to the client's first ACK, and it scales "
        "the client's windows by the shift its SYN offered; tcpdoctor's handshake_rtt_ms needs "
        "the SYN-ACK and is null, and without the SYN-ACK it cannot know that the server "
        "agreed to window scaling (RFC 7323 §2.2): its windows are the raw field.",
    ),
    "never_captured": (
        "bytes",
        "bytes",
        "tshark's sequence span includes bytes the capture never saw (a hole after `previous "
        "segment not captured` that no later segment fills); tcpdoctor counts the bytes it saw.",
    ),
    "no_handshake_no_data": (
        "connections",
        "frames",
        "tshark gives a tcp.stream to every tuple, also to one whose only segments are without "
        "data and without SYN (a keep-alive and its ACK on a connection that opened before the "
        "capture); tcpdoctor makes connections of a handshake or data and counts these frames "
        "in `stray_tcp_packets` (its tcp_stream numbers still count them, as tshark's do).",
    ),
    "after_finish": (
        "packets, duration_ms",
        "frames",
        "frames of a connection captured after both its FINs were acknowledged (a capture's "
        "copies of the last ACK): tshark keeps them in the tcp.stream; tcpdoctor frees a "
        "connection once both FINs are acknowledged and counts what follows in "
        "`stray_tcp_packets` (memory and the open count stay those of open connections).",
    ),
    "bogus_header": (
        "connections",
        "frames",
        "tshark gives a frame whose TCP header length is below 20 bytes (`Bogus TCP header "
        "length`) a tcp.stream of its own; tcpdoctor reports it undecodable (`data offset below "
        "5`) and makes no connection of it.",
    ),
}

# Real disagreements that are tcpdoctor's bugs, visible here until fixed.
# Each names the differences it explains, exactly: (capture, tcp.stream,
# field) -> (tshark's value, tcpdoctor's value). A listed difference that no
# longer occurs (or with other values) fails the test too: remove it when the
# bug is fixed.
KNOWN_BUGS = {}


class Result:
    """One capture's comparison."""

    def __init__(self, name):
        self.name = name
        self.connections = 0
        self.fields = 0
        self.equal = 0
        self.definitions = defaultdict(lambda: [0, 0])  # reason -> [fields, count]
        self.known = []  # (bug, key, note)
        self.failures = []
        self.evidence = 0
        self.evidence_frames = 0

    def fail(self, msg):
        self.failures.append(f"{self.name}: {msg}")


def by_definition(field, a, b, st, side, c):
    """[(reason, count)] explaining tshark's `a` against tcpdoctor's `b`,
    from tshark's flags, or None."""
    late = st.after_finish
    if late and field == "packets" and b == a - len(late):
        return [("after_finish", len(late))]
    if late and field == "duration_ms":
        kept = st.frames[: len(st.frames) - len(late)]
        if ms_close(b, (max(f.ts for f in kept) - min(f.ts for f in kept)) / 1e6):
            return [("after_finish", len(late))]
    if field.startswith("retransmissions.") and side is not None:
        flagged = set(side.retrans) | set(side.spurious) | set(side.ooo)
        copies = [n for n in side.copies if n in flagged]
        peer = c["server"] if field.endswith("client_to_server") else c["client"]
        acks = st.ack_lost.get(peer, [])
        unseen = [n for n in side.acked_unseen if any(k < n for k in acks)]
        if b == a + len(side.spurious) + len(side.ooo) - len(copies) - len(unseen):
            parts = [("out_of_order", len(side.ooo)), ("spurious", len(side.spurious)),
                     ("capture_copy", len(copies)), ("acked_before_seen", len(unseen))]
            return [p for p in parts if p[1]]
    if field == "syn_retransmissions":
        copies = [n for n in st.syn_retrans if n in st.handshake_copies]
        if copies and b == a - len(copies):
            return [("capture_copy", len(copies))]
    if field == "handshake_rtt_ms" and a is not None:
        fr = st.initial_rtt_frame
        if b is None and fr is not None and fr.flags & RST and not st.synacks:
            return [("refused_rtt", 1)]
        early = early_ack(st)
        if b is None and early is not None and ms_close(a, early / 1e6):
            return [("reordered_handshake", 1)]
        if b is not None and fr is not None and handshake_legs(st, fr) is not None:
            last_syn, legs = handshake_legs(st, fr)
            if ms_close(a, (fr.ts - last_syn) / 1e6) and ms_close(b, legs / 1e6):
                return [("handshake_legs", 1)]
    if st.syns and not st.synacks:
        if field == "handshake_rtt_ms" and a is not None and b is None:
            return [("synack_not_captured", 1)]
        shift = side.wscale if side is not None and side.syn else None
        if field.startswith("min_window.") and shift and a is not None and b is not None \
                and b << shift == a:
            return [("synack_not_captured", 1)]
    if field.startswith("bytes.") and side is not None:
        covered = side.covered()
        if b == covered and covered < a and side.lost:
            return [("never_captured", a - covered)]
    return None


def early_ack(st):
    """The time from the last SYN to the SYN sender's first ACK when the
    capture has that ACK before the first SYN-ACK, in ns; else None."""
    if not st.syns or not st.synacks:
        return None
    at = {f.no: f for f in st.frames}
    client = at[st.syns[0]].src
    ack = next((f for f in st.frames if f.no > st.syns[0] and f.src == client
                and f.flags & ACK and not f.flags & (SYN | RST)), None)
    if ack is None or ack.no > st.synacks[0]:
        return None
    last_syn = max(n for n in st.syns if n < ack.no)
    return ack.ts - at[last_syn].ts


def handshake_legs(st, ack):
    """For a handshake whose SYN or SYN-ACK came more than once: the time of
    the last SYN before `ack` (tshark's initial_rtt starts there) and
    tcpdoctor's handshake RTT from tshark's frames (the last SYN before the
    first SYN-ACK to that SYN-ACK, plus the last SYN-ACK before `ack` to
    `ack`; capture copies left out), in ns; None otherwise."""
    if len(st.syns) + len(st.synacks) < 3 or not st.synacks:
        return None
    at = {f.no: f.ts for f in st.frames}
    synacks = [n for n in st.synacks if n not in st.handshake_copies]
    first_synack = synacks[0]
    syn = [n for n in st.syns if n < first_synack and n not in st.handshake_copies]
    synack = [n for n in synacks if n < ack.no]
    before_ack = [n for n in st.syns if n < ack.no]
    if not syn or not synack or not before_ack:
        return None
    legs = at[first_synack] - at[syn[-1]] + ack.ts - at[synack[-1]]
    return at[before_ack[-1]], legs


def compare_connection(res, st, c):
    res.connections += 1
    for field, a, b, side in field_values(st, c):
        res.fields += 1
        if equal(field, a, b):
            res.equal += 1
            continue
        key = (res.name, st.number, field)
        why = by_definition(field, a, b, st, side, c)
        if why:
            for reason, count in why:
                res.definitions[reason][0] += 1
                res.definitions[reason][1] += count
            continue
        bug = next((n for n, bug in KNOWN_BUGS.items() if bug["where"].get(key) == (a, b)), None)
        if bug:
            res.known.append((bug, key))
            continue
        note = ""
        if side is not None:
            note = (f" (tshark frames: retransmission {side.retrans[:8]}, out-of-order "
                    f"{side.ooo[:8]}, spurious {side.spurious[:8]}, previous segment not "
                    f"captured {side.lost[:8]}; bytes covered {side.covered()}, first seen "
                    f"in a re-sent segment {side.first_seen_in_resent})")
        res.fail(f"tcp.stream {st.number} {c['client']} -> {c['server']}: {field}: "
                 f"tshark {a!r}, tcpdoctor {b!r}{note}")


def is_bare(st):
    """A tcp.stream without SYN and without data (a keep-alive and its ACK)."""
    return not st.syns and not st.synacks and all(f.len == 0 for f in st.frames)


def compare_capture(res, doc, frames, streams, bogus, bare):
    """`bare`: the tcp.streams without SYN and data that tcpdoctor has no
    connection for (no_handshake_no_data)."""
    cap = doc["capture"]
    undecodable = sum(u["count"] for u in cap.get("undecodable", [])
                      if "data offset below 5" in u["reason"])
    tcp_frames = sum(len(st.frames) for st in streams.values())
    bare_frames = sum(len(streams[n].frames) for n in bare)
    late = sum(len(st.after_finish) for n, st in streams.items() if n not in bare)
    rows = [
        ("capture.packets", len(frames), cap["packets"]),
        ("capture.tcp_packets", tcp_frames, cap["tcp_packets"]),
        ("capture.connections", len(streams) - len(bare), cap["connections"]),
        ("capture.connections_listed", len(streams) - len(bare), len(doc["connections"])),
        ("capture.stray_tcp_packets", bare_frames + late, cap["stray_tcp_packets"]),
    ]
    if late:
        res.definitions["after_finish"][0] += 1
    if bare:
        res.definitions["no_handshake_no_data"][0] += 2
        res.definitions["no_handshake_no_data"][1] += bare_frames
    if bogus:
        rows.append(("capture.undecodable_tcp_headers", len(bogus), undecodable))
        res.definitions["bogus_header"][0] += 1
        res.definitions["bogus_header"][1] += len(bogus)
    for field, a, b in rows:
        res.fields += 1
        if a == b:
            res.equal += 1
        else:
            res.fail(f"{field}: tshark {a}, tcpdoctor {b}")


def check_evidence(res, doc, frames, checks, counts):
    conns = {c["id"]: c for c in doc["connections"]}
    for f in doc.get("findings", []) + doc.get("minor_findings", []):
        for ev in f.get("evidence", []):
            c = conns.get(ev.get("connection"))
            if c is None or c["tcp_stream"] != ev.get("tcp_stream"):
                res.fail(f"{f['kind']} evidence names connection {ev.get('connection')} and "
                         f"tcp.stream {ev.get('tcp_stream')}, which are not one connection")
            for n in ev.get("frames", []):
                fr = frames.get(n)
                res.evidence_frames += 1
                if fr is None:
                    res.fail(f"{f['kind']} evidence frame {n}: no such frame")
                elif fr.stream != ev.get("tcp_stream"):
                    res.fail(f"{f['kind']} evidence frame {n}: tshark's tcp.stream {fr.stream}, "
                             f"evidence says {ev.get('tcp_stream')}")
    for (label, flt, want), got in zip(checks, counts):
        res.evidence += 1
        if got != want:
            res.fail(f"{label}: tshark matches {got} of {want} frames with `{flt}`")


def analyse(binary, name, tmpdir):
    res = Result(name)
    path = os.path.join(ROOT, name)
    try:
        doc = run_tcpdoctor(binary, path)
        checks = evidence_filters(doc)
        frames, counts = run_tshark(for_tshark(path, tmpdir), checks)
    except (RuntimeError, ValueError, OSError, subprocess.CalledProcessError) as e:
        res.fail(str(e))
        return res
    streams, bogus = streams_of(frames)
    conns = {}
    for c in doc["connections"]:
        if c["tcp_stream"] in conns:
            res.fail(f"tcp.stream {c['tcp_stream']} given to two connections")
        conns[c["tcp_stream"]] = c
    bare = {n for n, st in streams.items() if n not in conns and is_bare(st)}
    compare_capture(res, doc, frames, streams, bogus, bare)
    for number in sorted(set(streams) | set(conns)):
        st, c = streams.get(number), conns.get(number)
        if number in bare:
            continue
        if st is None:
            res.fail(f"tcpdoctor's connection {c['id']} ({c['client']} -> {c['server']}) has "
                     f"tcp.stream {number}, which tshark does not have")
        elif c is None:
            res.fail(f"tshark's tcp.stream {number} ({sorted(st.endpoints)}, first frame "
                     f"{st.frames[0].no}) is no tcpdoctor connection")
        else:
            compare_connection(res, st, c)
    check_evidence(res, doc, frames, checks, counts)
    return res


def tshark_version():
    out = subprocess.run(["tshark", "--version"], capture_output=True, text=True).stdout
    m = out.split("\n")[0].split()
    version = next((w for w in m if w[:1].isdigit()), "?")
    return ".".join(version.split(".")[:2])


def table(results):
    out = [
        "# Oracle: every committed capture against tshark",
        "",
        f"Compared with TShark {tshark_version()} (its flags for out-of-order and retransmitted "
        "segments change between versions: another version may give other counts below).",
        "",
        "`tests/e2e/oracle.sh` (in `scripts/test.sh`) runs `tcpdoctor analyze --format json` on every",
        "capture committed in the repository and compares each connection with tshark's own TCP",
        "analysis of the same packets (`tcp.stream` is the connection's `tcp_stream`): the endpoints",
        "and which one sent the SYN, the first frame, packets, duration, the handshake RTT",
        "(`tcp.analysis.initial_rtt`), SYN retransmissions, how it ended (RST, refused, FINs),",
        "capture copies, and each way: payload bytes (the sequence span of the data), retransmissions",
        "(`tcp.analysis.retransmission`), zero windows (`tcp.analysis.zero_window`), the smallest",
        "window advertised (`tcp.window_size`), the MSS and window scale of the SYNs, and the fastest",
        "delivery rate (its two ACK frames are the receiver's, and tshark's `tcp.ack_raw` and times",
        "for them give at least that rate); per capture:",
        "frames, TCP frames, connections and stray TCP frames (of no connection). The public corpus",
        "(`fixtures/corpus/`, captures made elsewhere) is compared like the project's own captures.",
        "Every finding's evidence frames must exist and lie in the",
        "`tcp.stream` the evidence names, and its `wireshark_filter` must match them in tshark.",
        "",
        "A difference is either one of definition (below: recognised from tshark's own flags on the",
        "frames concerned, and counted), a known bug (`KNOWN_BUGS` in `tests/e2e/oracle.py`, with",
        "its exact values), or a failure. This file is written by",
        "`python3 tests/e2e/oracle.py target/release/tcpdoctor --write fixtures/ORACLE.md`; the test",
        "fails when it is not what the script writes today.",
        "",
        "| capture | connections | fields equal | by definition | known bugs | evidence checks |",
        "|---|---|---|---|---|---|",
    ]
    tot = Result("total")
    for r in results:
        defs = ", ".join(f"{k}: {v[0]} field{'s'[:v[0] > 1]}, {v[1]} {DEFINITIONS[k][1]}"
                         for k, v in sorted(r.definitions.items())) or "–"
        known = ", ".join(sorted({b for b, _ in r.known})) or "–"
        known = f"{len(r.known)}: {known}" if r.known else known
        out.append(f"| `{r.name}` | {r.connections} | {r.equal}/{r.fields} | {defs} | {known} | "
                   f"{r.evidence} filters, {r.evidence_frames} frames |")
        tot.connections += r.connections
        tot.fields += r.fields
        tot.equal += r.equal
        tot.evidence += r.evidence
        tot.evidence_frames += r.evidence_frames
        tot.known += r.known
        for k, v in r.definitions.items():
            tot.definitions[k][0] += v[0]
            tot.definitions[k][1] += v[1]
    out.append(f"| **{len(results)} captures** | {tot.connections} | {tot.equal}/{tot.fields} | "
               + (", ".join(f"{k}: {v[0]}" for k, v in sorted(tot.definitions.items())) or "–")
               + f" | {len(tot.known)} | {tot.evidence} filters, {tot.evidence_frames} frames |")
    out += [
        "",
        "`fields equal`: fields of the connections and of the capture that tshark and tcpdoctor give",
        "the same value. `by definition`: the reason, the fields it explains and what it counts:",
        "",
        "| reason | field | counted | what differs |",
        "|---|---|---|---|",
    ]
    for k, (field, unit, text) in DEFINITIONS.items():
        out.append(f"| `{k}` | {field} | {unit} | {text} |")
    out += ["", "Known bugs (tcpdoctor is wrong; tshark's value is the right one):", ""]
    if not KNOWN_BUGS:
        out.append("none")
    for k, bug in KNOWN_BUGS.items():
        out.append(f"- `{k}`: {bug['reason']}.")
        for (cap, stream, field), (a, b) in sorted(bug["where"].items()):
            out.append(f"  - `{cap}` tcp.stream {stream} {field}: tshark {a}, tcpdoctor {b}")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tcpdoctor")
    ap.add_argument("--check", metavar="ORACLE.md")
    ap.add_argument("--write", metavar="ORACLE.md")
    ap.add_argument("--only", nargs="*", help="captures to compare (paths in the repository)")
    ap.add_argument("-v", "--verbose", action="store_true", help="a line per capture")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args()
    if args.only and (args.check or args.write):
        ap.error("--check and --write need every capture: not with --only")
    binary = os.path.abspath(args.tcpdoctor)
    names = args.only or committed_captures()
    if not names:
        print("oracle: no capture found", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="tcpdoctor-oracle.") as tmpdir:
        # The largest first: they would otherwise run alone at the end.
        order = sorted(names, key=lambda n: -os.path.getsize(os.path.join(ROOT, n)))
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            done = dict(zip(order, pool.map(lambda n: analyse(binary, n, tmpdir), order)))
        results = [done[n] for n in names]
    failures = [f for r in results for f in r.failures]
    seen = {key for r in results for _, key in r.known}
    if not args.only:
        for name, bug in KNOWN_BUGS.items():
            for key in bug["where"]:
                if key not in seen:
                    failures.append(f"KNOWN_BUGS[{name!r}] lists {key}, which no longer differs "
                                    "so: fixed? remove it from the list")
    md = table(results)
    for r in results if args.only or args.verbose else []:
        defs = sum(v[0] for v in r.definitions.values())
        print(f"oracle {r.name}: {r.connections} connections, {r.equal}/{r.fields} equal, "
              f"{defs} by definition, {len(r.known)} known bugs, {r.evidence} evidence filters, "
              f"{len(r.failures)} failures")
    if args.write:
        with open(args.write, "w") as fh:
            fh.write(md)
    if args.check:
        with open(args.check) as fh:
            if fh.read() != md:
                failures.append(f"{args.check} is stale: write it again with "
                                f"`python3 tests/e2e/oracle.py {args.tcpdoctor} --write {args.check}`")
    for f in failures:
        print("oracle FAIL: " + f, file=sys.stderr)
    if failures:
        return 1
    print(f"oracle: {len(results)} captures agree with tshark")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# End to end for `tcpdoctor diagnose URL`, with real parts: nginx (sendfile on,
# keep-alive; tcp_nodelay off on :8080, on on :8081) in one network namespace,
# tcpdoctor in another, real Linux TCP between them.
#   :8080 (root)      must name nagle_delayed_ack with the server as culprit, p50 > 30 ms,
#                     within 15 s; the pcap it writes must be diagnosed the same by `analyze`
#   :8081 (root)      must name no nagle_delayed_ack, p50 < 5 ms
#   :8080 (not root)  must still measure (connect() timing, no capture), say what it
#                     could not see, and hint at the delayed-ACK shape from timing alone
#   lab run nagle-delayed-ack --peer nginx --diagnose   must name Nagle at the nginx server;
#   lab run healthy --diagnose                          must name nothing
#   a closed port and a resetting server: connection_refused / connection_reset lead the
#   verdict; --write to a bad path fails at once (exit 2); Ctrl-C typed into a pseudo-terminal
#   during the load ends it with the report; on loopback each frame is captured once, in
#   time order, and --write x.pcapng writes pcapng
# Needs root, nginx, python3, setpriv. Usage: tests/e2e/diagnose.sh [TCPDOCTOR]
set -euo pipefail
TD=${1:-${TCPDOCTOR:-target/release/tcpdoctor}}
TD=$(readlink -f "$TD")
P=tddg$$
. "$(dirname "$0")/lib.sh"
fail() { echo "e2e diagnose FAIL: $*" >&2; exit 1; }

e2e_netns "$P" 10.79.0
python3 -c 'import sys; open(sys.argv[1], "w").write("<html><body>" + "diagnose end-to-end page. " * 24 + "</body></html>\n")' "$WORK/html/index.html"
e2e_nginx "  server { listen $SERVER_IP:8080; tcp_nodelay off; root $WORK/html; }
  server { listen $SERVER_IP:8081; tcp_nodelay on;  root $WORK/html; }"
e2e_wait_port 8080 8081

# 1. tcp_nodelay off, as root: capture, analysis, verdict.
start=$(date +%s.%N)
ip netns exec "$C" "$TD" diagnose --format json --write "$WORK/off.pcap" --html "$WORK/off.html" \
  http://10.79.0.2:8080/ > "$WORK/off.json" \
  || fail "diagnose :8080 exited $?"
end=$(date +%s.%N)
ip netns exec "$C" "$TD" diagnose http://10.79.0.2:8080/ | head -8
"$TD" analyze --format json "$WORK/off.pcap" > "$WORK/off-file.json"
python3 - "$WORK/off.json" "$WORK/off-file.json" "$start" "$end" <<'PY' || fail "tcp_nodelay off: expected nagle_delayed_ack blaming 10.79.0.2:8080"
import json, sys
d = json.load(open(sys.argv[1]))
f = d["findings"]
assert f, "no finding"
assert f[0]["kind"] == "nagle_delayed_ack", [x["kind"] for x in f]
assert f[0]["culprit"] == {"endpoint": "10.79.0.2:8080", "role": "server"}, f[0]["culprit"]
m = d["measured"]
assert m["round_trip"]["method"] == "TCP SYN", m["round_trip"]
assert m["round_trip"]["answered"] == m["round_trip"]["probes"] > 0, m["round_trip"]
assert m["load"]["latency_ms"]["p50"] > 30, m["load"]["latency_ms"]
assert m["capture"]["kernel_dropped"] == 0, m["capture"]
assert "delayed ACK" in d["verdict"]["sentence"], d["verdict"]
assert "tcp_nodelay on" in d["verdict"]["fix"], d["verdict"]
took = float(sys.argv[4]) - float(sys.argv[3])
assert took <= 15, f"diagnose took {took:.1f} s"
# The written capture says the same when analysed on its own.
a = json.load(open(sys.argv[2]))
assert a["findings"][0]["kind"] == "nagle_delayed_ack"
assert a["capture"]["packets"] == m["capture"]["frames"], (a["capture"]["packets"], m["capture"])
# --html: the page names the same finding, with its charts.
h = open(sys.argv[1].replace(".json", ".html")).read()
assert h.startswith("<!DOCTYPE html>") and "nagle_delayed_ack" in h and "10.79.0.2:8080" in h
assert h.count("<svg") >= 2, h.count("<svg")
print(f"e2e ok: diagnose :8080 -> {f[0]['kind']} {f[0]['culprit']['endpoint']}, p50 "
      f"{m['load']['latency_ms']['p50']:.1f} ms, rtt {m['round_trip']['median_ms']:.3f} ms, {took:.1f} s")
PY

# 2. tcp_nodelay on, as root.
ip netns exec "$C" "$TD" diagnose --format json http://10.79.0.2:8081/ > "$WORK/on.json" \
  || fail "diagnose :8081 exited $?"
python3 - "$WORK/on.json" <<'PY' || fail "tcp_nodelay on: expected no nagle_delayed_ack"
import json, sys
d = json.load(open(sys.argv[1]))
kinds = [x["kind"] for x in d["findings"]]
assert "nagle_delayed_ack" not in kinds, kinds
assert d["measured"]["load"]["latency_ms"]["p50"] < 5, d["measured"]["load"]["latency_ms"]
assert d["capture"]["exchanges"] > 100, d["capture"]["exchanges"]
print("e2e ok: diagnose :8081 -> findings", kinds, "p50",
      round(d["measured"]["load"]["latency_ms"]["p50"], 3), "ms")
PY

# 3. Not root: no capture, timings and TCP_INFO only.
cp "$TD" "$WORK/tcpdoctor"
chmod 755 "$WORK/tcpdoctor"
ip netns exec "$C" setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
  "$WORK/tcpdoctor" diagnose --format json http://10.79.0.2:8080/ > "$WORK/nonroot.json" \
  || fail "diagnose as nobody exited $?"
python3 - "$WORK/nonroot.json" <<'PY' || fail "not root: expected a measured, capture-less report"
import json, sys
d = json.load(open(sys.argv[1]))
m = d["measured"]
assert d["capture"] is None and m["capture"] is None
assert d["findings"] == []
assert m["round_trip"]["method"] == "connect()", m["round_trip"]
assert m["sequential"]["tcp_info"]["rtt_us"] > 0, m["sequential"]
assert any("no capture" in c for c in d["could_not_see"]), d["could_not_see"]
assert any("first request" in h for h in d["hints"]), d["hints"]
print("e2e ok: diagnose as nobody ->", d["verdict"]["sentence"])
PY
# 5. A closed port and a server that resets: the verdict leads with it, the capture shows it.
HERE=$(cd "$(dirname "$0")" && pwd)
ip netns exec "$S" python3 "$HERE/badserver.py" 10.79.0.2 8098 rst > "$WORK/bad.log" &
PIDS+=($!)
e2e_wait_port 8098
for port in 8099 8098; do
  rc=0
  ip netns exec "$C" "$TD" diagnose -d 1s --format json --write "$WORK/p$port.pcap" \
    http://10.79.0.2:$port/ > "$WORK/p$port.json" || rc=$?
  [ "$rc" -eq 1 ] || fail "diagnose :$port (nothing answered) exited $rc, expected 1"
  "$TD" analyze --format json "$WORK/p$port.pcap" > "$WORK/p$port-file.json"
done
python3 - "$WORK" <<'PY' || fail "closed port / resetting server"
import json, sys
w = sys.argv[1]
d = json.load(open(f"{w}/p8099.json"))
assert d["findings"][0]["kind"] == "connection_refused", [f["kind"] for f in d["findings"]]
assert d["findings"][0]["culprit"] == {"endpoint": "10.79.0.2:8099", "role": "server"}
assert d["verdict"]["headline"].startswith("connection refused by 10.79.0.2:8099"), d["verdict"]
assert d["measured"]["round_trip"]["refused"] == d["measured"]["round_trip"]["probes"], d["measured"]["round_trip"]
assert "connection refused by 10.79.0.2:8099" in d["measured"]["load"]["errors"]["causes"], d["measured"]["load"]
a = json.load(open(f"{w}/p8099-file.json"))
assert a["findings"][0]["kind"] == "connection_refused"
assert a["connections"] and all(c["end"] == "refused" and c["ended_by"] == "server" for c in a["connections"])
r = json.load(open(f"{w}/p8098.json"))
assert r["findings"][0]["kind"] == "connection_reset", [f["kind"] for f in r["findings"]]
assert r["findings"][0]["culprit"]["role"] == "server"
assert r["verdict"]["headline"].startswith("connections reset by 10.79.0.2:8098"), r["verdict"]
ra = json.load(open(f"{w}/p8098-file.json"))
assert any(c["end"] == "rst" and c["ended_by"] == "server" for c in ra["connections"])
for doc in (d, r):
    assert doc["schema"] == 1 and doc["command"] == "diagnose" and doc["tool_version"], doc.keys()
print("e2e ok: closed port ->", d["verdict"]["headline"][:70], "...; resetting server ->", r["verdict"]["headline"][:60], "...")
PY

# 6. --write to a path that cannot be written: exit 2 at once, nothing measured.
start=$(date +%s.%N)
rc=0; ip netns exec "$C" "$TD" diagnose --write "$WORK/no/such/dir/x.pcap" http://10.79.0.2:8081/ \
  > "$WORK/badwrite.txt" 2>&1 || rc=$?
end=$(date +%s.%N)
[ "$rc" -eq 2 ] || fail "--write to a bad path: exit $rc"
python3 -c 'import sys; t = float(sys.argv[2]) - float(sys.argv[1]); assert t < 1, t' "$start" "$end" \
  || fail "--write to a bad path: it measured first"
if grep -q "round trip" "$WORK/badwrite.txt"; then fail "--write to a bad path: it measured first"; fi

# 7. Ctrl-C from a terminal (a pseudo-terminal, ^C typed into it) during the load: the
#    report of what was measured follows at once.
python3 - "$TD" "$C" "$WORK" <<'PY' || fail "Ctrl-C during diagnose"
import os, pty, select, sys, time
td, ns, work = sys.argv[1:4]
pid, fd = pty.fork()
if pid == 0:
    os.execvp("ip", ["ip", "netns", "exec", ns, td, "diagnose", "-d", "30s", "http://10.79.0.2:8081/"])
out, t0, sent = b"", time.time(), None
while True:
    if sent is None and time.time() - t0 > 5:
        os.write(fd, b"\x03")          # the terminal's interrupt character: SIGINT to the job
        sent = time.time()
    r, _, _ = select.select([fd], [], [], 0.2)
    if r:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    if time.time() - t0 > 40:
        os.kill(pid, 9)
        raise SystemExit("diagnose did not end after Ctrl-C")
_, status = os.waitpid(pid, 0)
text = out.decode(errors="replace")
open(f"{work}/ctrl-c.txt", "w").write(text)
took = time.time() - sent
assert "interrupted during the load step" in text, text[-2000:]
assert "VERDICT" in text and "requests take" in text, text[-2000:]
assert took < 5, f"the report came {took:.1f} s after Ctrl-C"
print(f"e2e ok: Ctrl-C during the load -> report {took:.1f} s later, exit status {os.waitstatus_to_exitcode(status)}")
PY

# 8. Loopback (the server's own address, from its namespace): each frame captured once, in
#    time order; --write x.pcapng writes pcapng.
ip netns exec "$S" "$TD" diagnose -d 1s --format json --write "$WORK/lo.pcapng" http://10.79.0.2:8081/ \
  > "$WORK/lo.json" || fail "diagnose on loopback exited $?"
if command -v tshark >/dev/null && command -v capinfos >/dev/null; then
  capinfos -t "$WORK/lo.pcapng" | grep -q pcapng || fail "--write x.pcapng did not write pcapng"
  capinfos -o "$WORK/lo.pcapng" | grep -q "Strict time order: *True" || fail "loopback capture out of time order"
  n=$(capinfos -c -M "$WORK/lo.pcapng" | awk '/Number of packets/ {print $NF}')
  # A frame captured twice is byte for byte the same; a real retransmission (a tail loss
  # probe on a busy machine) differs at least in its TCP timestamp.
  dup=$(editcap -D 100 "$WORK/lo.pcapng" "$WORK/lo-dedup.pcapng" 2>&1 | sed -n 's/.* \([0-9]*\) packets skipped.*/\1/p')
  [ "${dup:-x}" -eq 0 ] || fail "loopback capture: $dup frames captured twice (editcap -D)"
  retx=$(tshark -r "$WORK/lo.pcapng" -Y "tcp.analysis.retransmission" 2>/dev/null | wc -l)
  [ "$((retx * 100))" -lt "$n" ] || fail "loopback capture: tshark calls $retx of $n frames retransmissions"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); f=d["measured"]["capture"]; assert f["interface"]=="lo" and f["frames"]==int(sys.argv[2]) > 100, (f, sys.argv[2])' "$WORK/lo.json" "$n" \
    || fail "loopback: frame count"
  echo "e2e ok: loopback diagnose -> $n frames in pcapng, none captured twice, in time order ($retx real retransmissions)"
fi

# 4. diagnose on the lab's seed case (real nginx, tcp_nodelay off, behind the lab's router), and
#    on the lab's healthy server; a client-side case is refused with a reason.
if command -v nginx >/dev/null; then
  "$TD" lab run nagle-delayed-ack --peer nginx --diagnose --format json > "$WORK/lab-nagle.json" \
    || fail "lab run nagle-delayed-ack --peer nginx --diagnose exited $?"
  python3 - "$WORK/lab-nagle.json" <<'PY' || fail "lab --diagnose: expected nagle_delayed_ack at the nginx server"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["reproduced"] is True, d["reproduced"]
f = d["findings"][0]
assert f["kind"] == "nagle_delayed_ack" and f["culprit"]["role"] == "server", f["kind"]
assert f["details"]["software"] == "nginx", f["details"]
assert d["measured"]["load"]["latency_ms"]["p50"] > 30
print("e2e ok: lab nagle-delayed-ack --peer nginx --diagnose ->", d["verdict"]["headline"])
PY
fi
# A timing measurement on two cores shared with whatever else runs: like tests/e2e/lab.sh's
# cases, a healthy run that shows a finding (printed) gets one more run; two in a row fail.
healthy_run() {
  local rc=0
  "$TD" lab run healthy --diagnose --format json > "$WORK/lab-healthy.json" || rc=$?
  python3 - "$WORK/lab-healthy.json" "$rc" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
top = [(f["kind"], f["culprit"]["role"], round(f["share_of_time"], 3)) for f in d["findings"]]
ok = sys.argv[2] == "0" and d["reproduced"] is True and all(f["share_of_time"] < 0.05 for f in d["findings"])
if not ok:
    print("e2e diagnose: lab healthy --diagnose (exit %s) found %s" % (sys.argv[2], top), file=sys.stderr)
    sys.exit(1)
print("e2e ok: lab healthy --diagnose -> p50", round(d["measured"]["load"]["latency_ms"]["p50"], 3), "ms, no finding")
PY
}
healthy_run || healthy_run || fail "lab run healthy --diagnose: a finding in two runs in a row (above)"
set +e
"$TD" lab run small-receive-window --diagnose > "$WORK/refused.txt" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "needs its own client" "$WORK/refused.txt" \
  || fail "lab run small-receive-window --diagnose: expected exit 2 with a reason (got $rc: $(cat "$WORK/refused.txt"))"
[ -z "$(ip netns list | grep '^tdlab')" ] || fail "lab namespaces left behind: $(ip netns list | grep '^tdlab')"
echo "e2e diagnose: all passed"

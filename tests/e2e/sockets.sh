#!/usr/bin/env bash
# End to end for `tcpdoctor sockets`, with real parts in network namespaces:
#   1. nginx with `tcp_nodelay off` on :8080 and `on` on :80, both under wrk at once: in the
#      server namespace, `sockets --port 8080 --format json` reports every established :8080
#      server socket with process nginx, tcp_nodelay false and the nagle_on flag; the :80 ones
#      report tcp_nodelay true and no nagle_on; the text view answers "does this nginx set
#      TCP_NODELAY?"; --fail-on-flag exits 1 on :8080 and 0 on :80; the :80 listener line
#      leaves TCP_NODELAY to its accepted sockets; `--state connected` (no listener in view)
#      gives one group and one Nagle paragraph; lines fit COLUMNS.
#   2. a receiver (python3) with SO_RCVBUF 4096 behind a delay line (~30 ms round trip), a sender
#      pushing 4 MB: the sender's socket shows rwnd_limited for most of its busy time and the
#      flag, the receiver's socket the small_rcvbuf flag.
#   3. as an unprivileged user (setpriv nobody), `sockets` still lists the sockets (exit 0) and
#      says what it could not read (process, options), and still flags the small buffer.
#   4. bad input: `--state bogus`, `--port eighty` and `--pid 999999` exit 2 with a clear message.
# Needs root, nginx, wrk, python3, setpriv. Usage: tests/e2e/sockets.sh [TCPDOCTOR]
set -euo pipefail
TD=${1:-${TCPDOCTOR:-target/release/tcpdoctor}}
TD=$(readlink -f "$TD")
# The text checks below read phrases, not line breaks: one width for all of them (whatever the
# terminal CI runs in); the wrap itself is checked with COLUMNS=80 further down.
export COLUMNS=200
P=tds$$
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
fail() { echo "e2e FAIL: $*" >&2; exit 1; }
# A signal ends the script through its EXIT trap, which removes everything.
trap 'exit 130' INT
trap 'exit 143' TERM
NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups)

e2e_netns "$P" 10.83.0

# 4 (first: fast). Bad input is a usage error.
rc=0
"$TD" sockets --state bogus > "$WORK/bad.out" 2> "$WORK/bad.err" || rc=$?
[ "$rc" = 2 ] || fail "--state bogus: exit status $rc, expected 2"
grep -q "bogus" "$WORK/bad.err" && grep -q "established" "$WORK/bad.err" \
  || fail "--state bogus: the error does not name the value and the valid states: $(cat "$WORK/bad.err")"
echo "e2e ok: --state bogus -> exit 2: $(grep -m1 bogus "$WORK/bad.err")"
rc=0
"$TD" sockets --port eighty > /dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "--port eighty: exit status $rc, expected 2"
rc=0
"$TD" sockets --pid 999999 > "$WORK/nopid.out" 2> "$WORK/nopid.err" || rc=$?
[ -e /proc/999999 ] || { [ "$rc" = 2 ] && grep -q "no such process" "$WORK/nopid.err"; } \
  || fail "--pid 999999: exit status $rc, expected 2 and 'no such process': $(cat "$WORK/nopid.out" "$WORK/nopid.err")"

# 1. nginx, Nagle on :8080, off on :80, both loaded at once.
python3 -c 'import sys; open(sys.argv[1], "w").write("<!DOCTYPE html>\n<html><body>" + "tcpdoctor sockets test page. " * 24 + "</body></html>\n")' \
  "$WORK/html/index.html"
e2e_nginx "  server { listen $SERVER_IP:8080; tcp_nodelay off; root $WORK/html; }
  server { listen $SERVER_IP:80; tcp_nodelay on; root $WORK/html; }"
e2e_wait_port 8080 80
ip netns exec "$C" wrk -c 4 -t 1 -d 12s "http://$SERVER_IP:8080/" > "$WORK/wrk-off.txt" &
PIDS+=($!)
ip netns exec "$C" wrk -c 4 -t 1 -d 12s "http://$SERVER_IP:80/" > "$WORK/wrk-on.txt" &
PIDS+=($!)
# segs_at_least NS PORT N: every established server socket of PORT in NS (4 of them) has sent
# N data segments or more (ss -i's data_segs_out).
segs_at_least() {
  ip netns exec "$1" ss -Htin state established "( sport = :$2 )" | tr ' \t' '\n\n' \
    | awk -v n="$3" -F: '/^data_segs_out:/ { c++; if ($2 + 0 < n) low++ } END { exit !(c == 4 && !low) }'
}
# Until wrk's 4 connections to each port have exchanged messages (10 s at most; wrk runs 12).
for _ in $(seq 100); do
  segs_at_least "$S" 8080 20 && segs_at_least "$S" 80 20 && break
  sleep 0.1
done

ip netns exec "$S" "$TD" sockets --port 8080 --format json > "$WORK/off.json" \
  || fail "sockets --port 8080 failed"
ip netns exec "$S" "$TD" sockets --port 80 --format json > "$WORK/on.json" \
  || fail "sockets --port 80 failed"
python3 - "$WORK/off.json" "$WORK/on.json" "$SERVER_IP" <<'PY' || fail "TCP_NODELAY / Nagle per port"
import json, sys
off, on, ip = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
assert off["schema"] == 1 and on["schema"] == 1
assert off["could_not_read"] == [], off["could_not_read"]

def server(doc, port):
    return [s for s in doc["sockets"] if s["state"] == "established" and s["local"] == f"{ip}:{port}"]

def kinds(s):
    return [f["kind"] for f in s["flags"]]

assert all(8080 in (int(s["local"].rsplit(":", 1)[1]), int(s["remote"].rsplit(":", 1)[1])) for s in off["sockets"]), \
    "--port 8080 let another port through"
slow = server(off, 8080)
assert len(slow) == 4, f"wrk -c 4 should give 4 server sockets on :8080, got {len(slow)}"
for s in slow:
    assert s["process"] and s["process"]["command"] == "nginx", s["process"]
    assert s["options"] is not None, "options must be readable as root"
    assert s["options"]["tcp_nodelay"] is False, s["options"]
    assert "nagle_on" in kinds(s), (s["local"], s["remote"], s["flags"], s["tcp_info"])
    assert s["tcp_info"]["bytes_received"] > 0 and s["tcp_info"]["rtt_us"] > 0
listener = [s for s in off["sockets"] if s["state"] == "listen"]
assert len(listener) == 1 and listener[0]["local"] == f"{ip}:8080", listener
assert listener[0]["process"]["command"] == "nginx"
assert [p["command"] for p in listener[0]["also_held_by"]] == ["nginx"], "master and worker share the listener"
assert listener[0]["send_q"] == 511, "a listener's send_q is its backlog"

fast = server(on, 80)
assert len(fast) == 4, f"wrk -c 4 should give 4 server sockets on :80, got {len(fast)}"
for s in fast:
    assert s["process"]["command"] == "nginx"
    assert s["options"]["tcp_nodelay"] is True, s["options"]
    assert "nagle_on" not in kinds(s), s["flags"]
f = slow[0]["flags"][kinds(slow[0]).index("nagle_on")]
print("e2e ok: :8080 x%d nginx tcp_nodelay false + nagle_on; :80 x%d tcp_nodelay true, no nagle_on" % (len(slow), len(fast)))
print("        " + f["message"][:150] + "...")
PY

ip netns exec "$S" "$TD" sockets --port 8080 > "$WORK/off.txt" || fail "text view failed"
cat "$WORK/off.txt"
grep -q "^nginx pid [0-9]* (also held by pid [0-9]*) listening on $SERVER_IP:8080" "$WORK/off.txt" \
  || fail "the text view does not group under the nginx listener"
# The text view wraps long lines (a wider rtt range moves a count onto the next line):
# counts are looked for in the text with its line breaks and indents folded to one space.
flat() { tr '\n' ' ' < "$1" | tr -s ' '; }
grep -q "TCP_NODELAY off on 4 of 4" <<< "$(flat "$WORK/off.txt")" || fail "the text view does not count TCP_NODELAY off"
grep -q "! nagle_on on 4 of 4 connections" <<< "$(flat "$WORK/off.txt")" || fail "the text view does not count the Nagle flag"
grep -q 'fix: nginx: `tcp_nodelay on;`' "$WORK/off.txt" || fail "the text view does not give nginx's fix"
rc=0
ip netns exec "$S" "$TD" sockets --port 8080 --fail-on-flag > /dev/null || rc=$?
[ "$rc" = 1 ] || fail "--fail-on-flag on :8080: exit $rc, expected 1"
rc=0
ip netns exec "$S" "$TD" sockets --port 80 --fail-on-flag > "$WORK/on.txt" || rc=$?
[ "$rc" = 0 ] || fail "--fail-on-flag on :80: exit $rc, expected 0: $(cat "$WORK/on.txt")"
# The :80 listener has TCP_NODELAY off and its accepted sockets on: the listener's
# line leaves TCP_NODELAY to the count of the accepted ones.
grep "listening on $SERVER_IP:80:" "$WORK/on.txt" | grep -q "TCP_NODELAY" \
  && fail "the :80 listener line states TCP_NODELAY: $(grep "listening on" "$WORK/on.txt")"
grep -q "TCP_NODELAY off on 0 of 4" <<< "$(flat "$WORK/on.txt")" || fail "the :80 text does not count TCP_NODELAY: $(cat "$WORK/on.txt")"
# --state connected (no listener in view): one group per server address, one Nagle paragraph;
# lines wrapped to COLUMNS.
ip netns exec "$S" env COLUMNS=80 "$TD" sockets --port 8080 --state connected > "$WORK/connected.txt" \
  || fail "--state connected failed"
n=$(grep -c "! nagle_on" "$WORK/connected.txt" || true)
[ "$n" = 1 ] || fail "--state connected: $n nagle_on paragraphs, expected 1: $(cat "$WORK/connected.txt")"
python3 -c 'import sys; bad = [l for l in open(sys.argv[1], encoding="utf-8").read().splitlines() if len(l) > 80]; print(*bad, sep="\n"); sys.exit(1 if bad else 0)' "$WORK/connected.txt" \
  || fail "lines longer than COLUMNS=80"
echo "e2e ok: text view groups and counts; --fail-on-flag 1 on :8080, 0 on :80; listener lines, --state connected, COLUMNS"

# 3a. Unprivileged, in the nginx namespace: still lists, exit 0, says what it could not read.
rc=0
ip netns exec "$S" "${NOBODY[@]}" "$TD" sockets --format json > "$WORK/nobody-s.json" 2> "$WORK/nobody-s.err" || rc=$?
[ "$rc" = 0 ] || fail "unprivileged sockets: exit $rc: $(cat "$WORK/nobody-s.err")"
python3 - "$WORK/nobody-s.json" "$WORK/off.json" "$SERVER_IP" <<'PY' || fail "unprivileged listing in the nginx namespace"
import json, sys
d, root, ip = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
est = [s for s in d["sockets"] if s["state"] == "established" and s["local"] == f"{ip}:8080"]
assert len(est) == 4, len(est)
assert all(s["tcp_info"] and s["tcp_info"]["rtt_us"] > 0 and s["memory"]["rcvbuf"] > 0 for s in est)
lst = [s for s in d["sockets"] if s["state"] == "listen" and s["local"] == f"{ip}:8080"]
assert len(lst) == 1
# nginx's master runs as root: its descriptors are hidden from nobody.
assert any(n["what"] == "process" for n in d["could_not_read"]), d["could_not_read"]
assert all(p["command"] != "nginx" or p["pid"] != lst[0]["process"]["pid"] for p in lst[0]["also_held_by"])
print("e2e ok: as nobody in the nginx namespace: %d sockets listed, could_not_read: %s"
      % (len(d["sockets"]), "; ".join(n["what"] for n in d["could_not_read"])))
PY

# 2. A small receive buffer behind a delay line.
# The topology: sender a - router r (the delay line, 15 ms each way) - receiver b.
e2e_delay_path "$P" 10.83 15 || fail "the delay line did not start"

cat > "$WORK/receiver.py" <<'PY'
import socket, sys
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before listen: the handshake's window
l.bind((sys.argv[1], 5001))
l.listen(4)
print("listening", flush=True)
c, _ = l.accept()
while c.recv(65536):
    pass
PY
cat > "$WORK/sender.py" <<'PY'
import socket, sys
s = socket.create_connection((sys.argv[1], 5001))
s.sendall(b"\0" * (4 << 20))
PY
ip netns exec "$B" python3 "$WORK/receiver.py" 10.83.2.2 > "$WORK/receiver.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do grep -q listening "$WORK/receiver.log" 2>/dev/null && break; sleep 0.1; done
ip netns exec "$A" python3 "$WORK/sender.py" 10.83.2.2 > "$WORK/sender.log" 2>&1 &
PIDS+=($!)
# Until the sender's connection has been busy 2.5 s (ss -i's busy:, 10 s at most): the share of
# that time the window limited is then measured over ~80 round trips.
for _ in $(seq 100); do
  ip netns exec "$A" ss -Htin state established "( dport = :5001 )" | tr ' \t' '\n\n' \
    | awk -F: '/^busy:/ { if ($2 + 0 >= 2500) ok = 1 } END { exit !ok }' && break
  sleep 0.1
done

ip netns exec "$P-a" "$TD" sockets --port 5001 --format json > "$WORK/sender.json" || fail "sockets (sender) failed"
ip netns exec "$P-b" "$TD" sockets --port 5001 --format json > "$WORK/receiver.json" || fail "sockets (receiver) failed"
python3 - "$WORK/sender.json" "$WORK/receiver.json" <<'PY' || fail "rwnd_limited / small_rcvbuf"
import json, sys
snd, rcv = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
s = [x for x in snd["sockets"] if x["state"] == "established" and x["remote"] == "10.83.2.2:5001"]
assert len(s) == 1, snd["sockets"]
s = s[0]
t = s["tcp_info"]
share = t["rwnd_limited_us"] / t["busy_us"]
assert s["process"]["command"].startswith("python"), s["process"]
assert t["rtt_us"] > 25000, f"the path's round trip should be ~30 ms, tcp_info says {t['rtt_us']} us"
# With a window of ~2 segments the kernel counts only part of the stall as rwnd_limited (a TSO
# segment deferred for want of window counts as plain busy time): 42-58% measured here.
assert share > 0.3, f"rwnd_limited {share:.0%} of busy time"
assert t["snd_wnd"] <= 8192, f"the receiver's window should be pinned small, snd_wnd {t['snd_wnd']}"
# The rate the window allows, window / round trip, is the rate the transfer gets.
bound = t["snd_wnd"] * 1e6 / t["rtt_us"]
assert 0 < t["delivery_rate_bytes_per_sec"] <= 2 * bound, (t["delivery_rate_bytes_per_sec"], bound)
f = [f for f in s["flags"] if f["kind"] == "rwnd_limited"]
assert f, s["flags"]
assert f[0]["message"].startswith("rwnd_limited %.0f%% of busy time" % (share * 100)), f[0]["message"]
assert "10.83.2.2:5001" in f[0]["fix"], f[0]["fix"]

r = [x for x in rcv["sockets"] if x["state"] == "established" and x["local"] == "10.83.2.2:5001"]
assert len(r) == 1, rcv["sockets"]
r = r[0]
assert r["options"]["so_rcvbuf"] == 8192, r["options"]
assert r["memory"]["rcvbuf"] == 8192
g = [f for f in r["flags"] if f["kind"] == "small_rcvbuf"]
assert g and g[0]["message"].startswith("SO_RCVBUF 4 KB pins the window"), r["flags"]
lst = [x for x in rcv["sockets"] if x["state"] == "listen"]
assert len(lst) == 1 and any(f["kind"] == "small_rcvbuf" for f in lst[0]["flags"]), lst
print("e2e ok: sender rwnd_limited %.0f%% of %.1f s busy, peer window %d B, rtt %.1f ms; receiver SO_RCVBUF 8192 flagged"
      % (share * 100, t["busy_us"] / 1e6, t["snd_wnd"], t["rtt_us"] / 1000))
print("        " + f[0]["message"])
print("        " + g[0]["message"][:160] + "...")
PY
ip netns exec "$P-a" "$TD" sockets --port 5001 | tee "$WORK/sender.txt"
grep -q "! rwnd_limited on 1 of 1 sockets" <<< "$(flat "$WORK/sender.txt")" || fail "text view (sender) lacks the rwnd_limited flag"
ip netns exec "$P-b" "$TD" sockets --port 5001 | tee "$WORK/receiver.txt"
grep -q "! small_rcvbuf on the listener and 1 of 1 connections" <<< "$(flat "$WORK/receiver.txt")" \
  || fail "text view (receiver) lacks the small_rcvbuf flag on listener and connection"

# 3b. Unprivileged in the receiver's namespace: the receiver (root) is hidden, yet the socket
# is listed with what netlink gives, the small buffer is still flagged, and the gaps are named.
rc=0
ip netns exec "$P-b" "${NOBODY[@]}" "$TD" sockets --format json > "$WORK/nobody-b.json" 2> "$WORK/nobody-b.err" || rc=$?
[ "$rc" = 0 ] || fail "unprivileged sockets (receiver): exit $rc: $(cat "$WORK/nobody-b.err")"
python3 - "$WORK/nobody-b.json" <<'PY' || fail "unprivileged listing in the receiver namespace"
import json, sys
d = json.load(open(sys.argv[1]))
r = [x for x in d["sockets"] if x["state"] == "established" and x["local"] == "10.83.2.2:5001"]
assert len(r) == 1, d["sockets"]
r = r[0]
assert r["process"] is None and r["options"] is None, (r["process"], r["options"])
assert r["tcp_info"]["rtt_us"] > 0 and r["memory"]["rcvbuf"] == 8192
assert any(f["kind"] == "small_rcvbuf" for f in r["flags"]), r["flags"]
what = {n["what"]: n for n in d["could_not_read"]}
assert "process" in what and "options" in what, d["could_not_read"]
assert "root" in what["options"]["reason"], what["options"]
print("e2e ok: as nobody: receiver socket listed (process null, options null, small_rcvbuf still flagged)")
print("        could_not_read options: " + what["options"]["reason"])
PY
ip netns exec "$P-b" "${NOBODY[@]}" "$TD" sockets --port 5001 > "$WORK/nobody-b.txt" || fail "unprivileged text view failed"
grep -q "^could not read options:" "$WORK/nobody-b.txt" || fail "the unprivileged text view does not say what it could not read"
grep -q "process null" "$WORK/nobody-b.txt" && fail "the text view speaks of 'process null'"
sed -n '1,/^$/p' "$WORK/nobody-b.txt" | tr '\n' ' ' | tr -s ' ' | grep -q "nagle_on not judged on" \
  || fail "the unprivileged headline does not say Nagle was not judged: $(head -2 "$WORK/nobody-b.txt")"
echo "e2e sockets: all checks passed"

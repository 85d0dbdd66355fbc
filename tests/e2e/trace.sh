#!/usr/bin/env bash
# End to end for `tcpdoctor trace` against traceroute, on one path, in one run:
# a chain of namespaces  c - r1 - r2 - r3 - r4 - r5 - r6 - s  where r3 and r5
# send no ICMP time exceeded (silent hops), nginx on s, and a second port on s
# whose SYNs are dropped (a silent tail).
#   - to the open port: every answering router, `*` for r3 and r5, the target
#     reached, in at most 2x the time `traceroute -T` takes (measured here);
#   - to the dropped port with -m 10: the silent tail costs about one wait
#     per window of probes, timed next to traceroute's;
#   - --count 5: per-hop loss (100% at the silent hops, 0% elsewhere);
#   - Ctrl-C (SIGINT to its PID) during a silent tail: a clean line, exit 1.
# Needs root, nginx, traceroute, python3. Usage: tests/e2e/trace.sh [TCPDOCTOR]
set -euo pipefail
TD=${1:-${TCPDOCTOR:-target/release/tcpdoctor}}
TD=$(readlink -f "$TD")
P=tdact$$
NS=(c r1 r2 r3 r4 r5 r6 s)
WORK=$(mktemp -d /tmp/tcpdoctor-trace.XXXXXX)
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for n in "${NS[@]}"; do ip netns del "$P-$n" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "trace e2e FAIL: $*" >&2; exit 1; }
nsx() { local n=$1; shift; ip netns exec "$P-$n" "$@"; }
command -v traceroute >/dev/null || fail "traceroute is not installed"

for n in "${NS[@]}"; do ip netns add "$P-$n"; ip -n "$P-$n" link set lo up; done
# Link i joins NS[i] (10.82.i.1) and NS[i+1] (10.82.i.2).
for i in $(seq 0 6); do
  a=${NS[$i]} b=${NS[$((i + 1))]}
  ip link add "$P-l${i}a" type veth peer name "$P-l${i}b"
  ip link set "$P-l${i}a" netns "$P-$a"
  ip link set "$P-l${i}b" netns "$P-$b"
  ip -n "$P-$a" addr add "10.82.$i.1/24" dev "$P-l${i}a"
  ip -n "$P-$b" addr add "10.82.$i.2/24" dev "$P-l${i}b"
  ip -n "$P-$a" link set "$P-l${i}a" up
  ip -n "$P-$b" link set "$P-l${i}b" up
done
# Towards s: via the next namespace; towards c: via the previous one.
for i in $(seq 0 7); do
  n=${NS[$i]}
  [ "$i" -lt 7 ] && ip -n "$P-$n" route add 10.82.0.0/16 via "10.82.$i.2" 2>/dev/null || true
  for j in $(seq 0 $((i - 2))); do
    ip -n "$P-$n" route replace "10.82.$j.0/24" via "10.82.$((i - 1)).1"
  done
  if [ "$i" -gt 0 ] && [ "$i" -lt 7 ]; then
    nsx "$n" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 \
      net.ipv4.conf.default.rp_filter=0 net.ipv4.icmp_ratelimit=0
  fi
done
ip -n "$P-s" route add default via 10.82.6.1
# The silent hops: r3 and r5 forward, but send no time exceeded.
for r in r3 r5; do
  nsx "$r" iptables -w -A OUTPUT -p icmp --icmp-type time-exceeded -j DROP
done
# The silent tail: SYNs to port 8082 on s vanish.
nsx s iptables -w -A INPUT -p tcp --dport 8082 -j DROP

mkdir -p "$WORK/html" "$WORK/logs"
chmod 755 "$WORK" "$WORK/html"
echo ok > "$WORK/html/index.html"
cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/logs/error.log;
events { worker_connections 64; }
http { access_log off; server { listen 10.82.6.2:8081; root $WORK/html; } }
CONF
# Started directly (not through a shell function): $! is nginx itself.
ip netns exec "$P-s" nginx -c "$WORK/nginx.conf" -p "$WORK" &
PIDS+=($!)
for _ in $(seq 50); do
  nsx c bash -c 'exec 3<>/dev/tcp/10.82.6.2/8081' 2>/dev/null && break
  sleep 0.1
done

now() { date +%s.%N; }
# 1. The open port, both tools, alternating, timed.
t0=$(now); nsx c "$TD" trace --format json 10.82.6.2:8081 > "$WORK/open.json" || true; t1=$(now)
nsx c traceroute -n -T -p 8081 10.82.6.2 > "$WORK/open.traceroute" 2>&1 || true; t2=$(now)
nsx c "$TD" trace 10.82.6.2:8081 | tee "$WORK/open.txt" || true
cat "$WORK/open.traceroute"
nsx c "$TD" trace --format json 10.82.6.2:8083 > "$WORK/closed.json" || true   # nothing listens
# 2. The silent tail, 10 hops at most.
t3=$(now); nsx c "$TD" trace -m 10 --format json 10.82.6.2:8082 > "$WORK/tail.json" || true; t4=$(now)
nsx c traceroute -n -T -p 8082 -m 10 10.82.6.2 > "$WORK/tail.traceroute" 2>&1 || true; t5=$(now)
cat "$WORK/tail.traceroute"
python3 - "$WORK" "$t0" "$t1" "$t2" "$t3" "$t4" "$t5" <<'PY' || fail "trace"
import json, sys
w = sys.argv[1]
t = [float(x) for x in sys.argv[2:]]
ours, theirs = t[1] - t[0], t[2] - t[1]
tail_ours, tail_theirs = t[4] - t[3], t[5] - t[4]
o = json.load(open(f"{w}/open.json"))
assert o["schema"] == 1 and o["tool_version"] and o["input"]["target"] == "10.82.6.2:8081", o
assert o["reached"], o
hops = [h["addresses"] for h in o["hops"]]
want = [["10.82.0.2"], ["10.82.1.2"], [], ["10.82.3.2"], [], ["10.82.5.2"], ["10.82.6.2"]]
assert hops == want, hops
# Three SYNs of one flow reach the target: each answered SYN-ACK (none reset by another's state).
assert [p["reply"] for p in o["hops"][-1]["probes"]] == ["syn-ack"] * 3, o["hops"][-1]
c = json.load(open(f"{w}/closed.json"))
assert c["reached"] and [p["reply"] for p in c["hops"][-1]["probes"]] == ["rst"] * 3, c["hops"][-1]
print(f"trace e2e: open port, 2 silent hops: tcpdoctor {ours:.2f} s, traceroute -T {theirs:.2f} s, ratio {ours / theirs:.2f}")
# Both take tens of milliseconds here: within twice traceroute's time, or
# within 50 ms of it (process start-up is most of either).
assert ours <= 2 * theirs or ours - theirs < 0.05, "tcpdoctor trace took more than twice traceroute's time"
tl = json.load(open(f"{w}/tail.json"))
assert not tl["reached"] and len(tl["hops"]) == 10, tl
assert all(h["loss"] == 1.0 for h in tl["hops"][6:]), [h["loss"] for h in tl["hops"]]
print(f"trace e2e: silent tail (-m 10): tcpdoctor {tail_ours:.2f} s, traceroute -T {tail_theirs:.2f} s, ratio {tail_ours / tail_theirs:.2f}")
assert tail_ours <= 2 * tail_theirs, "the silent tail took more than twice traceroute's time"
PY
grep -q "^ 3  \* \* \*$" "$WORK/open.txt" || fail "the silent hop 3 is not shown as * * *"

# 3. mtr-like rounds: loss per hop.
nsx c "$TD" trace -c 5 -i 100ms 10.82.6.2:8081 | tee "$WORK/rounds.txt"
nsx c "$TD" trace -c 5 -i 100ms --format json 10.82.6.2:8081 > "$WORK/rounds.json"
python3 - "$WORK/rounds.json" <<'PY' || fail "--count"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["rounds"] == 5, r["rounds"]
loss = [h["loss"] for h in r["hops"]]
assert loss == [0, 0, 1, 0, 1, 0, 0], loss
assert all(h["sent"] == 15 for h in r["hops"]), [h["sent"] for h in r["hops"]]
assert all(h["rtt_ms"]["best"] <= h["rtt_ms"]["avg"] <= h["rtt_ms"]["worst"] for h in r["hops"] if h["rtt_ms"])
print("trace e2e: 5 rounds, loss per hop", loss)
PY
grep -q "loss%" "$WORK/rounds.txt" || fail "--count prints no per-hop table"

# 4. Ctrl-C during the silent tail: a clean line, then the exit status 1.
# Started directly, so that $! is tcpdoctor itself (ip netns exec execs it).
ip netns exec "$P-c" "$TD" trace -w 5s 10.82.6.2:8082 > "$WORK/int.txt" 2>&1 &
pid=$!
# Hop 6 (r6) is the last that answers: once its line is out, the probes wait on silence.
for _ in $(seq 40); do grep -q "^ 6  10.82.5.2" "$WORK/int.txt" && break; sleep 0.1; done
grep -q "^ 6  10.82.5.2" "$WORK/int.txt" || fail "trace printed no hop 6 within 4 s: $(cat "$WORK/int.txt")"
kill -INT "$pid"
rc=0; wait "$pid" || rc=$?
cat "$WORK/int.txt"
[ "$rc" -eq 1 ] || fail "interrupted trace: exit $rc"
grep -q "^interrupted after" "$WORK/int.txt" || fail "no clean 'interrupted' line"
if grep -q '\*interrupted\|\*target' "$WORK/int.txt"; then fail "interrupt message glued to a hop line"; fi
echo "trace e2e: all checks passed"

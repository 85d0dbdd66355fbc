#!/usr/bin/env bash
# tcpdoctor load against wrk, side by side: the same nginx (sendfile on,
# keep-alive; tcp_nodelay on at :8081, off at :8080) in a network namespace,
# the client in another, both on this machine's cores. Runs alternate
# (tcpdoctor, wrk, tcpdoctor, ...) with the same connections, threads and
# duration; the report gives each pair's requests/s ratio and both p50s, and
# the medians. Needs root, nginx, wrk, python3.
#   sudo bash bench/load-vs-wrk.sh                       # 5 pairs per server, -c 100 -t 2 -d 5s
#   PAIRS=3 CONNS=50 DURATION=10 sudo -E bash bench/load-vs-wrk.sh
# Results: bench/results/load-vs-wrk.txt (override with OUT=...).
set -euo pipefail
cd "$(dirname "$0")/.."
TD=$(readlink -f "${TCPDOCTOR:-target/release/tcpdoctor}")
PAIRS=${PAIRS:-5}
CONNS=${CONNS:-100}
THREADS=${THREADS:-2}
DURATION=${DURATION:-5}
OUT=${OUT:-bench/results/load-vs-wrk.txt}
P=${PREFIX:-tdbn$$}
[ -x "$TD" ] || cargo build --release --locked
. tests/e2e/lib.sh
e2e_netns "$P" 10.78.0
# The page of the nginx case: 612 bytes of body.
python3 -c 'import sys; open(sys.argv[1], "w").write("<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n" + "x" * 546 + "\n</html>\n")' "$WORK/html/index.html"
e2e_nginx "  server { listen $SERVER_IP:8080; tcp_nodelay off; root $WORK/html; }
  server { listen $SERVER_IP:8081; tcp_nodelay on;  root $WORK/html; }"
e2e_wait_port 8080 8081

# requests/s and p50 (ms) of one run, "RPS P50".
run_td() {
  ip netns exec "$C" "$TD" load -c "$CONNS" -t "$THREADS" -d "${DURATION}s" --format json "$1" \
    | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["requests_per_sec"], r["latency_ms"]["p50"])'
}
run_wrk() {
  ip netns exec "$C" wrk -c "$CONNS" -t "$THREADS" -d "${DURATION}s" --latency "$1" | python3 -c '
import re, sys
t = sys.stdin.read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
v, u = re.search(r"\n\s+50%\s+([\d.]+)(us|ms|s)", t).groups()
print(rps, float(v) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[u])'
}

{
  echo "tcpdoctor load vs wrk: -c $CONNS -t $THREADS -d ${DURATION}s, $PAIRS alternating pairs per server"
  echo "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), sendfile on, keep-alive; $(nproc) cores shared by client and server"
  echo "date $(date -u +%Y-%m-%dT%H:%MZ), tcpdoctor $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
} | tee "$WORK/report"
for port in 8081 8080; do
  case $port in 8081) name="tcp_nodelay on";; *) name="tcp_nodelay off";; esac
  url=http://10.78.0.2:$port/
  run_td "$url" >/dev/null  # warm-up
  : > "$WORK/pairs"
  for i in $(seq "$PAIRS"); do
    read -r td_rps td_p50 < <(run_td "$url")
    read -r wrk_rps wrk_p50 < <(run_wrk "$url")
    echo "$td_rps $td_p50 $wrk_rps $wrk_p50" >> "$WORK/pairs"
  done
  python3 - "$name" "$WORK/pairs" <<'PY' | tee -a "$WORK/report"
import statistics, sys
name, rows = sys.argv[1], [list(map(float, l.split())) for l in open(sys.argv[2])]
print(f"\n{name}")
print(f"  {'pair':>4}  {'tcpdoctor req/s':>15}  {'wrk req/s':>10}  {'ratio':>6}  {'tcpdoctor p50':>13}  {'wrk p50':>8}")
for i, (a, ap, b, bp) in enumerate(rows, 1):
    print(f"  {i:>4}  {a:>15.0f}  {b:>10.0f}  {a / b:>6.3f}  {ap:>10.2f} ms  {bp:>5.2f} ms")
ratio = statistics.median(a / b for a, _, b, _ in rows)
p50_td = statistics.median(r[1] for r in rows)
p50_wrk = statistics.median(r[3] for r in rows)
print(f"  median ratio of requests/s (tcpdoctor / wrk): {ratio:.3f}")
print(f"  median p50: tcpdoctor {p50_td:.2f} ms, wrk {p50_wrk:.2f} ms (difference {100 * (p50_td / p50_wrk - 1):+.1f}%)")
PY
done
mkdir -p "$(dirname "$OUT")"
cp "$WORK/report" "$OUT"
echo "written: $OUT"

#!/usr/bin/env bash
# tcpdoctor load against wrk over HTTPS, side by side: nginx with TLS (a self-signed certificate
# made here with openssl; tcp_nodelay on, keep-alive) in a network namespace, the client in
# another, both on this machine's cores. Runs alternate (tcpdoctor, wrk, ...) with the same
# connections, threads and duration; the report gives each pair's requests/s ratio, both p50s
# and tcpdoctor's TLS handshake p50, and the medians. Needs root, nginx, wrk, openssl, python3.
#   sudo bash bench/load-vs-wrk-tls.sh                   # 5 pairs, -c 100 -t 2 -d 5s
#   PAIRS=3 CONNS=50 DURATION=10 sudo -E bash bench/load-vs-wrk-tls.sh
# Results: bench/results/load-vs-wrk-tls.txt (override with OUT=...).
set -euo pipefail
cd "$(dirname "$0")/.."
TD=$(readlink -f "${TCPDOCTOR:-target/release/tcpdoctor}")
PAIRS=${PAIRS:-5}
CONNS=${CONNS:-100}
THREADS=${THREADS:-2}
DURATION=${DURATION:-5}
OUT=${OUT:-bench/results/load-vs-wrk-tls.txt}
P=${PREFIX:-tdfit-bt$$}
[ -x "$TD" ] || cargo build --release --locked
. tests/e2e/lib.sh
e2e_netns "$P" 10.85.0
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$SERVER_IP" \
  -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
python3 -c 'import sys; open(sys.argv[1], "w").write("<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n" + "x" * 546 + "\n</html>\n")' "$WORK/html/index.html"
e2e_nginx "  server { listen $SERVER_IP:8443 ssl; tcp_nodelay on; root $WORK/html;
    ssl_certificate $WORK/cert.pem; ssl_certificate_key $WORK/key.pem; }"
e2e_wait_port 8443
URL=https://$SERVER_IP:8443/

run_td() {
  ip netns exec "$C" "$TD" load -k -c "$CONNS" -t "$THREADS" -d "${DURATION}s" --format json "$URL" \
    | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["requests_per_sec"], r["latency_ms"]["p50"], r["tls"]["handshake_ms"]["p50"])'
}
run_wrk() {
  ip netns exec "$C" wrk -c "$CONNS" -t "$THREADS" -d "${DURATION}s" --latency "$URL" | python3 -c '
import re, sys
t = sys.stdin.read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
v, u = re.search(r"\n\s+50%\s+([\d.]+)(us|ms|s)", t).groups()
print(rps, float(v) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[u])'
}

{
  echo "tcpdoctor load vs wrk over HTTPS: -c $CONNS -t $THREADS -d ${DURATION}s, $PAIRS alternating pairs"
  echo "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), TLS (RSA 2048, self-signed; tcpdoctor -k), keep-alive; $(nproc) cores shared by client and server"
  echo "date $(date -u +%Y-%m-%dT%H:%MZ), tcpdoctor $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
} | tee "$WORK/report"
run_td >/dev/null  # warm-up
: > "$WORK/pairs"
for i in $(seq "$PAIRS"); do
  read -r td_rps td_p50 td_hs < <(run_td)
  read -r wrk_rps wrk_p50 < <(run_wrk)
  echo "$td_rps $td_p50 $wrk_rps $wrk_p50 $td_hs" >> "$WORK/pairs"
done
python3 - "$WORK/pairs" <<'PY' | tee -a "$WORK/report"
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
print(f"  {'pair':>4}  {'tcpdoctor req/s':>15}  {'wrk req/s':>10}  {'ratio':>6}  {'tcpdoctor p50':>13}  {'wrk p50':>8}  {'TLS handshake p50':>17}")
for i, (a, ap, b, bp, hs) in enumerate(rows, 1):
    print(f"  {i:>4}  {a:>15.0f}  {b:>10.0f}  {a / b:>6.3f}  {ap:>10.2f} ms  {bp:>5.2f} ms  {hs:>14.2f} ms")
ratio = statistics.median(a / b for a, _, b, _, _ in rows)
print(f"  median ratio of requests/s (tcpdoctor / wrk): {ratio:.3f}")
print(f"  median p50: tcpdoctor {statistics.median(r[1] for r in rows):.2f} ms, wrk {statistics.median(r[3] for r in rows):.2f} ms")
print(f"  median TLS handshake p50: {statistics.median(r[4] for r in rows):.2f} ms")
PY
mkdir -p "$(dirname "$OUT")"
cp "$WORK/report" "$OUT"
echo "written: $OUT"

#!/usr/bin/env bash
# tcpdoctor load against wrk and oha, side by side: the same nginx (sendfile on, keep-alive;
# tcp_nodelay on at :8081, off at :8080) in a network namespace, the clients in another, all on
# this machine's cores. Runs alternate (tcpdoctor, wrk, oha, then the next round starting one
# tool later) with the same connections, threads and duration (oha's threads are its tokio
# runtime's workers, --worker-threads: oha 1.16 has it; an oha without it uses one per core).
#
# Per run: requests/s, p50 and CPU (user + system seconds of the client process, from GNU time)
# per request. Per server: the medians of each tool, the faster peer (the higher median
# requests/s of wrk and oha), and tcpdoctor's ratio to it (the ratio of the medians, and the
# median of the per-round ratios).
#
#   sudo bash bench/load-vs-wrk.sh                       # 9 rounds per server, -c 100 -t 2 -d 3s
#   PAIRS=5 CONNS=50 DURATION=10 sudo -E bash bench/load-vs-wrk.sh
#
# Needs root, nginx, wrk, python3, GNU time, and oha: taken from PATH or OHA=..., else built
# once with `cargo install oha --locked` into ~/.cache/tcpdoctor-bench (a few minutes).
# Results: bench/results/load-vs-wrk.txt (override with OUT=...).
set -euo pipefail
cd "$(dirname "$0")/.."
TD=$(readlink -f "${TCPDOCTOR:-target/release/tcpdoctor}")
PAIRS=${PAIRS:-9}
CONNS=${CONNS:-100}
THREADS=${THREADS:-2}
DURATION=${DURATION:-3}
OUT=${OUT:-bench/results/load-vs-wrk.txt}
P=${PREFIX:-tdbn$$}
OHA_ROOT=${OHA_ROOT:-$HOME/.cache/tcpdoctor-bench}
[ -x "$TD" ] || cargo build --release --locked
[ -x /usr/bin/time ] || { echo "load-vs-wrk.sh: GNU time (/usr/bin/time) is required" >&2; exit 1; }
if [ -z "${OHA:-}" ]; then
  if command -v oha >/dev/null; then
    OHA=$(command -v oha)
  else
    OHA=$OHA_ROOT/bin/oha
    if [ ! -x "$OHA" ]; then
      command -v cargo >/dev/null || {
        echo "load-vs-wrk.sh: oha is not installed and cargo is not on PATH to build it; install oha or set OHA=path/to/oha" >&2
        exit 1
      }
      echo "load-vs-wrk.sh: building oha into $OHA_ROOT (once)" >&2
      cargo install oha --locked --root "$OHA_ROOT" >&2
    fi
  fi
fi
[ -x "$OHA" ] || { echo "load-vs-wrk.sh: no oha at $OHA" >&2; exit 1; }

. tests/e2e/lib.sh
e2e_netns "$P" 10.78.0
# The page of the nginx case: 612 bytes of body.
python3 -c 'import sys; open(sys.argv[1], "w").write("<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n" + "x" * 546 + "\n</html>\n")' "$WORK/html/index.html"
e2e_nginx "  server { listen $SERVER_IP:8080; tcp_nodelay off; root $WORK/html; }
  server { listen $SERVER_IP:8081; tcp_nodelay on;  root $WORK/html; }"
e2e_wait_port 8080 8081

# One run of TOOL against URL: prints "RPS P50_MS REQUESTS CPU_S". GNU time runs inside the
# namespace around the client alone, so CPU_S is the client's user + system time.
run() {
  local tool=$1 url=$2
  case $tool in
    tcpdoctor)
      ip netns exec "$C" /usr/bin/time -f '%U %S' -o "$WORK/time" \
        "$TD" load -c "$CONNS" -t "$THREADS" -d "${DURATION}s" --format json "$url" >"$WORK/out"
      python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))
print(r["requests_per_sec"], r["latency_ms"]["p50"], r["requests"])' "$WORK/out" ;;
    wrk)
      ip netns exec "$C" /usr/bin/time -f '%U %S' -o "$WORK/time" \
        wrk -c "$CONNS" -t "$THREADS" -d "${DURATION}s" --latency "$url" >"$WORK/out"
      python3 -c '
import re, sys
t = open(sys.argv[1]).read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
n = int(re.search(r"(\d+) requests in", t).group(1))
v, u = re.search(r"\n\s+50%\s+([\d.]+)(us|ms|s)", t).groups()
print(rps, float(v) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[u], n)' "$WORK/out" ;;
    oha)
      ip netns exec "$C" /usr/bin/time -f '%U %S' -o "$WORK/time" \
        "$OHA" -c "$CONNS" "${oha_threads[@]}" -z "${DURATION}s" --no-tui --output-format json "$url" >"$WORK/out"
      python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
s = r["summary"]
n = sum(r.get("statusCodeDistribution", {}).values())
# Completed responses over the run time: the requestsPerSec oha prints also counts the requests
# cut off at the deadline ("aborted due to deadline", one per connection).
print(n / s["total"], r["latencyPercentiles"]["p50"] * 1000, n)' "$WORK/out" ;;
  esac | tr '\n' ' '
  awk '{ printf "%.3f\n", $1 + $2 }' "$WORK/time"
}

# oha's threads: --worker-threads where this oha has it (1.16 does), else its default (one per core).
if "$OHA" --help | grep -q -- --worker-threads; then
  oha_threads=(--worker-threads "$THREADS"); oha_t="--worker-threads $THREADS"
else
  oha_threads=(); oha_t="no threads option: one tokio worker per core, $(nproc) here"
fi

tools=(tcpdoctor wrk oha)
{
  echo "tcpdoctor load vs wrk and oha: -c $CONNS -d ${DURATION}s, -t $THREADS (oha: $oha_t);"
  echo "$PAIRS alternating rounds per server, the order rotating each round (tcpdoctor wrk oha, wrk oha tcpdoctor, ...)"
  echo "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), sendfile on, keep-alive; $(nproc) cores shared by clients and server"
  echo "$("$OHA" --version 2>/dev/null | head -n 1), $(wrk -v 2>&1 | head -n 1 | awk '{ print $1, $2 }')"
  echo "date $(date -u +%Y-%m-%dT%H:%MZ), tcpdoctor $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "requests/s: completed responses / run time (for oha: its status-code counts / summary.total; its own"
  echo "requestsPerSec also counts the requests aborted at the deadline, one per connection)"
  echo "CPU/req: user + system seconds of the client process (GNU time) / requests it completed"
} | tee "$WORK/report"
for port in 8081 8080; do
  case $port in 8081) name="tcp_nodelay on";; *) name="tcp_nodelay off";; esac
  url=http://$SERVER_IP:$port/
  for t in "${tools[@]}"; do run "$t" "$url" >/dev/null; done  # warm-up
  : > "$WORK/runs"
  for i in $(seq "$PAIRS"); do
    for k in 0 1 2; do
      t=${tools[$(( (i - 1 + k) % 3 ))]}
      echo "$i $t $(run "$t" "$url")" >> "$WORK/runs"
    done
  done
  python3 - "$name" "$WORK/runs" <<'PY' | tee -a "$WORK/report"
import statistics as st, sys
name, path = sys.argv[1], sys.argv[2]
runs = {}  # round -> tool -> (rps, p50, requests, cpu)
for line in open(path):
    r, tool, rps, p50, n, cpu = line.split()
    runs.setdefault(int(r), {})[tool] = (float(rps), float(p50), int(n), float(cpu))
tools = ["tcpdoctor", "wrk", "oha"]
us = lambda v: 1e6 * v[3] / v[2] if v[2] else float("nan")
print(f"\n{name}")
print(f"  {'round':>5}  " + "  ".join(f"{t + ' req/s':>15}" for t in tools) + "  "
      + "  ".join(f"{t + ' p50':>13}" for t in tools) + "  "
      + "  ".join(f"{t + ' CPU/req':>17}" for t in tools))
for r in sorted(runs):
    row = runs[r]
    print(f"  {r:>5}  " + "  ".join(f"{row[t][0]:>15.0f}" for t in tools) + "  "
          + "  ".join(f"{row[t][1]:>10.2f} ms" for t in tools) + "  "
          + "  ".join(f"{us(row[t]):>14.1f} us" for t in tools))
med = {t: st.median(runs[r][t][0] for r in runs) for t in tools}
p50 = {t: st.median(runs[r][t][1] for r in runs) for t in tools}
cpu = {t: st.median(us(runs[r][t]) for r in runs) for t in tools}
peer = max(("wrk", "oha"), key=lambda t: med[t])
print("  medians: " + ", ".join(f"{t} {med[t]:.0f} req/s p50 {p50[t]:.2f} ms CPU {cpu[t]:.1f} us/req" for t in tools))
print(f"  faster peer: {peer}")
print(f"  tcpdoctor / {peer} requests/s: {med['tcpdoctor'] / med[peer]:.3f} (ratio of medians), "
      f"{st.median(runs[r]['tcpdoctor'][0] / runs[r][peer][0] for r in runs):.3f} (median of per-round ratios)")
for t in ("wrk", "oha"):
    print(f"  tcpdoctor / {t}: requests/s {med['tcpdoctor'] / med[t]:.3f}, CPU per request {cpu['tcpdoctor'] / cpu[t]:.3f}")
PY
done
mkdir -p "$(dirname "$OUT")"
cp "$WORK/report" "$OUT"
echo "written: $OUT"

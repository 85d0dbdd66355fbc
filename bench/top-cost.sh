#!/usr/bin/env bash
# What watching costs: tcpdoctor top (TCP tracepoints, no packet copies) against tcpdoctor watch
# (live capture + diagnosis) and tcpdump -w /dev/null (capture only), on the same traffic: nginx
# (tcp_nodelay on, keep-alive, a 612-byte page) in one network namespace, wrk -c 64 -t 2 in
# another, both on this machine's cores. One wrk run per observer (and one with none), each
# DURATION s; the observer runs DURATION-1 s of it:
#   none      wrk alone (its requests/s is the reference)
#   top       tcpdoctor top --port PORT --format json     (root namespace: tracepoints see all)
#   watch     tcpdoctor watch -i eth0 --format json        (server namespace)
#   tcpdump   tcpdump -i eth0 -w /dev/null                 (server namespace)
# Reported per run: CPU seconds (user+sys, GNU time), the segments that crossed the server's
# eth0 while the observer ran (its rx + tx packet counters), CPU microseconds per thousand of
# those segments, what the observer saw (events or frames), what it lost (samples dropped by the
# kernel / frames dropped), wrk's requests/s; then the ratios of CPU per segment, top/watch and
# top/tcpdump (medians over ROUNDS): wrk's rate differs from run to run on a shared machine, so
# CPU is compared per segment of the same traffic, not per run.
# Not a CI test. Needs root, nginx, wrk, tcpdump, python3, GNU time.
#   sudo bash bench/top-cost.sh                 # 1 round, 10 s runs
#   ROUNDS=3 DURATION=10 sudo -E bash bench/top-cost.sh
# Results: bench/results/top-cost.txt (override with OUT=...). nginx listens on PORT (8097): top's
# tracepoints see every network namespace, so the port must be one no other load on the host uses
# (sock_send_length/sock_recv_length have no ports: every process's TCP writes and reads reach
# top, whatever the port; other traffic during a run inflates top's events and CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
TD=$(readlink -f "${TCPDOCTOR:-target/release/tcpdoctor}")
ROUNDS=${ROUNDS:-1}
DURATION=${DURATION:-10}
CONNS=${CONNS:-64}
PORT=${PORT:-8097}
OUT=${OUT:-bench/results/top-cost.txt}
P=${PREFIX:-tdtopb$$}
[ -x "$TD" ] || { echo "no $TD: cargo build --release" >&2; exit 2; }
. tests/e2e/lib.sh
e2e_netns "$P" 10.87.0
python3 -c 'import sys; open(sys.argv[1], "w").write("<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n" + "x" * 546 + "\n</html>\n")' "$WORK/html/index.html"
e2e_nginx "  server { listen $SERVER_IP:$PORT; tcp_nodelay on; root $WORK/html; }"
e2e_wait_port "$PORT"
URL=http://$SERVER_IP:$PORT/
OBS=$((DURATION - 1))

load() {
  ip netns exec "$C" wrk -c "$CONNS" -t 2 -d "${DURATION}s" "$URL" \
    | sed -n 's/^Requests\/sec: *//p' > "$WORK/rps" &
  LOAD=$!
  sleep 0.2
}

segs() { # packets that crossed the server's eth0, both ways
  ip netns exec "$S" cat /sys/class/net/eth0/statistics/rx_packets /sys/class/net/eth0/statistics/tx_packets \
    | awk '{ n += $1 } END { print n }'
}

cpu() { # "U S" from GNU time -> seconds
  python3 -c 'import sys; u, s = map(float, open(sys.argv[1]).read().split()[-2:]); print(round(u + s, 3))' "$WORK/time"
}

# Each prints: NAME CPU_S SEEN LOST RPS
run_none() {
  load
  s0=$(segs)
  wait "$LOAD"
  echo "none 0 $(( $(segs) - s0 )) 0 0 $(cat "$WORK/rps")"
}

run_top() {
  load
  s0=$(segs)
  /usr/bin/time -f '%U %S' -o "$WORK/time" \
    "$TD" top --port "$PORT" --duration "${OBS}s" --format json > "$WORK/top.jsonl" 2> "$WORK/top.err"
  n=$(( $(segs) - s0 ))
  wait "$LOAD"
  python3 - "$WORK/top.jsonl" "$(cpu)" "$(cat "$WORK/rps")" "$n" <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print("top", sys.argv[2], sys.argv[4], d["trace"]["events"], d["trace"]["lost"], sys.argv[3])
PY
}

run_watch() {
  load
  s0=$(segs)
  /usr/bin/time -f '%U %S' -o "$WORK/time" ip netns exec "$S" \
    "$TD" watch -i eth0 --duration "${OBS}s" --format json > "$WORK/watch.jsonl" 2> "$WORK/watch.err"
  n=$(( $(segs) - s0 ))
  wait "$LOAD"
  python3 - "$WORK/watch.jsonl" "$(cpu)" "$(cat "$WORK/rps")" "$n" <<'PY'
import json, sys
a = json.loads(open(sys.argv[1]).read().splitlines()[-1])
drops = 0
for w in a["capture"].get("warnings", []):
    if "kernel dropped" in w:
        drops = int(w.split("dropped ")[1].split()[0])
print("watch", sys.argv[2], sys.argv[4], a["capture"]["packets"], drops, sys.argv[3])
PY
}

run_tcpdump() {
  load
  s0=$(segs)
  /usr/bin/time -f '%U %S' -o "$WORK/time" ip netns exec "$S" \
    timeout -s INT "$OBS" tcpdump -i eth0 -w /dev/null 2> "$WORK/tcpdump.err" || true
  n=$(( $(segs) - s0 ))
  wait "$LOAD"
  python3 - "$WORK/tcpdump.err" "$(cpu)" "$(cat "$WORK/rps")" "$n" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
got = int(re.search(r"(\d+) packets? captured", t).group(1))
drop = int(re.search(r"(\d+) packets? dropped by kernel", t).group(1))
print("tcpdump", sys.argv[2], sys.argv[4], got, drop, sys.argv[3])
PY
}

{
  echo "tcpdoctor top vs watch vs tcpdump: CPU on the same load (nginx + wrk -c $CONNS -t 2, ${DURATION} s runs, observers ${OBS} s), $(nproc) cores, $ROUNDS round(s)"
  echo "date $(date -u +%Y-%m-%dT%H:%MZ), kernel $(uname -r), tcpdoctor $(git rev-parse --short HEAD 2>/dev/null || echo '?'), port $PORT"
  printf '%-8s %8s %10s %12s %12s %10s %10s\n' run cpu_s segments us/kseg seen lost req/s
} | tee "$WORK/report"
: > "$WORK/rows"
for _ in $(seq "$ROUNDS"); do
  for r in none top watch tcpdump; do
    row=$(run_$r)
    echo "$row" >> "$WORK/rows"
    # shellcheck disable=SC2086
    set -- $row
    printf '%-8s %8s %10s %12s %12s %10s %10s\n' "$1" "$2" "$3" \
      "$(python3 -c 'import sys; c, n = map(float, sys.argv[1:]); print(round(c * 1e6 / n * 1e3, 1) if n else 0)' "$2" "$3")" \
      "$4" "$5" "$6" | tee -a "$WORK/report"
  done
done
python3 - "$WORK/rows" <<'PY' | tee -a "$WORK/report"
import statistics, sys
rows = {}
for l in open(sys.argv[1]):
    n, cpu, segs, seen, lost, rps = l.split()
    segs = int(segs)
    rows.setdefault(n, []).append((float(cpu), segs, int(seen), int(lost), float(rps or 0),
                                   float(cpu) * 1e9 / segs if segs else 0.0))
med = lambda n, i: statistics.median(r[i] for r in rows[n])
t, w, d = med("top", 5), med("watch", 5), med("tcpdump", 5)
print("median CPU per thousand segments: top %.1f us, watch %.1f us, tcpdump %.1f us" % (t, w, d))
print("ratios (CPU per segment): top/watch %.2f, top/tcpdump %.2f"
      % (t / w if w else float("nan"), t / d if d else float("nan")))
print("median CPU per run: top %.3f s, watch %.3f s, tcpdump %.3f s"
      % (med("top", 0), med("watch", 0), med("tcpdump", 0)))
print("top: %d events for %d segments (%.2f a segment), %d samples lost (median); watch dropped %d frames, tcpdump %d"
      % (med("top", 2), med("top", 1), med("top", 2) / max(1, med("top", 1)), med("top", 3), med("watch", 3), med("tcpdump", 3)))
base = med("none", 4)
for n in ("top", "watch", "tcpdump"):
    print("  wrk req/s with %-7s %.0f (%.2f of none's %.0f)" % (n, med(n, 4), med(n, 4) / base if base else 0, base))
PY
mkdir -p "$(dirname "$OUT")"
cp "$WORK/report" "$OUT"

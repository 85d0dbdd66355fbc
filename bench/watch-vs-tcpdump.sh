#!/usr/bin/env bash
# tcpdoctor watch against tcpdump, on the same veth and the same load: nginx (tcp_nodelay on,
# keep-alive, a 612-byte page) in one network namespace, wrk at the heaviest load it makes here
# (-c 64 -t 2) in another, both on this machine's cores. Runs alternate, each with its own
# identical wrk run; the capture runs in the server namespace on eth0 for the whole load:
#   tcpdump   tcpdump -i eth0 -w /dev/null                       (capture only)
#   watch     tcpdoctor watch -i eth0 --format json              (capture + live diagnosis)
#   pipeline  tcpdump -i eth0 -w FILE, then tcpdoctor analyze FILE   (capture, then diagnosis)
# Reported per run: frames the tool saw, frames the kernel dropped, CPU seconds (user+sys, from
# GNU time), CPU per million frames, wrk's requests/s. Then the medians and the ratios
#   drops(watch) - drops(tcpdump)                 goal <= 0
#   cpu_per_Mpkt(watch) / cpu_per_Mpkt(tcpdump + analyze)   goal < 1
# Needs root, nginx, wrk, tcpdump, python3, GNU time.
#   sudo bash bench/watch-vs-tcpdump.sh               # 3 rounds, 8 s each
#   ROUNDS=5 DURATION=10 sudo -E bash bench/watch-vs-tcpdump.sh
# Results: bench/results/watch-vs-tcpdump.txt (override with OUT=...).
set -euo pipefail
cd "$(dirname "$0")/.."
TD=$(readlink -f "${TCPDOCTOR:-target/release/tcpdoctor}")
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8}
CONNS=${CONNS:-64}
OUT=${OUT:-bench/results/watch-vs-tcpdump.txt}
P=${PREFIX:-tdbw$$}
[ -x "$TD" ] || cargo build --release --locked
. tests/e2e/lib.sh
e2e_netns "$P" 10.82.0
python3 -c 'import sys; open(sys.argv[1], "w").write("<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n" + "x" * 546 + "\n</html>\n")' "$WORK/html/index.html"
e2e_nginx "  server { listen $SERVER_IP:80; tcp_nodelay on; root $WORK/html; }"
e2e_wait_port 80
URL=http://$SERVER_IP/

# wrk for the duration, in the background; prints requests/s into $1.
load() {
  ip netns exec "$C" wrk -c "$CONNS" -t 2 -d "${DURATION}s" "$URL" \
    | sed -n 's/^Requests\/sec: *//p' > "$1" &
  LOAD=$!
}

# One run of a tool: prints "FRAMES DROPS CPU_S RPS".
run_tcpdump() {
  load "$WORK/rps"
  sleep 0.2
  /usr/bin/time -f '%U %S' -o "$WORK/time" ip netns exec "$S" \
    timeout -s INT "$((DURATION - 1))" tcpdump -i eth0 -w /dev/null 2> "$WORK/tcpdump.err" || true
  wait "$LOAD"
  python3 - "$WORK/tcpdump.err" "$WORK/time" "$WORK/rps" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
got = int(re.search(r"(\d+) packets? captured", t).group(1))
drop = int(re.search(r"(\d+) packets? dropped by kernel", t).group(1))
u, s = map(float, open(sys.argv[2]).read().split()[-2:])
print(got, drop, round(u + s, 3), open(sys.argv[3]).read().strip() or 0)
PY
}

run_watch() {
  load "$WORK/rps"
  sleep 0.2
  /usr/bin/time -f '%U %S' -o "$WORK/time" ip netns exec "$S" \
    "$TD" watch -i eth0 --duration "$((DURATION - 1))s" --format json > "$WORK/watch.jsonl" 2> "$WORK/watch.err"
  wait "$LOAD"
  python3 - "$WORK/watch.jsonl" "$WORK/time" "$WORK/rps" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
a = lines[-1]
drops = 0
for w in a["capture"]["warnings"]:
    if "kernel dropped" in w:
        drops = int(w.split("dropped ")[1].split()[0])
u, s = map(float, open(sys.argv[2]).read().split()[-2:])
print(a["capture"]["packets"], drops, round(u + s, 3), open(sys.argv[3]).read().strip() or 0)
PY
}

run_pipeline() {
  load "$WORK/rps"
  sleep 0.2
  /usr/bin/time -f '%U %S' -o "$WORK/time" ip netns exec "$S" \
    timeout -s INT "$((DURATION - 1))" tcpdump -i eth0 -w "$WORK/cap.pcap" 2> "$WORK/tcpdump.err" || true
  wait "$LOAD"
  /usr/bin/time -f '%U %S' -o "$WORK/time2" "$TD" analyze --format json "$WORK/cap.pcap" > /dev/null
  python3 - "$WORK/tcpdump.err" "$WORK/time" "$WORK/time2" "$WORK/rps" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
got = int(re.search(r"(\d+) packets? captured", t).group(1))
drop = int(re.search(r"(\d+) packets? dropped by kernel", t).group(1))
cpu = 0.0
for f in sys.argv[2:4]:
    u, s = map(float, open(f).read().split()[-2:])
    cpu += u + s
print(got, drop, round(cpu, 3), open(sys.argv[4]).read().strip() or 0)
PY
  rm -f "$WORK/cap.pcap"
}

{
  echo "tcpdoctor watch vs tcpdump on one veth under wrk -c $CONNS -t 2 (nginx, keep-alive, 612-byte page)"
  echo "$ROUNDS rounds of ${DURATION}s load, capture for $((DURATION - 1))s; $(nproc) cores shared by nginx, wrk and the capture"
  echo "$(tcpdump --version 2>&1 | head -1); tcpdoctor $(git rev-parse --short HEAD 2>/dev/null || echo '?'); $(date -u +%Y-%m-%dT%H:%MZ)"
  printf '%-9s %5s %10s %8s %7s %14s %9s\n' tool round frames drops cpu_s cpu_s_per_Mpkt req/s
} | tee "$WORK/report"
for round in $(seq "$ROUNDS"); do
  for tool in tcpdump watch pipeline; do
    read -r frames drops cpu rps < <("run_$tool")
    per=$(python3 -c "print(round($cpu / max($frames, 1) * 1e6, 3))")
    printf '%-9s %5s %10s %8s %7s %14s %9s\n' "$tool" "$round" "$frames" "$drops" "$cpu" "$per" "$rps" \
      | tee -a "$WORK/report"
  done
done
python3 - "$WORK/report" <<'PY' | tee -a "$WORK/report"
import statistics, sys
# Data rows only: tool, round number, five figures (the header also starts with "tcpdump").
rows = [l.split() for l in open(sys.argv[1])
        if len(l.split()) == 7 and l.split()[0] in ("tcpdump", "watch", "pipeline") and l.split()[1].isdigit()]
med = {}
for tool in ("tcpdump", "watch", "pipeline"):
    r = [x for x in rows if x[0] == tool]
    med[tool] = {k: statistics.median(float(x[i]) for x in r) for k, i in (("frames", 2), ("drops", 3), ("cpu", 4), ("per", 5))}
print()
for tool, m in med.items():
    print("median %-9s frames %9.0f  drops %6.0f  cpu %6.2f s  %6.3f cpu-s per million frames" % (tool, m["frames"], m["drops"], m["cpu"], m["per"]))
print("drops: watch %.0f vs tcpdump %.0f (goal: no more)" % (med["watch"]["drops"], med["tcpdump"]["drops"]))
print("cpu per million frames: watch / (tcpdump + analyze) = %.2f (goal < 1); watch / tcpdump alone = %.2f"
      % (med["watch"]["per"] / med["pipeline"]["per"], med["watch"]["per"] / med["tcpdump"]["per"]))
PY
mkdir -p "$(dirname "$OUT")"
cp "$WORK/report" "$OUT"
echo "written to $OUT"

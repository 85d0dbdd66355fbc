#!/usr/bin/env bash
# The fleet paths, measured in one run:
#   1. the Parquet writer's cost: `analyze FILE --parquet DIR` (every connection and exchange
#      a row, findings, in four Parquet files) against `analyze FILE --format json` on the
#      benchmark capture (bench/data/big.pcap, built by bench/make-big-capture.sh if missing),
#      interleaved rounds, page cache warm, median wall time and peak RSS; ratio parquet/json;
#   2. a sweep of a fleet tree (HOSTS folders of COPIES captures each, the committed lab
#      captures, a different case per host): `analyze TREE --parquet` on this machine, then
#      examples/fleet/sweep.py on Spark in local mode with 1 and with 2 workers (8 tasks
#      either way); captures/s, packets/s and MB/s (Spark: the analysis stage, without the
#      JVM's start);
#   3. the same Spark runs over HEAVY (8) links to the benchmark capture: captures of real
#      size, where the analysis rather than the per-task overhead takes the time;
#   4. the Python package alone on the benchmark capture, and 8 of them in a thread pool of
#      1 and of 2 threads.
# Needs the fleet virtualenv (tests/e2e/fleet.sh makes it) with the tcpdoctor wheel, GNU time;
# root only to build the benchmark capture.
#   sudo bash bench/fleet.sh          RUNS=5 COPIES=40 sudo -E bash bench/fleet.sh
# Results: bench/results/fleet.txt (override with OUT=...).
set -euo pipefail
cd "$(dirname "$0")/.."
TD=$(readlink -f "${TCPDOCTOR:-target/release/tcpdoctor}")
RUNS=${RUNS:-3}
COPIES=${COPIES:-20}
BIG=${BIG:-bench/data/big.pcap}
OUT=${OUT:-bench/results/fleet.txt}
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/tcpdoctor-e2e/fleet-venv
PY=$VENV/bin/python
[ -x "$TD" ] || cargo build --release --locked
"$PY" -c 'import tcpdoctor, pyspark' 2>/dev/null \
  || { echo "no fleet virtualenv with tcpdoctor and pyspark: run tests/e2e/fleet.sh first" >&2; exit 2; }
[ -f "$BIG" ] || bash bench/make-big-capture.sh "$BIG"
WORK=$(mktemp -d /tmp/tcpdoctor-fleet-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$(dirname "$OUT")"
exec > >(tee "$OUT") 2>&1

echo "fleet benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo
# 1. --parquet against --format json on the benchmark capture.
run() {  # run NAME CMD... ; prints "wall_ms max_rss_kib cpu_s"
  local t0 t1
  shift
  cat "$BIG" > /dev/null
  t0=$(date +%s%N)
  /usr/bin/time -f '%M %U %S' -o "$WORK/time" "$@" > /dev/null 2>> "$WORK/stderr" || true
  t1=$(date +%s%N)
  echo "$(( (t1 - t0) / 1000000 )) $(awk '{print $1, $2 + $3}' "$WORK/time")"
}
: > "$WORK/json.txt"; : > "$WORK/parquet.txt"
for _ in $(seq "$RUNS"); do
  run json "$TD" analyze "$BIG" --format json >> "$WORK/json.txt"
  rm -rf "$WORK/tables"
  run parquet "$TD" analyze "$BIG" --parquet "$WORK/tables" >> "$WORK/parquet.txt"
done
"$TD" analyze "$BIG" --parquet "$WORK/tables" --format json > "$WORK/big-sweep.json"
python3 - "$BIG" "$WORK/json.txt" "$WORK/parquet.txt" "$WORK/big-sweep.json" "$WORK/tables" <<'PY'
import json, os, statistics, sys
big, jt, pt, sweep, tables = sys.argv[1:6]
def med(path):
    rows = [tuple(map(float, l.split())) for l in open(path) if l.strip()]
    return (statistics.median(r[0] for r in rows) / 1e3, statistics.median(r[1] for r in rows) / 1024,
            statistics.median(r[2] for r in rows), [int(r[0]) for r in rows])
js, jm, jc, jr = med(jt)
ps, pm, pc, pr = med(pt)
s = json.load(open(sweep))
size = sum(os.path.getsize(os.path.join(tables, f)) for f in os.listdir(tables))
print(f"1. {big}: {os.path.getsize(big) / 1e6:.0f} MB, {s['packets']:,} packets; {len(jr)} interleaved runs each")
print(f"   analyze --format json   median {js:.3f} s  CPU {jc:.2f} s  peak {jm:.1f} MiB   runs (ms): {jr}")
print(f"   analyze --parquet DIR   median {ps:.3f} s  CPU {pc:.2f} s  peak {pm:.1f} MiB   runs (ms): {pr}")
print(f"   rows: {s['rows']}; Parquet files {size / 1e6:.1f} MB")
print(f"   ratio parquet / json: wall time {ps / js:.2f}x, CPU time {pc / jc:.2f}x, peak memory {pm / jm:.2f}x")
PY
echo

# 2. A fleet tree: the CLI sweep, then Spark with 1 and 2 local workers.
TREE=$WORK/fleet
declare -A CASE=([web-nginx]=nginx-nodelay-off.server [api-jdk]=jdk-default.client
                 [upload-store]=upload-rcvbuf4k.server [lossy-edge]=rto.client
                 [web-fast]=nginx-nodelay-on.client)
for h in "${!CASE[@]}"; do
  mkdir -p "$TREE/$h"
  for i in $(seq -w 1 "$COPIES"); do cp "fixtures/${CASE[$h]}.pcap" "$TREE/$h/cap-$i.pcap"; done
done
t0=$(date +%s%N)
"$TD" analyze "$TREE" --parquet "$WORK/fleet-tables" --format json > "$WORK/fleet-sweep.json"
t1=$(date +%s%N)
python3 - "$WORK/fleet-sweep.json" "$(( (t1 - t0) / 1000000 ))" "${#CASE[@]}" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); sec = int(sys.argv[2]) / 1e3
print(f"2. fleet tree: {s['files']} captures in {sys.argv[3]} host folders, {s['packets']:,} packets, {s['bytes'] / 1e6:.1f} MB")
print(f"   analyze TREE --parquet   {sec:.2f} s   {s['files'] / sec:.1f} captures/s  {s['packets'] / sec:,.0f} packets/s  {s['bytes'] / sec / 1e6:.1f} MB/s")
PY
export SPARK_LOCAL_IP=127.0.0.1
spark() {  # spark TREE LABEL: the job with 1 then 2 local workers, the same 8 tasks each
  local tree=$1 label=$2 w t0 t1
  for w in 1 2; do
    t0=$(date +%s%N)
    "$PY" examples/fleet/sweep.py "$tree" --master "local[$w]" --partitions 8 --json "$WORK/spark$w.json" \
      > "$WORK/spark$w.out" 2> "$WORK/spark$w.err" || { tail -5 "$WORK/spark$w.err"; exit 1; }
    t1=$(date +%s%N)
    python3 - "$WORK/spark$w.json" "$w" "$(( (t1 - t0) / 1000000 ))" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); w = sys.argv[2]; total = int(sys.argv[3]) / 1e3
sec = s["seconds"]
print(f"   Spark local[{w}], 8 tasks {sec:6.2f} s   {s['captures'] / sec:.1f} captures/s  {s['packets'] / sec:,.0f} packets/s  {s['bytes'] / sec / 1e6:.1f} MB/s"
      f"   (whole job with JVM start and ranking: {total:.1f} s)")
PY
  done
  python3 - "$WORK/spark1.json" "$WORK/spark2.json" "$label" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print(f"   {sys.argv[3]}: 2 workers / 1 worker = {a['seconds'] / b['seconds']:.2f}x the captures/s")
PY
}
spark "$TREE" "small captures"

# 3. Spark on captures of real size: HEAVY links to the benchmark capture, two host folders.
HEAVY=${HEAVY:-8}
for i in $(seq 1 "$HEAVY"); do
  mkdir -p "$WORK/heavy/host-$((i % 2))"
  ln -s "$(readlink -f "$BIG")" "$WORK/heavy/host-$((i % 2))/big-$i.pcap"
done
echo
echo "3. $HEAVY × $BIG (linked) in 2 host folders"
spark "$WORK/heavy" "big captures"

# 4. The Python package without Spark: a thread pool (the GIL is released while it works).
"$PY" - "$BIG" <<'PY'
import statistics, sys, time
from concurrent.futures import ThreadPoolExecutor
import tcpdoctor
big = sys.argv[1]
tcpdoctor.analyze(big)
one = []
for _ in range(3):
    t0 = time.perf_counter(); t = tcpdoctor.analyze(big); one.append(time.perf_counter() - t0)
print(f"\n4. Python: tcpdoctor.analyze({big}) median {statistics.median(one):.3f} s "
      f"({t.exchanges.num_rows:,} exchange rows as pyarrow)")
res = {}
for w in (1, 2):
    t0 = time.perf_counter()
    with ThreadPoolExecutor(w) as ex:
        list(ex.map(tcpdoctor.analyze, [big] * 8))
    res[w] = time.perf_counter() - t0
    print(f"   thread pool of {w}: 8 captures in {res[w]:.2f} s, {8 / res[w]:.2f} captures/s")
print(f"   2 threads / 1 thread = {res[1] / res[2]:.2f}x the captures/s")
PY
echo
echo "Results in $OUT"

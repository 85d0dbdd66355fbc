#!/usr/bin/env bash
# Instructions, not seconds: `analyze --format json` of two builds under callgrind, side by side.
#
#   bash bench/instructions.sh BEFORE_BINARY AFTER_BINARY [CAPTURE...]
#   LINES=40 bash bench/instructions.sh BEFORE AFTER      # and AFTER's 40 costliest source lines
#   CACHE=1 bash bench/instructions.sh BEFORE AFTER       # and both builds' cache misses
#   WALL=21 bash bench/instructions.sh BEFORE AFTER       # and 21 paired wall-time runs each
#
# Instruction counts do not drift with the machine's load the way times do (±10-30% here), so a
# change of a few percent shows in one run. For each capture (default: bench/data/short.pcap and
# bench/data/big.pcap, made by bench/make-big-capture.sh) it prints, for both builds, the
# instructions in all, on the engine thread (the caller's: tracking and diagnosis, the critical
# path of the two-thread pipeline, which bounds the wall time) and on the reading thread (read
# and decode), each per packet, and AFTER/BEFORE. LINES=N adds AFTER's N costliest source lines
# of the last capture by self cost, inlined code charged to the innermost line of the project's
# own source (bench/inline-lines.py): the engine is a few large functions into which every rule
# is inlined, so callgrind's per-function view cannot tell the rules apart.
#
# CACHE=1 adds, per capture, both builds' instruction-cache and data-cache misses (cachegrind's
# model of this machine's caches: 32 KiB of instructions, 48 KiB of data, per core), per packet,
# both threads together. A model of the caches: on this machine the wall time followed the
# engine thread's instructions, not these misses (bench/results/pgo.txt, section 4).
# WALL=N adds the wall time of N runs of each build, run in turn (before, after, before, ...,
# after two of each to warm the page cache): medians and AFTER/BEFORE. Times on this machine
# move by 10-30% from one minute to the next; runs in turn share the drift.
# Needs valgrind (and binutils' addr2line for LINES). Takes about 15 s a build and capture here
# (CACHE: a minute more).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
before=$1 after=$2
shift 2
captures=("$@")
[ ${#captures[@]} -gt 0 ] || captures=(bench/data/short.pcap bench/data/big.pcap)
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 2; }
for b in "$before" "$after"; do [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }; done
for c in "${captures[@]}"; do [ -r "$c" ] || { echo "no capture $c (bench/make-big-capture.sh makes it)" >&2; exit 2; }; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run NAME BINARY CAPTURE: callgrind, one output file per thread (NAME.out-01 is the caller's).
run() {
  valgrind --tool=callgrind --separate-threads=yes --dump-instr=yes \
    --callgrind-out-file="$tmp/$1.out" "$2" analyze --format json "$3" >"$tmp/$1.json" 2>"$tmp/$1.log"
}
# totals NAME: "all engine reader" instructions (the thread summaries' Ir).
totals() {
  local f engine=0 reader=0 n
  for f in "$tmp/$1".out-*; do
    n=$(sed -n 's/^summary: //p' "$f" | head -1)
    case $f in *-01) engine=$n ;; *) reader=$((reader + n)) ;; esac
  done
  echo "$((engine + reader)) $engine $reader"
}

printf '%-26s %-7s %15s %15s %15s   %s\n' capture build all engine reader "per packet (all/engine/reader)"
declare -A packets_of   # per capture, for the cache misses per packet
for c in "${captures[@]}"; do
  run before "$before" "$c" &
  run after "$after" "$c"
  wait
  packets=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["capture"]["packets"])' "$tmp/after.json")
  packets_of[$c]=$packets
  read -r ba be br < <(totals before)
  read -r aa ae ar < <(totals after)
  for row in "before $ba $be $br" "after $aa $ae $ar"; do
    set -- $row
    printf '%-26s %-7s %15d %15d %15d   %d / %d / %d\n' "$(basename "$c")" "$1" "$2" "$3" "$4" \
      $(($2 / packets)) $(($3 / packets)) $(($4 / packets))
  done
  python3 -c 'import sys; a=[int(x) for x in sys.argv[1:4]]; b=[int(x) for x in sys.argv[4:7]]
print("%-26s %-7s %15.3f %15.3f %15.3f   (%s packets)" % ("", "ratio", b[0]/a[0], b[1]/a[1], b[2]/a[2], sys.argv[7]))' \
    "$ba" "$be" "$br" "$aa" "$ae" "$ar" "$packets"
done
if [ "${CACHE:-0}" = 1 ]; then
  echo
  printf '%-26s %-7s %15s %15s   %s\n' capture build "I1 misses" "D1 misses" "per packet (I1 / D1)"
  for c in "${captures[@]}"; do
    packets=${packets_of[$c]}
    for b in before after; do
      bin=$before; [ $b = after ] && bin=$after
      valgrind --tool=cachegrind --cache-sim=yes --I1=32768,8,64 --D1=49152,12,64 \
        --cachegrind-out-file="$tmp/$b.cg" "$bin" analyze --format json "$c" >/dev/null 2>"$tmp/$b.cglog" &
    done
    wait
    python3 - "$(basename "$c")" "$packets" "$tmp/before.cglog" "$tmp/after.cglog" <<'PY'
import re, sys
name, packets = sys.argv[1], int(sys.argv[2])
def misses(path):
    text = open(path).read()
    return [int(re.search(k + r" misses:\s*([\d,]+)", text).group(1).replace(",", "")) for k in ("I1 ", "D1 ")]
b, a = misses(sys.argv[3]), misses(sys.argv[4])
for build, (i1, d1) in (("before", b), ("after", a)):
    print("%-26s %-7s %15d %15d   %.1f / %.1f" % (name, build, i1, d1, i1 / packets, d1 / packets))
print("%-26s %-7s %15.3f %15.3f" % ("", "ratio", a[0] / b[0], a[1] / b[1]))
PY
  done
fi
if [ "${WALL:-0}" -gt 0 ]; then
  echo
  printf '%-26s %-7s %15s\n' capture build "median ms"
  for c in "${captures[@]}"; do
    python3 - "$WALL" "$c" "$before" "$after" <<'PY'
import os, statistics, subprocess, sys, time
runs, capture, builds = int(sys.argv[1]), sys.argv[2], sys.argv[3:5]
times = {b: [] for b in builds}
for i in range(runs + 2):
    for b in builds:
        t = time.perf_counter()
        subprocess.run([b, "analyze", "--format", "json", capture], stdout=subprocess.DEVNULL, check=True)
        if i >= 2:
            times[b].append(time.perf_counter() - t)
m = [statistics.median(times[b]) * 1e3 for b in builds]
name = os.path.basename(capture)
print("%-26s %-7s %15.1f\n%-26s %-7s %15.1f\n%-26s %-7s %15.3f" % (name, "before", m[0], name, "after", m[1], "", "ratio", m[1] / m[0]))
PY
  done
fi
if [ "${LINES:-0}" -gt 0 ]; then
  echo
  echo "$(basename "$after") on $(basename "${captures[-1]}"): the $LINES costliest source lines (self, inlined code charged to the innermost project line)"
  python3 bench/inline-lines.py "$after" "$LINES" "$tmp"/after.out-*
fi

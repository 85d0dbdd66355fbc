#!/usr/bin/env bash
# `tcpdoctor lab fixtures` again and again while stress-ng keeps every core busy: does each
# regenerated capture still come out as labelled when the host is loaded? One line per run
# (exit status, seconds) and the fixtures that needed a 2nd or 3rd attempt, in
# bench/results/lab-under-load.txt (override with OUT=...).
#
#   sudo bash bench/lab-under-load.sh            # 10 runs under stress-ng --cpu 2 (~55 min)
#   RUNS=3 CPU=4 sudo -E bash bench/lab-under-load.sh
#
# Needs root, stress-ng, and what the lab needs (nginx, wrk, a JDK, curl; the built-in peers
# stand in for those not installed). Stops only the stress-ng it started, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
TD=$(readlink -f "${TCPDOCTOR:-target/release/tcpdoctor}")
RUNS=${RUNS:-10}
CPU=${CPU:-2}
OUT=${OUT:-bench/results/lab-under-load.txt}
[ -x "$TD" ] || cargo build --release --locked
command -v stress-ng >/dev/null || { echo "lab-under-load.sh: stress-ng is required (apt-get install stress-ng)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/tcpdoctor-lab-load.XXXXXX)
stress-ng --cpu "$CPU" --timeout 0 >/dev/null 2>&1 &
STRESS=$!
trap 'kill "$STRESS" 2>/dev/null || true; wait "$STRESS" 2>/dev/null || true; rm -rf "$WORK"' EXIT
{
  echo "tcpdoctor lab fixtures under stress-ng --cpu $CPU, $RUNS runs; $(nproc) cores"
  echo "date $(date -u +%Y-%m-%dT%H:%MZ), tcpdoctor $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
} > "$OUT"
passed=0
for i in $(seq "$RUNS"); do
  start=$SECONDS
  rc=0
  "$TD" lab fixtures "$WORK/run$i" > "$WORK/run$i.log" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] && passed=$((passed + 1))
  echo "run $i: exit $rc, $((SECONDS - start)) s" | tee -a "$OUT"
  grep -E "attempt [0-9]|NOT AS LABELLED|^tcpdoctor" "$WORK/run$i.log" | sed 's/^/  /' | tee -a "$OUT" || true
  rm -rf "$WORK/run$i"
done
echo "$passed of $RUNS runs passed" | tee -a "$OUT"

#!/usr/bin/env bash
# Runs end-to-end scripts again and again beside a CPU load, to show that they do not flake:
# every wait in them must be on a condition with a deadline, and every timing check must hold
# on a machine whose cores are busy with something else.
#
#   bash tests/under-load.sh [--runs N] [--cpu N] [--out FILE] BINARY SCRIPT...
#
#   --runs N   runs of each script (default 10)
#   --cpu N    stress-ng CPU workers beside them (default 2: one per core here)
#   --out FILE one line per run: script, run, exit code, seconds (default under-load.tsv)
#
# Example: bash tests/under-load.sh --runs 10 target/release/tcpdoctor tests/e2e/probe.sh
# Each failing run's output is kept beside FILE (FILE.SCRIPT.RUN.log). Exit 1 if any run failed.
# It needs root (the scripts build network namespaces) and stress-ng (apt-get install stress-ng).
set -euo pipefail

runs=10 cpu=2 out=under-load.tsv
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "usage: $0 [--runs N] [--cpu N] [--out FILE] BINARY SCRIPT..." >&2; exit 2; }
td=$1
shift
command -v stress-ng >/dev/null || { echo "under-load: stress-ng is not installed (apt-get install stress-ng)" >&2; exit 2; }

stress-ng --cpu "$cpu" --quiet &
STRESS=$!
trap 'kill "$STRESS" 2>/dev/null; wait "$STRESS" 2>/dev/null || true' EXIT

printf 'script\trun\texit\tseconds\n' > "$out"
failed=0
for script in "$@"; do
  name=$(basename "$script" .sh)
  pass=0
  for run in $(seq "$runs"); do
    log=$out.$name.$run.log
    start=$(date +%s%N)
    rc=0
    bash "$script" "$td" > "$log" 2>&1 || rc=$?
    ms=$((($(date +%s%N) - start) / 1000000))
    printf '%s\t%d\t%d\t%d.%d\n' "$name" "$run" "$rc" $((ms / 1000)) $((ms % 1000 / 100)) >> "$out"
    if [ "$rc" -eq 0 ]; then
      pass=$((pass + 1))
      rm -f "$log"
    else
      failed=$((failed + 1))
      echo "under-load: $name run $run FAILED (exit $rc): $log" >&2
      grep -m3 -E "FAIL|Error|assert" "$log" >&2 || tail -3 "$log" >&2
    fi
  done
  echo "under-load: $name: $pass of $runs runs passed beside stress-ng --cpu $cpu"
done
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# Wall time of `tcpdoctor sysctl --format json` against `sysctl -a`, with hyperfine, on this
# host's network namespace: tcpdoctor reads its catalogue of sysctls, dumps interfaces, IPv4
# and IPv6 routes and qdiscs over rtnetlink, judges everything and writes JSON; sysctl -a
# (procps) reads and prints every sysctl. Both outputs go to /dev/null (hyperfine's default).
# Before timing, tcpdoctor's JSON is checked (it parses, schema 1, settings present).
#   bash bench/sysctl.sh                       # 20 warm-up runs, 300 timed runs each
#   RUNS=1000 TCPDOCTOR=/path/to/tcpdoctor bash bench/sysctl.sh
# Results: bench/results/sysctl.txt (override with OUT=...).
set -euo pipefail
cd "$(dirname "$0")/.."
TD=$(readlink -f "${TCPDOCTOR:-target/release/tcpdoctor}")
RUNS=${RUNS:-300}
OUT=${OUT:-bench/results/sysctl.txt}
[ -x "$TD" ] || cargo build --release --locked
command -v hyperfine >/dev/null || { echo "hyperfine is missing" >&2; exit 2; }
SYSCTL=$(command -v sysctl)

"$TD" sysctl --format json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["schema"] == 1 and len(d["settings"]) > 30 and d["errors"] == [], "unexpected report"
n = {k: len(d[k]) for k in ("settings", "routes", "qdiscs")}
print("# tcpdoctor report: {settings} settings, {routes} routes, {qdiscs} qdiscs".format(**n))
' > /tmp/tcpdoctor-sysctl-bench.$$
lines=$("$SYSCTL" -a 2>/dev/null | wc -l)
{
  echo "# bench/sysctl.sh $(date -u +%Y-%m-%dT%H:%MZ), tcpdoctor $(git rev-parse --short HEAD 2>/dev/null || echo ?), Linux $(uname -r), $(nproc) cores"
  cat /tmp/tcpdoctor-sysctl-bench.$$
  echo "# sysctl -a: $lines lines"
  hyperfine -N --style basic --warmup 20 --runs "$RUNS" \
    -n "tcpdoctor sysctl --format json" "$TD sysctl --format json" \
    -n "sysctl -a" "$SYSCTL -a" 2>&1
} | tee "$OUT"
rm -f /tmp/tcpdoctor-sysctl-bench.$$

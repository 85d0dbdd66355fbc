#!/usr/bin/env bash
# `tcpdoctor analyze` of a capture, plain and compressed (gzip -6 as tcpdump -z gzip leaves it,
# and zstd -3, and tcpdump's rotation of it into gzip'd 10 MB files read as a directory), side by side in one hyperfine run; and mergecap's plain read of the same gzip
# file as the anchor that decompresses too. Reports the times and the ratios to the plain run.
#   bash bench/analyze-compressed.sh [CAPTURE]     (default bench/data/big.pcap,
#                                                   made by bench/make-big-capture.sh)
# Results: bench/results/analyze-compressed.txt (override with OUT=...). Needs hyperfine, gzip, zstd, tcpdump.
set -euo pipefail
cd "$(dirname "$0")/.."
TD=$(readlink -f "${TCPDOCTOR:-target/release/tcpdoctor}")
CAP=${1:-bench/data/big.pcap}
OUT=${OUT:-bench/results/analyze-compressed.txt}
RUNS=${RUNS:-5}
WORK=$(mktemp -d /tmp/tcpdoctor-bench-gz.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
gzip -6 -c "$CAP" > "$WORK/cap.pcap.gz"
zstd -q -3 -c "$CAP" > "$WORK/cap.pcap.zst"
# tcpdump's own rotation, every 10 MB, each finished file gzip'd (-z waits for nothing: let it end).
mkdir "$WORK/rot"
CAP_ABS=$(readlink -f "$CAP")
(cd "$WORK/rot" && tcpdump -r "$CAP_ABS" -w part -C 10 -Z root -z gzip 2>/dev/null)
# gzip runs in the background; it is done when only the newest file is left uncompressed.
until [ "$(ls "$WORK/rot" | grep -vc '\.gz$')" -le 1 ]; do sleep 0.2; done
{
  echo "tcpdoctor analyze: plain vs gzip vs zstd, $RUNS runs each (hyperfine), $(nproc) cores"
  echo "capture: $(basename "$CAP"), $(stat -c %s "$CAP") bytes; gzip -6 $(stat -c %s "$WORK/cap.pcap.gz") bytes; zstd -3 $(stat -c %s "$WORK/cap.pcap.zst") bytes; rotated: $(ls "$WORK/rot" | wc -l) files"
  echo "date $(date -u +%Y-%m-%dT%H:%MZ), tcpdoctor $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
} | tee "$WORK/report"
hyperfine -N -w 1 -r "$RUNS" --export-json "$WORK/h.json" \
  -n plain "$TD analyze --format json $CAP" \
  -n gzip "$TD analyze --format json $WORK/cap.pcap.gz" \
  -n zstd "$TD analyze --format json $WORK/cap.pcap.zst" \
  -n "rotated (tcpdump -C 10 -z gzip, a directory)" "$TD analyze --format json $WORK/rot" \
  -n "gzip -dc (decompression alone)" "gzip -dc $WORK/cap.pcap.gz" >/dev/null
python3 - "$WORK/h.json" <<'PY' | tee -a "$WORK/report"
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
base = r["plain"]["median"]
for name, x in r.items():
    print(f"  {name:<32} median {x['median']:.3f} s (min {x['min']:.3f})  {x['median'] / base:.2f}x plain")
PY
mkdir -p "$(dirname "$OUT")"
cp "$WORK/report" "$OUT"
echo "written: $OUT"

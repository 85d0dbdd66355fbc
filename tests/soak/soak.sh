#!/usr/bin/env bash
# Soak tests: hours of traffic in minutes, and what a long run must not do.
#
# 1. `analyze -` streams a generated capture far larger than memory (made on the fly by
#    crates/capture/examples/soak.rs, never stored: many keep-alive connections, one in 20
#    each with Nagle x delayed-ACK stalls, loss (fast retransmit and timer) or a zero window)
#    and must stay under 64 MB of resident memory (max RSS from /usr/bin/time -v), read
#    every packet and connection written, find every unhealthy connection injected, and
#    report exactly what `analyze DIR` reports for the same traffic cut into files.
# 2. `load --rate` against nginx (in network namespaces, tests/e2e/lib.sh) for a minute or
#    more: sampled every second, the open file descriptors must not grow after a warm-up and
#    the resident memory not by more than 5%, and every request scheduled must be made.
#
# Usage: tests/soak/soak.sh [--short|--long] [TCPDOCTOR]
#   --short (CI): 2 GiB streamed; 1 GiB streamed and compared with 4 files; load for 60 s.
#   --long (default, by hand): 20 GiB streamed; the comparison with files on as much as half
#          the free space under $SOAK_TMP allows (up to 20 GiB, 16 files); load for 600 s.
#   Sizes and times can be set: SOAK_STREAM (e.g. 40G), SOAK_FILES_SIZE, SOAK_FILES,
#   SOAK_LOAD_SECS, SOAK_LOAD_RATE (requests/s), SOAK_RSS_MB (the limit, 64), SOAK_TMP.
# Figures go to standard output. Needs root (namespaces), nginx, python3, /usr/bin/time, and
# a release build (the generator is built with `cargo build --release`).
set -euo pipefail
mode=long
case "${1:-}" in --short|--long) mode=${1#--}; shift ;; esac
TD=$(readlink -f "${1:-${TCPDOCTOR:-target/release/tcpdoctor}}")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/tests/e2e
P=tdsoak$$
. "$HERE/lib.sh"
fail() { echo "soak FAIL: $*" >&2; exit 1; }
# The EXIT trap (lib.sh: stop what was started, remove namespaces and files) also on signals.
trap 'exit 130' INT
trap 'exit 143' TERM HUP

if [ "$mode" = short ]; then
  stream=${SOAK_STREAM:-2G} files=${SOAK_FILES:-4} secs=${SOAK_LOAD_SECS:-60}
else
  stream=${SOAK_STREAM:-20G} files=${SOAK_FILES:-16} secs=${SOAK_LOAD_SECS:-600}
fi
rate=${SOAK_LOAD_RATE:-2000}
rss_limit_mb=${SOAK_RSS_MB:-64}
tmp=${SOAK_TMP:-/tmp}

(cd "$ROOT" && cargo build -q --release --locked -p tcpdoctor-capture --example soak)
GEN=${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/soak
[ -x "$GEN" ] || fail "no generator at $GEN"

e2e_netns "$P" 10.83.0
FILES=$(mktemp -d "$tmp/tcpdoctor-$P-files.XXXXXX")
PREV_CLEANUP=$(declare -f e2e_cleanup)
eval "${PREV_CLEANUP/e2e_cleanup/e2e_cleanup_netns}"
e2e_cleanup() { rm -rf "$FILES"; e2e_cleanup_netns; }

bytes() { python3 -c 'import sys; s=sys.argv[1]; m={"K":1<<10,"M":1<<20,"G":1<<30}.get(s[-1:].upper()); print(int(s[:-1])*m if m else int(s))' "$1"; }

# stream NAME SIZE: generator | analyze -, never stored.
stream() {
  local name=$1 size=$2 t0 t1
  t0=$(date +%s.%N)
  "$GEN" "$size" 2> "$WORK/$name.gen" \
    | /usr/bin/time -v -o "$WORK/$name.time" "$TD" analyze --format json - > "$WORK/$name.json" \
    || { cat "$WORK/$name.gen" "$WORK/$name.time" >&2; fail "$name: generator or analyze failed"; }
  t1=$(date +%s.%N)
  echo "$t0 $t1" > "$WORK/$name.wall"
}

# files NAME SIZE N: the same traffic cut into N files, analysed as a directory.
files() {
  local name=$1 size=$2 n=$3 t0 t1
  rm -rf "${FILES:?}"/*
  "$GEN" "$size" --split "$n" "$FILES" 2> "$WORK/$name.gen" || fail "$name: generator failed"
  t0=$(date +%s.%N)
  /usr/bin/time -v -o "$WORK/$name.time" "$TD" analyze --format json "$FILES" > "$WORK/$name.json" \
    || { cat "$WORK/$name.time" >&2; fail "$name: analyze DIR failed"; }
  t1=$(date +%s.%N)
  echo "$t0 $t1" > "$WORK/$name.wall"
  echo "soak: $name: $(ls "$FILES" | wc -l) files, $(du -sh "$FILES" | cut -f1)"
  rm -rf "${FILES:?}"/*
}

# check NAME: what was written was read, what was injected was found, memory bounded.
check() {
  python3 - "$WORK" "$1" "$rss_limit_mb" <<'PY'
import json, re, sys
work, name, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
gen = open(f"{work}/{name}.gen").read()
m = re.search(r"soak: bytes (\d+) packets (\d+) connections (\d+) nagle (\d+) loss (\d+) zero_window (\d+)", gen)
assert m, gen
nbytes, packets, conns, nagle, loss, zw = map(int, m.groups())
rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f"{work}/{name}.time").read()).group(1))
t0, t1 = map(float, open(f"{work}/{name}.wall").read().split())
r = json.load(open(f"{work}/{name}.json"))
c = r["capture"]
found = {}
for f in r["findings"] + r["minor_findings"]:
    found[f["kind"]] = found.get(f["kind"], 0) + f["connections"]
secs = t1 - t0
print(f"soak: {name}: {nbytes / 2**30:.2f} GiB, {packets} packets, {conns} connections in {secs:.1f} s "
      f"({nbytes / 2**20 / secs:.0f} MiB/s), max RSS {rss_kb / 1024:.1f} MB; "
      f"injected nagle {nagle}, loss {loss}, zero window {zw}; found {found}")
ok = True
def want(cond, what):
    global ok
    if not cond:
        print(f"soak FAIL: {name}: {what}", file=sys.stderr)
        ok = False
want(c["packets"] == packets, f"read {c['packets']} packets of {packets} written")
want(c["connections"] == conns, f"{c['connections']} connections of {conns}")
want(found.get("nagle_delayed_ack") == nagle, f"Nagle x delayed ACK on {found.get('nagle_delayed_ack')} connections, {nagle} injected")
want(found.get("zero_window") == zw, f"zero window on {found.get('zero_window')} connections, {zw} injected")
want(found.get("retransmission_timeout") == loss, f"timer retransmissions on {found.get('retransmission_timeout')} connections, {loss} injected")
want(found.get("packet_loss") == loss, f"fast retransmits on {found.get('packet_loss')} connections, {loss} injected")
want(set(found) <= {"nagle_delayed_ack", "zero_window", "retransmission_timeout", "packet_loss"}, f"findings not injected: {found}")
want(rss_kb <= limit * 1024, f"max RSS {rss_kb / 1024:.1f} MB > {limit} MB")
sys.exit(0 if ok else 1)
PY
}

# same A B: the two reports agree on everything but the input they name.
same() {
  python3 - "$WORK/$1.json" "$WORK/$2.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for r in (a, b):
    r.pop("input")
    r.pop("inputs", None)  # the files: only a directory has them
diff = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
for k in diff:
    print(f"soak FAIL: stream and files differ in {k!r}:\n  {json.dumps(a.get(k))[:400]}\n  {json.dumps(b.get(k))[:400]}", file=sys.stderr)
print(f"soak: stream and files: {'the same report' if not diff else 'DIFFERENT'} "
      f"({a['capture']['packets']} packets, {len(a['findings'])} findings, {len(a['connections'])} connections listed)")
sys.exit(1 if diff else 0)
PY
}

status=0
echo "== soak: analyze - on $stream generated on the fly ($mode)"
stream stream "$stream"
check stream || status=1
if [ "$mode" = short ]; then
  fsize=${SOAK_FILES_SIZE:-1G}
else
  # As much as half the free space allows, at most the streamed size.
  free=$(df -P -k "$tmp" | awk 'NR==2 {print $4}')
  cap=$(( free / 2 / 1048576 ))
  want=$(( $(bytes "$stream") / 1073741824 ))
  fsize=${SOAK_FILES_SIZE:-$(( cap < want ? cap : want ))G}
fi
[ "$(bytes "$fsize")" -gt 0 ] || fail "no room under $tmp for the files"
if [ "$(bytes "$fsize")" -ne "$(bytes "$stream")" ]; then
  stream stream-same "$fsize"
  check stream-same || status=1
  ref=stream-same
else
  ref=stream
fi
files files "$fsize" "$files"
check files || status=1
same "$ref" files || status=1

echo "== soak: load --rate $rate against nginx for $secs s"
SA=$SERVER_IP
head -c 2048 /dev/zero | tr '\0' 'x' > "$WORK/html/index.html"
e2e_nginx "  server { listen $SA:8080; tcp_nodelay on; root $WORK/html; }"
e2e_wait_port 8080
ip netns exec "$C" "$TD" load --format json -c 20 -t 2 -d "${secs}s" --rate "$rate" "http://$SA:8080/" \
  > "$WORK/load.json" 2> "$WORK/load.err" &
LOAD=$!
PIDS+=("$LOAD")
# `ip netns exec` execs the command: the PID is tcpdoctor's own.
for _ in $(seq 50); do
  [ "$(cat /proc/$LOAD/comm 2>/dev/null)" = tcpdoctor ] && break
  sleep 0.1
done
[ "$(cat /proc/$LOAD/comm 2>/dev/null)" = tcpdoctor ] || fail "load did not start"
: > "$WORK/samples"
while kill -0 "$LOAD" 2>/dev/null && [ "$(cat /proc/$LOAD/comm 2>/dev/null)" = tcpdoctor ]; do
  fds=$(ls /proc/$LOAD/fd 2>/dev/null | wc -l)
  rss=$(awk '/^VmRSS:/ {print $2}' /proc/$LOAD/status 2>/dev/null || true)
  [ -n "$rss" ] && echo "$(date +%s.%N) $fds $rss" >> "$WORK/samples"
  sleep 1
done
rc=0; wait "$LOAD" || rc=$?
[ "$rc" -eq 0 ] || { cat "$WORK/load.err" >&2; fail "load: exit status $rc"; }
python3 - "$WORK" "$secs" "$rate" <<'PY' || status=1
import json, sys
work, secs, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [l.split() for l in open(f"{work}/samples") if l.strip()]
t = [float(r[0]) for r in rows]; fds = [int(r[1]) for r in rows]; rss = [int(r[2]) for r in rows]
# Warm-up: the first sixth of the run (10 s of a minute).
warm = max(3, len(rows) // 6)
ok = len(rows) >= secs * 0.8
base_fd, base_rss = max(fds[:warm]), max(rss[warm - 3:warm])
after_fd, after_rss = fds[warm:], rss[warm:]
growth = max(after_rss) / base_rss - 1 if after_rss else 0
r = json.load(open(f"{work}/load.json"))
e = r["errors"]
print(f"soak: load: {r['requests']} requests in {secs} s at --rate {rate} ({r['requests_per_sec']:.0f}/s), "
      f"p50 {r['latency_ms']['p50']:.2f} ms, p99 {r['latency_ms']['p99']:.2f} ms, errors {e['total']}, "
      f"late sends {r['rate']['late_sends']}")
print(f"soak: load: {len(rows)} samples; open fds {fds[0]} at start, {base_fd} after warm-up, "
      f"{min(after_fd, default=0)}..{max(after_fd, default=0)} after, {fds[-1]} at the end; "
      f"RSS {rss[0] / 1024:.1f} MB at start, {base_rss / 1024:.1f} MB after warm-up, "
      f"{max(after_rss, default=0) / 1024:.1f} MB at most after ({growth * 100:+.1f}%), {rss[-1] / 1024:.1f} MB at the end")
def want(cond, what):
    global ok
    if not cond:
        print(f"soak FAIL: load: {what}", file=sys.stderr)
        ok = False
want(len(rows) >= secs * 0.8, f"only {len(rows)} samples in {secs} s")
want(max(after_fd, default=0) <= base_fd, f"open file descriptors grew from {base_fd} to {max(after_fd)}")
want(growth <= 0.05, f"RSS grew {growth * 100:.1f}% after warm-up")
want(e["total"] == 0, f"errors {e}")
want(abs(r["requests"] - rate * secs) <= 0.05 * rate * secs, f"{r['requests']} requests, {rate * secs} scheduled")
sys.exit(0 if ok else 1)
PY
[ "$status" -eq 0 ] || fail "see above"
echo "soak ($mode): all checks passed"

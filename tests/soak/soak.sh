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
# 3. `watch` (in the server namespace) and `top --port 80` (tracepoints, every namespace) on
#    the same run of wrk against nginx, as fast as the machine serves it (wrk -c 50, no rate):
#    each sampled every second, the resident memory must not grow by more than 5% after the
#    first 20% of the run. watch: no finding the traffic does not explain (nginx on :80 has
#    tcp_nodelay on: never nagle_delayed_ack; loss findings only with kernel drops or with
#    segments the kernel retransmitted, and so queueing_delay on the path: at the machine's
#    top rate the veth path's backlog queue fills until it drops, and the kernel's re-sent
#    segments are that queue overflowing; server_delay is a saturated server's own), a Nagle-prone
#    peer (nginx :8080, tcp_nodelay off, wrk -c 2 from 40% to 60% of the run) named within
#    10 s of its start and never before, its kernel drops printed, and once wrk has stopped
#    (FIN, then RST) no connection counted open. top: an interval a second, the nginx worker
#    in its report, its lost samples printed, Nagle never named (tcp_nodelay on).
# Every part's samples (seconds, rss_kb, fds) go to a CSV in $SOAK_OUT (load.csv, watch.csv,
# top.csv), drawn by tests/soak/plot.py into $SOAK_OUT/rss.png (matplotlib: python3-matplotlib).
#
# Usage: tests/soak/soak.sh [--short|--long] [TCPDOCTOR]
#   --short (CI): 2 GiB streamed; 1 GiB streamed and compared with 4 files; load for 60 s;
#          watch for 120 s with top for its last 60 s; figures in a new directory under /tmp.
#   --long (default, by hand): 20 GiB streamed; the comparison with files on as much as half
#          the free space under $SOAK_TMP allows (up to 20 GiB, 16 files); load for 600 s;
#          watch and top for 600 s; figures in bench/results/soak/.
#   Sizes and times can be set: SOAK_STREAM (e.g. 40G), SOAK_FILES_SIZE, SOAK_FILES,
#   SOAK_LOAD_SECS, SOAK_LOAD_RATE (requests/s), SOAK_RSS_MB (the limit, 64), SOAK_TMP,
#   SOAK_WATCH_SECS, SOAK_TOP_SECS (at most SOAK_WATCH_SECS), SOAK_WRK_CONNS (50), SOAK_OUT,
#   SOAK_PARTS (any of stream, load, watch, top; default all of them, comma-separated).
# Figures go to standard output. Needs root (namespaces, tracepoints), nginx, wrk, python3,
# /usr/bin/time, and a release build (the generator is built with `cargo build --release`).
set -euo pipefail
mode=long
case "${1:-}" in --short|--long) mode=${1#--}; shift ;; esac
TD=$(readlink -f "${1:-${TCPDOCTOR:-target/release/tcpdoctor}}")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/tests/e2e
P=tdsoak$$
# shellcheck source=tests/e2e/lib.sh
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
if [ "$mode" = short ]; then
  watch_secs=${SOAK_WATCH_SECS:-120} top_secs=${SOAK_TOP_SECS:-60}
  OUT=${SOAK_OUT:-$(mktemp -d /tmp/tcpdoctor-soak-out.XXXXXX)}
else
  watch_secs=${SOAK_WATCH_SECS:-600} top_secs=${SOAK_TOP_SECS:-600}
  OUT=${SOAK_OUT:-$ROOT/bench/results/soak}
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
parts=,${SOAK_PARTS:-stream,load,watch,top},
part() { [[ $parts == *",$1,"* ]]; }
for name in load watch top; do
  if part "$name"; then rm -f "$OUT/$name.csv" "$OUT/$name-findings.json" "$OUT/$name-report.json"; fi
done
[ "$top_secs" -le "$watch_secs" ] || fail "SOAK_TOP_SECS ($top_secs) > SOAK_WATCH_SECS ($watch_secs)"
[ "$watch_secs" -ge 30 ] || fail "SOAK_WATCH_SECS ($watch_secs) < 30"
wrk_conns=${SOAK_WRK_CONNS:-50}
rate=${SOAK_LOAD_RATE:-2000}
rss_limit_mb=${SOAK_RSS_MB:-64}
tmp=${SOAK_TMP:-/tmp}

if part stream; then
  (cd "$ROOT" && cargo build -q --release --locked -p tcpdoctor-capture --example soak)
  GEN=${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/soak
  [ -x "$GEN" ] || fail "no generator at $GEN"
fi

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
  echo "soak: $name: $(find "$FILES" -mindepth 1 -maxdepth 1 | wc -l) files, $(du -sh "$FILES" | cut -f1)"
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
if part stream; then
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
    ref="stream-same"
  else
    ref=stream
  fi
  files files "$fsize" "$files"
  check files || status=1
  same "$ref" files || status=1
fi

# nginx for the load and live parts: :8080 (load) and :80 (watch, top) with tcp_nodelay on,
# :8081 with tcp_nodelay off and a small page (the Nagle-prone peer of the watch).
SA=$SERVER_IP
mkdir -p "$WORK/small"
chmod 755 "$WORK/small"
head -c 2048 /dev/zero | tr '\0' 'x' > "$WORK/html/index.html"
python3 -c 'import sys; open(sys.argv[1], "w").write("<p>" + "tcpdoctor soak page. " * 25 + "</p>\n")' \
  "$WORK/small/index.html"
e2e_nginx "  server { listen $SA:8080; tcp_nodelay on; root $WORK/html; }
  server { listen $SA:80; tcp_nodelay on; root $WORK/html; }
  server { listen $SA:8081; tcp_nodelay off; root $WORK/small; }"
e2e_wait_port 8080 80 8081
NGINX=${PIDS[-1]}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# sample PID CSV T0: one row (seconds since T0, VmRSS in kB, open fds) if PID is alive.
sample() {
  local rss fds
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || true)
  [ -n "$rss" ] || return 0
  fds=$(find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  echo "$(since "$3"),$rss,$fds" >> "$2"
}
# is_td PID: PID is tcpdoctor (`ip netns exec` execs it: the PID becomes tcpdoctor's own).
is_td() { [ "$(cat "/proc/$1/comm" 2>/dev/null)" = tcpdoctor ]; }
# wait_for SECONDS COMMAND...: until COMMAND succeeds, at most SECONDS.
wait_for() {
  local end
  end=$(awk -v n="$1" -v t="$(now)" 'BEGIN { printf "%.2f", t + n }'); shift
  until "$@"; do
    awk -v e="$end" -v t="$(now)" 'BEGIN { exit !(t > e) }' && return 1
    sleep 0.1
  done
}
# pace T0 N: sleep until N whole seconds after T0 (the sampling clock, not a synchronisation).
pace() {
  local d
  d=$(awk -v a="$1" -v n="$2" -v t="$(now)" 'BEGIN { d = a + n - t; printf "%.3f", (d > 0 ? d : 0) }')
  sleep "$d"
}

if part load; then
  echo "== soak: load --rate $rate against nginx for $secs s"
  ip netns exec "$C" "$TD" load --format json -c 20 -t 2 -d "${secs}s" --rate "$rate" "http://$SA:8080/" \
    > "$WORK/load.json" 2> "$WORK/load.err" &
  LOAD=$!
  PIDS+=("$LOAD")
  wait_for 5 is_td "$LOAD" || fail "load did not start"
  echo "seconds,rss_kb,fds" > "$OUT/load.csv"
  T0=$(now) n=0
  while kill -0 "$LOAD" 2>/dev/null && is_td "$LOAD"; do
    sample "$LOAD" "$OUT/load.csv" "$T0"
    n=$((n + 1)); pace "$T0" "$n"
  done
  rc=0; wait "$LOAD" || rc=$?
  [ "$rc" -eq 0 ] || { cat "$WORK/load.err" >&2; fail "load: exit status $rc"; }
  python3 - "$WORK" "$OUT/load.csv" "$secs" "$rate" <<'PY' || status=1
import json, sys
work, csv, secs, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = [l.split(",") for l in open(csv).read().splitlines()[1:] if l.strip()]
rss = [int(r[1]) for r in rows]; fds = [int(r[2]) for r in rows]
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
fi

# retrans NS: segments the kernel of namespace NS retransmitted (its counters start at 0).
retrans() {
  # shellcheck disable=SC2016 # awk's own fields
  ip netns exec "$1" awk '/^Tcp:/ { if (!h) { for (i = 2; i <= NF; i++) if ($i == "RetransSegs") c = i; h = 1 }
    else { print $c; exit } }' /proc/net/snmp
}

if part watch || part top; then
  D=$watch_secs
  part watch || D=$top_secs
  wrk_end=$((D - 8))                      # wrk stops 8 s before the end: connections must close
  top_at=$((D - top_secs))                # top runs the end of the load (all of it when as long)
  nagle_at=$((D * 2 / 5)) nagle_secs=$((D / 5))
  what=""
  part watch && what="watch for $D s"
  if part top && [ "$top_secs" -lt "$D" ]; then what="${what:+$what, }top for the last $top_secs s"
  elif part top; then what="${what:+$what, }top beside it"; fi
  echo "== soak: $what on nginx under wrk -c $wrk_conns (as fast as it goes, ${wrk_end} s)"
  if part watch; then echo "seconds,rss_kb,fds" > "$OUT/watch.csv.new"; fi
  if part top; then echo "seconds,rss_kb,fds" > "$OUT/top.csv.new"; fi
  WATCH="" TOP=""
  T0=$(now)
  if part watch; then
    ip netns exec "$S" "$TD" watch -i eth0 --filter "tcp port 80 or tcp port 8081" --duration "${D}s" \
      --format json > "$WORK/watch.jsonl" 2> "$WORK/watch.err" &
    WATCH=$!
    PIDS+=("$WATCH")
    wait_for 5 grep -q watching "$WORK/watch.err" || fail "watch did not start: $(cat "$WORK/watch.err")"
    # watch counts its seconds from its own start, at most this long after T0.
    since "$T0" > "$WORK/watch.start"
  fi
  ip netns exec "$C" wrk -c "$wrk_conns" -t 2 -d "${wrk_end}s" "http://$SA:80/" > "$WORK/wrk.txt" &
  WRK=$!
  PIDS+=("$WRK")
  NAGLE=""
  n=0
  while [ "$n" -le "$((D + 2))" ]; do
    if [ "$n" = "$top_at" ] && part top; then
      "$TD" top --port 80 --duration "${top_secs}s" --format json > "$WORK/top.jsonl" 2> "$WORK/top.err" &
      TOP=$!
      PIDS+=("$TOP")
      wait_for 5 grep -q tracing "$WORK/top.err" || fail "top did not start: $(cat "$WORK/top.err")"
      since "$T0" > "$WORK/top.start"
    fi
    if [ "$n" = "$nagle_at" ] && part watch; then
      since "$T0" > "$WORK/nagle.start"
      ip netns exec "$C" wrk -c 2 -t 1 -d "${nagle_secs}s" "http://$SA:8081/" > "$WORK/wrk-nagle.txt" &
      NAGLE=$!
      PIDS+=("$NAGLE")
    fi
    [ -n "$WATCH" ] && sample "$WATCH" "$OUT/watch.csv.new" "$T0"
    [ -n "$TOP" ] && sample "$TOP" "$OUT/top.csv.new" "$T0"
    # Done when both have ended (top may not have started yet).
    if { [ -z "$WATCH" ] || ! kill -0 "$WATCH" 2>/dev/null; } && [ "$n" -gt "$top_at" ] \
      && { [ -z "$TOP" ] || ! kill -0 "$TOP" 2>/dev/null; }; then
      break
    fi
    n=$((n + 1)); pace "$T0" "$n"
  done
  ended() { ! kill -0 "$1" 2>/dev/null; }
  for pid in $WATCH $TOP; do
    wait_for 30 ended "$pid" || fail "$(cat "/proc/$pid/comm") $pid still runs 30 s after its --duration"
  done
  wait "$WRK" || fail "wrk failed: $(cat "$WORK/wrk.txt")"
  [ -z "$NAGLE" ] || wait "$NAGLE" || fail "wrk on :8081 failed: $(cat "$WORK/wrk-nagle.txt")"
  rtx_s=$(retrans "$S") rtx_c=$(retrans "$C")
  reqs=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt")
  echo "soak: wrk -c $wrk_conns on :80: $reqs req/s over ${wrk_end} s" \
    "($(grep -m1 'requests in' "$WORK/wrk.txt" | sed 's/^ *//')); retransmitted segments:" \
    "server $rtx_s, client $rtx_c"
fi

# rss_check NAME CSV START_S: from the samples taken after START_S, the first 20% are the
# warm-up; after it, the resident memory must not exceed the warm-up's last by more than 5%.
rss_check() {
  python3 - "$1" "$2" "$3" <<'PY'
import sys
name, csv, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
rows = [tuple(map(float, l.split(","))) for l in open(csv).read().splitlines()[1:] if l.strip()]
rows = [r for r in rows if r[0] >= start]
rss = [int(r[1]) for r in rows]; fds = [int(r[2]) for r in rows]
warm = max(3, len(rows) // 5)
if len(rows) < warm + 3:
    print(f"soak FAIL: {name}: {len(rows)} samples", file=sys.stderr); sys.exit(1)
base = max(rss[warm - 3:warm]); after = rss[warm:]
growth = max(after) / base - 1
print(f"soak: {name}: {len(rows)} samples; RSS {rss[0] / 1024:.1f} MB at start, {base / 1024:.1f} MB after "
      f"warm-up ({rows[warm - 1][0] - start:.0f} s), {max(after) / 1024:.1f} MB at most after ({growth * 100:+.1f}%), "
      f"{rss[-1] / 1024:.1f} MB at the end (end/warm-up {rss[-1] / base:.3f}); open fds {min(fds)}..{max(fds)}")
if growth > 0.05:
    print(f"soak FAIL: {name}: RSS grew {growth * 100:.1f}% after warm-up", file=sys.stderr); sys.exit(1)
PY
}

if part watch; then
  rc=0; wait "$WATCH" || rc=$?
  [ "$rc" -eq 0 ] || { cat "$WORK/watch.err" >&2; fail "watch: exit status $rc"; }
  mv "$OUT/watch.csv.new" "$OUT/watch.csv"
  rss_check watch "$OUT/watch.csv" 0 || status=1
  python3 - "$WORK/watch.jsonl" "$SA" "$(cat "$WORK/nagle.start")" "$D" "$wrk_conns" "$rtx_s" "$rtx_c" \
    "$OUT/watch-findings.json" "$(cat "$WORK/watch.start")" <<'PY' || status=1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
sa, nagle_at, secs, conns, rtx_s, rtx_c = sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
intervals, report = lines[:-1], lines[-1]
ok = True
def want(cond, what):
    global ok
    if not cond:
        print(f"soak FAIL: watch: {what}", file=sys.stderr)
        ok = False
want(report.get("schema") == 1 and "capture" in report, "the last line is not the report")
drops = intervals[-1]["kernel_drops_total"] if intervals else 0
packets = sum(iv["packets"] for iv in intervals)
exchanges = sum(iv["exchanges"] for iv in intervals)
opens = [iv["open_connections"] for iv in intervals]
nagle = (sa + ":8081", "server")
lossy = drops > 0 or rtx_s + rtx_c > 0
# A path that dropped packets had a queue on it that filled: the waits in it before it
# overflowed are queueing_delay, on the path (the network's role), never an endpoint's.
explained = {"server_delay"} | ({"packet_loss", "retransmission_timeout", "queueing_delay"} if lossy else set())
first_nagle, wrong = None, []
for iv in intervals:
    for f in iv["findings"] + iv["minor_findings"]:
        c = (f["culprit"]["endpoint"], f["culprit"]["role"])
        if f["kind"] == "nagle_delayed_ack" and c == nagle:
            if first_nagle is None:
                first_nagle = iv["t_s"]
        elif f["kind"] not in explained or not c[0].startswith(sa + ":") \
                or (f["kind"] == "queueing_delay" and c[1] != "network"):
            wrong.append((iv["t_s"], f["kind"], c, f))
final = {(f["kind"], f["culprit"]["endpoint"], f["culprit"]["role"]) for f in report["findings"] + report["minor_findings"]}
print(f"soak: watch: {len(intervals)} intervals, {packets} packets ({packets / max(1, len(intervals)):.0f}/s), "
      f"{exchanges} exchanges, kernel drops {drops}; open connections at most {max(opens, default=0)}, "
      f"{opens[-1] if opens else None} at the end; Nagle peer from {nagle_at:.0f} s, named at "
      f"{first_nagle if first_nagle is None else f'{first_nagle:.0f} s'}; final findings {sorted(final)}")
want(len(intervals) >= secs * 0.9, f"{len(intervals)} intervals in {secs} s")
want(all(iv["kernel_drops_total"] >= iv["kernel_drops"] for iv in intervals), "drop totals below an interval's drops")
want(not wrong, f"findings the traffic does not explain (first of {len(wrong)}): {[w[:3] for w in wrong[:5]]}")
# Kept for whoever looks into a failure: the report's findings, the first unexplained ones.
with open(sys.argv[8], "w") as out:
    json.dump({"capture": {k: v for k, v in report.get("capture", {}).items() if k != "latency_budget"},
               "findings": report.get("findings"), "minor_findings": report.get("minor_findings"),
               "kernel_retransmitted_segments": {"server": rtx_s, "client": rtx_c},
               "first_unexplained": [{"t_s": w[0], "finding": w[3]} for w in wrong[:3]]}, out, indent=1)
want(first_nagle is not None, "the Nagle-prone peer on :8081 was never named")
if first_nagle is not None:
    # An interval's t_s is watch's clock, which started up to `lag` after the script's: the
    # interval ending at t_s ends at t_s + lag at most on the clock nagle_at was read from.
    lag = float(sys.argv[9])
    want(first_nagle + lag >= nagle_at, f"Nagle named at {first_nagle:.1f} s (+{lag:.2f} s), before its peer started ({nagle_at:.1f} s)")
    want(first_nagle <= nagle_at + 10, f"Nagle named at {first_nagle:.1f} s, {first_nagle - nagle_at:.1f} s after its peer started")
want(("nagle_delayed_ack", sa + ":8081", "server") in final, f"the report does not name Nagle on :8081: {sorted(final)}")
want(not any(k == "nagle_delayed_ack" and e != sa + ":8081" for k, e, _ in final), f"Nagle named elsewhere: {sorted(final)}")
want(max(opens, default=0) >= conns, f"at most {max(opens, default=0)} open connections, wrk had {conns}")
want(opens and opens[-1] == 0, f"{opens[-1] if opens else None} connections still open after wrk stopped: {opens[-10:]}")
sys.exit(0 if ok else 1)
PY
fi

if part top; then
  rc=0; wait "$TOP" || rc=$?
  [ "$rc" -eq 0 ] || { cat "$WORK/top.err" >&2; fail "top: exit status $rc"; }
  mv "$OUT/top.csv.new" "$OUT/top.csv"
  rss_check top "$OUT/top.csv" "$(cat "$WORK/top.start")" || status=1
  worker=$(cat "/proc/$NGINX/task/"*/children 2>/dev/null | tr ' ' '\n' | grep -m1 . || true)
  python3 - "$WORK/top.jsonl" "$top_secs" "${worker:-0}" "$OUT/top-report.json" <<'PY' || status=1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
secs, worker = int(sys.argv[2]), int(sys.argv[3])
intervals = [l for l in lines if l.get("type") == "interval"]
report = lines[-1]
ok = True
def want(cond, what):
    global ok
    if not cond:
        print(f"soak FAIL: top: {what}", file=sys.stderr)
        ok = False
want(report.get("schema") == 1 and report.get("command") == "top", "the last line is not top's report")
tr = report.get("trace", {})
# An interval's "events" is the running total so far: the report's is the run's.
events = tr.get("events", max((iv.get("events", 0) for iv in intervals), default=0))
lost = sum(iv.get("lost", 0) for iv in intervals)
opens = [iv.get("open_connections") for iv in intervals]
procs = {p["pid"]: p["command"] for p in report.get("processes", [])}
print(f"soak: top: {len(intervals)} intervals, {events} events ({events / max(1, len(intervals)):.0f}/s), "
      f"lost samples {lost} in the intervals, {tr.get('lost')} in the report; open connections at most "
      f"{max((o for o in opens if o is not None), default=None)}, {opens[-1] if opens else None} at the end; "
      f"{len(report.get('connections', []))} connections, processes {sorted(set(procs.values()))}; "
      f"findings {sorted({f['kind'] for f in report.get('findings', [])})}")
want(len(intervals) >= secs * 0.9, f"{len(intervals)} intervals in {secs} s")
want(events > 0, "no event traced")
want(tr.get("lost") is not None and tr["lost"] >= lost, f"the report counts {tr.get('lost')} lost samples, the intervals {lost}")
want(procs.get(worker) == "nginx", f"the nginx worker {worker} is not among the processes: {procs}")
# nginx on :80 has tcp_nodelay on: nothing it writes is held for an ACK.
held = [(iv.get("elapsed_s"), f["culprit"]) for iv in intervals for f in iv.get("findings", [])] + \
    [("report", f["culprit"]) for f in report.get("findings", []) if f["kind"] == "nagle_delayed_ack"]
want(not held, f"Nagle named on a tcp_nodelay socket: {held[:3]}")
# Kept for whoever looks into a failure: the report without its connections, its findings
# counted by kind with the first three of each.
kinds = {}
for f in report.get("findings", []):
    kinds.setdefault(f["kind"], []).append(f)
with open(sys.argv[4], "w") as out:
    json.dump({**{k: v for k, v in report.items() if k not in ("connections", "findings")},
               "connections_count": len(report.get("connections", [])),
               "findings_by_kind": {k: {"count": len(v), "first": v[:3]} for k, v in kinds.items()}}, out, indent=1)
sys.exit(0 if ok else 1)
PY
fi

csvs=()
for name in load watch top; do
  if part "$name" && [ -s "$OUT/$name.csv" ]; then csvs+=("$OUT/$name.csv"); fi
done
if [ ${#csvs[@]} -gt 0 ]; then
  plotter=""
  for py in python3 /usr/bin/python3; do
    if "$py" -c 'import matplotlib' 2>/dev/null; then plotter=$py; break; fi
  done
  if [ -n "$plotter" ]; then
    "$plotter" "$ROOT/tests/soak/plot.py" "$OUT/rss.png" "${csvs[@]}" || status=1
  else
    echo "soak: no plot: matplotlib is missing (apt-get install python3-matplotlib)" >&2
  fi
  echo "soak: samples in $OUT"
fi
[ "$status" -eq 0 ] || fail "see above"
echo "soak ($mode): all checks passed"

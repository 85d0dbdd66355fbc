#!/usr/bin/env bash
# End to end: faults injected into live commands. Each must give a clear message, a partial
# report where one makes sense, the documented exit status, and lose nothing already written.
#   sigpipe     standard output closed early (`| head`, and a pipe whose reader is already
#               gone): analyze (text, JSON), sockets, man, completions exit 0, stderr empty
#   full disk   --annotate, --html, --parquet into a 64 KiB tmpfs: exit 2, the message names
#               the file and says "No space left on device", no file (complete-looking or
#               temporary) is left; the text report is still printed. `watch --write` onto a
#               full disk goes on without the file, gives its report and exits 2
#   signals     `analyze -` from a FIFO whose writer idles (SIGTERM: 143) and from a producer
#               that keeps writing (SIGINT: 130): a partial report marked as such (JSON
#               `interrupted`, a warning); `watch` on a veth with curl against
#               python3 -m http.server stopped by SIGTERM and by SIGINT: exit 0, the final
#               report, a --write pcap that capinfos reads with every frame the report counts
#   link down   the watched veth set down, then deleted: exit 3 within 5 s, a message, the report
#   rotation    tcpdump -C 1 files analysed as a directory count every packet capinfos counts;
#               the last one cut mid-record (still being written) is a truncation warning, exit 0
# Needs root, tcpdump, capinfos, curl, python3. Usage: tests/e2e/faults.sh [TCPDOCTOR]
set -euo pipefail
TD=${1:-${TCPDOCTOR:-target/release/tcpdoctor}}
TD=$(readlink -f "$TD")
HERE=$(cd "$(dirname "$0")" && pwd)
EXAMPLE=$HERE/../../examples/nginx-nagle.pcap
P=tdflt$$
. "$HERE/lib.sh"
fail() { echo "e2e faults FAIL: $*" >&2; exit 1; }
STARTED=$SECONDS
FULL=

cleanup() {
  [ -n "$FULL" ] && mountpoint -q "$FULL" && umount "$FULL"
  e2e_cleanup
}

# wait_for SECONDS CONDITION...: polls the condition every 50 ms; false after the deadline.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.05
  done
}
running() { kill -0 "$1" 2>/dev/null; }
stopped() { ! running "$1"; }
# wrote_over PID BYTES: the process has written more than BYTES (its /proc io counter).
wrote_over() { [ "$(awk '/^wchar/ {print $2}' /proc/"$1"/io 2>/dev/null || echo 0)" -gt "$2" ]; }
# exit_of PID: waits for a background process (already stopped) and prints its status.
exit_of() { local rc=0; wait "$1" || rc=$?; echo "$rc"; }
json_get() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
packets() { capinfos -c -M "$1" | awk -F: '/Number of packets/ {gsub(/ /, "", $2); print $2}'; }

e2e_netns "$P" 10.86.0
trap cleanup EXIT
[ -f "$EXAMPLE" ] || fail "no $EXAMPLE"

# 1. A closed standard output.
closed_pipe() { python3 - "$@" <<'PY'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)  # the reader is gone before the first write: every write is EPIPE
p = subprocess.run(sys.argv[1:], stdout=w, stderr=subprocess.PIPE, timeout=30)
print(p.returncode, len(p.stderr), p.stderr.decode(errors="replace")[:200].replace("\n", " | "))
PY
}
for cmd in "analyze $EXAMPLE" "analyze --format json $EXAMPLE" "sockets" "man" "completions bash"; do
  # shellcheck disable=SC2086
  set -- $cmd
  read -r rc errlen err < <(closed_pipe "$TD" "$@")
  [ "$rc" = 0 ] && [ "$errlen" = 0 ] || fail "$cmd into a closed pipe: exit $rc, stderr: $err"
  "$TD" "$@" 2> "$WORK/pipe.err" | head -1 > /dev/null
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] && [ ! -s "$WORK/pipe.err" ] || fail "$cmd | head -1: exit $rc, stderr: $(head -3 "$WORK/pipe.err")"
done
"$TD" analyze --format json "$EXAMPLE" 2> "$WORK/pipe.err" | head -c 10 > /dev/null
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] && [ ! -s "$WORK/pipe.err" ] || fail "analyze --format json | head -c 10: exit $rc"
echo "e2e faults: a closed standard output (analyze text/JSON, sockets, man, completions): exit 0, stderr empty"

# 2. A full disk under the output files.
FULL=$WORK/full
mkdir -p "$FULL"
mount -t tmpfs -o size=64k tdflt-full "$FULL"
no_leftovers() { # no file but the filler: neither the output nor a temporary one
  local left
  left=$(find "$FULL" -type f ! -path "$FULL/fill")
  [ -z "$left" ] || fail "$1: left behind on the full disk: $left"
}
full_disk() { # WHAT FILL_KB ARGS...: exit 2, the file named, nothing left
  local what=$1 fill=$2 rc=0; shift 2
  rm -rf "${FULL:?}"/*
  [ "$fill" = 0 ] || dd if=/dev/zero of="$FULL/fill" bs=1k count="$fill" status=none 2>/dev/null || true
  "$TD" analyze "$EXAMPLE" "$@" > "$WORK/full.out" 2> "$WORK/full.err" || rc=$?
  [ "$rc" = 2 ] || fail "$what on a full disk: exit $rc, not 2 ($(cat "$WORK/full.err"))"
  grep -q "No space left on device" "$WORK/full.err" || fail "$what: $(cat "$WORK/full.err")"
  grep -q "$FULL/" "$WORK/full.err" || fail "$what: the message names no file: $(cat "$WORK/full.err")"
  ! grep -q panicked "$WORK/full.err" || fail "$what: a panic"
  no_leftovers "$what"
  echo "e2e faults: $what on a full disk -> exit 2: $(head -1 "$WORK/full.err")"
}
full_disk "--annotate" 0 --annotate "$FULL/a.pcapng"
grep -q "^FINDINGS" "$WORK/full.out" || fail "--annotate on a full disk: the report was not printed"
full_disk "--html" 56 --html "$FULL/r.html"
grep -q "^FINDINGS" "$WORK/full.out" || fail "--html on a full disk: the report was not printed"
full_disk "--parquet" 60 --parquet "$FULL/pq"
rm -rf "${FULL:?}"/*
umount "$FULL"

# 3a. `analyze -` interrupted mid-stream.
mkfifo "$WORK/fifo"
( head -c 100000 "$EXAMPLE"; touch "$WORK/written"; sleep 30 ) > "$WORK/fifo" &
PRODUCER=$!; PIDS+=("$PRODUCER")
"$TD" analyze --format json - < "$WORK/fifo" > "$WORK/int.json" 2> "$WORK/int.err" &
A=$!; PIDS+=("$A")
wait_for 10 test -e "$WORK/written" || fail "the FIFO was not read"
running "$A" || fail "analyze - ended while its producer still held the FIFO open"
kill -TERM "$A"
wait_for 5 stopped "$A" || fail "analyze - did not end within 5 s of SIGTERM"
rc=$(exit_of "$A")
kill "$PRODUCER" 2>/dev/null || true
[ "$rc" = 143 ] || fail "analyze - after SIGTERM: exit $rc, not 143 ($(cat "$WORK/int.err"))"
python3 - "$WORK/int.json" <<'PY' || fail "analyze - after SIGTERM: the JSON is not a partial report"
import json, sys
d = json.load(open(sys.argv[1]))
i = d["interrupted"]
assert i["signal"] == "SIGTERM" and i["partial"] is True, i
assert 0 < d["capture"]["packets"] == i["packets_read"] < 922, (d["capture"]["packets"], i)
assert any("interrupted by SIGTERM" in w for w in d["capture"]["warnings"]), d["capture"]["warnings"]
print("e2e faults: analyze - (idle FIFO) SIGTERM -> exit 143, partial report of %d packets" % i["packets_read"])
PY

# A producer that never stops: the example's packets again and again, times moving on.
python3 - "$EXAMPLE" > "$WORK/stream.py" <<'PY'
import sys
print(r'''
import struct, sys, time
raw = open(sys.argv[1], "rb").read()
head, recs, off = raw[:24], [], 24
while off + 16 <= len(raw):
    sec, frac, cap, orig = struct.unpack("<IIII", raw[off:off + 16])
    recs.append((sec, frac, cap, orig, raw[off + 16:off + 16 + cap])); off += 16 + cap
span = recs[-1][0] - recs[0][0] + 1
out = sys.stdout.buffer
out.write(head)
lap = 0
while True:
    for sec, frac, cap, orig, data in recs:
        out.write(struct.pack("<IIII", sec + lap * span, frac, cap, orig) + data)
    out.flush()
    lap += 1
    time.sleep(0.05)
''')
PY
# Read through a FIFO (a pipe with a name, so that each side has its own process id).
python3 "$WORK/stream.py" "$EXAMPLE" > "$WORK/fifo" 2>/dev/null &
PRODUCER=$!; PIDS+=("$PRODUCER")
"$TD" analyze - < "$WORK/fifo" > "$WORK/int.txt" 2> "$WORK/int.err" &
A=$!; PIDS+=("$A")
wait_for 10 wrote_over "$PRODUCER" 1000000 || fail "the endless producer was not read"
running "$A" || fail "analyze - of an endless stream ended by itself: $(cat "$WORK/int.err")"
kill -INT "$A"
wait_for 5 stopped "$A" || fail "analyze - did not end within 5 s of SIGINT"
rc=$(exit_of "$A")
[ "$rc" = 130 ] || fail "analyze - after SIGINT: exit $rc, not 130 ($(cat "$WORK/int.err"))"
wait_for 5 stopped "$PRODUCER" || fail "the producer did not end (SIGPIPE) after analyze -"
grep -q "interrupted by SIGINT after [0-9]* packets: a partial report" "$WORK/int.txt" \
  || fail "analyze - after SIGINT: no partial-report warning: $(head -20 "$WORK/int.txt")"
grep -q "^FINDINGS" "$WORK/int.txt" || fail "analyze - after SIGINT: no report"
echo "e2e faults: analyze - (endless producer) SIGINT -> exit 130, $(grep -o 'interrupted by SIGINT after [0-9]* packets' "$WORK/int.txt")"

# 3b. watch stopped by SIGTERM and by SIGINT, with --write.
mkdir -p "$WORK/www"
python3 -c 'import sys; open(sys.argv[1], "w").write("faults " * 2000)' "$WORK/www/index.html"
ip netns exec "$S" python3 -m http.server 8000 --bind "$SERVER_IP" --directory "$WORK/www" \
  > /dev/null 2>&1 &
PIDS+=($!)
e2e_wait_port 8000
ip netns exec "$C" bash -c "while :; do curl -s -o /dev/null http://$SERVER_IP:8000/; sleep 0.05; done" &
CURL=$!; PIDS+=("$CURL")
has_packets() { grep -q '"packets":[1-9]' "$1" 2>/dev/null; }
for sig in TERM INT; do
  out=$WORK/watch-$sig
  ip netns exec "$S" "$TD" watch -i eth0 --filter "tcp port 8000" --interval 200ms --format json \
    --write "$out.pcap" --duration 60s > "$out.jsonl" 2> "$out.err" &
  W=$!; PIDS+=("$W")
  wait_for 10 has_packets "$out.jsonl" || fail "watch saw no packets: $(cat "$out.err")"
  kill -"$sig" "$W"
  wait_for 5 stopped "$W" || fail "watch did not end within 5 s of SIG$sig"
  rc=$(exit_of "$W")
  [ "$rc" = 0 ] || fail "watch after SIG$sig: exit $rc ($(cat "$out.err"))"
  n=$(packets "$out.pcap") || fail "capinfos cannot read the --write pcap after SIG$sig"
  python3 - "$out.jsonl" "$n" "$sig" <<'PY' || fail "watch after SIG$sig: no final report, or it disagrees with the pcap"
import json, sys
last = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert last["schema"] == 1 and last["command"] == "watch", list(last)
assert last["capture"]["packets"] == int(sys.argv[2]) > 0, (last["capture"]["packets"], sys.argv[2])
assert last["capture"]["exchanges"] > 0, last["capture"]["exchanges"]
print("e2e faults: watch SIG%s -> exit 0, final report of %s packets, %d exchanges; capinfos reads the --write pcap (%s packets)"
      % (sys.argv[3], sys.argv[2], last["capture"]["exchanges"], sys.argv[2]))
PY
  tcpdump -r "$out.pcap" -w /dev/null 2>/dev/null || fail "tcpdump cannot read the --write pcap after SIG$sig"
done

# 3c. watch --write onto a full disk: the watch goes on, the report follows, exit 2.
mkdir -p "$FULL"
mount -t tmpfs -o size=64k tdflt-full "$FULL"
ip netns exec "$S" "$TD" watch -i eth0 --filter "tcp port 8000" --interval 200ms --format json \
  --write "$FULL/live.pcap" --snaplen 65535 --duration 60s > "$WORK/wfull.jsonl" 2> "$WORK/wfull.err" &
W=$!; PIDS+=("$W")
disk_full() { [ "$(df --output=avail -k "$FULL" | tail -1 | tr -d ' ')" -le 4 ]; }
wait_for 20 disk_full || fail "watch --write did not fill the 64 KiB disk: $(df -k "$FULL" | tail -1)"
wait_for 5 grep -q '"packets":[1-9]' "$WORK/wfull.jsonl" || fail "watch --write (full disk) saw nothing"
kill -TERM "$W"
wait_for 5 stopped "$W" || fail "watch (full disk) did not end within 5 s of SIGTERM"
rc=$(exit_of "$W")
[ "$rc" = 2 ] || fail "watch --write on a full disk: exit $rc, not 2 ($(cat "$WORK/wfull.err"))"
grep -q -- "--write $FULL/live.pcap: No space left on device" "$WORK/wfull.err" \
  || fail "watch --write on a full disk: $(cat "$WORK/wfull.err")"
tail -1 "$WORK/wfull.jsonl" | grep -q '"command":"watch"' || fail "watch --write on a full disk: no final report"
"$TD" analyze "$FULL/live.pcap" > /dev/null 2>&1 || fail "the --write pcap left on the full disk cannot be analysed"
echo "e2e faults: watch --write on a full disk -> went on, final report, exit 2: $(tail -1 "$WORK/wfull.err" | cut -c1-110)…"
umount "$FULL"

# 4. The watched interface goes down, then away.
ip netns exec "$S" "$TD" watch -i eth0 --interval 200ms --duration 30s --write "$WORK/down.pcap" \
  > "$WORK/down.txt" 2> "$WORK/down.err" &
W=$!; PIDS+=("$W")
wait_for 10 grep -q "packets/s" "$WORK/down.txt" || fail "watch (link down) did not start: $(cat "$WORK/down.err")"
kill "$CURL" 2>/dev/null || true
ip -n "$S" link set dev eth0 down
ip -n "$C" link del eth0
wait_for 5 stopped "$W" || fail "watch still runs 5 s after its interface went away"
rc=$(exit_of "$W")
[ "$rc" = 3 ] || fail "watch, interface gone: exit $rc, not 3 ($(cat "$WORK/down.err"))"
grep -q "went down or away" "$WORK/down.err" || fail "watch, interface gone: $(cat "$WORK/down.err")"
grep -q "^warning .*went down or away" "$WORK/down.txt" || fail "watch, interface gone: no final report: $(tail -5 "$WORK/down.txt")"
packets "$WORK/down.pcap" > /dev/null || fail "watch, interface gone: capinfos cannot read the --write pcap"
echo "e2e faults: watch, interface down then deleted -> exit 3: $(tail -1 "$WORK/down.err")"

# 5. Rotated files (tcpdump -C 1), complete and then one still being written.
python3 - "$EXAMPLE" "$WORK/big.pcap" <<'PY'
import struct, sys
raw = open(sys.argv[1], "rb").read()
head, recs, off = raw[:24], [], 24
while off + 16 <= len(raw):
    sec, frac, cap, orig = struct.unpack("<IIII", raw[off:off + 16])
    recs.append((sec, frac, cap, orig, raw[off + 16:off + 16 + cap])); off += 16 + cap
span = recs[-1][0] - recs[0][0] + 1
with open(sys.argv[2], "wb") as out:
    out.write(head)
    for lap in range(12):
        for sec, frac, cap, orig, data in recs:
            out.write(struct.pack("<IIII", sec + lap * span, frac, cap, orig) + data)
PY
mkdir -p "$WORK/rot"
(cd "$WORK/rot" && tcpdump -r "$WORK/big.pcap" -w rot -C 1 -Z root 2>/dev/null)
files=$(ls "$WORK/rot" | wc -l)
[ "$files" -ge 3 ] || fail "tcpdump -C 1 made only $files file(s)"
want=0
for f in "$WORK"/rot/*; do want=$((want + $(packets "$f"))); done
"$TD" analyze --format json "$WORK/rot" > "$WORK/rot.json" 2> "$WORK/rot.err" || fail "analyze of the rotated files: $(cat "$WORK/rot.err")"
got=$(json_get "$WORK/rot.json" 'd["capture"]["packets"]')
[ "$got" = "$want" ] || fail "the $files rotated files: $got packets analysed, capinfos counts $want"
echo "e2e faults: $files files from tcpdump -C 1 analysed as a directory: $got packets, as capinfos counts"
last=$(ls "$WORK"/rot/* | sort -V | tail -1)
size=$(stat -c %s "$last")
truncate -s $((size - 7)) "$last" # cut inside its last record, as while tcpdump writes it
rc=0
"$TD" analyze --format json "$WORK/rot" > "$WORK/rot2.json" 2> "$WORK/rot2.err" || rc=$?
[ "$rc" = 0 ] || fail "a rotated file cut mid-record: exit $rc, not 0 ($(cat "$WORK/rot2.err"))"
! grep -q panicked "$WORK/rot2.err" || fail "a rotated file cut mid-record: a panic"
python3 - "$WORK/rot2.json" "$want" "$(basename "$last")" <<'PY' || fail "a rotated file cut mid-record is not reported as truncated"
import json, sys
d = json.load(open(sys.argv[1]))
got, want, name = d["capture"]["packets"], int(sys.argv[2]), sys.argv[3]
assert got == want - 1, (got, want)
warns = [w for w in d["capture"]["warnings"] if name in w and "truncated" in w]
assert warns, d["capture"]["warnings"]
print("e2e faults: the last rotated file cut mid-record -> exit 0, %d packets (its last one lost), warning: %s" % (got, warns[0]))
PY
echo "e2e faults: PASS in $((SECONDS - STARTED)) s"

#!/usr/bin/env bash
# End to end for `tcpdoctor load`, with real parts: nginx (sendfile on,
# keep-alive; tcp_nodelay off on :8080, on on :8081, `return 500` on :8082,
# gzip -> chunked responses on :8083) and misbehaving servers (reset after the
# request, close mid-response, never answer) in one network namespace, the
# load from another, over real Linux TCP.
#   tcp_nodelay off -> p50 >= 35 ms (Nagle x delayed ACK); on -> p50 < 5 ms
#   500 and 404 -> status errors; resets and mid-response closes -> read
#   errors; refused port -> connect errors; silent server -> timeouts;
#   --rate -> requests on schedule, and against the 44 ms server late sends and
#   latencies far above 44 ms (from the schedule: coordinated omission corrected);
#   --no-keepalive -> one connection per request;
#   errors named by cause (connection refused by ADDR, connection reset by ADDR).
# Needs root, nginx, python3. Usage: tests/e2e/load.sh [TCPDOCTOR]
set -euo pipefail
TD=${1:-${TCPDOCTOR:-target/release/tcpdoctor}}
TD=$(readlink -f "$TD")
P=tdact$$
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
fail() { echo "load e2e FAIL: $*" >&2; exit 1; }

e2e_netns "$P" 10.79.0
SA=$SERVER_IP
python3 -c 'import sys; open(sys.argv[1], "w").write("<!DOCTYPE html>\n<html><body>" + "tcpdoctor load test page. " * 24 + "</body></html>\n")' "$WORK/html/index.html"
e2e_nginx "  server { listen $SA:8080; tcp_nodelay off; root $WORK/html; }
  server { listen $SA:8081; tcp_nodelay on;  root $WORK/html; location = /form { return 200 \"posted\\n\"; } }
  server { listen $SA:8082; location / { return 500; } }
  server { listen $SA:8083; root $WORK/html; gzip on; gzip_min_length 0; }"
for mode in rst:9001 midclose:9002 silent:9003; do
  ip netns exec "$S" python3 "$HERE/badserver.py" $SA "${mode#*:}" "${mode%:*}" > "$WORK/bad-${mode%:*}.log" &
  PIDS+=($!)
done
e2e_wait_port 8081 9001 9002 9003

# load NAME ARGS... : run, keep the JSON and the exit status.
load() {
  local name=$1; shift
  local rc=0
  ip netns exec "$C" "$TD" load --format json "$@" > "$WORK/$name.json" 2> "$WORK/$name.err" || rc=$?
  echo "$rc" > "$WORK/$name.rc"
  [ "$rc" -le 1 ] || { cat "$WORK/$name.err" >&2; fail "$name: exit status $rc"; }
}
check() {
  python3 - "$WORK" "$@" <<'PY'
import json, sys
work, name, expr, what = sys.argv[1:5]
r = json.load(open(f"{work}/{name}.json"))
rc = int(open(f"{work}/{name}.rc").read())
l, e, s = r["latency_ms"], r["errors"], r["status_codes"]
# Every JSON document says what made it, from what.
assert r["schema"] == 1 and r["command"] == "load" and r["tool_version"] and r["input"]["url"] == r["url"], r
ok = eval(expr)
print(f"load e2e {'ok' if ok else 'FAIL'}: {name}: {what}: requests {r['requests']}, "
      f"{r['requests_per_sec']:.0f}/s, p50 {l['p50']:.2f} ms, p99 {l['p99']:.2f} ms, errors {e}, status {s}, exit {rc}")
sys.exit(0 if ok else 1)
PY
}

load nagle -c 10 -t 2 -d 3s http://$SA:8080/
load nodelay -c 10 -t 2 -d 3s http://$SA:8081/
load status500 -c 4 -t 1 -d 1s http://$SA:8082/
load status404 -c 4 -t 1 -d 1s http://$SA:8081/missing
load chunked -c 4 -t 1 -d 1s -H 'Accept-Encoding: gzip' http://$SA:8083/
load reset -c 4 -t 1 -d 1s http://$SA:9001/
load midclose -c 4 -t 1 -d 1s http://$SA:9002/
load silent -c 4 -t 1 -d 2s --timeout 300ms http://$SA:9003/
load refused -c 4 -t 1 -d 1s http://$SA:9999/
load rate -c 10 -t 2 -d 3s --rate 200 http://$SA:8081/
load overload -c 10 -t 2 -d 3s --rate 500 http://$SA:8080/
load nokeepalive -c 4 -t 1 -d 1s --no-keepalive http://$SA:8081/
load post -c 2 -t 1 -d 1s -X POST --body 'a=1&b=2' -H 'Content-Type: application/x-www-form-urlencoded' http://$SA:8081/form

status=0
check nagle "35 <= l['p50'] <= 60 and r['requests'] > 50 and e['total'] == 0" "tcp_nodelay off: p50 of Nagle x delayed ACK" || status=1
check nodelay "l['p50'] < 5 and r['requests'] > 1000 and e['total'] == 0" "tcp_nodelay on: p50 of a few ms at most" || status=1
check status500 "r['requests'] > 0 and e['status'] == r['requests'] and set(s) == {'500'} and rc == 0" "500 -> status errors" || status=1
check status404 "r['requests'] > 0 and e['status'] == r['requests'] and set(s) == {'404'}" "404 -> status errors" || status=1
check chunked "r['requests'] > 100 and e['total'] == 0 and s == {'200': r['requests']}" "chunked responses parsed" || status=1
check reset "e['read'] > 0 and r['requests'] == 0 and rc == 1 and e['causes'].get('connection reset by $SA:9001', 0) > 0" "reset after the request -> read errors, named" || status=1
check midclose "e['read'] > 20 and r['requests'] == 0 and rc == 1" "close mid-response -> read errors" || status=1
check silent "e['timeout'] >= 4 and r['requests'] == 0" "silent server -> timeouts" || status=1
check refused "e['connect'] > 0 and r['requests'] == 0 and rc == 1 and e['causes'] == {'connection refused by $SA:9999': e['connect']}" "refused -> connect errors, named" || status=1
check rate "500 <= r['requests'] <= 700 and r['latency_from'] == 'schedule' and r['rate']['target_per_sec'] == 200" "--rate 200 for 3 s" || status=1
check overload "r['rate']['late_sends'] > 100 and l['p50'] > 200 and r['requests'] < 900" "--rate 500 against the 44 ms server: sends fall behind, latency counted from the schedule" || status=1
check nokeepalive "r['requests'] > 10 and r['connects'] >= r['requests'] and e['total'] == 0" "--no-keepalive: one connection per request" || status=1
check post "r['requests'] > 10 and e['total'] == 0 and s == {'200': r['requests']}" "POST with a body" || status=1

# The text report reads like wrk's.
ip netns exec "$C" "$TD" load -c 2 -t 1 -d 1s http://$SA:8081/ > "$WORK/text.txt"
cat "$WORK/text.txt"
for want in "Latency Distribution" "99.9%" "Requests/sec:" "Transfer/sec:"; do
  grep -q "$want" "$WORK/text.txt" || { echo "load e2e FAIL: text report lacks '$want'" >&2; status=1; }
done
# A closed port: no table of zeros, the reason instead.
rc=0; ip netns exec "$C" "$TD" load -c 2 -t 1 -d 1s http://$SA:9999/ > "$WORK/closed.txt" || rc=$?
cat "$WORK/closed.txt"
[ "$rc" -eq 1 ] || { echo "load e2e FAIL: closed port: exit $rc" >&2; status=1; }
grep -q "No response: connection refused by $SA:9999" "$WORK/closed.txt" \
  || { echo "load e2e FAIL: closed port: the refusal is not named" >&2; status=1; }
if grep -q "Latency Distribution" "$WORK/closed.txt"; then
  echo "load e2e FAIL: closed port: a latency table of nothing" >&2; status=1
fi
# wrk's own command line is accepted (--latency), and so is the old -m for the method.
ip netns exec "$C" "$TD" load -c 2 -t 1 -d 1s --latency -m GET http://$SA:8081/ > /dev/null \
  || { echo "load e2e FAIL: wrk's --latency / -m refused" >&2; status=1; }
# Bad input is refused with exit status 2.
for bad in "ftp://$SA/" "--cacert /nonexistent.pem https://$SA/" "http://$SA:99999/" "-H nocolon http://$SA:8081/"; do
  rc=0; ip netns exec "$C" "$TD" load -d 1s $bad > /dev/null 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || { echo "load e2e FAIL: '$bad' gave exit status $rc, expected 2" >&2; status=1; }
done
[ "$status" -eq 0 ] || fail "see above"
echo "load e2e: all checks passed"

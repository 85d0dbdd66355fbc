#!/usr/bin/env bash
# End to end, with real parts: nginx (tcp_nodelay off on :8080, on on :8081,
# sendfile on, keep-alive) and wrk in two network namespaces, real Linux TCP,
# captured with tcpdump and diagnosed by tcpdoctor.
#   :8080 must give nagle_delayed_ack with the server 10.77.0.2:8080 as culprit
#   :8081 (captured through a pipe: tcpdump -w - | tcpdoctor analyze -) must not.
# Needs root, nginx, wrk, tcpdump, python3. Usage: tests/e2e/nginx-wrk.sh [TCPDOCTOR]
set -euo pipefail
TD=${1:-${TCPDOCTOR:-target/release/tcpdoctor}}
TD=$(readlink -f "$TD")
P=tdci$$
. "$(dirname "$0")/lib.sh"
fail() { echo "e2e FAIL: $*" >&2; exit 1; }

e2e_netns "$P" 10.77.0
python3 - "$WORK/html/index.html" <<'PY'
import sys
body = "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head>\n<body>\n" + \
       "<h1>Welcome to nginx!</h1>\n" + "<p>" + "tcpdoctor end-to-end test page. " * 15 + "</p>\n</body></html>\n"
open(sys.argv[1], "w").write(body)
PY
e2e_nginx "  server { listen $SERVER_IP:8080; tcp_nodelay off; root $WORK/html; }
  server { listen $SERVER_IP:8081; tcp_nodelay on;  root $WORK/html; }"
e2e_wait_port 8080 8081

# 1. tcp_nodelay off: capture at the server, analyse the file.
e2e_tcpdump "$S" "$WORK/off.pcap" 256 tcp port 8080
ip netns exec "$C" wrk -c 4 -t 1 -d 2s --latency http://10.77.0.2:8080/ | tee "$WORK/wrk-off.txt"
e2e_wait_closed "$C" 8080
e2e_tcpdump_stop "$DUMP"
"$TD" analyze --format json "$WORK/off.pcap" > "$WORK/off.json"
"$TD" analyze "$WORK/off.pcap" | head -12
python3 - "$WORK/off.json" <<'PY' || fail "tcp_nodelay off: expected nagle_delayed_ack blaming 10.77.0.2:8080"
import json, sys
a = json.load(open(sys.argv[1]))
f = a["findings"]
assert f, "no finding"
assert f[0]["kind"] == "nagle_delayed_ack", f[0]["kind"]
assert f[0]["culprit"] == {"endpoint": "10.77.0.2:8080", "role": "server"}, f[0]["culprit"]
assert f[0]["details"]["software"] == "nginx"
assert 30 <= f[0]["details"]["ack_delay_ms"] <= 70, f[0]["details"]
assert a["capture"]["exchange_latency_ms"]["p50"] > 30
print("e2e ok: tcp_nodelay off ->", f[0]["kind"], f[0]["culprit"]["endpoint"],
      "typical", f[0]["typical_delay_ms"], "ms,", f[0]["occurrences"], "occurrences")
PY

# 2. tcp_nodelay on: capture at the client, streamed through a pipe.
( ip netns exec "$C" tcpdump -i eth0 -U -s 256 -w - tcp port 8081 2>"$WORK/tcpdump-on.log" \
    | "$TD" analyze --format json - > "$WORK/on.json" ) &
PIPE=$!
e2e_wait_line "listening on" "$WORK/tcpdump-on.log"
ip netns exec "$C" wrk -c 4 -t 1 -d 2s --latency http://10.77.0.2:8081/ | tee "$WORK/wrk-on.txt"
e2e_wait_closed "$C" 8081
# tcpdump is all that still runs in the client namespace.
ip netns pids "$C" | xargs -r kill
wait "$PIPE" || fail "the pipeline into 'tcpdoctor analyze -' failed"
python3 - "$WORK/on.json" <<'PY' || fail "tcp_nodelay on: expected no nagle_delayed_ack"
import json, sys
a = json.load(open(sys.argv[1]))
kinds = [f["kind"] for f in a["findings"]]
assert "nagle_delayed_ack" not in kinds, kinds
assert a["capture"]["exchanges"] > 1000, a["capture"]["exchanges"]
assert a["capture"]["exchange_latency_ms"]["p50"] < 5
print("e2e ok: tcp_nodelay on -> no finding;", a["capture"]["exchanges"], "exchanges, p50",
      a["capture"]["exchange_latency_ms"]["p50"], "ms")
PY

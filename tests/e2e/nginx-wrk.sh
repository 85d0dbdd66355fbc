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
C=$P-c S=$P-s
WORK=$(mktemp -d /tmp/tcpdoctor-e2e.XXXXXX)
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  ip netns del "$C" 2>/dev/null || true
  ip netns del "$S" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() { echo "e2e FAIL: $*" >&2; exit 1; }

ip netns add "$C"
ip netns add "$S"
ip link add "$P-vc" type veth peer name "$P-vs"
ip link set "$P-vc" netns "$C"
ip link set "$P-vs" netns "$S"
ip -n "$C" addr add 10.77.0.1/24 dev "$P-vc"
ip -n "$S" addr add 10.77.0.2/24 dev "$P-vs"
for ns in "$C" "$S"; do ip -n "$ns" link set lo up; done
ip -n "$C" link set "$P-vc" up
ip -n "$S" link set "$P-vs" up

mkdir -p "$WORK/html" "$WORK/logs"
chmod 755 "$WORK" "$WORK/html"
python3 - "$WORK/html/index.html" <<'PY'
import sys
body = "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head>\n<body>\n" + \
       "<h1>Welcome to nginx!</h1>\n" + "<p>" + "tcpdoctor end-to-end test page. " * 15 + "</p>\n</body></html>\n"
open(sys.argv[1], "w").write(body)
PY
cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  keepalive_timeout 65;
  keepalive_requests 100000;
  client_body_temp_path $WORK/tmp;
  server { listen 10.77.0.2:8080; tcp_nodelay off; root $WORK/html; }
  server { listen 10.77.0.2:8081; tcp_nodelay on;  root $WORK/html; }
}
CONF
ip netns exec "$S" nginx -c "$WORK/nginx.conf" -p "$WORK" &
PIDS+=($!)
for _ in $(seq 50); do
  ip netns exec "$C" bash -c 'exec 3<>/dev/tcp/10.77.0.2/8081' 2>/dev/null && break
  sleep 0.1
done

# 1. tcp_nodelay off: capture at the server, analyse the file.
ip netns exec "$S" tcpdump -i "$P-vs" --immediate-mode -s 256 -w "$WORK/off.pcap" tcp port 8080 2>"$WORK/tcpdump-off.log" &
TCPDUMP=$!
PIDS+=($TCPDUMP)
sleep 1
ip netns exec "$C" wrk -c 4 -t 1 -d 2s --latency http://10.77.0.2:8080/ | tee "$WORK/wrk-off.txt"
sleep 1
kill "$TCPDUMP"; wait "$TCPDUMP" 2>/dev/null || true
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
( ip netns exec "$C" tcpdump -i "$P-vc" -U -s 256 -w - tcp port 8081 2>"$WORK/tcpdump-on.log" \
    | "$TD" analyze --format json - > "$WORK/on.json" ) &
PIPE=$!
sleep 1
ip netns exec "$C" wrk -c 4 -t 1 -d 2s --latency http://10.77.0.2:8081/ | tee "$WORK/wrk-on.txt"
sleep 1
pkill -f "tcpdump -i $P-vc" || true
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

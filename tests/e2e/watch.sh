#!/usr/bin/env bash
# End to end, with real parts: nginx (tcp_nodelay off on :8080, on on :80) under wrk in two
# network namespaces, real Linux TCP, watched live by `tcpdoctor watch` in the server namespace.
#   - the watch on port 8080 names nagle_delayed_ack, culprit the nginx endpoint, within 10 s;
#   - its /metrics, scraped with curl during the run and by a real Prometheus server, has the
#     finding's time-lost counter;
#   - the watch on port 80 stays quiet about Nagle, and once wrk has closed its connections
#     (FIN then RST) counts none open;
#   - --write keeps a pcap that `analyze` diagnoses the same way; the text view shows findings;
#   - bad input (no such interface, a filter that does not parse, a --prometheus port in use)
#     is a clear error with exit status 2.
# Needs root, nginx, wrk, curl, prometheus, python3. Usage: tests/e2e/watch.sh [TCPDOCTOR]
set -euo pipefail
TD=${1:-${TCPDOCTOR:-target/release/tcpdoctor}}
TD=$(readlink -f "$TD")
P=tdw$$
. "$(dirname "$0")/lib.sh"
fail() { echo "e2e FAIL: $*" >&2; exit 1; }

e2e_netns "$P" 10.81.0
python3 - "$WORK/html/index.html" <<'PY'
import sys
body = "<!DOCTYPE html>\n<html><body>\n" + "<p>" + "tcpdoctor watch test page. " * 20 + "</p>\n</body></html>\n"
open(sys.argv[1], "w").write(body)
PY
e2e_nginx "  server { listen $SERVER_IP:8080; tcp_nodelay off; root $WORK/html; }
  server { listen $SERVER_IP:80; tcp_nodelay on; root $WORK/html; }"
e2e_wait_port 8080 80
PROM_PORT=9464

# 1. Bad input first: each must fail fast with exit status 2 and say why.
expect_2() {
  local what=$1; shift
  local rc=0
  ip netns exec "$S" "$TD" watch "$@" --duration 2s > "$WORK/bad.out" 2> "$WORK/bad.err" || rc=$?
  [ "$rc" = 2 ] || fail "$what: exit status $rc, expected 2 ($(cat "$WORK/bad.err"))"
  grep -qi "$what" "$WORK/bad.err" || fail "$what: the error does not say so: $(cat "$WORK/bad.err")"
  echo "e2e ok: $what -> exit 2: $(head -1 "$WORK/bad.err")"
}
expect_2 "no-such-if0" -i no-such-if0
expect_2 "filter" -i eth0 --filter 'port eighty and ('
ip netns exec "$S" python3 -c "
import socket, time
s = socket.socket(); s.bind(('127.0.0.1', $PROM_PORT)); s.listen(1); time.sleep(30)" &
BLOCKER=$!
PIDS+=($BLOCKER)
# The port must be taken before watch starts (python may take a while to start).
for _ in $(seq 100); do
  ip netns exec "$S" ss -Hltn "sport = :$PROM_PORT" | grep -q . && break
  sleep 0.05
done
ip netns exec "$S" ss -Hltn "sport = :$PROM_PORT" | grep -q . || fail "the port blocker never listened"
expect_2 "prometheus" -i eth0 --prometheus 127.0.0.1:$PROM_PORT
kill "$BLOCKER"; wait "$BLOCKER" 2>/dev/null || true

# 2. A real Prometheus server in the server namespace, scraping the watch every second.
cat > "$WORK/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: tcpdoctor
    static_configs:
      - targets: ['127.0.0.1:$PROM_PORT']
YML
ip netns exec "$S" prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/prom" \
  --web.listen-address=127.0.0.1:9090 > "$WORK/prometheus.log" 2>&1 &
PIDS+=($!)

# 3. Two watches (8080: Nagle; 80: nodelay on) while wrk loads both ports.
ip netns exec "$S" "$TD" watch -i eth0 --filter "tcp port 8080" --duration 12s --format json \
  --prometheus 127.0.0.1:$PROM_PORT --write "$WORK/live.pcap" --html "$WORK/live.html" \
  > "$WORK/off.jsonl" 2> "$WORK/off.err" &
WATCH_OFF=$!
PIDS+=($WATCH_OFF)
ip netns exec "$S" "$TD" watch -i eth0 --filter "port 80 and host $SERVER_IP" --duration 8s \
  --format json > "$WORK/on.jsonl" 2> "$WORK/on.err" &
WATCH_ON=$!
PIDS+=($WATCH_ON)
e2e_wait_line "tcpdoctor: watching" "$WORK/off.err" "$WORK/on.err"
ip netns exec "$C" wrk -c 4 -t 1 -d 10s http://$SERVER_IP:8080/ > "$WORK/wrk-off.txt" &
PIDS+=($!)
ip netns exec "$C" wrk -c 4 -t 1 -d 6s http://$SERVER_IP:80/ > "$WORK/wrk-on.txt" &
PIDS+=($!)

# Scraped with curl while the watch runs (12 s), until the Nagle finding's counter is there
# (9 s at most).
NAGLE_RE="^tcpdoctor_time_lost_seconds_total\\{kind=\"nagle_delayed_ack\",culprit=\"$SERVER_IP:8080\",role=\"server\"\\} [0-9.]+"
for _ in $(seq 90); do
  ip netns exec "$S" curl -sf "http://127.0.0.1:$PROM_PORT/metrics" > "$WORK/metrics.txt" \
    && grep -qE "$NAGLE_RE" "$WORK/metrics.txt" && break
  sleep 0.1
done
[ -s "$WORK/metrics.txt" ] || fail "GET /metrics failed during the watch"
grep -E "$NAGLE_RE" "$WORK/metrics.txt" || fail "no Nagle time-lost counter in /metrics: $(grep -v '^#' "$WORK/metrics.txt" | head)"
grep -E "^tcpdoctor_exchange_duration_seconds_bucket\{server=\"$SERVER_IP:8080\",le=" "$WORK/metrics.txt" >/dev/null \
  || fail "no exchange-duration histogram for $SERVER_IP:8080"

# The Prometheus server has scraped the same counter.
python3 - "$SERVER_IP" <<PY || fail "Prometheus did not ingest the finding's counter"
import json, subprocess, sys, time
q = 'tcpdoctor_time_lost_seconds_total{kind="nagle_delayed_ack",role="server"}'
for _ in range(40):
    out = subprocess.run(["ip", "netns", "exec", "$S", "curl", "-sf", "--get",
                          "http://127.0.0.1:9090/api/v1/query", "--data-urlencode", "query=" + q],
                         capture_output=True, text=True).stdout
    try:
        r = json.loads(out)["data"]["result"]
    except (ValueError, KeyError):
        r = []
    if r and float(r[0]["value"][1]) > 0:
        m = r[0]["metric"]
        assert m["culprit"] == sys.argv[1] + ":8080", m
        print("e2e ok: Prometheus has", q, "=", r[0]["value"][1], "s for", m["culprit"])
        sys.exit(0)
    time.sleep(0.5)
sys.exit(1)
PY

wait "$WATCH_OFF" || fail "watch on 8080 failed: $(cat "$WORK/off.err")"
wait "$WATCH_ON" || fail "watch on 80 failed: $(cat "$WORK/on.err")"

python3 - "$WORK/off.jsonl" "$SERVER_IP" <<'PY' || fail "watch on 8080 did not name the Nagle stall within 10 s"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
intervals, analysis = lines[:-1], lines[-1]
assert analysis["schema"] == 1, "the last line is the analysis"
assert len(intervals) >= 8, len(intervals)
first = None
for iv in intervals:
    assert iv["kernel_drops"] == 0 or iv["kernel_drops_total"] >= iv["kernel_drops"]
    for f in iv["findings"]:
        if f["kind"] == "nagle_delayed_ack" and f["culprit"] == {"endpoint": sys.argv[2] + ":8080", "role": "server"}:
            first = first or iv
assert first is not None, "never named"
assert first["t_s"] <= 10.0, first["t_s"]
lat = first["exchange_latency_ms"]
assert lat and lat["p50"] > 30, lat
assert analysis["findings"][0]["kind"] == "nagle_delayed_ack"
assert analysis["findings"][0]["details"]["software"] == "nginx"
packets = sum(iv["packets"] for iv in intervals)
print("e2e ok: watch named nagle_delayed_ack (server %s:8080) at t=%.1f s, p50 %.1f ms; %d packets in %d intervals, %d kernel drops"
      % (sys.argv[2], first["t_s"], lat["p50"], packets, len(intervals), intervals[-1]["kernel_drops_total"]))
PY

python3 - "$WORK/on.jsonl" <<'PY' || fail "watch on port 80 (tcp_nodelay on) should not report Nagle"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
intervals, analysis = lines[:-1], lines[-1]
ex = sum(iv["exchanges"] for iv in intervals)
assert ex > 100, "the port-80 watch saw only %d exchanges" % ex
for iv in intervals:
    for f in iv["findings"] + iv["minor_findings"]:
        assert f["kind"] != "nagle_delayed_ack", f
        assert not f["culprit"]["endpoint"].endswith(":8080"), "the filter let port 8080 through: %s" % f
assert all(f["kind"] != "nagle_delayed_ack" for f in analysis["findings"])
# wrk closed its connections (FIN, then RST) about 1.5 s before the watch ended:
# they are not open any more, though no packet came after to end their grace period.
assert max(iv["open_connections"] for iv in intervals) >= 4, [iv["open_connections"] for iv in intervals]
assert intervals[-1]["open_connections"] == 0, [iv["open_connections"] for iv in intervals]
print("e2e ok: port 80 (tcp_nodelay on): %d exchanges, no Nagle, p50 %.2f ms, open connections %s"
      % (ex, analysis["capture"]["exchange_latency_ms"]["p50"], [iv["open_connections"] for iv in intervals]))
PY

# 4. The pcap the watch wrote gives the same diagnosis offline.
"$TD" analyze --format json "$WORK/live.pcap" > "$WORK/live.json"
python3 - "$WORK/live.json" "$WORK/off.jsonl" <<'PY' || fail "--write: analyze of the pcap disagrees with the watch"
import json, sys
a = json.load(open(sys.argv[1]))
w = [json.loads(l) for l in open(sys.argv[2])][-1]
assert a["findings"][0]["kind"] == w["findings"][0]["kind"] == "nagle_delayed_ack"
assert a["capture"]["packets"] == w["capture"]["packets"], (a["capture"]["packets"], w["capture"]["packets"])
print("e2e ok: --write pcap of %d packets analyses the same" % a["capture"]["packets"])
PY

# --html: the page written at the end names the finding, with its charts, and loads nothing.
python3 - "$WORK/live.html" "$SERVER_IP" <<'PY' || fail "--html: the report page is missing or wrong"
import re, sys
h = open(sys.argv[1]).read()
assert h.startswith("<!DOCTYPE html>"), h[:40]
assert "nagle_delayed_ack" in h and sys.argv[2] + ":8080" in h
assert h.count("<svg") >= 2, h.count("<svg")
assert not re.search(r'(src|href)="https?:', h), "the page loads from the network"
print("e2e ok: --html wrote a %d KB page naming nagle_delayed_ack, %d SVG charts" % (len(h) // 1024, h.count("<svg")))
PY

# 5. The text view, not on a terminal: one block per interval, then the report.
ip netns exec "$C" wrk -c 2 -t 1 -d 3s http://$SERVER_IP:8080/ > /dev/null &
PIDS+=($!)
ip netns exec "$S" "$TD" watch -i any --filter "port 8080" --duration 3s > "$WORK/view.txt" 2>&1 \
  || fail "text watch failed: $(tail -3 "$WORK/view.txt")"
grep -q "findings so far" "$WORK/view.txt" || fail "no live view: $(head -5 "$WORK/view.txt")"
grep -q "^1. nagle_delayed_ack" "$WORK/view.txt" || fail "no final report naming Nagle: $(tail -20 "$WORK/view.txt")"
echo "e2e ok: text view on 'any', then the report:"
grep -m1 -A2 "findings so far" "$WORK/view.txt"
echo "e2e watch: all checks passed"

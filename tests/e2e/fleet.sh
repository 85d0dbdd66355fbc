#!/usr/bin/env bash
# Beyond one host, with real parts:
#   - a fleet of captures (one folder per host, a different lab case on each, 11 captures
#     a host, plus a corrupt one) swept by `analyze --parquet`: DuckDB reads the tables and
#     its counts agree, capture by capture, with `analyze --format json`; the corrupt
#     capture is reported (stderr, exit 2, files.parquet) and the sweep goes on;
#   - the Python package, built with maturin and installed in a virtualenv: a directory of
#     plain, gzip and zstd captures analysed with a filter and a time window gives the counts
#     of `analyze DIR --filter/--from/--to --format json`; and inside a real
#     PySpark job (local mode, 2 workers): examples/fleet/sweep.py ranks each host's
#     endpoints by time lost per cause; the top of each host is its known case, the healthy
#     host has nothing, and the ranking equals DuckDB's over the Parquet tables
#     (examples/fleet/ranking.sql) and the JSON totals;
#   - a real Prometheus server with examples/prometheus/prometheus.yml scrapes two
#     `watch --prometheus` in two network namespaces (nginx with tcp_nodelay off and on
#     under wrk): PromQL over its HTTP API counts one Nagle finding, on the right host, and
#     every query of examples/prometheus/grafana-dashboard.json runs.
# Needs root, a JDK, nginx, wrk, curl, prometheus, python3-venv; PyPI for maturin, pyarrow,
# pandas, duckdb and pyspark (into ${XDG_CACHE_HOME:-~/.cache}/tcpdoctor-e2e/fleet-venv).
# Usage: tests/e2e/fleet.sh [TCPDOCTOR]
set -euo pipefail
TD=${1:-${TCPDOCTOR:-target/release/tcpdoctor}}
TD=$(readlink -f "$TD")
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
P=tdflt-$$
. "$HERE/lib.sh"
fail() { echo "e2e FAIL: $*" >&2; exit 1; }

# The Python side: a virtualenv with the wheel built from this tree.
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/tcpdoctor-e2e/fleet-venv
if ! "$VENV/bin/python" -c 'import maturin, pyarrow, pandas, duckdb, pyspark' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q 'maturin>=1.7,<2' 'pyarrow>=15' 'pandas>=2.2' 'duckdb>=1.0' 'pyspark>=3.5,<5'
fi
PY=$VENV/bin/python
e2e_netns "$P" 10.83.0
(cd "$ROOT/crates/python" && "$VENV/bin/maturin" build --profile wheel --locked -q -i "$PY" \
  --out "$WORK/wheel") > "$WORK/maturin.log" 2>&1 || fail "maturin build: $(tail -5 "$WORK/maturin.log")"
"$VENV/bin/pip" install -q --force-reinstall --no-deps "$WORK"/wheel/tcpdoctor-*.whl
"$PY" - "$ROOT/fixtures/nginx-nodelay-on.client.pcap" <<'PY' || fail "the Python package"
import sys, threading, tcpdoctor
cap = sys.argv[1]
# The GIL is released while a capture is analysed: a Python thread counts meanwhile.
# (Held, the counter could not move between reading it and the call's return.)
count, done = [0], threading.Event()
def spin():
    while not done.is_set():
        count[0] += 1
t = threading.Thread(target=spin); t.start()
moved = 0
for _ in range(10):
    before = count[0]
    r = tcpdoctor.analyze(cap)
    moved += count[0] - before
done.set(); t.join()
assert moved > 1000, moved
# Path and bytes give the same tables; bytes that are no capture raise CaptureError.
b = tcpdoctor.analyze(open(cap, "rb").read(), host="h", file=cap)
assert b.exchanges.drop_columns(["host"]).equals(r.exchanges.drop_columns(["host"]))
try:
    tcpdoctor.analyze(b"not a capture")
    raise SystemExit("no CaptureError")
except tcpdoctor.CaptureError as e:
    assert "not a pcap" in str(e), e
print("e2e ok: tcpdoctor %s for Python: %d exchanges as pyarrow; a Python thread counted %d while"
      " it analysed (GIL released); bytes = path; junk raises CaptureError"
      % (tcpdoctor.__version__, r.exchanges.num_rows, moved))
PY

# A directory of captures (plain, gzip, zstd, and a file that is no capture) with a filter and
# a time window: the Python package merges and selects as `tcpdoctor analyze DIR` does, count
# for count, and the filter and the window each leave connections out.
PYDIR=$WORK/py-captures
mkdir -p "$PYDIR"
cp "$ROOT/fixtures/nginx-nodelay-off.server.pcap" "$ROOT/fixtures/client-delay.client.pcap" "$PYDIR/"
gzip -c "$ROOT/fixtures/jdk-default.client.pcap" > "$PYDIR/jdk-default.pcap.gz"
zstd -q -c "$ROOT/fixtures/rto.client.pcap" > "$PYDIR/rto.pcap.zst"
echo "not a capture" > "$PYDIR/notes.txt"
"$TD" analyze "$PYDIR" --format json > "$WORK/py-all.json" 2>/dev/null || fail "analyze $PYDIR"
"$TD" analyze "$PYDIR" --filter 'host 10.71.0.2' --format json > "$WORK/py-filter.json" 2>/dev/null \
  || fail "analyze $PYDIR --filter"
"$TD" analyze "$PYDIR" --from 1 --to 3 --format json > "$WORK/py-window.json" 2>/dev/null \
  || fail "analyze $PYDIR --from --to"
"$PY" - "$PYDIR" "$WORK" <<'PY' || fail "the Python package on a directory, with a filter"
import json, os, sys, tcpdoctor
d, work = sys.argv[1:3]
def counts(t):
    return (t.connections.num_rows, t.exchanges.num_rows, t.findings.num_rows)
def cli(name):
    j = json.load(open(os.path.join(work, name)))
    c = j["capture"]
    return (c["connections"], c["exchanges"], len(j["findings"]) + len(j["minor_findings"]))
every = tcpdoctor.analyze(d)
kept = tcpdoctor.analyze(d, filter="host 10.71.0.2")
window = tcpdoctor.analyze([d], start=1, end="3")
listed = tcpdoctor.analyze(sorted(os.path.join(d, f) for f in os.listdir(d) if f != "notes.txt"),
                           filter="host 10.71.0.2")
for name, t in [("py-all.json", every), ("py-filter.json", kept), ("py-window.json", window)]:
    assert counts(t) == cli(name), (name, counts(t), cli(name))
assert counts(listed) == counts(kept), (counts(listed), counts(kept))
assert 0 < kept.connections.num_rows < every.connections.num_rows, (counts(kept), counts(every))
assert 0 < window.connections.num_rows < every.connections.num_rows, (counts(window), counts(every))
assert every.status == "ok" and every.files.num_rows == 1, (every.status, every.files.num_rows)
assert every.files.column("host").to_pylist() == ["py-captures"], every.files.column("host")
try:
    tcpdoctor.analyze(d, filter="port nope")
    raise SystemExit("a bad filter did not raise ValueError")
except ValueError as e:
    assert "port" in str(e), e
print("e2e ok: tcpdoctor.analyze(DIR) of plain, gzip and zstd captures = analyze DIR: %s connections,"
      " exchanges, findings; filter %s and window %s as --filter and --from/--to"
      % (counts(every), counts(kept), counts(window)))
PY

# The wheel as a user installs it: an abi3 wheel, into a fresh virtualenv, with pip offline (its
# one dependency, pyarrow, from a folder of wheels fetched beforehand; no index), then an analysis.
WHEEL=$(ls "$WORK"/wheel/tcpdoctor-*.whl)
case "$(basename "$WHEEL")" in *-abi3-*) ;; *) fail "the wheel is not abi3: $(basename "$WHEEL")" ;; esac
WHEELS=${XDG_CACHE_HOME:-$HOME/.cache}/tcpdoctor-e2e/wheels
"$VENV/bin/pip" download -q -d "$WHEELS" --only-binary :all: 'pyarrow>=12' \
  || fail "pip download pyarrow (needs PyPI once)"
python3 -m venv "$WORK/fresh"
"$WORK/fresh/bin/pip" install -q --no-index --find-links "$WHEELS" "$WHEEL" \
  || fail "pip install of the wheel into a fresh virtualenv, offline"
"$WORK/fresh/bin/python" - "$ROOT/fixtures/nginx-nodelay-off.server.pcap" <<'PY' || fail "the wheel in a fresh virtualenv"
import sys, tcpdoctor
r = tcpdoctor.analyze(sys.argv[1])
kinds = r.findings.column("kind").to_pylist()
assert "nagle_delayed_ack" in kinds, kinds
print("e2e ok: the abi3 wheel installed offline into a fresh virtualenv: %d exchanges, findings %s"
      % (r.exchanges.num_rows, sorted(set(kinds))))
PY

# 1. The fleet: a lab case per host, 11 captures each; one host healthy; one corrupt capture.
TREE=$WORK/fleet
declare -A CASE=([web-nginx]=nginx-nodelay-off.server [api-jdk]=jdk-default.client
                 [upload-store]=upload-rcvbuf4k.server [lossy-edge]=rto.client
                 [web-fast]=nginx-nodelay-on.client)
for h in "${!CASE[@]}"; do
  mkdir -p "$TREE/$h"
  for i in $(seq -w 1 11); do cp "$ROOT/fixtures/${CASE[$h]}.pcap" "$TREE/$h/cap-$i.pcap"; done
done
head -c 4096 /dev/urandom > "$TREE/lossy-edge/corrupt.pcap"
for f in "$TREE"/*/*.pcap; do
  [ "$(basename "$f")" = corrupt.pcap ] && continue
  "$TD" analyze "$f" --format json > "${f%.pcap}.json" || fail "analyze $f"
done

# 2. The sweep into Parquet: the corrupt capture is reported and skipped, exit status 2.
rc=0
"$TD" analyze "$TREE" --parquet "$WORK/tables" --format json > "$WORK/sweep.json" 2> "$WORK/sweep.err" || rc=$?
[ "$rc" = 2 ] || fail "sweep with a corrupt capture: exit $rc, expected 2 ($(cat "$WORK/sweep.err"))"
grep -q "corrupt.pcap: .*not a pcap or pcapng capture.*skipped" "$WORK/sweep.err" \
  || fail "the corrupt capture is not reported: $(cat "$WORK/sweep.err")"
echo "e2e ok: sweep exit 2, stderr: $(head -1 "$WORK/sweep.err")"

# 3. DuckDB over the tables: capture by capture, the counts of analyze --format json.
(cd "$WORK/tables" && "$PY" - "$TREE" "$ROOT/examples/fleet/ranking.sql" "$WORK/duckdb-ranking.json") <<'PY' \
  || fail "DuckDB's counts disagree with analyze --format json"
import duckdb, glob, json, os, sys
tree, sql, out = sys.argv[1:4]
con = duckdb.connect()
def per_file(table):
    return dict(con.execute(f"SELECT file, count(*) FROM '{table}.parquet' GROUP BY file").fetchall())
conns, exch, finds = per_file("connections"), per_file("exchanges"), per_file("findings")
files = {r[0]: r[1:] for r in con.execute("SELECT file, host, status, error, packets FROM 'files.parquet'").fetchall()}
n = 0
for js in sorted(glob.glob(os.path.join(tree, "*", "*.json"))):
    cap = js[:-5] + ".pcap"
    d = json.load(open(js))
    c = d["capture"]
    got = (conns.get(cap, 0), exch.get(cap, 0), finds.get(cap, 0), files[cap][3])
    want = (c["connections"], c["exchanges"], len(d["findings"]) + len(d["minor_findings"]), c["packets"])
    assert got == want, (cap, got, want)
    assert files[cap][0] == os.path.basename(os.path.dirname(cap)) and files[cap][1] == "ok", files[cap]
    n += 1
bad = os.path.join(tree, "lossy-edge", "corrupt.pcap")
assert files[bad][1] == "failed" and "not a pcap" in files[bad][2], files[bad]
assert n == 55 and len(files) == 56, (n, len(files))
# Budget columns add up to each exchange's duration, in every table row.
worst = con.execute("""SELECT max(abs(duration_ms - (budget_syn_retry_wait_ms + budget_connection_setup_ms
    + budget_client_idle_ms + budget_network_ms + budget_server_ms + budget_nagle_delayed_ack_ms
    + budget_retransmission_wait_ms + budget_window_wait_ms + budget_congestion_wait_ms
    + budget_transfer_ms + budget_tls_handshake_ms + budget_tls_key_exchange_ms
    + budget_queueing_ms + budget_bandwidth_ms + budget_other_connection_ms
    + budget_reader_wait_ms))) FROM 'exchanges.parquet'""").fetchone()[0]
assert worst < 0.05, worst
ranking = con.execute(open(sql).read())
columns = [d[0] for d in ranking.description]
rows = [dict(zip(columns, r)) for r in ranking.fetchall()]
json.dump(rows, open(out, "w"), default=float)
total = con.execute("SELECT count(*) FROM 'exchanges.parquet'").fetchone()[0]
print(f"e2e ok: DuckDB agrees with --format json on {n} captures ({total} exchanges); "
      f"files.parquet: corrupt.pcap failed; ranking.sql: {len(rows)} rows")
PY

# 4. The Spark job over the same tree: the known case tops each host.
export SPARK_LOCAL_IP=127.0.0.1
"$PY" "$ROOT/examples/fleet/sweep.py" "$TREE" --master 'local[2]' --json "$WORK/spark.json" \
  > "$WORK/spark.out" 2> "$WORK/spark.err" || fail "the Spark job failed: $(grep -v WARN "$WORK/spark.err" | tail -20)"
cat "$WORK/spark.out"
"$PY" - "$WORK/spark.json" "$WORK/duckdb-ranking.json" "$TREE" <<'PY' || fail "the Spark ranking is wrong"
import glob, json, os, sys
s = json.load(open(sys.argv[1]))
duck = json.load(open(sys.argv[2]))
tree = sys.argv[3]
assert s["captures"] == 56, s["captures"]
assert [os.path.basename(f["file"]) for f in s["failed"]] == ["corrupt.pcap"], s["failed"]
top = {r["host"]: r for r in s["ranking"] if r["rank"] == 1}
known = {"web-nginx": ("nagle_delayed_ack", "server"), "api-jdk": ("nagle_delayed_ack", "server"),
         "upload-store": ("receive_window_limited", "server"),
         "lossy-edge": ("retransmission_timeout", "network")}
for host, (kind, role) in known.items():
    assert (top[host]["kind"], top[host]["role"]) == (kind, role), (host, top[host])
assert "web-fast" not in {r["host"] for r in s["ranking"]}, "the healthy host has findings"
# The JSON totals, 11 captures each; and DuckDB's answer to the same question.
for host in known:
    js = sorted(glob.glob(os.path.join(tree, host, "*.json")))
    want = {}
    for j in js:
        d = json.load(open(j))
        for f in d["findings"] + d["minor_findings"]:
            k = (f["culprit"]["endpoint"], f["kind"])
            want[k] = want.get(k, 0) + f["total_delay_ms"]
    got = {(r["endpoint"], r["kind"]): r["lost_ms"] for r in s["ranking"] if r["host"] == host}
    assert got.keys() == want.keys(), (host, got, want)
    for k in want:
        assert abs(got[k] - want[k]) < 0.2, (host, k, got[k], want[k])
key = lambda r: (r["host"], r["endpoint"], r["kind"])
sd = {key(r): (r["rank"], r["lost_ms"], r["occurrences"], r["captures"]) for r in s["ranking"]}
dd = {key(r): (r["rank"], r["lost_ms"], r["occurrences"], r["captures"]) for r in duck}
assert sd.keys() == dd.keys(), (sorted(sd), sorted(dd))
for k in sd:
    assert sd[k][0] == dd[k][0] and sd[k][2:] == dd[k][2:] and abs(sd[k][1] - dd[k][1]) < 0.2, (k, sd[k], dd[k])
print("e2e ok: Spark ranks the known case first on each of %d hosts, the healthy host has none, "
      "and agrees with DuckDB (%d rows) and the JSON totals; %.1f captures/s"
      % (len(known), len(sd), s["captures"] / s["seconds"]))
PY

# 5. Live: two watches in two namespaces, scraped by a real Prometheus with the example config.
python3 - "$WORK/html/index.html" <<'PY'
import sys
open(sys.argv[1], "w").write("<html><body><p>" + "fleet test page. " * 40 + "</p></body></html>\n")
PY
e2e_nginx "  server { listen $SERVER_IP:8080; tcp_nodelay off; root $WORK/html; }
  server { listen $SERVER_IP:80; tcp_nodelay on; root $WORK/html; }"
e2e_wait_port 8080 80
sed -e "s/'web-1:9464'/'127.0.0.1:9464'/" -e "s/'web-2:9464'/'$CLIENT_IP:9465'/" \
    -e 's/scrape_interval: 15s/scrape_interval: 1s/' -e 's/scrape_timeout: 10s/scrape_timeout: 900ms/' \
    "$ROOT/examples/prometheus/prometheus.yml" > "$WORK/prometheus.yml"
grep -q "127.0.0.1:9464" "$WORK/prometheus.yml" && grep -q "$CLIENT_IP:9465" "$WORK/prometheus.yml" \
  || fail "the example scrape config changed shape"
ip netns exec "$S" prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/prom" \
  --web.listen-address=127.0.0.1:9090 > "$WORK/prometheus.log" 2>&1 &
PIDS+=($!)
# web-1: the server's namespace, watching nginx with tcp_nodelay off (port 8080).
ip netns exec "$S" "$TD" watch -i eth0 --filter "tcp port 8080" --duration 14s --format json \
  --prometheus 127.0.0.1:9464 > "$WORK/w1.jsonl" 2> "$WORK/w1.err" &
W1=$!; PIDS+=($W1)
# web-2: the client's namespace, watching its requests to port 80 (tcp_nodelay on).
ip netns exec "$C" "$TD" watch -i eth0 --filter "tcp port 80" --duration 14s --format json \
  --prometheus "$CLIENT_IP:9465" > "$WORK/w2.jsonl" 2> "$WORK/w2.err" &
W2=$!; PIDS+=($W2)
e2e_wait_line "tcpdoctor: watching" "$WORK/w1.err" "$WORK/w2.err"
ip netns exec "$C" wrk -c 4 -t 1 -d 11s "http://$SERVER_IP:8080/" > /dev/null &
PIDS+=($!)
ip netns exec "$C" wrk -c 4 -t 1 -d 11s "http://$SERVER_IP:80/" > /dev/null &
PIDS+=($!)
ip netns exec "$S" python3 - "$SERVER_IP" "$ROOT/examples/prometheus/grafana-dashboard.json" <<'PY' \
  || fail "PromQL over Prometheus' API did not return the expected findings"
import json, sys, time, urllib.parse, urllib.request
server, dash = sys.argv[1], sys.argv[2]
def query(q):
    url = "http://127.0.0.1:9090/api/v1/query?" + urllib.parse.urlencode({"query": q})
    r = json.load(urllib.request.urlopen(url, timeout=5))
    assert r["status"] == "success", r
    return r["data"]["result"]
# rate() needs two samples of a series in its window: the Nagle series is born with the
# first finding, so the loop waits for a second scrape after it, not only for the series.
def nagle_rate():
    lost = query('sum by (host, kind) (rate(tcpdoctor_time_lost_seconds_total[1m]))')
    return lost, any(r["metric"]["host"] == "web-1" and r["metric"]["kind"] == "nagle_delayed_ack"
                     and float(r["value"][1]) > 0 for r in lost)
up = nagle = None
for _ in range(48):
    time.sleep(0.5)
    try:
        up = {r["metric"]["host"]: r["value"][1] for r in query('sum by (host) (up{job="tcpdoctor"})')}
    except OSError:  # Prometheus not listening yet
        continue
    nagle = query('count by (host, culprit) (tcpdoctor_time_lost_seconds_total{kind="nagle_delayed_ack"} > 0)')
    exch = {r["metric"]["host"]: float(r["value"][1]) for r in query("sum by (host) (tcpdoctor_exchanges_total)")}
    if (up == {"web-1": "1", "web-2": "1"} and nagle and all(exch.get(h, 0) > 100 for h in ("web-1", "web-2"))
            and nagle_rate()[1]):
        break
assert up == {"web-1": "1", "web-2": "1"}, up
got = {(r["metric"]["host"], r["metric"]["culprit"]): r["value"][1] for r in nagle}
assert got == {("web-1", server + ":8080"): "1"}, got
# Every query of the dashboard runs ($host: all hosts; the range variables: 1 minute).
d = json.load(open(dash))
n = 0
for p in d["panels"]:
    for t in p["targets"]:
        q = t["expr"].replace("$host", ".*").replace("$__rate_interval", "1m").replace("$__range", "1m")
        query(q)
        n += 1
lost, ok = nagle_rate()
assert ok, lost
print("e2e ok: Prometheus scrapes web-1 and web-2 (two namespaces); PromQL counts one Nagle finding,",
      "on web-1 (%s:8080), none on web-2; exchanges %s; %d dashboard queries run" % (server, exch, n))
PY
wait "$W1" || fail "watch web-1: $(cat "$WORK/w1.err")"
wait "$W2" || fail "watch web-2: $(cat "$WORK/w2.err")"
python3 - "$WORK/w1.jsonl" "$WORK/w2.jsonl" <<'PY' || fail "the watches' own reports disagree with Prometheus"
import json, sys
w1 = [json.loads(l) for l in open(sys.argv[1])][-1]
w2 = [json.loads(l) for l in open(sys.argv[2])][-1]
assert [f["kind"] for f in w1["findings"]][:1] == ["nagle_delayed_ack"], w1["findings"]
assert all(f["kind"] != "nagle_delayed_ack" for f in w2["findings"] + w2["minor_findings"]), w2["findings"]
print("e2e ok: the watches' final reports agree (web-1 Nagle, web-2 none)")
PY
echo "e2e fleet: all checks passed"

#!/usr/bin/env bash
# End to end for `tcpdoctor sysctl`: it must report the network namespace it runs in.
# A namespace tdk<pid>-a gets its own values of every per-namespace sysctl the test sets
# (checked on this kernel first: a key whose write fails in a namespace is host-wide and
# skipped, and the host's value must stay untouched), a veth pair with IPv4 and IPv6 routes
# carrying metrics (initcwnd, initrwnd, quickack, rto_min, congctl, features ecn; one route
# in table 100), and a tbf qdisc. Then, with python3 reading the JSON:
#   - in the namespace, every value set is reported with its judgement (severity, words, fix);
#   - run on the host, the same keys show the host's values (read from /proc on the host), its
#     own namespace id, no routes or qdiscs of the test: it reads where it runs;
#   - routes carry their metrics and findings; the initcwnd fix, run, removes the finding and
#     keeps the other metrics; on a route with two bad metrics every printed fix, run in
#     turn, leaves no warning and rto_min keeps its lock; the tbf qdisc is reported with its rate and queue delay;
#   - the text report shows the warnings and their fixes;
#   - as an unprivileged user (setpriv nobody) the report is the same;
#   - --fail-on-warn exits 1 there, 0 for a clean namespace.
# KEEP_OUTPUT=DIR keeps the reports (before.txt: text before the route fix, ns.json, ns.txt, host.json).
# Needs root, iproute2 (ip, tc), python3, util-linux (setpriv).
# Usage: tests/e2e/sysctl.sh [TCPDOCTOR]
set -euo pipefail
TD=${1:-${TCPDOCTOR:-target/release/tcpdoctor}}
TD=$(readlink -f "$TD")
P=tdk$$
NS=$P-a
CLEAN=$P-b
WORK=$(mktemp -d /tmp/tcpdoctor-sysctl.XXXXXX)

cleanup() {
  ip netns del "$NS" 2>/dev/null || true
  ip netns del "$CLEAN" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
fail() { echo "sysctl e2e FAIL: $*" >&2; exit 1; }
nsx() { ip netns exec "$NS" "$@"; }

[ "$(id -u)" -eq 0 ] || fail "needs root (network namespaces)"
for c in ip tc python3 setpriv; do
  command -v "$c" >/dev/null || fail "$c is missing"
done
[ -x "$TD" ] || fail "no tcpdoctor at $TD"
echo "kernel $(uname -r)"

ip netns add "$NS"
ip netns add "$CLEAN"
nsx ip link set lo up
ip -n "$NS" link add v0 type veth peer name v1
ip -n "$NS" link set v0 up
ip -n "$NS" link set v1 up
ip -n "$NS" addr add 10.84.0.1/24 dev v0
ip -n "$NS" -6 addr add fd84::1/64 dev v0 nodad
ip -n "$NS" route add 10.84.1.0/24 dev v0 initcwnd 4 initrwnd 20 quickack 1 rto_min 50ms
ip -n "$NS" route add 10.84.2.0/24 via 10.84.0.2 dev v0 table 100 rto_min 300ms
ip -n "$NS" route add 10.84.3.0/24 dev v0 initcwnd 2 initrwnd 2 rto_min 50ms
ip -n "$NS" -6 route add fd84:1::/64 dev v0 initcwnd 4 congctl reno features ecn

TBF=1
if ! nsx tc qdisc add dev v0 root tbf rate 10mbit burst 32kbit latency 50ms 2> "$WORK/tc.err"; then
  echo "SKIP tbf checks: this kernel refuses a tbf qdisc ($(cat "$WORK/tc.err"))"
  TBF=0
fi

# The values set in the namespace. Each is written there; a write that fails means the key
# is host-wide (or missing) on this kernel and it is left out of the checks.
SETS=(
  "net.ipv4.tcp_rmem=4096 8192 16384"
  "net.ipv4.tcp_wmem=4096 8192 16384"
  "net.ipv4.tcp_sack=0"
  "net.ipv4.tcp_timestamps=0"
  "net.ipv4.tcp_window_scaling=0"
  "net.ipv4.tcp_moderate_rcvbuf=0"
  "net.ipv4.tcp_congestion_control=reno"
  "net.ipv4.tcp_slow_start_after_idle=1"
  "net.ipv4.tcp_recovery=0"
  "net.ipv4.tcp_retries2=5"
  "net.ipv4.tcp_syn_retries=1"
  "net.ipv4.tcp_rto_min_us=1000000"
  "net.core.somaxconn=64"
  "net.ipv4.tcp_max_syn_backlog=64"
  "net.ipv4.tcp_syncookies=0"
  "net.ipv4.tcp_abort_on_overflow=1"
  "net.ipv4.ip_local_port_range=40000 40999"
  "net.ipv4.tcp_tw_reuse=0"
  "net.core.rmem_max=16384"
)
: > "$WORK/set.txt"
for kv in "${SETS[@]}"; do
  key=${kv%%=*} value=${kv#*=}
  path=/proc/sys/${key//.//}
  if [ ! -e "$path" ]; then
    echo "not on this kernel: $key (skipped)"
    continue
  fi
  host_before=$(tr -s ' \t' '  ' < "$path")
  # Written directly: procps' sysctl -w exits 0 even when the kernel refuses the value.
  if ! nsx sh -c 'printf "%s\n" "$1" > "$2"' _ "$value" "$path" 2> /dev/null; then
    echo "not per-namespace on this kernel: $key (skipped)"
    continue
  fi
  host_after=$(tr -s ' \t' '  ' < "$path")
  [ "$host_before" = "$host_after" ] || fail "writing $key in $NS changed the host's value"
  got=$(nsx cat "$path" | tr -s ' \t' '  ')
  [ "$got" = "$value" ] || fail "$key reads '$got' in $NS after setting '$value'"
  printf '%s=%s\n' "$key" "$value" >> "$WORK/set.txt"
done
[ "$(wc -l < "$WORK/set.txt")" -ge 12 ] || fail "fewer than 12 per-namespace keys could be set"
echo "per-namespace keys set in $NS: $(cut -d= -f1 "$WORK/set.txt" | tr '\n' ' ')"

# The binary where an unprivileged user can run it.
cp "$TD" "$WORK/tcpdoctor"
chmod 755 "$WORK" "$WORK/tcpdoctor"
TDX=$WORK/tcpdoctor

nsx "$TDX" sysctl --format json > "$WORK/ns.json"
nsx "$TDX" sysctl > "$WORK/before.txt"
"$TDX" sysctl --format json > "$WORK/host.json"
ip netns exec "$CLEAN" "$TDX" sysctl --format json > "$WORK/clean.json"
nsx setpriv --reuid=nobody --regid=nogroup --clear-groups "$TDX" sysctl --format json > "$WORK/nobody.json"
nsx readlink /proc/self/ns/net > "$WORK/ns.id"
readlink /proc/self/ns/net > "$WORK/host.id"
# The host's own values, read here on the host.
while IFS= read -r kv; do
  key=${kv%%=*}
  printf '%s=%s\n' "$key" "$(tr -s ' \t' '  ' < "/proc/sys/${key//.//}")"
done < "$WORK/set.txt" > "$WORK/host-values.txt"

python3 - "$WORK" "$NS" "$TBF" <<'PY'
import json, sys
work, ns, tbf = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
load = lambda n: json.load(open(f"{work}/{n}.json"))
nsj, host, nobody = load("ns"), load("host"), load("nobody")
errors = []
def check(cond, what):
    if not cond:
        errors.append(what)

def pairs(name):
    return dict(l.rstrip("\n").split("=", 1) for l in open(f"{work}/{name}") if l.strip())
set_values, host_values = pairs("set.txt"), pairs("host-values.txt")
settings = {s["name"]: s for s in nsj["settings"]}
host_settings = {s["name"]: s for s in host["settings"]}

# Where it ran.
check(nsj["schema"] == 1, "schema is not 1")
check(nsj["namespace"] == open(f"{work}/ns.id").read().strip(), f"namespace {nsj['namespace']} is not {ns}'s")
check(host["namespace"] == open(f"{work}/host.id").read().strip(), "host run: wrong namespace id")
check(nsj["namespace"] != host["namespace"], "same namespace id in and out of the namespace")
check(nsj["namespace_name"] == ns, f"namespace_name {nsj['namespace_name']!r}, expected {ns}")
check(nsj["initial_namespace"] is False, "the test namespace is reported as the host's")
check(host["initial_namespace"] is True, "the host namespace is not reported as the host's")
check(nsj["errors"] == [], f"errors in the namespace: {nsj['errors']}")

# Every value set is reported there, and the host's own value on the host.
differ = 0
for key, value in set_values.items():
    s = settings.get(key)
    if s is None:
        check(False, f"{key} missing from the report")
        continue
    check(s["value"] == value, f"{key}: reported {s['value']!r} in the namespace, set {value!r}")
    h = host_settings[key]
    check(h["value"] == host_values[key], f"{key}: reported {h['value']!r} on the host, which has {host_values[key]!r}")
    if host_values[key] != value:
        differ += 1
        check(h["value"] != s["value"], f"{key}: host and namespace reports agree although the values differ")
check(differ >= 10, f"only {differ} keys differ between host and namespace")

# The judgements: severity, words, and the fix (run in this namespace).
fx = lambda key, v: f"ip netns exec {ns} sysctl -w {key}={v}"
expect = {
    "net.ipv4.tcp_rmem": ("warn", "≈ 8 KB", fx("net.ipv4.tcp_rmem", "'4096 131072 16777216'")),
    "net.ipv4.tcp_wmem": ("warn", "≈ 8 KB in flight", fx("net.ipv4.tcp_wmem", "'4096 8192 16777216'")),
    "net.ipv4.tcp_sack": ("warn", "SACK is off", fx("net.ipv4.tcp_sack", "1")),
    "net.ipv4.tcp_timestamps": ("warn", "PAWS", fx("net.ipv4.tcp_timestamps", "1")),
    "net.ipv4.tcp_window_scaling": ("warn", "at most 64 KB both ways: 52.4 Mbit/s at 10 ms", fx("net.ipv4.tcp_window_scaling", "1")),
    "net.ipv4.tcp_moderate_rcvbuf": ("warn", "autotuning is off", fx("net.ipv4.tcp_moderate_rcvbuf", "1")),
    "net.ipv4.tcp_congestion_control": ("note", "reno halves its window", None),
    "net.ipv4.tcp_slow_start_after_idle": ("note", "from the initial window again", fx("net.ipv4.tcp_slow_start_after_idle", "0")),
    "net.ipv4.tcp_recovery": ("note", "RACK is off", fx("net.ipv4.tcp_recovery", "1")),
    "net.ipv4.tcp_retries2": ("note", "≈ 12.6 s", fx("net.ipv4.tcp_retries2", "15")),
    "net.ipv4.tcp_syn_retries": ("note", "≈ 3 s", fx("net.ipv4.tcp_syn_retries", "6")),
    "net.ipv4.tcp_rto_min_us": ("warn", "at least 1 s", fx("net.ipv4.tcp_rto_min_us", "200000")),
    "net.core.somaxconn": ("warn", "more than 64 connections", fx("net.core.somaxconn", "4096")),
    "net.ipv4.tcp_max_syn_backlog": ("warn", "syncookies are off", fx("net.ipv4.tcp_max_syn_backlog", "4096")),
    "net.ipv4.tcp_syncookies": ("warn", "new SYNs are dropped", fx("net.ipv4.tcp_syncookies", "1")),
    "net.ipv4.tcp_abort_on_overflow": ("note", "gets a reset", fx("net.ipv4.tcp_abort_on_overflow", "0")),
    "net.ipv4.ip_local_port_range": ("warn", "only 1000 ports", fx("net.ipv4.ip_local_port_range", "'32768 60999'")),
    "net.ipv4.tcp_tw_reuse": ("note", "TIME_WAIT (60 s)", fx("net.ipv4.tcp_tw_reuse", "1")),
}
for key, (sev, words, fix) in expect.items():
    if key not in set_values:
        continue
    s = settings[key]
    check(s["severity"] == sev, f"{key}={s['value']}: severity {s['severity']}, expected {sev}")
    check(words in (s["judgement"] or ""), f"{key}: judgement lacks {words!r}: {s['judgement']!r}")
    if fix is not None:
        check(s["fix"] == fix, f"{key}: fix {s['fix']!r}, expected {fix!r}")
# reno's fix: a congestion control this namespace may set, not reno.
cc = settings["net.ipv4.tcp_congestion_control"]
check((cc["fix"] or "").startswith(f"ip netns exec {ns} sysctl -w net.ipv4.tcp_congestion_control=")
      and not cc["fix"].endswith("=reno"), f"congestion control fix {cc['fix']!r}")
# The host's defaults on the same keys are not warnings.
for key in ("net.ipv4.tcp_sack", "net.ipv4.tcp_window_scaling", "net.ipv4.tcp_timestamps"):
    if key in set_values and host_values[key] == "1":
        check(host_settings[key]["severity"] == "ok", f"host {key}=1 judged {host_settings[key]['severity']}")
# rmem_max is host-wide on recent kernels: read-only in the namespace, reported with the host's value.
if "net.core.rmem_max" not in set_values:
    r = settings["net.core.rmem_max"]
    check(r["scope"] == "host", "net.core.rmem_max not reported as host-wide")
    check(r["value"] in (None, host_settings["net.core.rmem_max"]["value"]), "rmem_max differs from the host's")

# Routes.
def route(doc, dst, family="inet"):
    return next((r for r in doc["routes"] if r["dst"] == dst and r["family"] == family), None)
r1 = route(nsj, "10.84.1.0/24")
check(r1 is not None, "route 10.84.1.0/24 missing")
if r1:
    check(r1["dev"] == "v0" and r1["table"] == "main" and r1["gateway"] is None, f"route 10.84.1.0/24: {r1}")
    check(r1["metrics"] == {"initcwnd": 4, "initrwnd": 20, "quickack": 1, "rto_min_ms": 50}, f"metrics {r1['metrics']}")
    f = {x["subject"]: x for x in r1["findings"]}
    check(f.get("initcwnd", {}).get("severity") == "warn", "initcwnd 4 not a warning")
    check(f.get("initcwnd", {}).get("fix") == f"ip netns exec {ns} ip route change 10.84.1.0/24 dev v0 initcwnd 10 initrwnd 20 quickack 1 rto_min 50ms",
          f"initcwnd fix {f.get('initcwnd', {}).get('fix')!r}")
    check(f.get("quickack", {}).get("severity") == "note" and "delayed ACKs are off" in f["quickack"]["judgement"], "quickack finding")
    check(f.get("rto_min", {}).get("severity") == "note", "rto_min 50 ms finding")
    check(f.get("initrwnd", {}).get("severity") == "note", "initrwnd finding")
r2 = route(nsj, "10.84.2.0/24")
check(r2 is not None, "route 10.84.2.0/24 (table 100) missing")
if r2:
    check(r2["table"] == "100" and r2["gateway"] == "10.84.0.2", f"route 10.84.2.0/24: {r2}")
    f = {x["subject"]: x for x in r2["findings"]}
    check(f.get("rto_min", {}).get("severity") == "warn", "rto_min 300 ms not a warning")
    check(f.get("rto_min", {}).get("fix") == f"ip netns exec {ns} ip route change 10.84.2.0/24 via 10.84.0.2 dev v0 table 100",
          f"rto_min fix {f.get('rto_min', {}).get('fix')!r}")
r6 = route(nsj, "fd84:1::/64", "inet6")
check(r6 is not None, "route fd84:1::/64 missing")
if r6:
    check(r6["metrics"].get("initcwnd") == 4 and r6["metrics"].get("congctl") == "reno"
          and r6["metrics"].get("features") == ["ecn"], f"IPv6 metrics {r6['metrics']}")
    check(any(x["subject"] == "initcwnd" and x["severity"] == "warn" for x in r6["findings"]), "IPv6 initcwnd finding")
check(not any(r["dst"].startswith("10.84.") for r in host["routes"]), "the host run shows the namespace's routes")
check(all(r["table"] != "local" for r in nsj["routes"]), "local table routes reported")

# Qdiscs.
q = {(x["dev"], x["parent"]): x for x in nsj["qdiscs"]}
if tbf:
    t = q.get(("v0", "root"))
    check(t is not None and t["kind"] == "tbf", f"v0's root qdisc: {t}")
    if t:
        check(t["tbf"]["rate_bits_per_s"] == 10_000_000, f"tbf rate {t['tbf']}")
        check(49 <= t["tbf"]["latency_ms"] <= 51, f"tbf latency {t['tbf']}")
        f = t["findings"][0] if t["findings"] else {}
        check(f.get("severity") == "warn" and "up to 50 ms of added delay" in f.get("judgement", ""), f"tbf finding {f}")
        check(f.get("fix") == f"ip netns exec {ns} tc qdisc del dev v0 root", f"tbf fix {f.get('fix')!r}")
check(q.get(("v1", "root"), {}).get("kind") == "noqueue", "v1 (veth) should have noqueue")
check(q.get(("v1", "root"), {}).get("findings") == [], "noqueue judged")
check(not any(x["dev"] in ("v0", "v1") for x in host["qdiscs"]), "the host run shows the namespace's qdiscs")

# Unprivileged: the same report.
check(nobody["errors"] == [], f"unprivileged errors: {nobody['errors']}")
strip = lambda d: (d["namespace"], d["settings"], d["routes"], [dict(x, stats=None) for x in d["qdiscs"]])
check(strip(nobody) == strip(nsj), "the unprivileged report differs from root's")

if errors:
    print("sysctl e2e FAIL:", *errors, sep="\n  ", file=sys.stderr)
    sys.exit(1)
print(f"json: {len(set_values)} namespace values and judgements, routes, qdiscs, host vs namespace, unprivileged: ok")
PY

# The initcwnd fix, as printed, removes the finding and keeps the other metrics.
fix=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(next(f["fix"] for r in d["routes"] if r["dst"]=="10.84.1.0/24" for f in r["findings"] if f["subject"]=="initcwnd"))' "$WORK/ns.json")
case "$fix" in "ip netns exec $NS ip route change "*) ;; *) fail "unexpected fix: $fix" ;; esac
bash -c "$fix"
nsx "$TDX" sysctl --format json > "$WORK/fixed.json"
python3 - "$WORK/fixed.json" <<'PY' || fail "the initcwnd fix did not take"
import json, sys
d = json.load(open(sys.argv[1]))
r = next(r for r in d["routes"] if r["dst"] == "10.84.1.0/24")
assert r["metrics"] == {"initcwnd": 10, "initrwnd": 20, "quickack": 1, "rto_min_ms": 50}, r["metrics"]
assert not any(f["subject"] == "initcwnd" for f in r["findings"]), r["findings"]
PY
echo "fix: '$fix' applied, finding gone, other metrics kept"

# A route with two bad metrics: every printed fix, run in turn, leaves no warning
# on it (each restates the whole route), and rto_min keeps its lock.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [print(f["fix"]) for r in d["routes"] if r["dst"]=="10.84.3.0/24" for f in r["findings"] if f["fix"]]' "$WORK/ns.json" > "$WORK/fixes3"
[ "$(wc -l < "$WORK/fixes3")" -ge 2 ] || fail "10.84.3.0/24: expected two fixes, got: $(cat "$WORK/fixes3")"
while read -r f; do
  case "$f" in "ip netns exec $NS ip route change 10.84.3.0/24 "*) ;; *) fail "unexpected fix: $f" ;; esac
  bash -c "$f"
done < "$WORK/fixes3"
nsx "$TDX" sysctl --format json > "$WORK/fixed3.json"
python3 - "$WORK/fixed3.json" <<'PY' || fail "the fixes of 10.84.3.0/24 undid each other"
import json, sys
d = json.load(open(sys.argv[1]))
r = next(r for r in d["routes"] if r["dst"] == "10.84.3.0/24")
assert r["metrics"] == {"initcwnd": 10, "rto_min_ms": 50}, r["metrics"]
assert not any(f["severity"] == "warn" for f in r["findings"]), r["findings"]
PY
ip -n "$NS" route show 10.84.3.0/24 | grep -q "rto_min lock 50ms" || fail "rto_min lost its lock: $(ip -n "$NS" route show 10.84.3.0/24)"
echo "fixes of 10.84.3.0/24: $(wc -l < "$WORK/fixes3") run in turn, no warning left, rto_min still locked"

# The text report.
nsx "$TDX" sysctl > "$WORK/ns.txt"
need() { grep -qF -- "$1" "$WORK/ns.txt" || fail "text report lacks: $1"; }
need "tcpdoctor sysctl: network namespace $(cat "$WORK/ns.id") (ip netns $NS), not the host's"
for h in "BUFFERS & WINDOWS" "LOSS RECOVERY & TIMERS" "QUEUES & BACKLOG" "CONGESTION" "PER-ROUTE" "PER-INTERFACE QDISC"; do
  need "$h"
done
need "  net.ipv4.tcp_sack = 0 "
need "    WARN  SACK is off"
need "    fix   ip netns exec $NS sysctl -w net.ipv4.tcp_sack=1"
need "  net.ipv4.tcp_rmem = 4096 8192 16384 "
need "    WARN  largest receive window ≈ 8 KB"
need "  net.core.somaxconn = 64 "
need "  10.84.1.0/24 dev v0 initcwnd 10 initrwnd 20 quickack 1 rto_min 50ms"
need "  10.84.2.0/24 via 10.84.0.2 dev v0 table 100 rto_min 300ms"
need "    WARN  rto_min 300 ms"
need "    note  quickack 1: delayed ACKs are off"
[ "$TBF" = 1 ] && need "  v0         tbf rate 10 Mbit/s"
# Every warning's fix is in the text, once per finding.
python3 - "$WORK/fixed3.json" "$WORK/ns.txt" <<'PY' || fail "text report lacks fixes"
import json, sys
d = json.load(open(sys.argv[1])); t = open(sys.argv[2]).read()
fixes = [s["fix"] for s in d["settings"] if s["fix"]]
fixes += [f["fix"] for x in d["routes"] + d["qdiscs"] for f in x["findings"] if f["fix"]]
missing = [f for f in fixes if f"    fix   {f}\n" not in t]
assert not missing, missing
warn = sum(1 for l in t.splitlines() if l.startswith("    WARN  "))
assert warn == d["summary"]["warn"], (warn, d["summary"])
PY
echo "text: headings, warnings and every fix present"

# --fail-on-warn: 1 in the namespace with warnings, 0 in a fresh one without.
set +e
nsx "$TDX" sysctl --fail-on-warn > /dev/null; rc_bad=$?
ip netns exec "$CLEAN" "$TDX" sysctl --fail-on-warn > /dev/null; rc_clean=$?
set -e
[ "$rc_bad" = 1 ] || fail "--fail-on-warn exited $rc_bad with warnings"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["summary"]["warn"] == 0 else 1)' "$WORK/clean.json" \
  && { [ "$rc_clean" = 0 ] || fail "--fail-on-warn exited $rc_clean without warnings"; }
echo "--fail-on-warn: $rc_bad with warnings, $rc_clean in a fresh namespace"
if [ -n "${KEEP_OUTPUT:-}" ]; then
  mkdir -p "$KEEP_OUTPUT"
  cp "$WORK/before.txt" "$WORK/ns.json" "$WORK/ns.txt" "$WORK/host.json" "$KEEP_OUTPUT/"
  echo "reports kept in $KEEP_OUTPUT"
fi
echo "sysctl e2e: all checks passed"

#!/usr/bin/env bash
# End to end for the inputs `analyze` takes, with real parts: nginx (tcp_nodelay off on
# :8080, on on :8081) in one network namespace, wrk in another, a router namespace between
# them (so each side's TTL tells where a capture was taken), tcpdump at both ends.
#   rotation   tcpdump -r whole.pcap -C 1 -z gzip -w rot: the rotated files (gzip'd and
#              not) analysed as a directory give the JSON of the whole capture
#   stdin      gzip and zstd of the capture on standard input: the same JSON
#   vantage    the client's and the server's captures merged: each file's place is told
#              (client, server), every connection is matched across the two and analysed
#              once, and the findings are those of the client's capture alone
#   filter     --filter EXPR gives the JSON of `tcpdump -r whole.pcap -w - EXPR | analyze -`
#   from/to    --from/--to keep as many packets as tshark's frame.time_relative window
#   corrupt    a damaged gzip stream: exit 2 and a message naming the compressed offset
# Needs root, nginx, wrk, tcpdump, tshark, gzip. Usage: tests/e2e/inputs.sh [TCPDOCTOR]
set -euo pipefail
TD=${1:-${TCPDOCTOR:-target/release/tcpdoctor}}
TD=$(readlink -f "$TD")
P=tdfit-in$$
. "$(dirname "$0")/lib.sh"
fail() { echo "e2e inputs FAIL: $*" >&2; exit 1; }
R=$P-r

cleanup() {
  e2e_cleanup
  ip netns del "$R" 2>/dev/null || true
}

# client 10.83.1.1 -- 10.83.1.254 router 10.83.2.254 -- 10.83.2.1 server
C=$P-c S=$P-s CLIENT_IP=10.83.1.1 SERVER_IP=10.83.2.1
WORK=$(mktemp -d "/tmp/tcpdoctor-$P.XXXXXX")
PIDS=()
trap cleanup EXIT
for ns in "$C" "$S" "$R"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip -n "$C" link add eth0 type veth peer name c0 netns "$R"
ip -n "$S" link add eth0 type veth peer name s0 netns "$R"
ip -n "$C" addr add "$CLIENT_IP/24" dev eth0
ip -n "$S" addr add "$SERVER_IP/24" dev eth0
ip -n "$R" addr add 10.83.1.254/24 dev c0
ip -n "$R" addr add 10.83.2.254/24 dev s0
for l in "$C eth0" "$S eth0" "$R c0" "$R s0"; do set -- $l; ip -n "$1" link set "$2" up; done
ip -n "$C" route add default via 10.83.1.254
ip -n "$S" route add default via 10.83.2.254
ip netns exec "$R" sysctl -qw net.ipv4.ip_forward=1
mkdir -p "$WORK/html" "$WORK/logs" "$WORK/rot"
chmod 755 "$WORK" "$WORK/html"
python3 -c 'import sys; open(sys.argv[1], "w").write("<html><body>" + "inputs end-to-end page. " * 26 + "</body></html>\n")' "$WORK/html/index.html"
e2e_nginx "  server { listen $SERVER_IP:8080; tcp_nodelay off; root $WORK/html; }
  server { listen $SERVER_IP:8081; tcp_nodelay on;  root $WORK/html; }"
e2e_wait_port 8080 8081

# Capture at both ends while wrk runs against both ports.
e2e_tcpdump "$C" "$WORK/client.pcap" 0 tcp
TC=$DUMP
e2e_tcpdump "$S" "$WORK/server.pcap" 0 tcp
TS=$DUMP
ip netns exec "$C" wrk -c 4 -t 1 -d 1s "http://$SERVER_IP:8080/" >/dev/null
ip netns exec "$C" wrk -c 4 -t 1 -d 1s "http://$SERVER_IP:8081/" >/dev/null
# Until every connection's FIN is answered (10 s at most): the captures hold their ends.
e2e_wait_closed "$S" 8080
e2e_wait_closed "$S" 8081
e2e_tcpdump_stop "$TC" "$TS"
W=$WORK/server.pcap
n=$(tcpdump -r "$W" 2>/dev/null | wc -l)
[ "$n" -gt 2000 ] || fail "the server capture holds only $n packets"

json() { "$TD" analyze --format json "$@"; }
# `input` names what was asked (the files, stdin): the rest must not depend on it.
strip() { python3 -c '
import json, sys
d = json.load(sys.stdin)
for k in ["input"] + sys.argv[1:]:
    d.pop(k, None)
print(json.dumps(d, sort_keys=True))' "$@"; }
json "$W" | strip > "$WORK/whole.json"
grep -q nagle_delayed_ack "$WORK/whole.json" || fail "the whole capture names no Nagle stall"

# 1. tcpdump's own rotation (-C 1: every 1,000,000 bytes) with -z gzip.
(cd "$WORK/rot" && tcpdump -r "$W" -w part -C 1 -Z root -z gzip 2>/dev/null)
# -z runs gzip in the background on each file but the last: wait (10 s at most) until
# only the last is left uncompressed.
for _ in $(seq 100); do
  [ "$(ls "$WORK/rot" | grep -vc '\.gz$')" -eq 1 ] && break
  sleep 0.1
done
ls "$WORK/rot" | grep -q '\.gz$' || fail "tcpdump -z gzip left no .gz file"
files=$(ls "$WORK/rot" | wc -l)
[ "$files" -ge 2 ] || fail "tcpdump -C 1 made only $files file(s)"
json "$WORK/rot" > "$WORK/rot.json"
strip inputs < "$WORK/rot.json" | cmp -s - "$WORK/whole.json" \
  || fail "the $files rotated files do not analyse as the whole capture"
echo "e2e inputs: $files files from tcpdump -C 1 -z gzip analyse as the whole capture"

# 2. Compressed on standard input.
gzip -c "$W" | json - | strip | cmp -s - "$WORK/whole.json" || fail "gzip on stdin differs"
if command -v zstd >/dev/null; then
  zstd -q -c "$W" | json - | strip | cmp -s - "$WORK/whole.json" || fail "zstd on stdin differs"
fi
echo "e2e inputs: gzip (and zstd) on standard input give the same JSON"

# 3. Two vantage points of the same connections.
json "$WORK/client.pcap" "$WORK/server.pcap" > "$WORK/both.json"
json "$WORK/client.pcap" > "$WORK/client.json"
python3 - "$WORK/both.json" "$WORK/client.json" <<'PY' || fail "vantage points"
import json, sys
both, client = (json.load(open(p)) for p in sys.argv[1:3])
files = both["inputs"]["files"]
places = [f["vantage"] for f in files]
assert places == ["client", "server"], places
conns = client["capture"]["connections"]
assert both["capture"]["connections"] == conns, (both["capture"]["connections"], conns)
assert both["inputs"]["connections_in_several_files"] == conns, both["inputs"]
m = both["inputs"]["matched"][0]
assert [v["vantage"] for v in m["views"]] == ["client", "server"], m
assert m["ids"], m
assert files[1]["second_views"] > 0
kinds = lambda d: sorted((f["kind"], f["culprit"]["endpoint"], f["occurrences"]) for f in d["findings"])
assert kinds(both) == kinds(client), (kinds(both), kinds(client))
print(f"e2e inputs: client and server captures merged: places {places}, {conns} connections matched, findings {kinds(both)}")
PY

# 4. --filter against tcpdump's own selection.
for expr in "port 8080" "tcp port 8081 and host $SERVER_IP" "not port 8080"; do
  tcpdump -r "$W" -w "$WORK/f.pcap" "$expr" 2>/dev/null
  want=$(json "$WORK/f.pcap" | strip)
  got=$(json --filter "$expr" "$W" | strip selection)
  [ "$want" = "$got" ] || fail "--filter '$expr' differs from tcpdump's selection"
done
json --filter "port 8081" "$W" | grep -q nagle_delayed_ack && fail "port 8081 (nodelay on) names Nagle"
json --filter "port 8080" "$W" | grep -q nagle_delayed_ack || fail "port 8080 does not name Nagle"
echo "e2e inputs: --filter agrees with tcpdump -r -w EXPR on 3 expressions"

# 5. --from/--to against tshark's window.
for win in "0.5 1.5" "1 2.2"; do
  set -- $win
  want=$(tshark -r "$W" -Y "frame.time_relative >= $1 && frame.time_relative <= $2" 2>/dev/null | wc -l)
  got=$(json --from "$1" --to "$2" "$W" | python3 -c 'import json,sys; print(json.load(sys.stdin)["capture"]["packets"])')
  [ "$want" = "$got" ] || fail "--from $1 --to $2: $got packets, tshark $want"
  [ "$got" -gt 0 ] || fail "--from $1 --to $2 kept nothing"
done
echo "e2e inputs: --from/--to keep what tshark's frame.time_relative window keeps"

# 6. A damaged gzip stream.
gzip -c "$W" > "$WORK/bad.pcap.gz"
printf '\xe0' | dd of="$WORK/bad.pcap.gz" bs=1 seek=3 conv=notrunc 2>/dev/null
set +e
"$TD" analyze "$WORK/bad.pcap.gz" > /dev/null 2> "$WORK/err"
rc=$?
set -e
[ "$rc" = 2 ] || fail "damaged gzip: exit $rc, not 2"
grep -q "corrupt at compressed byte" "$WORK/err" || fail "damaged gzip: $(cat "$WORK/err")"
echo "e2e inputs: a damaged gzip stream exits 2: $(cat "$WORK/err")"
echo "e2e inputs: PASS"

#!/usr/bin/env bash
# End to end for a message broker's traffic, with real parts: Debian's mosquitto (MQTT) in one
# network namespace, mosquitto_sub (QoS 1) and mosquitto_pub (QoS 1, one message per line) in
# another, real Linux TCP between them, tcpdump at the broker.
#   quiet   six messages published 250 ms apart and delivered to the subscriber: the pace of the
#           publisher is nobody's wait, the deliveries answer no request of the subscriber's.
#           No finding; the subscriber's connection has two exchanges (CONNECT, SUBSCRIBE),
#           not one per delivery.
#   stalled the broker stopped (SIGSTOP) for 400 ms while each of three messages arrives, then
#           resumed (SIGCONT): server_delay at the broker, three occurrences of ~400 ms, all on
#           the publisher's connection (the late deliveries to the subscriber are nobody's
#           request); tshark says each occurrence's last evidence frame is an MQTT PUBACK.
# Needs root, mosquitto, mosquitto-clients, tcpdump, tshark. Usage: tests/e2e/broker.sh [TCPDOCTOR]
set -euo pipefail
TD=${1:-${TCPDOCTOR:-target/release/tcpdoctor}}
TD=$(readlink -f "$TD")
P=tdbk$$
. "$(dirname "$0")/lib.sh"
fail() { echo "e2e broker FAIL: $*" >&2; exit 1; }

e2e_netns "$P" 10.88.0
# mosquitto drops root for its own user: it must be able to read its configuration.
chmod 755 "$WORK"
cat > "$WORK/mosquitto.conf" <<CONF
listener 1883 $SERVER_IP
allow_anonymous true
persistence false
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
log_type subscribe
CONF
chmod 644 "$WORK/mosquitto.conf"
ip netns exec "$S" mosquitto -c "$WORK/mosquitto.conf" 2> "$WORK/broker.err" &
BROKER=$!
PIDS+=("$BROKER")
# A stopped broker would hold SIGTERM pending and the cleanup's wait forever: resume it first.
trap 'kill -CONT "$BROKER" 2>/dev/null; e2e_cleanup' EXIT
e2e_wait_port 1883
kill -0 "$BROKER" 2>/dev/null || fail "mosquitto did not start: $(cat "$WORK/broker.err")"

# run NAME STALLS: a subscriber, then a publisher sending six messages 250 ms apart and then
# STALLS more, each while the broker is stopped for 400 ms; writes $WORK/NAME.pcap and .json.
run() {
  local name=$1 stalls=$2 i sub pub
  e2e_tcpdump "$S" "$WORK/$name.pcap" 0 tcp port 1883
  local dump=$DUMP
  ip netns exec "$C" mosquitto_sub -h "$SERVER_IP" -t "t/$name" -q 1 -i "sub-$name" \
    > "$WORK/$name.sub" 2> "$WORK/$name.sub.err" &
  sub=$!
  PIDS+=("$sub")
  # The subscription is in place once the broker logs it.
  e2e_wait_line "sub-$name 1 t/$name" "$WORK/broker.err"
  mkfifo "$WORK/$name.fifo"
  ip netns exec "$C" mosquitto_pub -h "$SERVER_IP" -t "t/$name" -q 1 -l -i "pub-$name" \
    < "$WORK/$name.fifo" 2> "$WORK/$name.pub.err" &
  pub=$!
  PIDS+=("$pub")
  exec 7> "$WORK/$name.fifo"
  for i in 1 2 3 4 5 6; do
    echo "reading $i" >&7
    sleep 0.25
  done
  for i in $(seq "$stalls"); do
    kill -STOP "$BROKER"
    echo "stalled $i" >&7
    sleep 0.4
    kill -CONT "$BROKER"
    sleep 0.25
  done
  exec 7>&-
  wait "$pub" || fail "$name: mosquitto_pub failed: $(cat "$WORK/$name.pub.err")"
  # Every message reached the subscriber before it is stopped.
  for _ in $(seq 50); do
    [ "$(wc -l < "$WORK/$name.sub")" -ge $((6 + stalls)) ] && break
    sleep 0.1
  done
  [ "$(wc -l < "$WORK/$name.sub")" -eq $((6 + stalls)) ] \
    || fail "$name: the subscriber got $(wc -l < "$WORK/$name.sub") of $((6 + stalls)) messages"
  kill "$sub"
  wait "$sub" 2>/dev/null || true
  e2e_wait_closed "$S" 1883
  e2e_tcpdump_stop "$dump"
  "$TD" analyze --format json "$WORK/$name.pcap" > "$WORK/$name.json" \
    || fail "$name: analyze exited $?"
}

run quiet 0
"$TD" analyze "$WORK/quiet.pcap" | head -6
python3 - "$WORK/quiet.json" <<'PY' || fail "quiet: expected no finding and two exchanges on the subscriber's connection"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["capture"]["connections"] == 2, d["capture"]
assert d["findings"] == [], [(f["kind"], f["culprit"], f["total_delay_ms"]) for f in d["findings"]]
kinds = [f["kind"] for f in d["minor_findings"]]
assert not {"server_delay", "client_delay"} & set(kinds), kinds
sub, pub = sorted(d["connections"], key=lambda c: c["first_frame"])
# The subscriber asked twice (CONNECT, SUBSCRIBE); six deliveries answered nothing it asked.
assert sub["exchanges"] == 2, sub["exchanges"]
# The publisher asked seven times (CONNECT, six QoS 1 PUBLISHes), each answered at once.
assert pub["exchanges"] == 7, pub["exchanges"]
assert pub["exchange_latency_ms"]["max"] < 100, pub["exchange_latency_ms"]
PY

run stalled 3
"$TD" analyze "$WORK/stalled.pcap" | sed -n '/FINDINGS/,/evidence/p'
python3 - "$WORK/stalled.json" "$SERVER_IP" <<'PY' > "$WORK/pubacks" || fail "stalled: expected server_delay at the broker, 3 x ~400 ms on the publisher's connection"
import json, sys
d = json.load(open(sys.argv[1]))
f = d["findings"]
assert f, "no finding"
top = f[0]
assert top["kind"] == "server_delay", [x["kind"] for x in f]
assert top["culprit"] == {"endpoint": sys.argv[2] + ":1883", "role": "server"}, top["culprit"]
assert top["occurrences"] == 3, top["occurrences"]
# The broker was stopped 400 ms; the publisher may send a little after it stopped.
assert 200 <= top["typical_delay_ms"] <= 800, top["typical_delay_ms"]
sub, pub = sorted(d["connections"], key=lambda c: c["first_frame"])
assert {e["connection"] for e in top["evidence"]} == {pub["id"]}, top["evidence"]
assert sub["exchanges"] == 2, sub["exchanges"]
for e in top["evidence"]:
    print(e["frames"][-1])
PY
# The oracle: each occurrence ends at the broker's PUBACK (MQTT message type 4), by tshark.
for frame in $(cat "$WORK/pubacks"); do
  t=$(tshark -r "$WORK/stalled.pcap" -Y "frame.number == $frame" -T fields -e mqtt.msgtype 2>/dev/null)
  [ "$t" = 4 ] || fail "stalled: frame $frame is MQTT message type '$t', not a PUBACK (4)"
done
echo "e2e broker: ok (mosquitto: quiet deliveries name nothing; a stopped broker is server_delay)"

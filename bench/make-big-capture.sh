#!/usr/bin/env bash
# Build the benchmark capture: real nginx + wrk traffic between two network namespaces,
# captured with tcpdump on the server side of the veth.
#
#   sudo bash bench/make-big-capture.sh [OUT]        (default OUT=bench/data/big.pcap)
#
# Phase 1: wrk with keep-alive (-c KA_CONNS), a KA_SECS round then rounds sized from the
#          measured rate, until the packets left for phase 2 are about what MIN_CONNS
#          close-connections bring (PKTS_PER_CLOSE_CONN each).
# Phase 2: wrk with "Connection: close" in rounds (sized from measured rates) until at least
#          MIN_CONNS connections have been opened and MIN_PKTS packets crossed the veth.
# The live counters (veth packet counters, the client's TcpActiveOpens) aim MARGIN_PCT past
# the thresholds.
# The finished file is then checked (packets with capinfos, connections = client SYNs) and the
# script fails if either threshold is not met.
#
# Environment (defaults): MIN_PKTS=700000 MIN_CONNS=30000 KA_SECS=3 KA_CONNS=50
#                         CLOSE_CONNS=50 CLOSE_CHUNK=2 MAX_PHASE_SECS=120 MARGIN_PCT=5
#                         PKTS_PER_CLOSE_CONN=12
#                         TCPDUMP_BUF_KIB=262144 ALLOW_DROPS=0
#
# Only namespaces named tdbn-* created by this very run are touched; everything is cleaned up
# on exit (processes are stopped by PID, then the namespaces are deleted).
set -euo pipefail

# SHAPE=short: many short connections (Connection: close only, one exchange each), the shape
# that costs the most per packet; the defaults below then change to MIN_PKTS=400000,
# MIN_CONNS=33000, KA_SECS=0 (no keep-alive phase) and OUT=bench/data/short.pcap.
if [ "${SHAPE:-}" = short ]; then
    : "${MIN_PKTS:=400000}" "${MIN_CONNS:=33000}" "${KA_SECS:=0}"
fi
MIN_PKTS=${MIN_PKTS:-700000}
MIN_CONNS=${MIN_CONNS:-30000}
KA_SECS=${KA_SECS:-3}           # first round of phase 1 (0: no keep-alive phase)
KA_CONNS=${KA_CONNS:-50}
CLOSE_CONNS=${CLOSE_CONNS:-50}
CLOSE_CHUNK=${CLOSE_CHUNK:-2}   # first (probe) round of phase 2
MAX_PHASE_SECS=${MAX_PHASE_SECS:-120}
PKTS_PER_CLOSE_CONN=${PKTS_PER_CLOSE_CONN:-12}   # measured: a Connection: close request is ~12 packets
MARGIN_PCT=${MARGIN_PCT:-5}     # overshoot the live targets a little; the file is checked anyway
TCPDUMP_BUF_KIB=${TCPDUMP_BUF_KIB:-262144}   # kernel ring: the default 2 MiB drops ~45% here

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
if [ "${SHAPE:-}" = short ]; then default_out=$repo/bench/data/short.pcap; else default_out=$repo/bench/data/big.pcap; fi
OUT=${1:-$default_out}
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac

die() { echo "make-big-capture: $*" >&2; exit 1; }
log() { echo "[make-big-capture $(date +%T)] $*" >&2; }

[ "$(id -u)" = 0 ] || die "needs root (network namespaces): sudo bash $0 $*"
for t in ip nginx wrk tcpdump capinfos; do
    command -v "$t" >/dev/null || die "missing tool: $t"
done

start_s=$(date +%s.%N)
tag="$$"
NS_C="tdbn-c-$tag"
NS_S="tdbn-s-$tag"
IP_C=10.231.77.1
IP_S=10.231.77.2
IF_C=tdbn-c            # interface names live inside the namespaces only
IF_S=tdbn-s

tmp=$(mktemp -d /tmp/tdbn-capture.XXXXXX)
chmod 755 "$tmp"
mkdir -p "$(dirname "$OUT")"
partial="$OUT.partial.$tag"

nginx_pid=""
tcpdump_pid=""
wrk_pid=""
created_ns=()

stop_pid() {  # stop_pid PID SIGNAL: signal, wait up to 5 s, then SIGKILL
    local pid=$1 sig=$2 i
    [ -n "$pid" ] || return 0
    kill -0 "$pid" 2>/dev/null || return 0
    kill "-$sig" "$pid" 2>/dev/null || true
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_pid "$wrk_pid" INT
    stop_pid "$tcpdump_pid" INT
    stop_pid "$nginx_pid" QUIT
    local ns
    for ns in "${created_ns[@]}"; do
        ip netns del "$ns" 2>/dev/null || log "warning: could not delete netns $ns"
    done
    rm -f "$partial"
    rm -rf "$tmp"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- namespaces and veth -------------------------------------------------------------------
for ns in "$NS_C" "$NS_S"; do
    ip netns list | awk '{print $1}' | grep -qx "$ns" && die "netns $ns already exists"
done
ip netns add "$NS_C"; created_ns+=("$NS_C")
ip netns add "$NS_S"; created_ns+=("$NS_S")
ip -n "$NS_C" link add "$IF_C" type veth peer name "$IF_S" netns "$NS_S"
for ns in "$NS_C" "$NS_S"; do
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip -n "$ns" link set lo up
done
# wide ephemeral range on the client so 30k+ short connections rarely reuse a port
ip netns exec "$NS_C" sysctl -qw net.ipv4.ip_local_port_range="1024 65000"
ip netns exec "$NS_S" sysctl -qw net.core.somaxconn=4096 net.ipv4.tcp_max_syn_backlog=4096
ip -n "$NS_C" addr add "$IP_C/24" dev "$IF_C"
ip -n "$NS_S" addr add "$IP_S/24" dev "$IF_S"
ip -n "$NS_C" link set "$IF_C" up
ip -n "$NS_S" link set "$IF_S" up

# ---- nginx ---------------------------------------------------------------------------------
mkdir -p "$tmp/html" "$tmp/logs"
{
    echo '<!DOCTYPE html>'
    echo '<html><head><title>tcpdoctor benchmark</title></head><body>'
    echo '<h1>tcpdoctor benchmark page</h1>'
    for i in 1 2 3 4 5 6 7; do
        echo "<p>Line $i of filler text so that the response body is about six hundred bytes.</p>"
    done
    echo '</body></html>'
} >"$tmp/html/index.html"
chmod -R a+rX "$tmp"
cat >"$tmp/nginx.conf" <<EOF
worker_processes 1;
pid $tmp/nginx.pid;
error_log $tmp/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 100000;
    client_body_temp_path $tmp/client_body;
    proxy_temp_path $tmp/proxy;
    fastcgi_temp_path $tmp/fastcgi;
    uwsgi_temp_path $tmp/uwsgi;
    scgi_temp_path $tmp/scgi;
    types { text/html html; }
    server {
        listen $IP_S:80 backlog=4096;
        root $tmp/html;
        index index.html;
    }
}
EOF
ip netns exec "$NS_S" nginx -p "$tmp" -c "$tmp/nginx.conf" -g 'daemon off;' 2>"$tmp/logs/stderr" &
nginx_pid=$!
for i in $(seq 100); do
    if ip netns exec "$NS_C" bash -c "exec 3<>/dev/tcp/$IP_S/80" 2>/dev/null; then break; fi
    kill -0 "$nginx_pid" 2>/dev/null || die "nginx exited: $(cat "$tmp/logs/stderr" "$tmp/logs/error.log" 2>/dev/null)"
    sleep 0.1
done
ip netns exec "$NS_C" bash -c "exec 3<>/dev/tcp/$IP_S/80" 2>/dev/null || die "nginx not reachable"
log "nginx (pid $nginx_pid) serving $(wc -c <"$tmp/html/index.html") B index.html on $IP_S:80 in $NS_S"

# ---- counters ------------------------------------------------------------------------------
veth_packets() {  # packets received + sent by the server-side veth (what tcpdump sees)
    local rx tx
    rx=$(ip netns exec "$NS_S" cat "/sys/class/net/$IF_S/statistics/rx_packets")
    tx=$(ip netns exec "$NS_S" cat "/sys/class/net/$IF_S/statistics/tx_packets")
    echo $((rx + tx))
}
client_opens() {  # TcpActiveOpens in the client namespace (= SYNs sent, excluding retries)
    ip netns exec "$NS_C" awk '/^Tcp:/ { if (!h) { for (i = 1; i <= NF; i++) c[$i] = i; h = 1 }
                                         else print $c["ActiveOpens"] }' /proc/net/snmp
}

# ---- capture -------------------------------------------------------------------------------
ip netns exec "$NS_S" tcpdump -i "$IF_S" --immediate-mode -B "$TCPDUMP_BUF_KIB" -Z root -w "$partial" 2>"$tmp/tcpdump.err" &
tcpdump_pid=$!
for i in $(seq 100); do
    grep -q 'listening on' "$tmp/tcpdump.err" 2>/dev/null && break
    kill -0 "$tcpdump_pid" 2>/dev/null || die "tcpdump exited: $(cat "$tmp/tcpdump.err")"
    sleep 0.1
done
grep -q 'listening on' "$tmp/tcpdump.err" || die "tcpdump did not start: $(cat "$tmp/tcpdump.err")"
pk0=$(veth_packets); op0=$(client_opens)
log "tcpdump (pid $tcpdump_pid) capturing on $IF_S in $NS_S"

run_wrk() {  # run_wrk ARGS... ; in the background so cleanup can stop it by PID
    ip netns exec "$NS_C" wrk "$@" "http://$IP_S/" >"$tmp/wrk.out" 2>&1 &
    wrk_pid=$!
    wait "$wrk_pid" || die "wrk failed: $(cat "$tmp/wrk.out")"
    wrk_pid=""
    grep -E 'requests in|Requests/sec|errors' "$tmp/wrk.out" | sed 's/^ */    wrk: /' >&2 || true
}

want_pk=$(( MIN_PKTS * (100 + MARGIN_PCT) / 100 ))
want_op=$(( MIN_CONNS * (100 + MARGIN_PCT) / 100 ))

# drive LABEL FIRST_SECS WANT_PKTS WANT_CONNS WRK_ARGS...: run wrk rounds until the veth has
# seen WANT_PKTS packets and the client has opened WANT_CONNS connections (both counted from
# the start of the capture). The first round lasts FIRST_SECS; later rounds are sized from the
# rates just measured (wrk -d takes whole seconds; capped at 4 s so the estimate is refreshed).
# Sets drive_secs to the seconds wrk ran.
drive() {
    local label=$1 chunk=$2 wpk=$3 wop=$4 pk op pk2 op2
    shift 4
    drive_secs=0
    while :; do
        pk=$(( $(veth_packets) - pk0 )); op=$(( $(client_opens) - op0 ))
        [ "$pk" -ge "$wpk" ] && [ "$op" -ge "$wop" ] && break
        [ "$drive_secs" -ge "$MAX_PHASE_SECS" ] && die "gave up after ${drive_secs}s of $label: $pk packets, $op connections"
        log "$label: wrk $* -d ${chunk}s (have $pk/$wpk packets, $op/$wop connections)"
        run_wrk "$@" -d "${chunk}s"
        drive_secs=$(( drive_secs + chunk ))
        pk2=$(( $(veth_packets) - pk0 )); op2=$(( $(client_opens) - op0 ))
        chunk=$(awk -v c="$chunk" -v dp=$((pk2 - pk)) -v dc=$((op2 - op)) \
                    -v np=$((wpk - pk2)) -v nc=$((wop - op2)) 'BEGIN {
            s = 1
            if (dp > 0 && np / (dp / c) > s) s = np / (dp / c)
            if (dc > 0 && nc / (dc / c) > s) s = nc / (dc / c)
            s = (s == int(s)) ? s : int(s) + 1
            printf "%d", (s > 4) ? 4 : s }')
    done
}

# Phase 1 (keep-alive) leaves room for the packets phase 2 brings with its connections, so the
# file lands just past both thresholds whatever the request rates on this run.
drive_secs=0
ka_pk=$(( want_pk - want_op * PKTS_PER_CLOSE_CONN ))
[ "$ka_pk" -gt 0 ] || ka_pk=1
if [ "$KA_SECS" -gt 0 ]; then   # KA_SECS=0: short connections only (SHAPE=short)
    drive "phase 1 (keep-alive)" "$KA_SECS" "$ka_pk" 0 -c "$KA_CONNS" -t 2
fi
ka_secs=$drive_secs
drive "phase 2 (Connection: close)" "$CLOSE_CHUNK" "$want_pk" "$want_op" -c "$CLOSE_CONNS" -t 2 -H 'Connection: close'
close_secs=$drive_secs
sleep 0.5   # let the last FIN/ACKs cross
live_pk=$(( $(veth_packets) - pk0 )); live_op=$(( $(client_opens) - op0 ))
stop_pid "$tcpdump_pid" INT; tcpdump_pid=""
grep -E 'captured|dropped' "$tmp/tcpdump.err" | sed 's/^/    tcpdump: /' >&2 || true
dropped=$(awk '/dropped by kernel/ { print $1 }' "$tmp/tcpdump.err")
if [ "${dropped:-0}" -gt 0 ] && [ "${ALLOW_DROPS:-0}" != 1 ]; then
    die "tcpdump dropped $dropped packets (the file would show losses that never happened); raise TCPDUMP_BUF_KIB or set ALLOW_DROPS=1"
fi
log "wrk ran ${ka_secs}s with keep-alive, ${close_secs}s with Connection: close; veth saw $live_pk packets, client opened $live_op connections"

# ---- verify the file -----------------------------------------------------------------------
packets=$(capinfos -c -M "$partial" | awk -F: '/Number of packets/ { gsub(/ /, "", $2); print $2 }')
syns=$(tcpdump -nr "$partial" 'tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn' 2>/dev/null | wc -l)
# a connection = a distinct (client address.port, initial sequence number): SYN retries repeat both
conns=$(tcpdump -nr "$partial" 'tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn' 2>/dev/null \
        | awk '{ for (i = 1; i < NF; i++) if ($i == "seq") { s = $(i + 1); break }; print $3, s }' \
        | sort -u | wc -l)
[ "$packets" -ge "$MIN_PKTS" ] || die "only $packets packets in the file (need $MIN_PKTS); raise MARGIN_PCT"
[ "$conns" -ge "$MIN_CONNS" ] || die "only $conns connections in the file (need $MIN_CONNS); raise MARGIN_PCT"
mv -f "$partial" "$OUT"
bytes=$(stat -c %s "$OUT")
elapsed=$(awk -v a="$start_s" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')

echo "capture:     $OUT"
echo "size:        $bytes bytes ($(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MiB)"
echo "packets:     $packets"
echo "SYNs:        $syns (retries included)"
echo "connections: $conns"
printf 'built in:    %.1f s (phase 1 %ss keep-alive, phase 2 %ss Connection: close)\n' "$elapsed" "$ka_secs" "$close_secs"

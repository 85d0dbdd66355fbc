#!/usr/bin/env bash
# Regenerate the packet-capture fixtures in fixtures/ from scratch with real Linux TCP and real
# software (nginx, the JDK's com.sun.net.httpserver, wrk, curl, a small Python client) running
# in network namespaces. See fixtures/README.md for what each capture shows.
#
# Usage (as root):  scripts/make-fixtures.sh [GROUP...]
#   GROUP is any of: nginx-off nginx-on jdk-default jdk-nodelay client-write upload
#   (default: all of them, in that order).
#
# Environment:
#   DELAYRELAY   path of the userspace delay line (default /work/shared/tools/delayrelay.py)
#   NO_CHECK=1   install captures even when a check (expected symptom, no kernel drops, no
#                retransmissions, size) fails; by default a group is retried up to 5 times
#
# Only namespaces named tdfx-c (client), tdfx-s (server) and tdfx-r (router) are created (and
# deleted again); every process started is tracked by PID and stopped on exit.
# Needs: ip (iproute2), nginx, wrk, curl, tcpdump, dumpcap, tshark, capinfos, java, javac, python3.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FIX=$ROOT/fixtures
SRC=$FIX/src
EXAMPLES=$ROOT/examples
MEASURE=$FIX/measurements.txt
RELAY=${DELAYRELAY:-/work/shared/tools/delayrelay.py}
NO_CHECK=${NO_CHECK:-0}
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)

NS_C=tdfx-c
NS_S=tdfx-s
NS_R=tdfx-r
DELAY_DEV=tdfxdly   # TUN device of the delay line, inside the router namespace
DELAY_MS=17         # each way: RTT ~35 ms

# Everything runs at nice -10: the machine is shared, and a load generator starved of CPU for
# 2-3 ms makes a healthy server fire spurious tail-loss probes (PTO = 2*SRTT + 2 ms on a 0.1 ms path).
NICE=(nice -n -10)
PIDS=()       # background processes we started, stopped by PID
NAMESPACES=() # namespaces we created
TMP=""

log() { printf '[make-fixtures %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------------------------------------
# process and namespace bookkeeping

forget_pid() {
    local pid=$1 p keep=()
    for p in "${PIDS[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}

# stop_pid PID [SIGNAL]: signal one process we started, wait for it (KILL after 5 s).
stop_pid() {
    local pid=$1 sig=${2:-TERM} i
    if kill -0 "$pid" 2>/dev/null; then
        kill "-$sig" "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "pid $pid ignored SIG$sig; sending KILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    wait "$pid" 2>/dev/null || true
    forget_pid "$pid"
}

# spawn NAME NS CMD...: start CMD in namespace NS in the background; output in $TMP/NAME.{out,err}.
# Sets BG_PID. `ip netns exec` execs CMD, so the PID is CMD's own.
spawn() {
    local name=$1 ns=$2
    shift 2
    ip netns exec "$ns" "${NICE[@]}" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
    BG_PID=$!
    PIDS+=("$BG_PID")
}

# wait_text FILE TEXT SECONDS PID: wait until FILE contains TEXT (and PID is still alive).
wait_text() {
    local file=$1 text=$2 secs=$3 pid=$4 i
    for ((i = 0; i < secs * 20; i++)); do
        grep -qF -- "$text" "$file" 2>/dev/null && return 0
        kill -0 "$pid" 2>/dev/null || { cat "${file%.*}".{out,err} >&2 2>/dev/null || true; die "pid $pid exited while waiting for '$text' in $file"; }
        sleep 0.05
    done
    cat "${file%.*}".{out,err} >&2 2>/dev/null || true
    die "timed out waiting for '$text' in $file"
}

ns_add() {
    ip netns add "$1"
    NAMESPACES+=("$1")
    ip -n "$1" link set lo up
}

# Remove namespaces with our fixed names left behind by an interrupted earlier run of this
# script (and the processes still running in them). Nothing else is touched.
remove_stale_namespaces() {
    local ns pid
    for ns in "$NS_C" "$NS_S" "$NS_R"; do
        [[ -e /run/netns/$ns ]] || continue
        log "removing namespace $ns left over from an earlier run"
        for pid in $(ip netns pids "$ns" 2>/dev/null); do
            kill -TERM "$pid" 2>/dev/null || true
        done
        sleep 0.5
        for pid in $(ip netns pids "$ns" 2>/dev/null); do
            kill -KILL "$pid" 2>/dev/null || true
        done
        ip netns del "$ns"
    done
}

topo_down() {
    local pid ns
    for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
    for ns in "${NAMESPACES[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
    NAMESPACES=()
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    topo_down
    if [[ -n $TMP && -d $TMP ]]; then rm -rf -- "$TMP"; fi
    if ((rc != 0)); then log "FAILED (exit $rc); namespaces and processes cleaned up"; fi
    exit "$rc"
}

# ---------------------------------------------------------------------------------------------
# topologies

# client 10.71.0.1 <-veth-> 10.71.0.2 server
topo_direct() {
    SERVER_IP=10.71.0.2
    CLIENT_IP=10.71.0.1
    ns_add "$NS_C"
    ns_add "$NS_S"
    ip -n "$NS_C" link add eth0 type veth peer name eth0 netns "$NS_S"
    ip -n "$NS_C" addr add 10.71.0.1/24 dev eth0
    ip -n "$NS_S" addr add 10.71.0.2/24 dev eth0
    ip -n "$NS_C" link set eth0 up
    ip -n "$NS_S" link set eth0 up
}

# client 10.71.1.2 <-> 10.71.1.1 [router: ethc | eths] 10.71.2.1 <-> 10.71.2.2 server
# topo_routed [DELAY_MS]: with a delay, forwarded packets go through delayrelay.py's TUN device.
topo_routed() {
    local delay=${1:-0} ns
    SERVER_IP=10.71.2.2
    CLIENT_IP=10.71.1.2
    ns_add "$NS_C"
    ns_add "$NS_S"
    ns_add "$NS_R"
    for ns in "$NS_R" "$NS_C" "$NS_S"; do
        ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
    done
    ip netns exec "$NS_R" sysctl -qw net.ipv4.ip_forward=1
    ip -n "$NS_C" link add eth0 type veth peer name ethc netns "$NS_R"
    ip -n "$NS_S" link add eth0 type veth peer name eths netns "$NS_R"
    ip -n "$NS_C" addr add 10.71.1.2/24 dev eth0
    ip -n "$NS_R" addr add 10.71.1.1/24 dev ethc
    ip -n "$NS_R" addr add 10.71.2.1/24 dev eths
    ip -n "$NS_S" addr add 10.71.2.2/24 dev eth0
    ip -n "$NS_C" link set eth0 up
    ip -n "$NS_S" link set eth0 up
    ip -n "$NS_R" link set ethc up
    ip -n "$NS_R" link set eths up
    ip -n "$NS_C" route add default via 10.71.1.1
    ip -n "$NS_S" route add default via 10.71.2.1
    if ((delay > 0)); then
        spawn delayrelay "$NS_R" "$PY" "$RELAY" "$DELAY_DEV" "$delay"
        wait_text "$TMP/delayrelay.out" ready 10 "$BG_PID"
        ip netns exec "$NS_R" sysctl -qw "net.ipv4.conf.$DELAY_DEV.rp_filter=0"
        ip -n "$NS_R" link set "$DELAY_DEV" up
        ip -n "$NS_R" route add default dev "$DELAY_DEV" table 100
        ip -n "$NS_R" rule add iif ethc lookup 100
        ip -n "$NS_R" rule add iif eths lookup 100
    fi
}

# ---------------------------------------------------------------------------------------------
# servers

# nginx_start NAME: run nginx with $TMP/NAME/nginx.conf in the server namespace (daemon off).
nginx_start() {
    local dir=$TMP/$1
    ip netns exec "$NS_S" nginx -t -q -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log"
    spawn "$1" "$NS_S" nginx -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log"
    SERVER_PID=$BG_PID
}

# nginx_static_conf NAME on|off: the keep-alive static-file server of fixtures 1 and 2.
nginx_static_conf() {
    local dir=$TMP/$1 nodelay=$2
    mkdir -p "$dir/html"
    # ~600 bytes, like nginx's default page (same text as Debian's index.nginx-debian.html).
    cat >"$dir/html/index.html" <<'EOF'
<!DOCTYPE html>
<html>
<head>
<title>Welcome to nginx!</title>
<style>
html { color-scheme: light dark; }
body { width: 35em; margin: 0 auto;
font-family: Tahoma, Verdana, Arial, sans-serif; }
</style>
</head>
<body>
<h1>Welcome to nginx!</h1>
<p>If you see this page, the nginx web server is successfully installed and
working. Further configuration is required.</p>

<p>For online documentation and support please refer to
<a href="http://nginx.org/">nginx.org</a>.<br/>
Commercial support is available at
<a href="http://nginx.com/">nginx.com</a>.</p>

<p><em>Thank you for using nginx.</em></p>
</body>
</html>
EOF
    cat >"$dir/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    types { text/html html; }
    default_type application/octet-stream;
    client_body_temp_path $dir/client_body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;

    sendfile on;
    tcp_nodelay $nodelay;
    keepalive_timeout 65;

    server {
        listen $SERVER_IP:8080;
        root $dir/html;
        index index.html;
        location / { }
    }
}
EOF
}

# nginx_upload_conf NAME: fixture 6. :8081 has a 4 KiB SO_RCVBUF, :8080 the kernel default;
# both proxy the upload to a local server block so that nginx reads the whole request body.
nginx_upload_conf() {
    local dir=$TMP/$1
    mkdir -p "$dir"
    cat >"$dir/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    default_type application/octet-stream;
    client_body_temp_path $dir/client_body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;

    sendfile on;
    keepalive_timeout 65;

    server {
        listen $SERVER_IP:8081 rcvbuf=4k;
        location / {
            client_max_body_size 10m;
            proxy_pass http://127.0.0.1:8082;
        }
    }
    server {
        listen $SERVER_IP:8080;
        location / {
            client_max_body_size 10m;
            proxy_pass http://127.0.0.1:8082;
        }
    }
    server {
        listen 127.0.0.1:8082;
        location / { return 200 "ok\n"; }
    }
}
EOF
}

# jdk_start true|false: SmallServer on $SERVER_IP:8080 with sun.net.httpserver.nodelay set.
jdk_start() {
    local nodelay=$1
    spawn "jdk-$nodelay" "$NS_S" java -Xshare:auto -Dsun.net.httpserver.nodelay="$nodelay" \
        -cp "$TMP/java" SmallServer "$SERVER_IP" 8080
    SERVER_PID=$BG_PID
    wait_text "$TMP/jdk-$nodelay.out" "listening on" 30 "$SERVER_PID"
}

# wait_http METHOD URL: poll from the client namespace until the server answers 200.
wait_http() {
    local method=$1 url=$2 i code
    for ((i = 0; i < 100; i++)); do
        code=$(ip netns exec "$NS_C" curl -s -o /dev/null -w '%{http_code}' -X "$method" \
            ${3:+--data-binary "$3"} --max-time 2 "$url" || true)
        [[ $code == 200 ]] && return 0
        sleep 0.1
    done
    die "$url did not answer 200 (last code: $code)"
}

# ---------------------------------------------------------------------------------------------
# capture

# cap_tcpdump NS IFACE OUT [tcpdump options...]: start tcpdump, wait until it listens.
# --immediate-mode makes libpcap use a TPACKET_V2 ring of snaplen-sized slots (only ~128 slots of
# 256 KiB in 32 MiB): fine at a few thousand packets/s, but it drops under wrk at full speed.
# Captures bounded by -c (they end by themselves, so no ring block is lost on SIGINT) therefore
# use the default TPACKET_V3 block ring instead.
cap_tcpdump() {
    local ns=$1 iface=$2 out=$3 mode=(--immediate-mode -U) a
    shift 3
    for a in "$@"; do
        if [[ $a == -c ]]; then mode=(); fi
    done
    sleep 0.5   # let the readiness-check connections finish (their last ACK crosses the delay line)
    spawn "cap-$(basename "$out")" "$ns" tcpdump -n -Z root "${mode[@]}" -B 32768 -i "$iface" -w "$out" "$@" tcp
    CAP_PID=$BG_PID
    CAP_ERR=$TMP/cap-$(basename "$out").err
    wait_text "$CAP_ERR" "listening on" 10 "$CAP_PID"
}

# cap_dumpcap NS IFACE OUT [dumpcap options...]: pcapng via dumpcap.
cap_dumpcap() {
    local ns=$1 iface=$2 out=$3
    shift 3
    sleep 0.5   # let the readiness-check connections finish
    spawn "cap-$(basename "$out")" "$ns" dumpcap -n -B 32 -i "$iface" -f tcp -w "$out" "$@"
    CAP_PID=$BG_PID
    CAP_ERR=$TMP/cap-$(basename "$out").err
    wait_text "$CAP_ERR" "Capturing on" 10 "$CAP_PID"
    sleep 0.3   # dumpcap prints before its first poll
}

# cap_stop: give the capture a second to flush, then stop it (it may have exited via -c), and
# fail if the kernel dropped packets (a capture with holes would show phantom losses).
cap_stop() {
    sleep 1
    stop_pid "$CAP_PID" INT
    local err=$CAP_ERR drops
    drops=$(awk '/packets dropped by kernel/ { print $1 }
                 /^Packets received\/dropped/ { split($NF, a, "/"); print a[2] + 0 }' "$err" 2>/dev/null |
            awk '{ s += $1 } END { print s + 0 }')
    check "capture dropped $drops packets in the kernel == 0" "$drops == 0"
}

# check_clean FILE: no segment the capture missed, no retransmission, no reordering.
check_clean() {
    local n
    n=$(tshark -r "$1" -Y 'tcp.analysis.lost_segment || tcp.analysis.ack_lost_segment || tcp.analysis.retransmission || tcp.analysis.out_of_order' \
        -T fields -e frame.number 2>/dev/null | wc -l)
    check "$(basename "$1"): $n lost/unseen/retransmitted/out-of-order segments == 0" "$n == 0"
}

# ---------------------------------------------------------------------------------------------
# measurement, checks, installation

# wrk_run NAME ARGS...: run wrk in the client namespace; sets WRK_P50 (ms), WRK_RPS, WRK_REQS.
wrk_run() {
    local name=$1 out p50 unit
    shift
    out=$TMP/$name.wrk
    ip netns exec "$NS_C" "${NICE[@]}" wrk "$@" >"$out" 2>&1 || { cat "$out" >&2; die "wrk failed"; }
    cat "$out" >&2
    read -r p50 unit < <(awk '$1 == "50%" { v = $2; sub(/[a-z]+$/, "", v); u = $2; sub(/^[0-9.]+/, "", u); print v, u }' "$out")
    case $unit in
        us) WRK_P50=$(awk -v v="$p50" 'BEGIN { printf "%.3f", v / 1000 }') ;;
        ms) WRK_P50=$p50 ;;
        s) WRK_P50=$(awk -v v="$p50" 'BEGIN { printf "%.1f", v * 1000 }') ;;
        *) die "cannot parse wrk p50 from $out" ;;
    esac
    WRK_RPS=$(awk '$1 == "Requests/sec:" { print $2 }' "$out")
    WRK_REQS=$(awk '/requests in/ { print $1 }' "$out")
}

# check DESCRIPTION EXPR: when the awk expression EXPR is false, log it and set CHECK_FAILED
# (unless NO_CHECK=1). A fixture is only installed if all its checks passed; main() retries the
# group otherwise (a busy 2-core machine occasionally delays an ACK enough for a spurious
# tail-loss-probe retransmission, which has no place in a "healthy" fixture).
CHECK_FAILED=0
check() {
    if awk "BEGIN { exit !($2) }"; then
        log "check ok: $1"
    elif [[ $NO_CHECK == 1 ]]; then
        log "CHECK FAILED (ignored, NO_CHECK=1): $1"
    else
        log "CHECK FAILED: $1"
        CHECK_FAILED=1
    fi
}

# Delayed-ACK stalls: pure ACKs sent > 30 ms after the previous segment of the same connection
# (a data segment the other side sent), per ACK sender. The culprit of nagle_delayed_ack is the
# *other* endpoint, whose Nagle held its next segment until that ACK arrived.
stall_acks() {
    tshark -r "$1" -o tcp.calculate_timestamps:TRUE \
        -Y 'tcp.len == 0 && tcp.time_delta > 0.030 && tcp.flags.syn == 0 && tcp.flags.fin == 0 && tcp.flags.reset == 0' \
        -T fields -e ip.src -e tcp.srcport 2>/dev/null | sort | uniq -c | awk '{ printf "%s%s:%s x%d", sep, $2, $3, $1; sep = ", " }'
}
stall_count() {
    tshark -r "$1" -o tcp.calculate_timestamps:TRUE \
        -Y 'tcp.len == 0 && tcp.time_delta > 0.030 && tcp.flags.syn == 0 && tcp.flags.fin == 0 && tcp.flags.reset == 0' \
        -T fields -e frame.number 2>/dev/null | wc -l
}

# describe FILE: one line of facts about a capture (format, link type, size, packets, conns).
describe() {
    local f=$1 enc type pkts conns
    type=$(capinfos -t "$f" | awk -F': *' '/File type/ { print $2 }')
    enc=$(capinfos -E "$f" | awk -F': *' '/File encapsulation/ { print $2 }')
    pkts=$(capinfos -c -M "$f" | awk -F': *' '/Number of packets/ { print $2 }')
    conns=$(tshark -r "$f" -Y 'tcp.flags.syn == 1 && tcp.flags.ack == 0' -T fields -e frame.number 2>/dev/null | wc -l)
    printf 'format="%s" linktype="%s" bytes=%s packets=%s connections_with_syn=%s' \
        "$type" "$enc" "$(stat -c %s "$f")" "$pkts" "$conns"
}

# install_fixture FILE NAME MEASUREMENTS...: move the capture into fixtures/ and record its line in
# fixtures/measurements.txt (replacing that fixture's previous line).
install_fixture() {
    local f=$1 name=$2 line
    shift 2
    local size
    size=$(stat -c %s "$f")
    check "$name is $size bytes < 1.5 MB" "$size < 1500000"
    check_clean "$f"
    if ((CHECK_FAILED)); then
        log "not installing $name: a check failed"
        return 0
    fi
    install -m 0644 "$f" "$FIX/$name"
    line="$name $* $(describe "$FIX/$name")"
    touch "$MEASURE"
    { grep -v "^$name " "$MEASURE" || true; echo "$line"; } | sort >"$MEASURE.tmp"
    mv "$MEASURE.tmp" "$MEASURE"
    log "installed fixtures/$name: $line"
}

# ---------------------------------------------------------------------------------------------
# fixtures

# 1 and 2: nginx static page, keep-alive, sendfile on, tcp_nodelay off|on.
fx_nginx_off() {
    local name=nginx-nodelay-off.server.pcap cap=$TMP/nginx-nodelay-off.server.pcap
    log "== $name: nginx tcp_nodelay off, wrk -c 4, capture in the server namespace"
    topo_direct
    nginx_static_conf nginx-off off
    nginx_start nginx-off
    wait_http GET "http://$SERVER_IP:8080/"
    cap_tcpdump "$NS_S" eth0 "$cap"
    wrk_run nginx-off -c 4 -t 1 -d 2s --latency "http://$SERVER_IP:8080/"
    cap_stop
    local stalls
    stalls=$(stall_count "$cap")
    log "delayed-ACK stalls (ACK sender x count): $(stall_acks "$cap")"
    check "wrk p50 $WRK_P50 ms >= 30 ms" "$WRK_P50 >= 30"
    check "$stalls delayed-ACK stalls >= 20" "$stalls >= 20"
    check "capture < 300 KB for examples/" "$(stat -c %s "$cap") < 300000"
    install_fixture "$cap" "$name" "wrk_p50_ms=$WRK_P50 wrk_req_s=$WRK_RPS wrk_requests=$WRK_REQS" \
        "stall_acks=\"$(stall_acks "$cap")\""
    if ((!CHECK_FAILED)); then
        mkdir -p "$EXAMPLES"
        install -m 0644 "$FIX/$name" "$EXAMPLES/nginx-nagle.pcap"
        log "copied to examples/nginx-nagle.pcap"
    fi
    topo_down
}

fx_nginx_on() {
    local name=nginx-nodelay-on.client.pcap cap=$TMP/nginx-nodelay-on.client.pcap
    log "== $name: nginx tcp_nodelay on, wrk -c 4, capture in the client namespace (-i any)"
    topo_direct
    nginx_static_conf nginx-on on
    nginx_start nginx-on
    wait_http GET "http://$SERVER_IP:8080/"
    cap_tcpdump "$NS_C" any "$cap" -y LINUX_SLL -c 3000
    wrk_run nginx-on -c 4 -t 1 -d 2s --latency "http://$SERVER_IP:8080/"
    cap_stop
    local stalls
    stalls=$(stall_count "$cap")
    check "wrk p50 $WRK_P50 ms < 10 ms" "$WRK_P50 < 10"
    check "$stalls delayed-ACK stalls == 0" "$stalls == 0"
    install_fixture "$cap" "$name" "wrk_p50_ms=$WRK_P50 wrk_req_s=$WRK_RPS wrk_requests=$WRK_REQS" \
        "stall_acks=$stalls"
    topo_down
}

# 3 and 4: JDK HttpServer, POST of 100 bytes.
fx_jdk_default() {
    local name=jdk-default.client.pcap cap=$TMP/jdk-default.client.pcap
    log "== $name: JDK HttpServer (nodelay=false), wrk POST -c 2, capture in the client namespace (ns)"
    topo_direct
    jdk_start false
    wait_http POST "http://$SERVER_IP:8080/" "$(printf 'x%.0s' {1..100})"
    cap_tcpdump "$NS_C" eth0 "$cap" --time-stamp-precision=nano
    wrk_run jdk-default -c 2 -t 1 -d 2s --latency -s "$SRC/post100.lua" "http://$SERVER_IP:8080/"
    cap_stop
    local stalls
    stalls=$(stall_count "$cap")
    log "delayed-ACK stalls (ACK sender x count): $(stall_acks "$cap")"
    check "wrk p50 $WRK_P50 ms >= 30 ms" "$WRK_P50 >= 30"
    check "$stalls delayed-ACK stalls >= 20" "$stalls >= 20"
    install_fixture "$cap" "$name" "wrk_p50_ms=$WRK_P50 wrk_req_s=$WRK_RPS wrk_requests=$WRK_REQS" \
        "stall_acks=\"$(stall_acks "$cap")\""
    topo_down
}

fx_jdk_nodelay() {
    local name=jdk-nodelay.server.pcapng cap=$TMP/jdk-nodelay.server.pcapng
    log "== $name: JDK HttpServer (nodelay=true), wrk POST -c 2, dumpcap pcapng in the server namespace"
    topo_direct
    jdk_start true
    wait_http POST "http://$SERVER_IP:8080/" "$(printf 'x%.0s' {1..100})"
    # Warm the JVM up first (on connections that are not captured): while the JIT compilers
    # compete for the 2 cores, wrk's ACKs are sometimes late enough for the server's tail-loss
    # probe to fire a spurious retransmission, which does not belong in a healthy fixture.
    ip netns exec "$NS_C" "${NICE[@]}" wrk -c 2 -t 1 -d 2s -s "$SRC/post100.lua" "http://$SERVER_IP:8080/" >"$TMP/jdk-warmup.wrk" 2>&1
    cap_dumpcap "$NS_S" eth0 "$cap" -c 3000
    wrk_run jdk-nodelay -c 2 -t 1 -d 2s --latency -s "$SRC/post100.lua" "http://$SERVER_IP:8080/"
    cap_stop
    local stalls
    stalls=$(stall_count "$cap")
    check "wrk p50 $WRK_P50 ms < 10 ms" "$WRK_P50 < 10"
    check "$stalls delayed-ACK stalls == 0" "$stalls == 0"
    install_fixture "$cap" "$name" "wrk_p50_ms=$WRK_P50 wrk_req_s=$WRK_RPS wrk_requests=$WRK_REQS" \
        "stall_acks=$stalls"
    topo_down
}

# 5: client-side Nagle (write-write-read) and its single-write twin, captured at the router.
fx_client_write() {
    log "== client-write-write / client-single-write: Python client -> router -> JDK (nodelay=true)"
    topo_routed 0
    jdk_start true
    wait_http POST "http://$SERVER_IP:8080/" "$(printf 'x%.0s' {1..100})"
    local mode name cap out p50 stalls
    for mode in write-write single-write; do
        name=client-$mode.router.pcap
        cap=$TMP/$name
        out=$TMP/client-$mode.log
        cap_tcpdump "$NS_R" eths "$cap"
        ip netns exec "$NS_C" "${NICE[@]}" "$PY" "$SRC/write_write_client.py" -n 30 \
            $([[ $mode == single-write ]] && echo --single-write) "$SERVER_IP" 8080 >"$out"
        cap_stop
        cat "$out" >&2
        p50=$(sed -n 's/.* p50_ms=\([0-9.]*\).*/\1/p' "$out")
        stalls=$(stall_count "$cap")
        log "delayed-ACK stalls (ACK sender x count): $(stall_acks "$cap")"
        if [[ $mode == write-write ]]; then
            check "client p50 $p50 ms >= 30 ms" "$p50 >= 30"
            check "$stalls delayed-ACK stalls >= 20" "$stalls >= 20"
        else
            check "client p50 $p50 ms < 10 ms" "$p50 < 10"
            check "$stalls delayed-ACK stalls == 0" "$stalls == 0"
        fi
        install_fixture "$cap" "$name" "$(sed -n 's/^summary: //p' "$out")" \
            "stall_acks=\"$(stall_acks "$cap")\""
    done
    topo_down
}

# 6: 605 KB multipart upload over a 35 ms RTT to a 4 KiB-rcvbuf listener and to a default one.
fx_upload() {
    log "== upload-rcvbuf4k / upload-default: curl -F 605 KB -> router (17 ms each way) -> nginx"
    topo_routed "$DELAY_MS"
    nginx_upload_conf nginx-upload
    nginx_start nginx-upload
    wait_http GET "http://$SERVER_IP:8080/"
    local rtt
    rtt=$(ip netns exec "$NS_C" curl -s -o /dev/null -w '%{time_connect}' "http://$SERVER_IP:8080/")
    log "curl time_connect (one RTT) through the delay line: $rtt s"
    check "RTT $rtt s is ~35 ms" "$rtt > 0.030 && $rtt < 0.060"
    head -c 619520 /dev/urandom >"$TMP/upload.bin"

    local name cap port ns iface t winmax
    for name in upload-rcvbuf4k.server.pcap upload-rcvbuf4k.client.pcap upload-default.client.pcap; do
        cap=$TMP/$name
        if [[ $name == upload-rcvbuf4k.* ]]; then port=8081; else port=8080; fi
        if [[ $name == *.server.pcap ]]; then ns=$NS_S; else ns=$NS_C; fi
        cap_tcpdump "$ns" eth0 "$cap" -s 128
        t=$(ip netns exec "$NS_C" "${NICE[@]}" curl -s -o /dev/null -w '%{time_total}' \
            -F "file=@$TMP/upload.bin" "http://$SERVER_IP:$port/upload")
        cap_stop
        winmax=$(tshark -r "$cap" -Y "ip.src == $SERVER_IP && tcp.srcport == $port && tcp.flags.syn == 0" \
            -T fields -e tcp.window_size 2>/dev/null | sort -n | tail -1)
        log "curl time_total=$t s; largest window the server advertised: $winmax bytes"
        if [[ $port == 8081 ]]; then
            check "upload $t s > 2 s" "$t > 2"
            check "server window $winmax <= 16384" "$winmax <= 16384"
        else
            check "upload $t s < 1 s" "$t < 1"
        fi
        install_fixture "$cap" "$name" "curl_time_total_s=$t rtt_connect_s=$rtt max_server_window=$winmax"
    done
    topo_down
}

# ---------------------------------------------------------------------------------------------

main() {
    ((EUID == 0)) || die "run as root (network namespaces)"
    local tool
    for tool in ip nginx wrk curl tcpdump dumpcap tshark capinfos java javac; do
        command -v "$tool" >/dev/null || die "missing tool: $tool"
    done
    [[ -r $RELAY ]] || die "delay line not found: $RELAY (set DELAYRELAY)"

    local groups=("$@")
    ((${#groups[@]})) || groups=(nginx-off nginx-on jdk-default jdk-nodelay client-write upload)

    # One run at a time: a second run would reuse (and first remove) the same namespaces.
    exec 9>/run/lock/tdfx-make-fixtures.lock
    flock -n 9 || die "another make-fixtures.sh run is in progress"

    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    TMP=$(mktemp -d /tmp/tdfx.XXXXXX)
    chmod 755 "$TMP"   # nginx workers run as an unprivileged user and read files under it
    remove_stale_namespaces

    mkdir -p "$TMP/java"
    javac -d "$TMP/java" "$SRC/SmallServer.java"

    local g fn attempt
    for g in "${groups[@]}"; do
        case $g in
            nginx-off | nginx-on | jdk-default | jdk-nodelay | client-write | upload) ;;
            *) die "unknown group '$g'" ;;
        esac
    done
    for g in "${groups[@]}"; do
        fn=fx_${g//-/_}
        for attempt in 1 2 3 4 5; do
            CHECK_FAILED=0
            "$fn"
            ((CHECK_FAILED)) || break
            topo_down
            ((attempt < 5)) || die "$g: checks still failing after 5 attempts (is the machine busy? see the log)"
            log "retrying $g (attempt $((attempt + 1)) of 5)"
        done
    done
    log "done; measurements in ${MEASURE#"$ROOT"/}"
}

main "$@"

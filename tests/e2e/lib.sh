# Shared by the end-to-end scripts and bench/load-vs-wrk.sh: a client and a server network
# namespace joined by a veth pair (eth0 on both sides), nginx in the server namespace, and the
# removal of everything started, on exit. Source it, then:
#   e2e_netns PREFIX NET       namespaces PREFIX-c (NET.1) and PREFIX-s (NET.2); sets C, S,
#                              CLIENT_IP, SERVER_IP, WORK (a scratch directory) and PIDS
#   e2e_nginx SERVERS          writes $WORK/nginx.conf (keep-alive, sendfile on, one worker,
#                              root $WORK/html) with the server blocks given, starts nginx
#   e2e_wait_port PORT...      waits until each port accepts from the client namespace
#   e2e_delay_path PREFIX NET MS
#                              a sender namespace PREFIX-a (NET.1.1), a router PREFIX-r running
#                              delayline.py (each packet MS late: a round trip of 2 MS) and a
#                              receiver PREFIX-b (NET.2.2); sets A, B, A_IP, B_IP
# Background processes added to PIDS are stopped on exit, and tracefs instances (directories
# under /sys/kernel/tracing/instances) added to TRACEFS_INSTANCES removed.

PIDS=()
TRACEFS_INSTANCES=()
EXTRA_NETNS=()

e2e_cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for pid in "${TRACEFS_INSTANCES[@]}"; do rmdir "$pid" 2>/dev/null || true; done
  for pid in "${EXTRA_NETNS[@]}"; do ip netns del "$pid" 2>/dev/null || true; done
  [ -n "${C:-}" ] && ip netns del "$C" 2>/dev/null
  [ -n "${S:-}" ] && ip netns del "$S" 2>/dev/null
  [ -n "${WORK:-}" ] && rm -rf "$WORK"
  return 0
}

e2e_netns() {
  local prefix=$1 net=$2 ns
  C=$prefix-c S=$prefix-s CLIENT_IP=$net.1 SERVER_IP=$net.2
  WORK=$(mktemp -d "/tmp/tcpdoctor-$prefix.XXXXXX")
  trap e2e_cleanup EXIT
  ip netns add "$C"
  ip netns add "$S"
  ip -n "$C" link add eth0 type veth peer name eth0 netns "$S"
  ip -n "$C" addr add "$CLIENT_IP/24" dev eth0
  ip -n "$S" addr add "$SERVER_IP/24" dev eth0
  for ns in "$C" "$S"; do
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
  done
  mkdir -p "$WORK/html" "$WORK/logs"
  chmod 755 "$WORK" "$WORK/html"
}

e2e_nginx() {
  cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/logs/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  keepalive_timeout 65;
  keepalive_requests 1000000;
  client_body_temp_path $WORK/tmp;
$1
}
CONF
  ip netns exec "$S" nginx -c "$WORK/nginx.conf" -p "$WORK" &
  PIDS+=($!)
}

e2e_wait_port() {
  local port
  for port in "$@"; do
    for _ in $(seq 50); do
      ip netns exec "$C" bash -c "exec 3<>/dev/tcp/$SERVER_IP/$port" 2>/dev/null && break
      sleep 0.1
    done
  done
}

# e2e_wait_line TEXT FILE...: wait (10 s at most) until each FILE holds TEXT: a tcpdump's
# stderr "listening on", a watch's "tcpdoctor: watching" (each captures from then on).
e2e_wait_line() {
  local text=$1 f
  shift
  for f in "$@"; do
    for _ in $(seq 100); do
      grep -q "$text" "$f" 2>/dev/null && break
      sleep 0.1
    done
  done
}

# e2e_tcpdump NS FILE SNAPLEN FILTER...: tcpdump on namespace NS's eth0 into FILE, each packet
# written as it comes (-U --immediate-mode), its stderr in FILE.err; returns once it captures
# (10 s at most) and leaves its pid in DUMP (and PIDS). e2e_tcpdump_stop PID... ends them, each
# with its last packet written.
e2e_tcpdump() {
  local ns=$1 file=$2 snap=$3
  shift 3
  ip netns exec "$ns" tcpdump -i eth0 -s "$snap" -U --immediate-mode -w "$file" "$@" 2> "$file.err" &
  DUMP=$!
  PIDS+=("$DUMP")
  e2e_wait_line "listening on" "$file.err"
}
e2e_tcpdump_stop() {
  kill -INT "$@" 2>/dev/null || true
  wait "$@" 2>/dev/null || true
}

# e2e_wait_closed NS PORT: waits (10 s at most) until no connection to PORT in namespace NS is
# still open or closing: every FIN has been answered, so a capture holds the whole exchange.
e2e_wait_closed() {
  local ns=$1 port=$2
  for _ in $(seq 100); do
    [ -z "$(ip netns exec "$ns" ss -Htn state established state fin-wait-1 state fin-wait-2 \
      state close-wait state last-ack state closing "( dport = :$port or sport = :$port )")" ] && return 0
    sleep 0.1
  done
}

e2e_delay_path() {
  local p=$1 net=$2 delay=$3 n
  A=$p-a B=$p-b A_IP=$net.1.1 B_IP=$net.2.2
  for n in "$p-a" "$p-r" "$p-b"; do
    EXTRA_NETNS+=("$n")
    ip netns add "$n"
    ip -n "$n" link set lo up
  done
  ip link add "$p-a0" type veth peer name "$p-r0"
  ip link set "$p-a0" netns "$p-a"
  ip link set "$p-r0" netns "$p-r"
  ip link add "$p-r1" type veth peer name "$p-b0"
  ip link set "$p-r1" netns "$p-r"
  ip link set "$p-b0" netns "$p-b"
  ip -n "$p-a" addr add "$A_IP/24" dev "$p-a0"
  ip -n "$p-r" addr add "$net.1.254/24" dev "$p-r0"
  ip -n "$p-r" addr add "$net.2.254/24" dev "$p-r1"
  ip -n "$p-b" addr add "$B_IP/24" dev "$p-b0"
  ip -n "$p-a" link set "$p-a0" up
  ip -n "$p-r" link set "$p-r0" up
  ip -n "$p-r" link set "$p-r1" up
  ip -n "$p-b" link set "$p-b0" up
  ip -n "$p-a" route add default via "$net.1.254"
  ip -n "$p-b" route add default via "$net.2.254"
  ip netns exec "$p-r" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
  ip netns exec "$p-r" python3 "$(dirname "${BASH_SOURCE[0]}")/delayline.py" "$p-t" "$delay" > "$WORK/delay.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 50); do grep -q ready "$WORK/delay.log" 2>/dev/null && break; sleep 0.1; done
  grep -q ready "$WORK/delay.log" || { echo "the delay line did not start: $(cat "$WORK/delay.log")" >&2; return 1; }
  ip -n "$p-r" link set "$p-t" up
  ip netns exec "$p-r" sysctl -qw "net.ipv4.conf.$p-t.rp_filter=0"
  ip -n "$p-r" route add default dev "$p-t" table 100
  ip -n "$p-r" rule add iif "$p-r0" lookup 100
  ip -n "$p-r" rule add iif "$p-r1" lookup 100
}

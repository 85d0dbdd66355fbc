# Shared by the end-to-end scripts and bench/load-vs-wrk.sh: a client and a server network
# namespace joined by a veth pair (eth0 on both sides), nginx in the server namespace, and the
# removal of everything started, on exit. Source it, then:
#   e2e_netns PREFIX NET       namespaces PREFIX-c (NET.1) and PREFIX-s (NET.2); sets C, S,
#                              CLIENT_IP, SERVER_IP, WORK (a scratch directory) and PIDS
#   e2e_nginx SERVERS          writes $WORK/nginx.conf (keep-alive, sendfile on, one worker,
#                              root $WORK/html) with the server blocks given, starts nginx
#   e2e_wait_port PORT...      waits until each port accepts from the client namespace
# Background processes added to PIDS are stopped on exit, and tracefs instances (directories
# under /sys/kernel/tracing/instances) added to TRACEFS_INSTANCES removed.

PIDS=()
TRACEFS_INSTANCES=()

e2e_cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for pid in "${TRACEFS_INSTANCES[@]}"; do rmdir "$pid" 2>/dev/null || true; done
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

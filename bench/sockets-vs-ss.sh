#!/usr/bin/env bash
# tcpdoctor sockets against ss, on 10,000 established TCP connections: in a fresh network
# namespace a python3 server accepts and a python3 client opens CONNS (5,000) loopback
# connections (10,000 sockets, two processes), each having moved a few bytes both ways. Then
# (each raises its descriptor limit to the hard limit; 5,000 connections need ~5,000). Then
# hyperfine, inside the namespace (no `ip netns exec` in the timing), output to /dev/null:
#   ss -tinp                         every TCP socket with tcp_info and its process
#   tcpdoctor sockets                the same plus socket options (pidfd_getfd), flags, groups
#   tcpdoctor sockets --format json
# Before timing, the JSON is checked: every socket listed, with its process and options.
# ROUNDS (6) hyperfine runs rotate the order of the three; the report gives each round's ratio
# to ss (the three timed close together) and their median, the median walls, and the CPU time
# (user + system) of each.
# Goal: tcpdoctor's wall time <= ss's. Needs root, python3, hyperfine, ss.
#   sudo bash bench/sockets-vs-ss.sh
#   CONNS=2000 RUNS=20 ROUNDS=5 sudo -E bash bench/sockets-vs-ss.sh
# Results: bench/results/sockets-vs-ss.txt (override with OUT=...).
set -euo pipefail
cd "$(dirname "$0")/.."
TD=$(readlink -f "${TCPDOCTOR:-target/release/tcpdoctor}")
CONNS=${CONNS:-5000}
RUNS=${RUNS:-10}
ROUNDS=${ROUNDS:-6}
OUT=${OUT:-bench/results/sockets-vs-ss.txt}
NS=${PREFIX:-tdbs$$}
[ -x "$TD" ] || cargo build --release --locked
WORK=$(mktemp -d /tmp/tcpdoctor-bench-sockets.XXXXXX)
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
ip netns add "$NS"
ip -n "$NS" link set lo up

cat > "$WORK/server.py" <<'PY'
import resource, selectors, socket, sys
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 9000))
l.listen(4096)
print("listening", flush=True)
sel = selectors.DefaultSelector()
sel.register(l, selectors.EVENT_READ)
conns = []
while True:
    for key, _ in sel.select():
        if key.fileobj is l:
            c, _ = l.accept()
            c.setblocking(False)
            conns.append(c)
            sel.register(c, selectors.EVENT_READ)
        else:
            try:
                data = key.fileobj.recv(4096)
            except BlockingIOError:
                continue
            if data:
                key.fileobj.send(b"pong")
PY
cat > "$WORK/client.py" <<'PY'
import resource, socket, sys, time
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
n = int(sys.argv[1])
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", 9000))
    s.sendall(b"ping")
    socks.append(s)
for s in socks:
    s.recv(4)
print("connected", n, flush=True)
time.sleep(3600)
PY
ip netns exec "$NS" python3 "$WORK/server.py" > "$WORK/server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do grep -q listening "$WORK/server.log" 2>/dev/null && break; sleep 0.1; done
ip netns exec "$NS" python3 "$WORK/client.py" "$CONNS" > "$WORK/client.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 600); do grep -q connected "$WORK/client.log" 2>/dev/null && break; sleep 0.1; done
grep -q connected "$WORK/client.log" || { echo "the client did not connect: $(cat "$WORK/client.log")" >&2; exit 1; }

est=$(ip netns exec "$NS" ss -Htn state established | wc -l)
echo "established TCP sockets in $NS: $est"
[ "$est" -ge $((2 * CONNS)) ] || { echo "expected $((2 * CONNS)) established sockets" >&2; exit 1; }

# tcpdoctor's JSON must list every socket, with its process and options.
ip netns exec "$NS" "$TD" sockets --format json > "$WORK/check.json"
python3 - "$WORK/check.json" "$CONNS" > "$WORK/check.txt" <<'PY'
import json, sys
d, n = json.load(open(sys.argv[1])), int(sys.argv[2])
est = [s for s in d["sockets"] if s["state"] == "established"]
with_proc = sum(1 for s in est if s["process"] and s["process"]["command"].startswith("python"))
with_opts = sum(1 for s in est if s["options"] is not None)
with_info = sum(1 for s in est if s["tcp_info"] and s["tcp_info"]["bytes_received"] == 4)
assert len(est) == 2 * n, (len(est), 2 * n)
assert with_proc == with_opts == with_info == 2 * n, (with_proc, with_opts, with_info)
print(f"tcpdoctor --format json checked: {len(est)} established sockets, each with process, options and tcp_info")
PY
cat "$WORK/check.txt"

# Rounds with the order of the three rotated: on a shared 2-core machine the load drifts
# over a run, and hyperfine times one command's runs back to back.
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
CMDS=("ss -tinp" "$TD sockets" "$TD sockets --format json")
NAMES=("ss -tinp" "tcpdoctor sockets" "tcpdoctor sockets --format json")
for r in $(seq "$ROUNDS"); do
  args=()
  for k in 0 1 2; do
    j=$(( (k + r - 1) % 3 ))
    args+=(-n "${NAMES[$j]}" "${CMDS[$j]}")
  done
  echo "round $r of $ROUNDS"
  ip netns exec "$NS" hyperfine -N --warmup 2 --min-runs "$RUNS" --export-json "$WORK/hf-$r.json" "${args[@]}" \
    | tee -a "$WORK/hf.txt"
done

{
  echo "tcpdoctor sockets vs ss -tinp, $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) cores, load $LOAD_BEFORE before, $(cut -d' ' -f1-3 /proc/loadavg) after"
  echo "$((2 * CONNS)) established loopback TCP sockets (+1 listener) in one namespace, 2 python3 processes"
  cat "$WORK/check.txt"
  echo "hyperfine -N --warmup 2 --min-runs $RUNS, output to /dev/null, $ROUNDS rounds in rotated order"
  echo
  sed 's/\x1b\[[0-9;]*m//g' "$WORK/hf.txt"
  echo
  python3 - "$WORK" "$ROUNDS" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
med, cpu = {}, {}
for r in range(1, rounds + 1):
    for x in json.load(open(f"{work}/hf-{r}.json"))["results"]:
        med.setdefault(x["command"], []).append(x["median"])
        cpu.setdefault(x["command"], []).append(x["user"] + x["system"])
ss_wall, ss_cpu = statistics.median(med["ss -tinp"]), statistics.median(cpu["ss -tinp"])
print(f"median of the rounds' medians (wall), and CPU (user + system, mean per run):")
for name in med:
    w, c = statistics.median(med[name]), statistics.median(cpu[name])
    rounds_ms = " ".join(f"{m * 1e3:.0f}" for m in med[name])
    print(f"  {name:34s} wall {w * 1e3:6.1f} ms (rounds: {rounds_ms})  cpu {c * 1e3:6.1f} ms")
# Each round times the three close together: the ratio within a round is the robust figure
# on a machine whose load drifts between rounds.
for name in ("tcpdoctor sockets", "tcpdoctor sockets --format json"):
    w, c = statistics.median(med[name]), statistics.median(cpu[name])
    per_round = [a / b for a, b in zip(med[name], med["ss -tinp"])]
    ratio = statistics.median(per_round)
    print(f"{name}: wall / ss -tinp, median of the rounds' ratios {ratio:.2f} "
          f"(rounds: {' '.join(f'{x:.2f}' for x in per_round)}; goal <= 1.00: "
          f"{'MET' if ratio <= 1.0 else 'NOT MET'}); ratio of median walls {w / ss_wall:.2f}; "
          f"cpu ratio {c / ss_cpu:.2f}")
PY
} > "$OUT"
echo
tail -7 "$OUT"
echo "written: $OUT"

#!/usr/bin/env bash
# Time tcpdoctor against tcptrace and tshark on the same capture, in one run, side by side.
#
#   sudo bash bench/run.sh [CAPTURE]          (default bench/data/big.pcap; built if missing)
#
# Environment:
#   TCPDOCTOR  tcpdoctor binary (default target/release/tcpdoctor, built with
#              `cargo build --release` if missing; skipped if that fails)
#   RUNS       runs per tool (default 3); rounds are interleaved: tcpdoctor, tcptrace, tshark, ...
#   OUT        results file (default bench/results/latest.txt)
#
# Per run: wall seconds and peak RSS, with GNU time (`/usr/bin/time -f '%e %M'`). %e only has
# 10 ms resolution, so the wall time reported is read from a nanosecond clock around the same
# run (%e is kept in the per-run log). Reported: medians, and the ratios
#   tcptrace_time / tcpdoctor_time   (goal >= 10: "x faster than tcptrace")
#   tcpdoctor_mem / tcptrace_mem     (goal <= 0.2)
#   tshark_time   / tcpdoctor_time   (goal >= 100)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
CAPTURE=${1:-$repo/bench/data/big.pcap}
case $CAPTURE in /*) ;; *) CAPTURE=$PWD/$CAPTURE ;; esac
RUNS=${RUNS:-3}
OUT=${OUT:-$repo/bench/results/latest.txt}
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac
TCPDOCTOR_DEFAULT=$repo/target/release/tcpdoctor
TCPDOCTOR=${TCPDOCTOR:-$TCPDOCTOR_DEFAULT}
case $TCPDOCTOR in /*) ;; */*) TCPDOCTOR=$PWD/$TCPDOCTOR ;; esac
cd "$repo"

die() { echo "run.sh: $*" >&2; exit 1; }
note() { echo "[run.sh $(date +%T)] $*" >&2; }

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[ -x /usr/bin/time ] || die "GNU time (/usr/bin/time) is required"
for t in tcptrace tshark capinfos tcpdump dd; do
    command -v "$t" >/dev/null || die "missing tool: $t"
done

# ---- capture -------------------------------------------------------------------------------
if [ ! -s "$CAPTURE" ]; then
    note "$CAPTURE missing: building it with bench/make-big-capture.sh"
    bash "$here/make-big-capture.sh" "$CAPTURE" >&2 || die "could not build $CAPTURE"
fi

# ---- tcpdoctor binary ----------------------------------------------------------------------
skip_reason=""
if [ ! -x "$TCPDOCTOR" ]; then
    if [ "$TCPDOCTOR" = "$TCPDOCTOR_DEFAULT" ]; then
        note "$TCPDOCTOR missing: cargo build --release"
        cargo=$(command -v cargo || true)
        [ -n "$cargo" ] || { [ -x "$HOME/.cargo/bin/cargo" ] && cargo=$HOME/.cargo/bin/cargo; }
        if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
            # build as the invoking user so target/ does not become root-owned
            sudo -u "$SUDO_USER" -H bash -lc 'cd "$1" && cargo build --release' _ "$repo" >&2 \
                || skip_reason="cargo build --release failed"
        elif [ -n "$cargo" ]; then
            "$cargo" build --release >&2 || skip_reason="cargo build --release failed"
        else
            skip_reason="cargo not found"
        fi
        [ -n "$skip_reason" ] || [ -x "$TCPDOCTOR" ] \
            || skip_reason="cargo build --release produced no $TCPDOCTOR"
    else
        skip_reason="TCPDOCTOR=$TCPDOCTOR is not an executable file"
    fi
fi
[ -z "$skip_reason" ] || note "SKIPPING tcpdoctor: $skip_reason"

# ---- helpers -------------------------------------------------------------------------------
tmp=$(mktemp -d /tmp/tcpdoctor-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

median() {  # median of the numbers on stdin ("" if none)
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit
        if (NR % 2) printf "%.6f\n", v[(NR + 1) / 2]; else printf "%.6f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() {  # ratio A B [DECIMALS]
    awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN {
        if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.*f\n", d, a / b }'
}
now() { date +%s.%N; }

tools=(tcpdoctor tcptrace tshark)
declare -A cmdline=()
cmdline[tcpdoctor]="$TCPDOCTOR analyze $CAPTURE --format json"
cmdline[tcptrace]="tcptrace -n $CAPTURE"
cmdline[tshark]="tshark -q -z conv,tcp -r $CAPTURE"

run_tool() {  # run_tool NAME -> appends "wall_s %e KiB" to $tmp/NAME.runs; non-zero on failure
    local name=$1 t0 t1 rc=0
    cat "$CAPTURE" >/dev/null    # warm the page cache
    t0=$(now)
    case $name in
        tcpdoctor) /usr/bin/time -f '%e %M' -o "$tmp/time" "$TCPDOCTOR" analyze "$CAPTURE" --format json >/dev/null 2>"$tmp/$name.err" || rc=$? ;;
        tcptrace)  /usr/bin/time -f '%e %M' -o "$tmp/time" tcptrace -n "$CAPTURE" >/dev/null 2>"$tmp/$name.err" || rc=$? ;;
        tshark)    /usr/bin/time -f '%e %M' -o "$tmp/time" tshark -q -z conv,tcp -r "$CAPTURE" >/dev/null 2>"$tmp/$name.err" || rc=$? ;;
    esac
    t1=$(now)
    if [ "$rc" != 0 ]; then
        note "$name exited with status $rc: $(tail -n 5 "$tmp/$name.err" | tr '\n' ' ')"
        return 1
    fi
    # GNU time appends "Command exited..." lines only on failure; the last line is '%e %M'
    echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }') $(tail -n 1 "$tmp/time")" >>"$tmp/$name.runs"
    tail -n 1 "$tmp/$name.runs"
}

# ---- facts about the file ------------------------------------------------------------------
note "capture facts (capinfos, SYN count)"
bytes=$(stat -L -c %s "$CAPTURE")
packets=$(capinfos -c -M "$CAPTURE" 2>/dev/null | awk -F: '/Number of packets/ { gsub(/ /, "", $2); print $2 }')
connections=$(tcpdump -nr "$CAPTURE" 'tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn' 2>/dev/null \
    | awk '{ for (i = 1; i < NF; i++) if ($i == "seq") { s = $(i + 1); break }; print $3, s }' | sort -u | wc -l)

cat "$CAPTURE" >/dev/null
for i in $(seq "$RUNS"); do
    t0=$(now); dd if="$CAPTURE" of=/dev/null bs=4M status=none; t1=$(now)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f\n", b - a }' >>"$tmp/read.runs"
done
read_s=$(median <"$tmp/read.runs")

# ---- is tcpdoctor's output real? (one untimed run) -----------------------------------------
# A stub that exits 0 without analysing anything would "win" every ratio; the timed numbers count
# only if the JSON parses, has schema 1 and capture.packets equals capinfos' packet count.
check="not run"
if [ -z "$skip_reason" ]; then
    note "checking tcpdoctor's JSON (untimed run)"
    if "$TCPDOCTOR" analyze "$CAPTURE" --format json >"$tmp/tcpdoctor.json" 2>"$tmp/tcpdoctor.err"; then
        check=$(python3 - "$tmp/tcpdoctor.json" "$packets" <<'PY' 2>&1 || true
import json, sys
path, want = sys.argv[1], int(sys.argv[2])
try:
    doc = json.load(open(path))
except Exception as e:
    print("output is not JSON (%s)" % (str(e).splitlines() or ["empty"])[0]); sys.exit()
cap = doc.get("capture", {}) if isinstance(doc, dict) else {}
if not isinstance(doc, dict) or doc.get("schema") != 1:
    print("no \"schema\": 1"); sys.exit()
if cap.get("packets") != want:
    print("capture.packets = %r, capinfos says %d" % (cap.get("packets"), want)); sys.exit()
print("ok (capture.packets %d, capture.connections %s, findings %d)"
      % (want, cap.get("connections"), len(doc.get("findings") or [])))
PY
)
    else
        check="exited with status $?: $(tail -n 3 "$tmp/tcpdoctor.err" | tr '\n' ' ')"
    fi
    rm -f "$tmp/tcpdoctor.json"
    note "tcpdoctor output check: $check"
fi
verified=0; case $check in ok*) verified=1 ;; esac

# ---- timed runs, interleaved ---------------------------------------------------------------
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
active=()
for name in "${tools[@]}"; do
    if [ "$name" = tcpdoctor ] && [ -n "$skip_reason" ]; then continue; fi
    active+=("$name"); : >"$tmp/$name.runs"
done
declare -A failed=()
for i in $(seq "$RUNS"); do
    for name in "${active[@]}"; do
        [ -z "${failed[$name]:-}" ] || continue
        note "round $i/$RUNS: $name"
        if r=$(run_tool "$name"); then
            note "    wall ${r%% *} s, GNU time: $(echo "$r" | awk '{ printf "%s s, %.1f MiB", $2, $3 / 1024 }')"
        else
            failed[$name]=1
        fi
    done
done

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A wall=() mem=()
for name in "${tools[@]}"; do
    wall[$name]=""; mem[$name]=""
    [ -s "$tmp/$name.runs" ] && [ -z "${failed[$name]:-}" ] || continue
    wall[$name]=$(awk '{ print $1 }' "$tmp/$name.runs" | median)
    mem[$name]=$(awk '{ print $3 / 1024 }' "$tmp/$name.runs" | median)
done

r_tt=$(ratio "${wall[tcptrace]}" "${wall[tcpdoctor]}")
r_mem=$(ratio "${mem[tcpdoctor]}" "${mem[tcptrace]}" 3)
r_ts=$(ratio "${wall[tshark]}" "${wall[tcpdoctor]}")
verdict() {  # verdict VALUE OP GOAL
    awk -v v="$1" -v op="$2" -v g="$3" -v real="$verified" 'BEGIN { if (v == "n/a") { print "n/a"; exit }
        ok = (op == ">=") ? (v >= g) : (v <= g)
        print real ? (ok ? "met" : "MISSED") : "not counted: tcpdoctor output check failed" }'
}

# ---- report --------------------------------------------------------------------------------
{
    echo "tcpdoctor benchmark  $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host:      $(uname -sr), $(nproc) cores, $(awk -F': *' '/model name/ { print $2; exit }' /proc/cpuinfo)"
    echo "repo:      $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$repo" diff --quiet HEAD -- crates 2>/dev/null || echo ' (crates/ modified)')"
    echo "tools:     $(tcptrace -v 2>&1 | head -n 1 | tr -s ' ')"
    echo "           $(tshark --version 2>/dev/null | head -n 1)"
    if [ -n "$skip_reason" ]; then
        echo "           tcpdoctor SKIPPED: $skip_reason"
    else
        echo "           tcpdoctor: $TCPDOCTOR"
        echo "           tcpdoctor output check: $check"
    fi
    echo "capture:   $CAPTURE"
    printf 'size:      %d bytes (%.1f MiB), %s packets, %s connections\n' "$bytes" "$(awk -v b="$bytes" 'BEGIN { print b / 1048576 }')" "$packets" "$connections"
    printf 'read:      %.3f s (dd bs=4M, page cache warm, median of %d)\n' "$read_s" "$RUNS"
    echo "runs:      $RUNS per tool, interleaved, page cache warmed with cat before each run"
    echo "load avg:  $load_before before, $load_after after (other work on the machine skews the times)"
    echo
    printf '%-10s %12s %12s   %s\n' tool "wall s (med)" "peak MiB" "per run: wall s / GNU-time %e s / peak MiB"
    printf '%-10s %12s %12s   %s\n' ---------- ------------ ------------ -------------------------------------------
    for name in "${tools[@]}"; do
        if [ "$name" = tcpdoctor ] && [ -n "$skip_reason" ]; then
            printf '%-10s %12s %12s   %s\n' "$name" skipped skipped "$skip_reason"; continue
        fi
        if [ -n "${failed[$name]:-}" ] || [ -z "${wall[$name]}" ]; then
            printf '%-10s %12s %12s   %s\n' "$name" FAILED FAILED "$(tail -n 2 "$tmp/$name.err" 2>/dev/null | tr '\n' ' ')"; continue
        fi
        printf '%-10s %12.3f %12.1f   %s\n' "$name" "${wall[$name]}" "${mem[$name]}" \
            "$(awk '{ printf "%s%.3f/%s/%.1f", (NR > 1 ? "  " : ""), $1, $2, $3 / 1024 }' "$tmp/$name.runs")"
    done
    echo "command lines:"
    for name in "${tools[@]}"; do echo "  $name: ${cmdline[$name]} > /dev/null"; done
    echo
    printf '%-44s %8s   %-10s %s\n' ratio value goal status
    printf '%-44s %8s   %-10s %s\n' "tcptrace_time / tcpdoctor_time (x faster)" "$r_tt" ">= 10" "$(verdict "$r_tt" ">=" 10)"
    printf '%-44s %8s   %-10s %s\n' "tcpdoctor_mem / tcptrace_mem" "$r_mem" "<= 0.20" "$(verdict "$r_mem" "<=" 0.2)"
    printf '%-44s %8s   %-10s %s\n' "tshark_time / tcpdoctor_time (x faster)" "$r_ts" ">= 100" "$(verdict "$r_ts" ">=" 100)"
    echo
    fmt() { [ -n "$1" ] && printf "%.${2}f" "$1" || printf 'n/a'; }
    echo "BENCH v=1 file=$(basename "$CAPTURE") bytes=$bytes packets=$packets connections=$connections runs=$RUNS" \
        "read_s=$(fmt "$read_s" 4)" \
        "tcpdoctor_s=$(fmt "${wall[tcpdoctor]}" 4) tcpdoctor_mib=$(fmt "${mem[tcpdoctor]}" 1)" \
        "tcptrace_s=$(fmt "${wall[tcptrace]}" 4) tcptrace_mib=$(fmt "${mem[tcptrace]}" 1)" \
        "tshark_s=$(fmt "${wall[tshark]}" 4) tshark_mib=$(fmt "${mem[tshark]}" 1)" \
        "tcptrace_over_tcpdoctor_time=$r_tt tcpdoctor_over_tcptrace_mem=$r_mem tshark_over_tcpdoctor_time=$r_ts" \
        "tcpdoctor=$([ -n "$skip_reason" ] && echo skipped || { [ "$verified" = 1 ] && echo verified || echo unverified; })"
} >"$tmp/report"

mkdir -p "$(dirname "$OUT")"
cp "$tmp/report" "$OUT"
cat "$tmp/report"
note "written to $OUT"
# a failed tool makes the run fail (a skipped tcpdoctor does not: the peers were still measured)
[ ${#failed[@]} -eq 0 ]

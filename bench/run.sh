#!/usr/bin/env bash
# Time tcpdoctor against tcptrace and tshark on the same captures, in one run, side by side.
#
#   sudo bash bench/run.sh              the big capture (bench/data/big.pcap, built if missing)
#                                       -> bench/results/latest.txt, then the hostile shapes
#                                       (SYN flood, port scan, a million one-request
#                                       connections; built if missing) -> bench/results/hostile.txt
#   sudo bash bench/run.sh CAPTURE      that capture only -> bench/results/latest.txt
#   OUT=bench/results/short.txt sudo -E bash bench/run.sh bench/data/short.pcap
#                                       the short-connection shape (Connection: close, one
#                                       exchange each; built with SHAPE=short if missing)
#
# Environment:
#   TCPDOCTOR  tcpdoctor binary (default target/release/tcpdoctor, built with
#              `cargo build --release` if missing; skipped if that fails)
#   BASELINE   another tcpdoctor binary (an earlier build) measured in the same rounds; its
#              time and memory are reported next to TCPDOCTOR's, as a ratio (default: none)
#   RUNS       runs per tool (default 3); rounds are interleaved: tcpdoctor, [baseline,]
#              tcptrace, tshark, tcpdoctor, ...
#   OUT        results file for the big capture (default bench/results/latest.txt)
#   HOSTILE    1 to also measure the hostile shapes after the big capture (default 1; 0 skips
#              them); HOSTILE_OUT is their results file (default bench/results/hostile.txt)
#   Caps on the peers (tcptrace keeps every connection: 8 GB on a million of them; tshark
#   takes minutes on millions of packets), each said in the report when it applies:
#   TSHARK_MAX_PACKETS  tshark is not run on captures with more packets (default 2,000,000)
#   PEER_ONE_RUN_PACKETS  peers run once, not RUNS times, above this many packets (default 2,000,000)
#   PEER_MAX_GB         address-space limit for tcptrace and tshark (default 12)
#   TOOL_TIMEOUT        seconds before any run is stopped (default 900)
#
# Per run: wall seconds and peak RSS, with GNU time (`/usr/bin/time -f '%e %M'`). %e only has
# 10 ms resolution, so the wall time reported is read from a nanosecond clock around the same
# run (%e is kept in the per-run log). Reported: medians, and the ratios
#   tcptrace_time / tcpdoctor_time   (big capture: goal >= 10, "x faster than tcptrace")
#   tcpdoctor_mem / tcptrace_mem     (big capture: goal <= 0.2)
#   tshark_time   / tcpdoctor_time   (big capture: goal >= 100)
#   tcpdoctor_time / baseline_time   (with BASELINE: goal <= 1.00, "not slower")
#   SYN flood: tcpdoctor peak <= 64 MiB and >= 2,000,000 packets/s (packets / median wall)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
single=${1:-}
CAPTURE=${1:-$repo/bench/data/big.pcap}
case $CAPTURE in /*) ;; *) CAPTURE=$PWD/$CAPTURE ;; esac
RUNS=${RUNS:-3}
OUT=${OUT:-$repo/bench/results/latest.txt}
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac
HOSTILE=${HOSTILE:-1}
[ -z "$single" ] || HOSTILE=0
HOSTILE_OUT=${HOSTILE_OUT:-$repo/bench/results/hostile.txt}
case $HOSTILE_OUT in /*) ;; *) HOSTILE_OUT=$PWD/$HOSTILE_OUT ;; esac
TSHARK_MAX_PACKETS=${TSHARK_MAX_PACKETS:-2000000}
PEER_ONE_RUN_PACKETS=${PEER_ONE_RUN_PACKETS:-2000000}
PEER_MAX_GB=${PEER_MAX_GB:-12}
TOOL_TIMEOUT=${TOOL_TIMEOUT:-900}
TCPDOCTOR_DEFAULT=$repo/target/release/tcpdoctor
TCPDOCTOR=${TCPDOCTOR:-$TCPDOCTOR_DEFAULT}
case $TCPDOCTOR in /*) ;; */*) TCPDOCTOR=$PWD/$TCPDOCTOR ;; esac
BASELINE=${BASELINE:-}
case $BASELINE in /* | "") ;; *) BASELINE=$PWD/$BASELINE ;; esac
cd "$repo"

die() { echo "run.sh: $*" >&2; exit 1; }
note() { echo "[run.sh $(date +%T)] $*" >&2; }

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[ -x /usr/bin/time ] || die "GNU time (/usr/bin/time) is required"
for t in tcptrace tshark capinfos tcpdump dd timeout prlimit; do
    command -v "$t" >/dev/null || die "missing tool: $t"
done
[ -z "$BASELINE" ] || [ -x "$BASELINE" ] || die "BASELINE=$BASELINE is not an executable file"

# ---- captures ------------------------------------------------------------------------------
if [ ! -s "$CAPTURE" ]; then
    note "$CAPTURE missing: building it with bench/make-big-capture.sh"
    # bench/data/short.pcap: the short-connection shape (one exchange a connection).
    shape=""
    [ "$(basename "$CAPTURE")" = short.pcap ] && shape=short
    SHAPE=$shape bash "$here/make-big-capture.sh" "$CAPTURE" >&2 || die "could not build $CAPTURE"
fi
hostile_shapes=(syn-flood port-scan one-request)
if [ "$HOSTILE" = 1 ]; then
    note "hostile shapes: bench/make-hostile-captures.sh (kept if already built)"
    if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
        sudo -u "$SUDO_USER" -H bash "$here/make-hostile-captures.sh" >&2 || die "could not build the hostile captures"
    else
        bash "$here/make-hostile-captures.sh" >&2 || die "could not build the hostile captures"
    fi
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
# rel TEXT: TEXT with this checkout's path removed, so that results name files relative to the
# repository and not to the machine they ran on
rel() { printf '%s' "${1//"$repo/"/}"; }
fmt() { [ -n "$1" ] && printf "%.${2}f" "$1" || printf 'n/a'; }

tools=(tcpdoctor)
[ -z "$BASELINE" ] || tools+=(baseline)
tools+=(tcptrace tshark)

# tool_cmd NAME FILE: the command line of one run (printed in the report)
tool_cmd() {
    case $1 in
        tcpdoctor) echo "$TCPDOCTOR analyze $2 --format json" ;;
        baseline) echo "$BASELINE analyze $2 --format json" ;;
        tcptrace) echo "tcptrace -n $2" ;;
        tshark) echo "tshark -q -z conv,tcp -r $2" ;;
    esac
}

# run_tool NAME FILE TAG -> appends "wall_s %e KiB" to $tmp/TAG.NAME.runs; non-zero on failure.
# Peers run under an address-space limit (PEER_MAX_GB); every run under TOOL_TIMEOUT.
run_tool() {
    local name=$1 file=$2 tag=$3 t0 t1 rc=0 limit=()
    cat "$file" >/dev/null    # warm the page cache
    case $name in tcptrace | tshark) limit=(prlimit --as=$((PEER_MAX_GB * 1024 * 1024 * 1024))) ;; esac
    # shellcheck disable=SC2046
    t0=$(now)
    /usr/bin/time -f '%e %M' -o "$tmp/time" timeout "$TOOL_TIMEOUT" "${limit[@]}" $(tool_cmd "$name" "$file") \
        >/dev/null 2>"$tmp/$tag.$name.err" || rc=$?
    t1=$(now)
    if [ "$rc" != 0 ]; then
        local why
        why=$(tail -n 3 "$tmp/$tag.$name.err" | tr '\n' ' ')
        [ "$rc" = 124 ] && why="stopped after TOOL_TIMEOUT=${TOOL_TIMEOUT}s"
        echo "$why" >"$tmp/$tag.$name.why"
        note "$name exited with status $rc: $why"
        return 1
    fi
    echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }') $(tail -n 1 "$tmp/time")" >>"$tmp/$tag.$name.runs"
    tail -n 1 "$tmp/$tag.$name.runs"
}

# check_json FILE PACKETS: is tcpdoctor's output real? (one untimed run)
# A stub that exits 0 without analysing anything would "win" every ratio; the timed numbers
# count only if the JSON parses, has schema 1 and capture.packets equals capinfos' count.
check_json() {
    python3 - "$1" "$2" <<'PY' 2>&1 || true
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
print("ok (capture.packets %d, capture.connections %s, peak open %s, closed early %s, findings %d)"
      % (want, cap.get("connections"), cap.get("peak_open_connections"),
         cap.get("connections_closed_early"), len(doc.get("findings") or [])))
PY
}

# measure TAG FILE: facts about FILE and the interleaved, timed runs of every tool on it.
# Sets P_* (facts), W[TAG.tool], M[TAG.tool] (medians), STATUS[TAG.tool] (ok/skipped/capped/FAILED).
declare -A W=() M=() STATUS=() WHY=() NRUNS=() CHECK=() P_BYTES=() P_PACKETS=() P_CONNS=() P_READ=()
measure() {
    local tag=$1 file=$2 i name runs
    note "$tag: capture facts (capinfos, SYN count)"
    P_BYTES[$tag]=$(stat -L -c %s "$file")
    P_PACKETS[$tag]=$(capinfos -c -M "$file" 2>/dev/null | awk -F: '/Number of packets/ { gsub(/ /, "", $2); print $2 }')
    P_CONNS[$tag]=$(tcpdump -nr "$file" 'tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn' 2>/dev/null \
        | awk '{ for (i = 1; i < NF; i++) if ($i == "seq") { s = $(i + 1); break }; print $3, s }' | sort -u | wc -l)
    cat "$file" >/dev/null
    : >"$tmp/$tag.read.runs"
    for i in $(seq "$RUNS"); do
        local t0 t1
        t0=$(now); dd if="$file" of=/dev/null bs=4M status=none; t1=$(now)
        awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f\n", b - a }' >>"$tmp/$tag.read.runs"
    done
    P_READ[$tag]=$(median <"$tmp/$tag.read.runs")

    local active=()
    for name in "${tools[@]}"; do
        STATUS[$tag.$name]=ok; W[$tag.$name]=""; M[$tag.$name]=""; WHY[$tag.$name]=""
        if [ "$name" = tcpdoctor ] && [ -n "$skip_reason" ]; then
            STATUS[$tag.$name]=skipped; WHY[$tag.$name]=$skip_reason; continue
        fi
        if [ "$name" = tshark ] && [ "${P_PACKETS[$tag]}" -gt "$TSHARK_MAX_PACKETS" ]; then
            STATUS[$tag.$name]=skipped
            WHY[$tag.$name]="not run: ${P_PACKETS[$tag]} packets > TSHARK_MAX_PACKETS=$TSHARK_MAX_PACKETS"
            continue
        fi
        runs=$RUNS
        case $name in tcptrace | tshark)
            if [ "${P_PACKETS[$tag]}" -gt "$PEER_ONE_RUN_PACKETS" ]; then runs=1; fi ;;
        esac
        NRUNS[$tag.$name]=$runs
        active+=("$name"); : >"$tmp/$tag.$name.runs"
    done

    CHECK[$tag]="not run"
    if [ -z "$skip_reason" ]; then
        note "$tag: checking tcpdoctor's JSON (untimed run)"
        if "$TCPDOCTOR" analyze "$file" --format json >"$tmp/$tag.json" 2>"$tmp/$tag.err"; then
            CHECK[$tag]=$(check_json "$tmp/$tag.json" "${P_PACKETS[$tag]}")
        else
            CHECK[$tag]="exited with status $?: $(tail -n 3 "$tmp/$tag.err" | tr '\n' ' ')"
        fi
        rm -f "$tmp/$tag.json"
        note "$tag: tcpdoctor output check: ${CHECK[$tag]}"
    fi

    LOAD_BEFORE[$tag]=$(cut -d' ' -f1-3 /proc/loadavg)
    for i in $(seq "$RUNS"); do
        for name in "${active[@]}"; do
            [ "${STATUS[$tag.$name]}" = ok ] || continue
            [ "$i" -le "${NRUNS[$tag.$name]}" ] || continue
            note "$tag round $i/$RUNS: $name"
            if r=$(run_tool "$name" "$file" "$tag"); then
                note "    wall ${r%% *} s, GNU time: $(echo "$r" | awk '{ printf "%s s, %.1f MiB", $2, $3 / 1024 }')"
            else
                case $name in
                    tcptrace | tshark) STATUS[$tag.$name]=capped ;;
                    *) STATUS[$tag.$name]=FAILED ;;
                esac
                WHY[$tag.$name]=$(cat "$tmp/$tag.$name.why" 2>/dev/null || true)
                [ "${STATUS[$tag.$name]}" = FAILED ] || WHY[$tag.$name]="failed under the caps (PEER_MAX_GB=$PEER_MAX_GB, TOOL_TIMEOUT=${TOOL_TIMEOUT}s): ${WHY[$tag.$name]}"
            fi
        done
    done
    LOAD_AFTER[$tag]=$(cut -d' ' -f1-3 /proc/loadavg)
    for name in "${tools[@]}"; do
        [ "${STATUS[$tag.$name]}" = ok ] && [ -s "$tmp/$tag.$name.runs" ] || continue
        W[$tag.$name]=$(awk '{ print $1 }' "$tmp/$tag.$name.runs" | median)
        M[$tag.$name]=$(awk '{ print $3 / 1024 }' "$tmp/$tag.$name.runs" | median)
    done
}
declare -A LOAD_BEFORE=() LOAD_AFTER=()

verified() { case ${CHECK[$1]} in ok*) echo 1 ;; *) echo 0 ;; esac; }
verdict() {  # verdict TAG VALUE OP GOAL
    awk -v v="$2" -v op="$3" -v g="$4" -v real="$(verified "$1")" 'BEGIN { if (v == "n/a") { print "n/a"; exit }
        ok = (op == ">=") ? (v >= g) : (v <= g)
        print real ? (ok ? "met" : "MISSED") : "not counted: tcpdoctor output check failed" }'
}

# tool_table TAG: per-tool medians and per-run figures
tool_table() {
    local tag=$1 name
    printf '%-10s %12s %12s   %s\n' tool "wall s (med)" "peak MiB" "per run: wall s / GNU-time %e s / peak MiB"
    printf '%-10s %12s %12s   %s\n' ---------- ------------ ------------ -------------------------------------------
    for name in "${tools[@]}"; do
        case ${STATUS[$tag.$name]} in
            skipped) printf '%-10s %12s %12s   %s\n' "$name" skipped skipped "$(rel "${WHY[$tag.$name]}")"; continue ;;
            capped) printf '%-10s %12s %12s   %s\n' "$name" capped capped "$(rel "${WHY[$tag.$name]}")"; continue ;;
            FAILED) printf '%-10s %12s %12s   %s\n' "$name" FAILED FAILED "$(rel "${WHY[$tag.$name]}")"; continue ;;
        esac
        printf '%-10s %12.3f %12.1f   %s\n' "$name" "${W[$tag.$name]}" "${M[$tag.$name]}" \
            "$(awk '{ printf "%s%.3f/%s/%.1f", (NR > 1 ? "  " : ""), $1, $2, $3 / 1024 }' "$tmp/$tag.$name.runs")"
    done
    echo "command lines:"
    for name in "${tools[@]}"; do echo "  $name: $(rel "$(tool_cmd "$name" "${FILES[$tag]}")") > /dev/null"; done
}

facts() {  # facts TAG
    local tag=$1
    echo "capture:   $(rel "${FILES[$tag]}")"
    printf 'size:      %d bytes (%.1f MiB), %s packets, %s connections\n' "${P_BYTES[$tag]}" \
        "$(awk -v b="${P_BYTES[$tag]}" 'BEGIN { print b / 1048576 }')" "${P_PACKETS[$tag]}" "${P_CONNS[$tag]}"
    printf 'read:      %.3f s (dd bs=4M, page cache warm, median of %d)\n' "${P_READ[$tag]}" "$RUNS"
    echo "runs:      $RUNS per tool (peers once above $PEER_ONE_RUN_PACKETS packets), interleaved, page cache warmed with cat before each run"
    echo "load avg:  ${LOAD_BEFORE[$tag]} before, ${LOAD_AFTER[$tag]} after (other work on the machine skews the times)"
    [ -n "$skip_reason" ] || echo "tcpdoctor output check: $(rel "${CHECK[$tag]}")"
}

header() {
    echo "host:      $(uname -sr), $(nproc) cores, $(awk -F': *' '/model name/ { print $2; exit }' /proc/cpuinfo)"
    echo "repo:      $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$repo" diff --quiet HEAD -- crates 2>/dev/null || echo ' (crates/ modified)')"
    echo "tools:     $(tcptrace -v 2>&1 | head -n 1 | tr -s ' ')"
    echo "           $(tshark --version 2>/dev/null | head -n 1)"
    if [ -n "$skip_reason" ]; then
        echo "           tcpdoctor SKIPPED: $(rel "$skip_reason")"
    else
        echo "           tcpdoctor: $(rel "$TCPDOCTOR")"
    fi
    [ -z "$BASELINE" ] || echo "           baseline:  $(rel "$BASELINE") (an earlier tcpdoctor build, measured in the same rounds)"
}

declare -A FILES=()

# ---- the big capture -----------------------------------------------------------------------
FILES[big]=$CAPTURE
measure big "$CAPTURE"
r_tt=$(ratio "${W[big.tcptrace]}" "${W[big.tcpdoctor]}")
r_mem=$(ratio "${M[big.tcpdoctor]}" "${M[big.tcptrace]}" 3)
r_ts=$(ratio "${W[big.tshark]}" "${W[big.tcpdoctor]}")
r_base=$(ratio "${W[big.tcpdoctor]}" "${W[big.baseline]:-}")
r_base_mem=$(ratio "${M[big.tcpdoctor]}" "${M[big.baseline]:-}")
{
    echo "tcpdoctor benchmark  $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    header
    facts big
    echo
    tool_table big
    echo
    printf '%-44s %8s   %-10s %s\n' ratio value goal status
    printf '%-44s %8s   %-10s %s\n' "tcptrace_time / tcpdoctor_time (x faster)" "$r_tt" ">= 10" "$(verdict big "$r_tt" ">=" 10)"
    printf '%-44s %8s   %-10s %s\n' "tcpdoctor_mem / tcptrace_mem" "$r_mem" "<= 0.20" "$(verdict big "$r_mem" "<=" 0.2)"
    printf '%-44s %8s   %-10s %s\n' "tshark_time / tcpdoctor_time (x faster)" "$r_ts" ">= 100" "$(verdict big "$r_ts" ">=" 100)"
    if [ -n "$BASELINE" ]; then
        printf '%-44s %8s   %-10s %s\n' "tcpdoctor_time / baseline_time" "$r_base" "<= 1.00" "$(verdict big "$r_base" "<=" 1)"
        printf '%-44s %8s   %-10s %s\n' "tcpdoctor_mem / baseline_mem" "$r_base_mem" "" ""
    fi
    echo
    echo "BENCH v=1 file=$(basename "$CAPTURE") bytes=${P_BYTES[big]} packets=${P_PACKETS[big]} connections=${P_CONNS[big]} runs=$RUNS" \
        "read_s=$(fmt "${P_READ[big]}" 4)" \
        "tcpdoctor_s=$(fmt "${W[big.tcpdoctor]}" 4) tcpdoctor_mib=$(fmt "${M[big.tcpdoctor]}" 1)" \
        "tcptrace_s=$(fmt "${W[big.tcptrace]}" 4) tcptrace_mib=$(fmt "${M[big.tcptrace]}" 1)" \
        "tshark_s=$(fmt "${W[big.tshark]}" 4) tshark_mib=$(fmt "${M[big.tshark]}" 1)" \
        "tcptrace_over_tcpdoctor_time=$r_tt tcpdoctor_over_tcptrace_mem=$r_mem tshark_over_tcpdoctor_time=$r_ts" \
        "$([ -z "$BASELINE" ] || echo "baseline_s=$(fmt "${W[big.baseline]}" 4) baseline_mib=$(fmt "${M[big.baseline]}" 1) tcpdoctor_over_baseline_time=$r_base")" \
        "tcpdoctor=$([ -n "$skip_reason" ] && echo skipped || { [ "$(verified big)" = 1 ] && echo verified || echo unverified; })"
} >"$tmp/report"
mkdir -p "$(dirname "$OUT")"
cp "$tmp/report" "$OUT"
cat "$tmp/report"
note "written to $(rel "$OUT")"

# ---- hostile shapes ------------------------------------------------------------------------
if [ "$HOSTILE" = 1 ]; then
    for shape in "${hostile_shapes[@]}"; do
        FILES[$shape]=$repo/bench/data/$shape.pcap
        measure "$shape" "${FILES[$shape]}"
    done
    {
        echo "tcpdoctor benchmark, hostile shapes  $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        header
        echo "captures:  built by bench/make-hostile-captures.sh (deterministic: same bytes every run)"
        echo "caps:      tshark not run above $TSHARK_MAX_PACKETS packets; tcptrace and tshark run once above"
        echo "           $PEER_ONE_RUN_PACKETS packets, under an address-space limit of $PEER_MAX_GB GB; every run stopped after ${TOOL_TIMEOUT}s"
        echo
        printf '%-12s %9s %9s  %-28s' shape packets conns "tcpdoctor s / MiB / Mpkt/s"
        [ -z "$BASELINE" ] || printf '  %-18s' "baseline s / MiB"
        printf '  %-18s  %-18s\n' "tcptrace s / MiB" "tshark s / MiB"
        for shape in big "${hostile_shapes[@]}"; do
            cell() {  # cell TAG TOOL
                case ${STATUS[$1.$2]} in
                    ok) printf '%.3f / %.1f' "${W[$1.$2]}" "${M[$1.$2]}" ;;
                    *) printf '%s' "${STATUS[$1.$2]}" ;;
                esac
            }
            mpps=$(awk -v p="${P_PACKETS[$shape]}" -v w="${W[$shape.tcpdoctor]}" 'BEGIN { if (w == "" || w == 0) print "n/a"; else printf "%.2f", p / w / 1e6 }')
            printf '%-12s %9s %9s  %-28s' "$shape" "${P_PACKETS[$shape]}" "${P_CONNS[$shape]}" "$(cell "$shape" tcpdoctor) / $mpps"
            [ -z "$BASELINE" ] || printf '  %-18s' "$(cell "$shape" baseline)"
            printf '  %-18s  %-18s\n' "$(cell "$shape" tcptrace)" "$(cell "$shape" tshark)"
        done
        echo "(big: the capture of bench/results/latest.txt, measured again in this run)"
        for shape in "${hostile_shapes[@]}"; do
            echo
            echo "== $shape"
            facts "$shape"
            echo
            tool_table "$shape"
        done
        echo
        flood_pps=$(awk -v p="${P_PACKETS[syn-flood]}" -v w="${W[syn-flood.tcpdoctor]}" 'BEGIN { if (w == "" || w == 0) print "n/a"; else printf "%.0f", p / w }')
        printf '%-52s %12s   %-12s %s\n' goal value target status
        printf '%-52s %12s   %-12s %s\n' "syn-flood: tcpdoctor peak MiB" "$(fmt "${M[syn-flood.tcpdoctor]}" 1)" "<= 64" \
            "$(verdict syn-flood "$(fmt "${M[syn-flood.tcpdoctor]}" 1)" "<=" 64)"
        printf '%-52s %12s   %-12s %s\n' "syn-flood: tcpdoctor packets/s" "$flood_pps" ">= 2000000" \
            "$(verdict syn-flood "$flood_pps" ">=" 2000000)"
        for shape in big "${hostile_shapes[@]}"; do
            printf '%-52s %12s   %-12s %s\n' "$shape: tcptrace_time / tcpdoctor_time (x faster)" \
                "$(ratio "${W[$shape.tcptrace]}" "${W[$shape.tcpdoctor]}")" "" ""
            printf '%-52s %12s   %-12s %s\n' "$shape: tcpdoctor_mem / tcptrace_mem" \
                "$(ratio "${M[$shape.tcpdoctor]}" "${M[$shape.tcptrace]}" 3)" "" ""
            if [ -n "$BASELINE" ]; then
                r=$(ratio "${W[$shape.tcpdoctor]}" "${W[$shape.baseline]}")
                printf '%-52s %12s   %-12s %s\n' "$shape: tcpdoctor_time / baseline_time" "$r" \
                    "$([ "$shape" = big ] && echo "<= 1.00")" "$([ "$shape" = big ] && verdict big "$r" "<=" 1)"
                printf '%-52s %12s   %-12s %s\n' "$shape: tcpdoctor_mem / baseline_mem" \
                    "$(ratio "${M[$shape.tcpdoctor]}" "${M[$shape.baseline]}" 3)" "" ""
            fi
        done
        echo
        for shape in "${hostile_shapes[@]}"; do
            echo "BENCH v=1 file=$shape.pcap bytes=${P_BYTES[$shape]} packets=${P_PACKETS[$shape]} connections=${P_CONNS[$shape]} runs=$RUNS" \
                "tcpdoctor_s=$(fmt "${W[$shape.tcpdoctor]}" 4) tcpdoctor_mib=$(fmt "${M[$shape.tcpdoctor]}" 1)" \
                "$([ -z "$BASELINE" ] || echo "baseline_s=$(fmt "${W[$shape.baseline]}" 4) baseline_mib=$(fmt "${M[$shape.baseline]}" 1)")" \
                "tcptrace_s=$(fmt "${W[$shape.tcptrace]}" 4) tcptrace_mib=$(fmt "${M[$shape.tcptrace]}" 1) tcptrace=${STATUS[$shape.tcptrace]}" \
                "tshark_s=$(fmt "${W[$shape.tshark]}" 4) tshark_mib=$(fmt "${M[$shape.tshark]}" 1) tshark=${STATUS[$shape.tshark]}" \
                "tcpdoctor=$([ -n "$skip_reason" ] && echo skipped || { [ "$(verified "$shape")" = 1 ] && echo verified || echo unverified; })"
        done
    } >"$tmp/hostile"
    mkdir -p "$(dirname "$HOSTILE_OUT")"
    cp "$tmp/hostile" "$HOSTILE_OUT"
    cat "$tmp/hostile"
    note "written to $(rel "$HOSTILE_OUT")"
fi

# a failed tcpdoctor run makes the run fail (a skipped tcpdoctor, or a peer stopped by its caps,
# does not: the rest was still measured)
failed=0
for k in "${!STATUS[@]}"; do [ "${STATUS[$k]}" = FAILED ] && failed=1; done
[ "$failed" = 0 ]

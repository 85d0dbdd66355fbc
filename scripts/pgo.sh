#!/usr/bin/env bash
# Profile-guided optimisation of the release binary: makes the profile that
# scripts/static.sh (and so the Debian package) builds with, and prints its path.
#
#   bash scripts/pgo.sh                  the profile: ${CARGO_TARGET_DIR:-target}/pgo/tcpdoctor.profdata
#   bash scripts/pgo.sh --build          and a release build that uses it: prints the binary's path
#
# 1. An instrumented release build (-Cprofile-generate), in target/pgo/gen.
# 2. Training: `analyze` (JSON and text) on every capture committed to the repository: the lab's
#    fixtures of real Linux TCP, the examples, the decoders' test captures. Nothing of the
#    benchmark captures (bench/data, made on the day) is read: the profile is not tuned on what
#    it is measured with.
# 3. llvm-profdata (the toolchain's own, `rustup component add llvm-tools`; added here if
#    missing) merges the counts.
# With the profile, LLVM lays out each function's hot blocks together, inlines where the
# profile says calls are hot, and moves the cold paths away: on the benchmark captures about
# 9% fewer instructions and 17% fewer instruction-cache misses (bench/results/pgo.txt). The
# profile is tied to the source it was made from: make it again after a change (a stale one
# is ignored function by function, with a warning, never wrong).
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir=${CARGO_TARGET_DIR:-target}
out=$target_dir/pgo
gen=$out/gen
raw=$out/raw
profile=$out/tcpdoctor.profdata

sysroot=$(rustc --print sysroot)
host=$(rustc -vV | sed -n 's/^host: //p')
profdata=$sysroot/lib/rustlib/$host/bin/llvm-profdata
if [ ! -x "$profdata" ]; then
  rustup component add llvm-tools >&2
fi
[ -x "$profdata" ] || { echo "pgo.sh: no llvm-profdata at $profdata (rustup component add llvm-tools)" >&2; exit 2; }

rm -rf "$raw"
mkdir -p "$raw"
# --target keeps RUSTFLAGS off build scripts and proc-macros: only the binary's crates count.
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$(readlink -f "$raw")" \
  CARGO_TARGET_DIR=$gen cargo build --release --locked --target "$host" -p tcpdoctor >&2
instrumented=$gen/$host/release/tcpdoctor

trained=0
while IFS= read -r capture; do
  # A capture the analysis refuses (the decoders' hostile inputs) still trains its error paths.
  "$instrumented" analyze --format json "$capture" >/dev/null 2>&1 || true
  "$instrumented" analyze "$capture" >/dev/null 2>&1 || true
  trained=$((trained + 1))
done < <(git ls-files '*.pcap' '*.pcapng' '*.pcap.gz' '*.pcapng.gz' '*.pcap.zst' 2>/dev/null \
  || find fixtures examples crates -name '*.pcap*' -type f | sort)
[ "$trained" -gt 0 ] || { echo "pgo.sh: no committed capture to train on" >&2; exit 1; }
"$profdata" merge -o "$profile" "$raw"
echo "pgo.sh: profile of $trained captures in $profile" >&2

if [ "${1:-}" = --build ]; then
  RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$(readlink -f "$profile")" \
    CARGO_TARGET_DIR=$out/use cargo build --release --locked --target "$host" -p tcpdoctor >&2
  echo "$out/use/$host/release/tcpdoctor"
else
  echo "$profile"
fi

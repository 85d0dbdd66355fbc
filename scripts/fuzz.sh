#!/usr/bin/env bash
# Builds every cargo-fuzz target (fuzz/Cargo.toml) with libFuzzer and AddressSanitizer, and
# runs each for SECONDS_PER_TARGET (default 30) from its committed seeds (fuzz/seeds/TARGET,
# made by `fuzz/seed.sh --small`) and its regression inputs (fuzz/regressions/TARGET: inputs
# that once crashed, replayed first on every run). Prints the executions per target.
#
# A crash, a leak, a timeout (an input taking over 20 s) or running out of memory fails the
# run: the input is copied to fuzz/regressions/TARGET/ (commit it with the fix) and printed
# in base64, so that a failure in CI can be reproduced from its log alone.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
# Environment: FUZZ_SANITIZER (address; `none` for a plain libFuzzer build),
#   FUZZ_TARGET_DIR (fuzz/target). cargo-fuzz is installed from crates.io when missing.
# The active toolchain is used: on stable, RUSTC_BOOTSTRAP=1 lets it take the -Z flags
# (sanitizer, coverage instrumentation) that cargo-fuzz passes; nightly needs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
secs=${1:-30}
shift || true
sanitizer=${FUZZ_SANITIZER:-address}
tdir=${FUZZ_TARGET_DIR:-$root/fuzz/target}
CARGO_FUZZ_VERSION=0.13.2

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi
command -v c++ >/dev/null || { echo "fuzz: no C++ compiler (libFuzzer is C++): apt-get install g++" >&2; exit 2; }

if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cd fuzz && cargo fuzz list)
fi
export RUSTC_BOOTSTRAP=1
echo "== fuzz: building ${#targets[@]} targets (sanitizer: $sanitizer)"
t0=$(date +%s)
(cd fuzz && cargo fuzz build --sanitizer "$sanitizer" --target-dir "$tdir")
echo "fuzz: built in $(( $(date +%s) - t0 )) s"
triple=$(rustc -vV | sed -n 's/^host: //p')
bin=$tdir/$triple/release

work=$(mktemp -d "${TMPDIR:-/tmp}/tcpdoctor-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
summary=()
for t in "${targets[@]}"; do
  [ -d "fuzz/seeds/$t" ] || { echo "fuzz FAIL: $t has no seeds (fuzz/seed.sh --small)" >&2; status=1; continue; }
  mkdir -p "$work/$t/corpus" "$work/$t/artifacts" "fuzz/regressions/$t"
  rc=0
  # The first corpus directory takes what libFuzzer finds; the committed ones stay as they are.
  "$bin/$t" "$work/$t/corpus" "fuzz/seeds/$t" "fuzz/regressions/$t" \
    -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/$t/artifacts/" > "$work/$t/log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t/log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$work/$t/log" | tail -1 || true)
  seeds=$(find "fuzz/seeds/$t" "fuzz/regressions/$t" -type f | wc -l)
  line=$(printf '%-14s %10s executions in %s s, %s, %s seeds' "$t" "${execs:-?}" "$secs" "${cov:-cov: ?}" "$seeds")
  if [ "$rc" -ne 0 ]; then
    status=1
    line="$line: FAILED (exit $rc)"
    echo "fuzz FAIL: $t (exit $rc); the end of its log:" >&2
    tail -40 "$work/$t/log" >&2
    for a in "$work/$t/artifacts"/*; do
      [ -f "$a" ] || continue
      cp "$a" "fuzz/regressions/$t/"
      echo "fuzz: input saved as fuzz/regressions/$t/$(basename "$a"); commit it with the fix. base64:" >&2
      base64 -w 76 "$a" >&2
    done
  fi
  echo "fuzz: $line"
  summary+=("$line")
done
echo "== fuzz summary"
printf '  %s\n' "${summary[@]}"
exit "$status"

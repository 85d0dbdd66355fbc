#!/usr/bin/env bash
# Builds a statically linked x86_64 Linux tcpdoctor (glibc, static-pie) and
# prints its path. Needs glibc's static libraries (Debian: libc6-dev) and
# nothing else. The binary runs on any x86_64 Linux kernel, with no shared
# library at all: `scripts/deb.sh` packages it, and tests/e2e/static.sh runs
# it in an empty root. It is built with the profile scripts/pgo.sh makes from
# the committed captures (profile-guided optimisation; PGO_PROFILE=FILE takes a
# profile made before, PGO_PROFILE=none builds without one).
#
# glibc warns at link time that getaddrinfo/getpwnam in a static binary need,
# at run time, the NSS modules of the same glibc version. They are only used
# to resolve host names (diagnose/load/ping/trace URLs); an IP address needs
# none, and analyze, watch, sockets and sysctl never resolve names.
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-unknown-linux-gnu
if [ "$(uname -m)" != x86_64 ]; then
  echo "static.sh: builds for $target on an x86_64 host only" >&2; exit 2
fi
libc_a=$(gcc -print-file-name=libc.a 2>/dev/null || true)
if [ ! -f "$libc_a" ] && [ ! -f /usr/lib/x86_64-linux-gnu/libc.a ]; then
  echo "static.sh: glibc's static libraries are missing (Debian: apt-get install libc6-dev)" >&2
  exit 2
fi

# Built with the profile of scripts/pgo.sh (made here unless PGO_PROFILE names one; PGO_PROFILE=none:
# without): the released binary is the profile-guided one.
profile=${PGO_PROFILE:-}
[ -n "$profile" ] || profile=$(bash scripts/pgo.sh)
pgo=()
if [ "$profile" != none ]; then
  [ -f "$profile" ] || { echo "static.sh: no profile at $profile" >&2; exit 2; }
  pgo=(-Cprofile-use="$(readlink -f "$profile")")
fi
# --target keeps RUSTFLAGS off build scripts and proc-macros, which must stay
# dynamic; the crates of the binary get +crt-static.
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static ${pgo[*]}" \
  cargo build --release --locked --target "$target" -p tcpdoctor >&2

bin="${CARGO_TARGET_DIR:-target}/$target/release/tcpdoctor"
# No program interpreter and no needed libraries: nothing to load at start.
if LC_ALL=C readelf -l "$bin" | grep -q 'INTERP'; then
  echo "static.sh: $bin has a program interpreter: not static" >&2; exit 1
fi
if LC_ALL=C readelf -d "$bin" | grep -q '(NEEDED)'; then
  echo "static.sh: $bin needs shared libraries: not static" >&2; exit 1
fi
echo "$bin"

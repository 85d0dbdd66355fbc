#!/usr/bin/env bash
# The project's tests, as CI runs them: the documentation's links, formatting, lints, unit/property/
# integration tests over the committed captures, every fuzz target for 30 s
# (FUZZ_SECONDS), then the end-to-end test with real nginx + wrk in network
# namespaces (root) and the short soak (tests/soak/soak.sh --short). Installs what is missing
# (Debian packages) when run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
command -v nginx   >/dev/null || need_pkgs+=(nginx-light)
command -v wrk     >/dev/null || need_pkgs+=(wrk)
command -v tcpdump >/dev/null || need_pkgs+=(tcpdump)
command -v hping3  >/dev/null || need_pkgs+=(hping3)
command -v traceroute >/dev/null || need_pkgs+=(traceroute)
command -v ip      >/dev/null || need_pkgs+=(iproute2)
command -v python3 >/dev/null || need_pkgs+=(python3)
command -v iptables >/dev/null || need_pkgs+=(iptables)
command -v java    >/dev/null || need_pkgs+=(default-jdk-headless)
command -v curl    >/dev/null || need_pkgs+=(curl)
command -v openssl >/dev/null || need_pkgs+=(openssl)
command -v prometheus >/dev/null || need_pkgs+=(prometheus)
command -v setpriv >/dev/null || need_pkgs+=(util-linux)
command -v chromium >/dev/null || need_pkgs+=(chromium)
command -v chromedriver >/dev/null || need_pkgs+=(chromium-driver)
command -v tshark  >/dev/null || need_pkgs+=(tshark)
command -v capinfos >/dev/null || need_pkgs+=(wireshark-common)
command -v openssl >/dev/null || need_pkgs+=(openssl)
command -v gzip    >/dev/null || need_pkgs+=(gzip)
command -v zstd    >/dev/null || need_pkgs+=(zstd)
command -v man     >/dev/null || need_pkgs+=(man-db)
command -v file    >/dev/null || need_pkgs+=(file)
command -v tcplife >/dev/null || need_pkgs+=(libbpf-tools)
command -v mosquitto >/dev/null || need_pkgs+=(mosquitto)
command -v mosquitto_pub >/dev/null || need_pkgs+=(mosquitto-clients)
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || need_pkgs+=(libc6-dev)
command -v c++     >/dev/null || need_pkgs+=(g++)
[ -x /usr/bin/time ] || need_pkgs+=(time)
python3 -c 'import ensurepip' 2>/dev/null || need_pkgs+=(python3-venv)
# tests/soak/plot.py draws the soak's RSS curves (Debian's python3 has Debian's matplotlib).
python3 -c 'import matplotlib' 2>/dev/null || /usr/bin/python3 -c 'import matplotlib' 2>/dev/null \
  || need_pkgs+=(python3-matplotlib)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing: ${need_pkgs[*]} (run as root to install them)" >&2; exit 2
  fi
  export DEBIAN_FRONTEND=noninteractive
  # The tests run their own nginx and Prometheus: keep the packaged services
  # from starting (invoke-rc.d asks policy-rc.d; 101 means "not now").
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
llvm_profdata="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata"
[ -x "$llvm_profdata" ] || rustup component add llvm-tools

echo "== documentation: links, anchors, README length, a page per cause"
python3 scripts/check-links.py
echo "== rust-version: the true minimum of the locked dependencies, within the toolchain"
python3 scripts/check-msrv.py
echo "== lints: every crate inherits the workspace's; unsafe only where a module allows it"
python3 scripts/check-lints.py
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== no function longer than 120 lines in the engine crates"
python3 scripts/long-functions.py
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
# Tests that need root or tcpdump are #[ignore]d, so a plain `cargo test` passes anywhere
# and says how many it left out; here (root, tools installed) they all run.
if [ "$(id -u)" -eq 0 ]; then
  cargo test --workspace --locked -- --include-ignored
else
  cargo test --workspace --locked
fi
echo "== fuzz: every target for ${FUZZ_SECONDS:-30} s from its seeds"
bash scripts/fuzz.sh "${FUZZ_SECONDS:-30}"
echo "== end to end: nginx + wrk in namespaces"
cargo build --release --locked
echo "== every committed capture against tshark"
bash tests/e2e/oracle.sh target/release/tcpdoctor
if [ "$(id -u)" -eq 0 ]; then
  bash tests/e2e/nginx-wrk.sh target/release/tcpdoctor
  bash tests/e2e/inputs.sh target/release/tcpdoctor
  bash tests/e2e/faults.sh target/release/tcpdoctor
  bash tests/e2e/tls.sh target/release/tcpdoctor
  bash tests/e2e/broker.sh target/release/tcpdoctor
  bash tests/e2e/html.sh target/release/tcpdoctor
  bash tests/e2e/diagnose.sh target/release/tcpdoctor
  bash tests/e2e/load.sh target/release/tcpdoctor
  bash tests/soak/soak.sh --short target/release/tcpdoctor
  bash tests/e2e/probe.sh target/release/tcpdoctor
  bash tests/e2e/trace.sh target/release/tcpdoctor
  bash tests/e2e/sockets.sh target/release/tcpdoctor
  bash tests/e2e/top.sh target/release/tcpdoctor
  bash tests/e2e/sysctl.sh target/release/tcpdoctor
  bash tests/e2e/watch.sh target/release/tcpdoctor
  bash tests/e2e/lab.sh target/release/tcpdoctor
  bash tests/e2e/fleet.sh target/release/tcpdoctor
  echo "== the static binary in an empty root, and the Debian package made from it"
  static=$(bash scripts/static.sh)
  bash tests/e2e/static.sh "$static" target/release/tcpdoctor
  deb=$(bash scripts/deb.sh "$static")
  bash tests/e2e/deb.sh "$deb"
else
  echo "end-to-end test needs root (network namespaces): skipped" >&2
  exit 3
fi
echo "== all tests passed"

#!/usr/bin/env bash
# Build the hostile-shape benchmark captures, deterministically (the same bytes on every run),
# with the generator in crates/capture/examples/hostile.rs:
#
#   bash bench/make-hostile-captures.sh [DIR]     (default DIR=bench/data; no root needed)
#
#   syn-flood.pcap    300,000 SYNs to one server from distinct sources over 300 s, never
#                     answered (hping3-style: no options)                      300,000 packets
#   port-scan.pcap    one scanner, SYNs to 20,000 ports in random order over 2 s; closed ports
#                     answer RST-ACK, 3 open ones SYN-ACK (the scanner resets)  40,003 packets
#   one-request.pcap  1,000,000 connections from 1,000 clients, one every 100 µs: handshake,
#                     GET, response, FIN/FIN/ACK                            8,000,000 packets
#
# A capture already there is kept if its SHA-256 matches the expected one, else rebuilt.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
DIR=${1:-$repo/bench/data}
case $DIR in /*) ;; *) DIR=$PWD/$DIR ;; esac
mkdir -p "$DIR"

die() { echo "make-hostile-captures: $*" >&2; exit 1; }
log() { echo "[make-hostile-captures $(date +%T)] $*" >&2; }

# shape count sha256 (of the file the generator writes for that count)
shapes=(
    "syn-flood 300000 9e09a847f2de74799f9be73ac6b0757c63ffdc0a21c2f17395caf9ee5a671ed9"
    "port-scan 20000 bf0c9bc647cf282d45a29dad5a2f1df9ffbdea60e952493cc4346cddb763c33f"
    "one-request 1000000 cb2b09e7acefd6dac6e70a508004c8527d3cc80e1c55e590372cff57db5b254e"
)

gen=$repo/target/release/examples/hostile
built=0
for s in "${shapes[@]}"; do
    read -r shape count sum <<<"$s"
    out=$DIR/$shape.pcap
    if [ -s "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$sum" ]; then
        log "$out up to date"
        continue
    fi
    if [ "$built" = 0 ]; then
        log "cargo build --release -p tcpdoctor-capture --example hostile"
        (cd "$repo" && cargo build --release --locked -p tcpdoctor-capture --example hostile >&2) \
            || die "could not build the generator"
        built=1
    fi
    log "writing $out"
    "$gen" "$shape" "$out.partial" "$count" >&2
    mv -f "$out.partial" "$out"
    got=$(sha256sum "$out" | cut -d' ' -f1)
    [ "$got" = "$sum" ] || log "note: $out has SHA-256 $got, not the recorded $sum (generator changed?)"
done

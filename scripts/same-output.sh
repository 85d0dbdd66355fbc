#!/usr/bin/env bash
# Byte-identical output, before and after a change that must not change it:
#
#   bash scripts/same-output.sh BEFORE_BINARY AFTER_BINARY [CAPTURE...]
#
# Runs `analyze` (JSON, and the text report with 50 connections) with both binaries on every
# committed capture (fixtures/, examples/) and on the captures given (e.g. bench/data/big.pcap),
# and fails on the first difference, printing it. The `input` member of the JSON is the same
# for both (it names the file), so the documents are compared whole.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,8p' "$0" >&2; exit 2; }
before=$1 after=$2; shift 2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
n=0
for f in fixtures/*.pcap fixtures/*.pcapng examples/*.pcap "$@"; do
    [ -e "$f" ] || continue
    for mode in json text; do
        args=(analyze "$f" --connections 50)
        [ "$mode" = json ] && args=(analyze "$f" --format json)
        "$before" "${args[@]}" > "$tmp/before" 2>&1 || true
        "$after" "${args[@]}" > "$tmp/after" 2>&1 || true
        if ! cmp -s "$tmp/before" "$tmp/after"; then
            echo "differs: $f ($mode)" >&2
            diff "$tmp/before" "$tmp/after" | head -20 >&2
            exit 1
        fi
    done
    n=$((n + 1))
done
echo "same output on $n captures (JSON and text)"

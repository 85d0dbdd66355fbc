#!/usr/bin/env bash
# An independent oracle for every committed capture: tcpdoctor's JSON against tshark's own
# TCP analysis of the same packets, connection by connection (packets, bytes, retransmissions,
# SYN retries, windows, handshake RTT, duration, how it ended) and every finding's evidence
# frames under its tcp.stream and its wireshark_filter. Differences of definition are
# recognised from tshark's flags and counted in fixtures/ORACLE.md, which must be current;
# tcpdoctor bugs are listed in KNOWN_BUGS (tests/e2e/oracle.py); anything else fails.
# Needs tshark and python3; no root. Usage: tests/e2e/oracle.sh [TCPDOCTOR]
set -euo pipefail
TD=${1:-${TCPDOCTOR:-target/release/tcpdoctor}}
TD=$(readlink -f "$TD")
cd "$(dirname "$0")/../.."
command -v tshark >/dev/null || { echo "e2e oracle: tshark is missing" >&2; exit 2; }
[ -x "$TD" ] || { echo "e2e oracle: no tcpdoctor binary at $TD" >&2; exit 2; }
python3 tests/e2e/oracle.py "$TD" --check fixtures/ORACLE.md
echo "e2e oracle: ok"

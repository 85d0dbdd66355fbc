#!/usr/bin/env bash
# The statically linked build (scripts/static.sh) on a host with nothing installed:
#   linkage     `file` and `ldd` say static; no program interpreter, no needed library
#   empty root  a root directory holding only the binary and examples/nginx-nagle.pcap
#               (no /lib, /usr, /etc, /dev or /proc): `analyze --format json` there gives
#               the document of the normal (dynamically linked) build, byte for byte, with
#               its nagle_delayed_ack finding; the text report, standard input, --version
#               (with this checkout's commit) and an unreadable input (exit 2) work there too
#   control     the normal build in the same root does not start (the root is empty)
#   every capture  outside the root, the same JSON and text as the normal build on every
#               committed capture (scripts/same-output.sh): the profile-guided, static build
#               (scripts/static.sh, scripts/pgo.sh) computes what the plain one does
# Needs root (chroot) or unprivileged user namespaces (unshare -r).
# Usage: tests/e2e/static.sh STATIC_BINARY [NORMAL_BINARY]
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
ST=$(readlink -f "$1")
NORMAL=$(readlink -f "${2:-target/release/tcpdoctor}")
fail() { echo "e2e static FAIL: $*" >&2; exit 1; }
[ -x "$ST" ] || fail "no static binary at $1"
[ -x "$NORMAL" ] || fail "no normal build at ${2:-target/release/tcpdoctor}"

ROOT=$(mktemp -d /tmp/tcpdoctor-static.XXXXXX)
OUT=$(mktemp -d /tmp/tcpdoctor-static-out.XXXXXX)
trap 'rm -rf "$ROOT" "$OUT"' EXIT

# Linkage, as the usual tools tell it (static-pie is a static executable that is
# also position-independent: loaded at a random address, no loader needed).
kind=$(LC_ALL=C file -b "$ST")
case "$kind" in
  *"statically linked"* | *"static-pie linked"*) ;;
  *) fail "file: $kind" ;;
esac
lddout=$(LC_ALL=C ldd "$ST" 2>&1 || true)
case "$lddout" in
  *"statically linked"* | *"not a dynamic executable"*) ;;
  *) fail "ldd: $lddout" ;;
esac
! LC_ALL=C readelf -l "$ST" | grep -q INTERP || fail "readelf: a program interpreter"
! LC_ALL=C readelf -d "$ST" | grep -q '(NEEDED)' || fail "readelf: needs shared libraries"
# The normal build is dynamic: the control below must fail for the right reason.
LC_ALL=C readelf -d "$NORMAL" | grep -q '(NEEDED)' || fail "the normal build is not dynamic: $NORMAL"

# The empty root: the binary and one capture, nothing else.
cp "$ST" "$ROOT/tcpdoctor"
mkdir "$ROOT/examples"
cp examples/nginx-nagle.pcap "$ROOT/examples/"
if [ "$(id -u)" -eq 0 ]; then
  in_root() { chroot "$ROOT" "$@"; }
else
  in_root() { unshare --user --map-root-user --root="$ROOT" --wd=/ "$@"; }
fi
listing=$(cd "$ROOT" && find . | sort | tr '\n' ' ')
[ "$listing" = ". ./examples ./examples/nginx-nagle.pcap ./tcpdoctor " ] || fail "root holds: $listing"

# Control: a dynamically linked binary cannot even start there.
cp "$NORMAL" "$ROOT/tcpdoctor-dynamic"
if in_root /tcpdoctor-dynamic --version >/dev/null 2>&1; then
  fail "the normal build ran in the empty root: the root is not empty"
fi
rm "$ROOT/tcpdoctor-dynamic"

# analyze: the same JSON document as the normal build (the input is named alike:
# the root's working directory is /).
in_root /tcpdoctor analyze --format json examples/nginx-nagle.pcap > "$OUT/static.json" \
  || fail "analyze in the empty root: exit $?"
"$NORMAL" analyze --format json examples/nginx-nagle.pcap > "$OUT/normal.json"
python3 - "$OUT/static.json" "$OUT/normal.json" <<'PY' || fail "JSON findings"
import json, sys
st, nm = (json.load(open(p)) for p in sys.argv[1:3])
kinds = [f["kind"] for f in st["findings"]]
assert kinds and kinds[0] == "nagle_delayed_ack", f"findings in the empty root: {kinds}"
assert st["findings"] == nm["findings"], "findings differ from the normal build"
PY
cmp -s "$OUT/static.json" "$OUT/normal.json" || {
  diff "$OUT/static.json" "$OUT/normal.json" | head -20 >&2
  fail "the JSON document differs from the normal build's"
}

# The text report, and a capture on standard input.
in_root /tcpdoctor analyze examples/nginx-nagle.pcap > "$OUT/static.txt"
"$NORMAL" analyze examples/nginx-nagle.pcap > "$OUT/normal.txt"
cmp -s "$OUT/static.txt" "$OUT/normal.txt" || fail "the text report differs from the normal build's"
in_root /tcpdoctor analyze --format json - < examples/nginx-nagle.pcap > "$OUT/stdin.json"
python3 - "$OUT/stdin.json" "$OUT/normal.json" <<'PY' || fail "analyze - (standard input)"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["findings"] == b["findings"]
PY

# --version names the version and the commit (of this checkout, when it is one).
v=$(in_root /tcpdoctor --version)
[[ "$v" =~ ^tcpdoctor\ [0-9]+\.[0-9]+\.[0-9]+.*\ \(commit\ ([0-9a-z]+)\)$ ]] || fail "--version: $v"
if [ -e .git ] && head=$(git rev-parse --short HEAD 2>/dev/null); then
  [ "${BASH_REMATCH[1]}" = "$head" ] || fail "--version: $v, HEAD is $head"
fi

# An input that is not there: a message and exit 2, not a crash.
set +e
in_root /tcpdoctor analyze /no/such.pcap > /dev/null 2> "$OUT/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "missing input: exit $rc"
grep -q 'no/such.pcap' "$OUT/err" || fail "missing input: $(cat "$OUT/err")"

# Every committed capture: the static, profile-guided build says what the normal build says.
same=$(bash scripts/same-output.sh "$NORMAL" "$ST") || fail "output differs from the normal build's"

echo "e2e static: ok ($kind; $same)"

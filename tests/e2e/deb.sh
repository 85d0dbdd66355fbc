#!/usr/bin/env bash
# The Debian package (scripts/deb.sh), installed for real with dpkg:
#   contents   /usr/bin/tcpdoctor, a manual page per command in /usr/share/man/man1,
#              bash/zsh/fish completions in their packaged places; no dependencies
#   installed  `tcpdoctor analyze examples/nginx-nagle.pcap` from /usr/bin finds the
#              nagle_delayed_ack; `man tcpdoctor-analyze` shows the analyze page; bash
#              completes `tcpdoctor ana` from the packaged completion
#   removed    `dpkg -r` takes every file away again
# The package is removed on every exit path. Refuses to run when a tcpdoctor package is
# already installed (it would be replaced and then removed).
# Needs root, dpkg, man-db. Usage: tests/e2e/deb.sh PACKAGE.deb
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 1 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
DEB=$(readlink -f "$1")
fail() { echo "e2e deb FAIL: $*" >&2; exit 1; }
[ -f "$DEB" ] || fail "no package at $1"
[ "$(id -u)" -eq 0 ] || fail "needs root (dpkg -i)"
if dpkg-query -W -f='${Status}' tcpdoctor 2>/dev/null | grep -q 'installed'; then
  fail "a tcpdoctor package is already installed: not touching it"
fi
OUT=$(mktemp -d /tmp/tcpdoctor-deb.XXXXXX)
installed=0
cleanup() {
  if [ "$installed" -eq 1 ]; then dpkg -r tcpdoctor >/dev/null 2>&1 || true; fi
  rm -rf "$OUT"
}
trap cleanup EXIT

# What the package holds, before installing it.
dpkg-deb -f "$DEB" Package | grep -qx tcpdoctor || fail "package name"
dpkg-deb -f "$DEB" Architecture | grep -qx amd64 || fail "architecture"
[ -z "$(dpkg-deb -f "$DEB" Depends)" ] || fail "depends on: $(dpkg-deb -f "$DEB" Depends)"
dpkg-deb -c "$DEB" | awk '{print $6}' | sed 's|^\./|/|' > "$OUT/files"
for f in /usr/bin/tcpdoctor \
         /usr/share/man/man1/tcpdoctor.1.gz \
         /usr/share/man/man1/tcpdoctor-analyze.1.gz \
         /usr/share/man/man1/tcpdoctor-lab-run.1.gz \
         /usr/share/bash-completion/completions/tcpdoctor \
         /usr/share/zsh/vendor-completions/_tcpdoctor \
         /usr/share/fish/vendor_completions.d/tcpdoctor.fish \
         /usr/share/doc/tcpdoctor/copyright \
         /usr/share/doc/tcpdoctor/changelog.gz; do
  grep -qx "$f" "$OUT/files" || fail "not in the package: $f"
done
dpkg-deb -c "$DEB" | grep ' \./usr/bin/tcpdoctor$' | grep -q '^-rwxr-xr-x root/root' \
  || fail "/usr/bin/tcpdoctor is not root-owned mode 755"

# Install. Minimal images exclude /usr/share/man from every package
# (path-exclude in /etc/dpkg/dpkg.cfg.d): the pages of this one are let through.
installed=1
dpkg -i --path-include='/usr/share/man/man1/tcpdoctor*' "$DEB" > "$OUT/dpkg.log" 2>&1 \
  || { cat "$OUT/dpkg.log" >&2; fail "dpkg -i"; }
dpkg-query -W -f='${Status}' tcpdoctor | grep -qx 'install ok installed' || fail "dpkg status"

# The installed binary, by the PATH the system gives.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
[ "$(command -v tcpdoctor)" = /usr/bin/tcpdoctor ] || fail "tcpdoctor is $(command -v tcpdoctor)"
tcpdoctor --version | grep -Eq '^tcpdoctor [0-9.]+.* \(commit [0-9a-z]+\)$' || fail "--version: $(tcpdoctor --version)"
tcpdoctor analyze examples/nginx-nagle.pcap > "$OUT/report.txt" || fail "analyze: exit $?"
grep -q '^1\. nagle_delayed_ack — server 10.71.0.2:8080' "$OUT/report.txt" \
  || { head -20 "$OUT/report.txt" >&2; fail "analyze: no nagle_delayed_ack first"; }
tcpdoctor analyze --format json examples/nginx-nagle.pcap \
  | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["findings"][0]["kind"]=="nagle_delayed_ack", d["findings"]' \
  || fail "analyze --format json"

# The manual, as a user reads it.
[ "$(man -w tcpdoctor-analyze)" = /usr/share/man/man1/tcpdoctor-analyze.1.gz ] \
  || fail "man -w tcpdoctor-analyze: $(man -w tcpdoctor-analyze 2>&1)"
MANWIDTH=80 man -P cat tcpdoctor-analyze > "$OUT/man.txt" 2> "$OUT/man.err" \
  || { cat "$OUT/man.err" >&2; fail "man tcpdoctor-analyze"; }
for section in NAME SYNOPSIS DESCRIPTION OPTIONS 'EXIT STATUS' EXAMPLES; do
  grep -q "^$section" "$OUT/man.txt" || fail "man tcpdoctor-analyze: no $section"
done
grep -q 'tcpdoctor-analyze' "$OUT/man.txt" || fail "man tcpdoctor-analyze: not the analyze page"
grep -q -- '--format' "$OUT/man.txt" || fail "man tcpdoctor-analyze: no --format option"
man -P cat tcpdoctor > /dev/null 2>&1 || fail "man tcpdoctor"

# bash completion from the packaged script (bash-completion loads it by the command's name).
words=$(bash -c '
  source /usr/share/bash-completion/completions/tcpdoctor
  COMP_WORDS=(tcpdoctor ana); COMP_CWORD=1; COMP_LINE="tcpdoctor ana"; COMP_POINT=${#COMP_LINE}
  fn=$(complete -p tcpdoctor | sed -n "s/.*-F \([^ ]*\).*/\1/p")
  "$fn" tcpdoctor ana tcpdoctor
  echo "${COMPREPLY[*]}"')
[ "$words" = analyze ] || fail "bash completion of 'tcpdoctor ana': '$words'"

# Remove: nothing of it stays.
dpkg -r tcpdoctor > "$OUT/dpkg.log" 2>&1 || { cat "$OUT/dpkg.log" >&2; fail "dpkg -r"; }
installed=0
[ ! -e /usr/bin/tcpdoctor ] || fail "/usr/bin/tcpdoctor left after dpkg -r"
[ ! -e /usr/share/man/man1/tcpdoctor-analyze.1.gz ] || fail "man page left after dpkg -r"
[ ! -e /usr/share/bash-completion/completions/tcpdoctor ] || fail "completion left after dpkg -r"

echo "e2e deb: ok ($(du -k "$DEB" | cut -f1) KB, $(wc -l < "$OUT/files") entries)"

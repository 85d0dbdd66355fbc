#!/usr/bin/env bash
# Builds the Debian package of tcpdoctor from the statically linked binary (no
# dependencies) and prints the .deb's path:
#
#   bash scripts/deb.sh [BINARY]     BINARY: default, what scripts/static.sh builds
#
# Contents: /usr/bin/tcpdoctor; one manual page per command in /usr/share/man/man1
# (`tcpdoctor man --dir`); bash, zsh and fish completions where each shell looks
# for packaged ones; the changelog and copyright in /usr/share/doc/tcpdoctor.
# Written to ${CARGO_TARGET_DIR:-target}/debian/tcpdoctor_VERSION_amd64.deb with
# dpkg-deb (nothing beyond dpkg, binutils and gzip).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ge 1 ]; then
  bin=$1
else
  bin=$(bash scripts/static.sh)
fi
[ -x "$bin" ] || { echo "deb.sh: no binary at $bin" >&2; exit 2; }

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
[ -n "$version" ] || { echo "deb.sh: no version in Cargo.toml" >&2; exit 2; }
arch=amd64
out_dir="${CARGO_TARGET_DIR:-target}/debian"
mkdir -p "$out_dir"
deb="$out_dir/tcpdoctor_${version}_${arch}.deb"

stage=$(mktemp -d)
chmod 755 "$stage"
trap 'rm -rf "$stage"' EXIT
umask 022
# Timestamps of the last commit when there is one: the same tree gives the same package.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

install -D -m 755 "$bin" "$stage/usr/bin/tcpdoctor"
# Line tables go (backtraces keep function names); policy wants binaries stripped of debug info.
strip --strip-debug "$stage/usr/bin/tcpdoctor"

man1="$stage/usr/share/man/man1"
mkdir -p "$man1"
"$stage/usr/bin/tcpdoctor" man --dir "$man1" >/dev/null
[ -s "$man1/tcpdoctor.1" ] && [ -s "$man1/tcpdoctor-analyze.1" ] \
  || { echo "deb.sh: tcpdoctor man --dir wrote no pages" >&2; exit 1; }
gzip -9n "$man1"/*.1

install -d "$stage/usr/share/bash-completion/completions" \
  "$stage/usr/share/zsh/vendor-completions" "$stage/usr/share/fish/vendor_completions.d"
"$stage/usr/bin/tcpdoctor" completions bash > "$stage/usr/share/bash-completion/completions/tcpdoctor"
"$stage/usr/bin/tcpdoctor" completions zsh > "$stage/usr/share/zsh/vendor-completions/_tcpdoctor"
"$stage/usr/bin/tcpdoctor" completions fish > "$stage/usr/share/fish/vendor_completions.d/tcpdoctor.fish"

doc="$stage/usr/share/doc/tcpdoctor"
install -d "$doc"
gzip -9n < CHANGELOG.md > "$doc/changelog.gz"
cat > "$doc/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: tcpdoctor

Files: *
License: MIT or Apache-2.0
 Licensed under either of the MIT license or the Apache License, Version 2.0,
 at your option. On Debian systems the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
COPYRIGHT

install -d "$stage/DEBIAN"
(cd "$stage" && find usr -type f -print0 | sort -z | xargs -0 md5sum) > "$stage/DEBIAN/md5sums"
installed_size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: tcpdoctor
Version: $version
Architecture: $arch
Maintainer: tcpdoctor developers <tcpdoctor@example.invalid>
Installed-Size: $installed_size
Section: net
Priority: optional
Suggests: tcpdump
Homepage: https://example.invalid/tcpdoctor
Description: says why a TCP request is slow
 tcpdoctor reads a packet capture (pcap, pcapng, gzip or zstd) and names the
 mechanism that cost the time (Nagle and delayed ACK, receive window, loss,
 retransmission timeouts, server or client delay...), the endpoint responsible,
 the packets that prove it, and the fix. It also measures URLs, pings and traces
 TCP ports, inspects live sockets and kernel settings, and watches live traffic.
 .
 Statically linked: the binary needs no shared library.
CONTROL

find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >&2
echo "$deb"

#!/usr/bin/env python3
"""The workspace's `rust-version` states the true minimum.

It must be at least the highest `rust-version` among the locked dependencies
built for this platform (a lower claim cannot build), and at most the toolchain
CI builds with. Within those bounds, clippy's `incompatible_msrv` lint (run
with -D warnings) checks that the project's own code calls nothing of the
standard library newer than the claim.
"""
import json
import re
import subprocess
import sys


def version(text):
    parts = [int(x) for x in re.findall(r"\d+", text)[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


def main():
    host = re.search(r"^host: (\S+)", subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout, re.M).group(1)
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", host],
        capture_output=True, text=True, check=True).stdout)
    members = set(meta["workspace_members"])
    used = {n["id"] for n in meta["resolve"]["nodes"]}
    claimed = {version(p["rust_version"]) for p in meta["packages"] if p["id"] in members and p.get("rust_version")}
    if len(claimed) != 1:
        sys.exit(f"msrv: the workspace's crates claim {sorted(claimed)}; inherit one rust-version")
    claim = claimed.pop()
    deps = sorted((version(p["rust_version"]), f'{p["name"]} {p["version"]}') for p in meta["packages"]
                  if p["id"] in used and p["id"] not in members and p.get("rust_version"))
    need, who = deps[-1] if deps else ((0, 0, 0), "nothing")
    rustc = version(subprocess.run(["rustc", "--version"], capture_output=True, text=True, check=True).stdout.split()[1])
    show = lambda v: ".".join(map(str, v[:2]))
    if claim < need:
        sys.exit(f"msrv: rust-version {show(claim)} but {who} needs {show(need)}")
    if claim > rustc:
        sys.exit(f"msrv: rust-version {show(claim)} is newer than the toolchain ({show(rustc)})")
    print(f"rust-version {show(claim)}: the locked dependencies need {show(need)} ({who}); toolchain {show(rustc)}")


if __name__ == "__main__":
    main()

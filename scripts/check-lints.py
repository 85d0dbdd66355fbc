#!/usr/bin/env python3
"""Every crate inherits the workspace's lints, so a lint added there reaches all
of them. `unsafe` is denied by the workspace; a crate without any forbids it at
its root, and a crate that needs it allows it only in modules that say so at
their top (`#![allow(unsafe_code)]`, the socket and namespace calls in `sys.rs`)
or on one item (`#[allow(unsafe_code)]` right above it)."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
bad = []
for toml in sorted(root.glob("crates/*/Cargo.toml")):
    crate = toml.parent
    text = toml.read_text()
    if not re.search(r"^\[lints\]\nworkspace = true$", text, re.M) or re.search(r"^\[lints\.", text, re.M):
        bad.append(f"{toml.relative_to(root)}: lints not inherited ([lints] workspace = true, nothing else)")
    sources = sorted(crate.glob("src/**/*.rs"))
    uses = [p for p in sources if re.search(r"\bunsafe\s*(\{|fn|impl)", p.read_text())]
    roots = [p for p in (crate / "src/lib.rs", crate / "src/main.rs") if p.exists()]
    if not uses:
        for r in roots:
            if "#![forbid(unsafe_code)]" not in r.read_text():
                bad.append(f"{r.relative_to(root)}: no unsafe in the crate, so #![forbid(unsafe_code)] at its root")
    for p in uses:
        t = p.read_text()
        if "#![allow(unsafe_code)]" in t:
            continue
        for m in re.finditer(r"\bunsafe\s*(\{|fn|impl)", t):
            before = t[: m.start()]
            nearest = before.rfind("\n#[allow(unsafe_code)]")
            if nearest < 0 or before.count("\n}\n", nearest) > 0:
                line = before.count("\n") + 1
                bad.append(f"{p.relative_to(root)}:{line}: unsafe outside a module or item that allows it")
                break
if bad:
    sys.exit("lints:\n  " + "\n  ".join(bad))
print(f"lints: {len(list(root.glob('crates/*/Cargo.toml')))} crates inherit the workspace's; unsafe only where a module or item allows it")

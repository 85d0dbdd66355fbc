#!/usr/bin/env python3
"""The costliest source lines of a callgrind profile, inlined code charged to its project line.

    python3 bench/inline-lines.py BINARY N CALLGRIND_OUT...

The profile must be recorded with `--dump-instr=yes`. Each instruction's self cost is read from
the profile, its address resolved with `addr2line -i` (the chain of inlined frames), and the
cost charged to the innermost frame in the project's own `crates/`: an `Option::map_or` inlined
into a rule counts on the rule's line, not on `option.rs`. Costs of instructions outside BINARY
(libc, the loader) are left out. Lines are printed with the two project frames that inlined them.
"""

import collections
import re
import subprocess
import sys


def position(token, previous):
    """A callgrind position: absolute (0x.. or decimal), relative (+n/-n) or the same (*)."""
    if token.startswith("0x"):
        return int(token, 16)
    if token == "*":
        return previous
    if token[0] in "+-":
        return previous + int(token)
    return int(token)


def self_costs(path, binary_name):
    """Self cost by instruction address, for instructions of the object named `binary_name`."""
    costs = collections.Counter()
    objects = {}
    current = ""
    address = 0
    after_calls = False
    with open(path) as f:
        for line in f:
            if line[:1].isalpha():
                if line.startswith("calls="):
                    after_calls = True
                elif line.startswith(("ob=", "cob=")):
                    m = re.match(r"c?ob=\((\d+)\)(?: (.*))?", line.strip())
                    if m and m.group(2):
                        objects[m.group(1)] = m.group(2)
                    if m and line.startswith("ob="):
                        current = objects.get(m.group(1), "")
                continue
            fields = line.split()
            if not fields or fields[0][0] not in "0123456789+-*":
                continue
            address = position(fields[0], address)
            if after_calls:
                # The line after `calls=` is the call's inclusive cost, not self cost.
                after_calls = False
                continue
            if current.endswith(binary_name):
                costs[address] += int(fields[-1])
    return costs


def charge(binary, costs, floor):
    """Cost by innermost project source line, and the frames that inlined it."""
    by_line = collections.Counter()
    callers = {}
    addresses = [a for a, c in costs.items() if c >= floor]
    for start in range(0, len(addresses), 4000):
        part = addresses[start : start + 4000]
        out = subprocess.run(
            ["addr2line", "-i", "-a", "-e", binary],
            input="\n".join(hex(a) for a in part),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        address, frames = None, []

        def flush():
            if address is None:
                return
            own = [f.split("/crates/", 1)[1] for f in frames if "/crates/" in f]
            key = own[0] if own else (frames[0] if frames else "?")
            by_line[key] += costs[address]
            callers.setdefault(key, " <- ".join(own[1:3]))

        for line in out:
            if line.startswith("0x"):
                flush()
                address, frames = int(line, 16), []
            elif line.strip():
                frames.append(line.split(" (discriminator")[0])
        flush()
    return by_line, callers


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    binary, n, profiles = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    name = binary.rsplit("/", 1)[-1]
    costs = collections.Counter()
    for p in profiles:
        costs.update(self_costs(p, name))
    total = sum(costs.values())
    by_line, callers = charge(binary, costs, floor=max(1, total // 200_000))
    print(f"{total:,} instructions in {name}")
    for line, cost in by_line.most_common(n):
        print(f"{cost / 1e6:8.2f}M {cost / total * 100:5.2f}%  {line:48s} {callers[line][:100]}")


if __name__ == "__main__":
    main()

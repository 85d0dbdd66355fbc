#!/usr/bin/env python3
"""Lists the functions longer than a limit in every crate, and fails if there are any.

    python3 scripts/long-functions.py [--max N] [DIR...]

DIR defaults to every crate's sources, the binary's included: crates/*/src.
A function's length is counted from its `fn` line to its closing brace, both included.
Tests are left out: files named tests.rs or tests_*.rs, folders named tests, and
`#[cfg(test)]` modules. Exit status: 0 none too long, 1 some (listed, longest first),
2 bad arguments.

Reads Rust as text: comments, string and character literals are blanked before braces
are matched, so a brace in a string or a comment does not count.
"""
import argparse
import os
import re
import sys

DEFAULT_MAX = 120


def blank(src):
    """The source with comments and literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(src)

    def keep_lines(text):
        return "".join(c if c == "\n" else " " for c in text)

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(keep_lines(src[i:j]))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(keep_lines(src[i:j]))
            i = j
        elif re.match(r'b?r#*"', src[i:i + 258]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'(b?r)(#*)"', src[i:])
            end = '"' + m.group(2)
            j = src.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(keep_lines(src[i:j]))
            i = j
        elif c == '"' or (c == "b" and src.startswith('b"', i)):
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(keep_lines(src[i:j]))
            i = j
        elif c == "'":
            # A character literal ('x', '\n', '\u{7f}'), or a lifetime ('a), which is left as is.
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'])'", src[i:i + 12])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def closing(code, open_at):
    """The index of the brace that closes the one at `open_at`."""
    depth = 0
    for k in range(open_at, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(code) - 1


def test_modules(code):
    """Character ranges of `#[cfg(test)] mod x { ... }` blocks."""
    spans = []
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", code):
        open_at = m.end() - 1
        spans.append((m.start(), closing(code, open_at)))
    return spans


def functions(path):
    """(name, first line, length in lines) of each function with a body in the file."""
    with open(path, encoding="utf-8") as f:
        code = blank(f.read())
    skip = test_modules(code)
    found = []
    for m in re.finditer(r"\bfn\s+(\w+)", code):
        if any(a <= m.start() <= b for a, b in skip):
            continue
        # The body starts at the first `{` after the signature; a `;` first means no body.
        k = m.end()
        while k < len(code) and code[k] not in "{;":
            k += 1
        if k >= len(code) or code[k] == ";":
            continue
        end = closing(code, k)
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, end) + 1
        found.append((m.group(1), first, last - first + 1))
    return found


def is_test_file(path):
    parts = path.split(os.sep)
    name = parts[-1]
    return "tests" in parts[:-1] or name == "tests.rs" or name.startswith("tests_")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=DEFAULT_MAX, help="longest allowed, in lines (default %(default)s)")
    ap.add_argument("dirs", nargs="*", help="folders to read (default: the engine crates' src)")
    args = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    dirs = args.dirs or sorted(
        os.path.join(root, "crates", c, "src") for c in os.listdir(os.path.join(root, "crates"))
        if os.path.isdir(os.path.join(root, "crates", c, "src")))
    long = []
    files = 0
    for d in dirs:
        if not os.path.isdir(d):
            print(f"long-functions: no folder {d}", file=sys.stderr)
            return 2
        for base, _, names in os.walk(d):
            for name in sorted(names):
                path = os.path.join(base, name)
                if not name.endswith(".rs") or is_test_file(path):
                    continue
                files += 1
                for fn, line, length in functions(path):
                    if length > args.max:
                        long.append((length, os.path.relpath(path, root), line, fn))
    long.sort(key=lambda x: (-x[0], x[1], x[2]))
    for length, path, line, fn in long:
        print(f"{path}:{line}: fn {fn} is {length} lines (at most {args.max})")
    if long:
        print(f"{len(long)} function(s) longer than {args.max} lines in {files} files", file=sys.stderr)
        return 1
    print(f"no function longer than {args.max} lines in {files} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())

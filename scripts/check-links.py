#!/usr/bin/env python3
"""Checks the documentation: every relative link and anchor in README.md and
docs/**/*.md resolves (the file exists; a #anchor matches a heading's
GitHub-style slug in the target), README.md is at most 250 lines, and every
finding kind in the engine's registry (crates/engine/src/rules/mod.rs) has
its page docs/causes/<kind>.md (and every such page a kind). Standard library
only. A code block left open is reported too (it would hide the rest of
the page's links). Exit status 0 when all hold, 1 otherwise (each problem on a line)."""
import os
import re
import sys
import unicodedata

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
README_MAX_LINES = 250
FENCE = re.compile(r'^\s*(```|~~~)')
LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
CODE_SPAN = re.compile(r'(`+)(.+?)\1')


def prose_lines(text, state=None):
    """(line number, line) outside fenced code blocks. `state`, a dict, is
    given the line of a code block left open at the end ('open_fence')."""
    fence = None
    for n, line in enumerate(text.split('\n'), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence, opened = m.group(1), n
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield n, line
    if state is not None and fence is not None:
        state['open_fence'] = opened


def slug(heading):
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation
    removed (letters, digits, '_', '-' and spaces kept), spaces to '-'."""
    h = CODE_SPAN.sub(lambda m: m.group(2), heading)
    h = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', h)  # links: their text
    h = re.sub(r'<[^>]+>', '', h)                       # inline HTML
    h = h.strip().lower()
    out = []
    for ch in h:
        if ch in ' -_' or ch.isalnum() or unicodedata.category(ch) in ('Mn', 'Pc'):
            out.append('-' if ch == ' ' else ch)
    return ''.join(out)


def anchors(path, cache={}):
    if path not in cache:
        seen, found = {}, set()
        with open(path, encoding='utf-8') as f:
            for _, line in prose_lines(f.read()):
                m = re.match(r'^(#{1,6})\s+(.*?)\s*#*\s*$', line)
                if not m:
                    continue
                s = slug(m.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else f'{s}-{n}')
        cache[path] = found
    return cache[path]


def links(path):
    with open(path, encoding='utf-8') as f:
        text = f.read()
    state = {}
    for n, line in prose_lines(text, state):
        bare = CODE_SPAN.sub(lambda m: ' ' * len(m.group(0)), line)
        for m in LINK.finditer(bare):
            yield n, m.group(1)
    if 'open_fence' in state:
        yield state['open_fence'], None


def check_links(files):
    problems = []
    for path in files:
        rel = os.path.relpath(path, ROOT)
        for n, target in links(path):
            if target is None:
                problems.append(f'{rel}:{n}: a code block opened here is never closed')
                continue
            if re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I):
                continue  # http:, https:, mailto:…
            file_part, _, anchor = target.partition('#')
            dest = path if file_part == '' else os.path.normpath(
                os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(dest):
                problems.append(f'{rel}:{n}: link to {target}: {os.path.relpath(dest, ROOT)} does not exist')
                continue
            if anchor:
                if not dest.endswith('.md') or os.path.isdir(dest):
                    problems.append(f'{rel}:{n}: link to {target}: an anchor into a file that is not Markdown')
                elif anchor not in anchors(dest):
                    problems.append(f'{rel}:{n}: link to {target}: no heading in {os.path.relpath(dest, ROOT)} has the anchor #{anchor}')
    return problems


def registry_kinds():
    with open(os.path.join(ROOT, 'crates/engine/src/rules/mod.rs'), encoding='utf-8') as f:
        src = f.read()
    # registry entries: `Name "kind_name" [[parts…]] (words, cause)`
    return re.findall(r'\b[A-Z]\w*\s+"([a-z][a-z0-9_]*)"\s*\[', src)


def main():
    problems = []
    readme = os.path.join(ROOT, 'README.md')
    docs = []
    for d, _, names in os.walk(os.path.join(ROOT, 'docs')):
        docs += [os.path.join(d, n) for n in names if n.endswith('.md')]
    problems += check_links([readme] + sorted(docs))

    with open(readme, encoding='utf-8') as f:
        lines = f.read().count('\n')
    if lines > README_MAX_LINES:
        problems.append(f'README.md: {lines} lines, more than {README_MAX_LINES}: move the detail into docs/')

    kinds = registry_kinds()
    if len(kinds) < 1:
        problems.append('crates/engine/src/rules/mod.rs: no kind found in the registry (has its syntax changed?)')
    causes = os.path.join(ROOT, 'docs/causes')
    for k in kinds:
        if not os.path.isfile(os.path.join(causes, f'{k}.md')):
            problems.append(f'docs/causes/{k}.md missing: every kind in the rule registry has a page')
    pages = {n[:-3] for n in os.listdir(causes) if n.endswith('.md') and n != 'README.md'} if os.path.isdir(causes) else set()
    for p in sorted(pages - set(kinds)):
        problems.append(f'docs/causes/{p}.md: no kind "{p}" in the rule registry')

    for p in problems:
        print(p)
    if problems:
        print(f'check-links: {len(problems)} problem(s)', file=sys.stderr)
        return 1
    print(f'check-links: {len(docs) + 1} pages, links and anchors resolve; README.md {lines} lines; '
          f'{len(kinds)} kinds, each with its page')
    return 0


if __name__ == '__main__':
    sys.exit(main())

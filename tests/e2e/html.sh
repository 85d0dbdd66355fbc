#!/usr/bin/env bash
# The HTML report in a real browser, and the annotated pcapng in tshark.
#   tests/e2e/html.sh TCPDOCTOR [SHOTDIR]
# Needs (Debian): chromium chromium-driver python3-venv tshark wireshark-common.
# Installs only selenium, into a virtualenv under the cache dir
# (${XDG_CACHE_HOME:-~/.cache}/tcpdoctor-e2e/venv). Screenshots of the nginx
# and small-receive-window reports go to SHOTDIR (default: a temp dir; pass
# docs/ to refresh the committed ones).
set -euo pipefail
T=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d)
SHOTS=$(realpath -m "${2:-$WORK/shots}")
mkdir -p "$SHOTS"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for b in chromium chromedriver tshark capinfos python3; do
    command -v "$b" >/dev/null || fail "$b is not installed (apt-get install chromium chromium-driver tshark python3-venv)"
done
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/tcpdoctor-e2e/venv
if ! "$VENV/bin/python" -c 'import selenium' 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q 'selenium>=4.20,<5'
fi

# Reports of the committed captures and a hostile one.
python3 "$HERE/hostile_capture.py" "$WORK/hostile.pcap"
HOSTILE_HTML="$WORK/x<img src=x onerror=window.__pwned=3>.html"
cases=()
n=0
cd "$ROOT"
for cap in fixtures/*.pcap* examples/nginx-nagle.pcap "$WORK/hostile.pcap"; do
    n=$((n + 1))
    base=$(basename "$cap")
    html="$WORK/$n.html"
    [ "$base" = hostile.pcap ] && html=$HOSTILE_HTML
    "$T" analyze "$cap" --format json --html "$html" --annotate "$WORK/$n.pcapng" > "$WORK/$n.json" ||
        fail "analyze $base"
    cases+=("$cap" "$html" "$WORK/$n.json" "$WORK/$n.pcapng")
done

# The annotated pcapng: comments on the evidence frames, nothing else changed.
python3 - "${cases[@]}" <<'PY'
import json, subprocess, sys
a = sys.argv[1:]
bad = 0
for cap, html, js, ng in zip(a[0::4], a[1::4], a[2::4], a[3::4]):
    doc = json.load(open(js))
    want = set()
    for f in doc["findings"] + doc["minor_findings"]:
        for e in f["evidence"]:
            want.update(e["frames"])
    out = subprocess.run(["tshark", "-r", ng, "-Y", "frame.comment", "-T", "fields",
                          "-e", "frame.number", "-e", "frame.comment"],
                         capture_output=True, text=True, check=True).stdout
    got = {int(l.split("\t")[0]) for l in out.splitlines() if l.strip()}
    if got != want or not all("tcpdoctor:" in l for l in out.splitlines()):
        print("FAIL annotate", cap, "comments on", sorted(got)[:10], "want", sorted(want)[:10]); bad += 1
    info = lambda f: subprocess.run(["capinfos", "-M", "-S", "-c", "-a", "-e", "-T", "-r", f],
                                    capture_output=True, text=True, check=True).stdout.split("\t")[1:]
    i, o = info(cap), info(ng)
    # count and first/last time; pcap µs vs pcapng ns print with different digits
    if i[0] != o[0] or any(abs(float(x) - float(y)) > 1e-6 for x, y in zip(i[1:], o[1:])):
        print("FAIL capinfos", cap, i, o); bad += 1
    # every frame's timestamp unchanged
    ts = lambda f: subprocess.run(["tshark", "-r", f, "-T", "fields", "-e", "frame.time_epoch"],
                                  capture_output=True, text=True, check=True).stdout.split()
    if [round(float(x), 6) for x in ts(cap)] != [round(float(x), 6) for x in ts(ng)]:
        print("FAIL timestamps", cap); bad += 1
print("annotate: %d captures checked" % (len(a) // 4))
sys.exit(1 if bad else 0)
PY

# The browser: no console errors, charts, key numbers, nothing injected runs.
python3 - "$WORK/cases.json" "${cases[@]}" <<'PY'
import json, sys
out, a = sys.argv[1], sys.argv[2:]
def fmt_ms(v):
    return "%.2f s" % (v / 1e3) if v >= 1000 else ("%.1f ms" % v if v >= 10 else "%.2f ms" % v)
cases = []
for cap, html, js, ng in zip(a[0::4], a[1::4], a[2::4], a[3::4]):
    doc = json.load(open(js))
    f = doc["findings"][0] if doc["findings"] else None
    charts = (2 if doc["capture"].get("latency_budget") else 0) + (1 if doc["capture"]["exchanges"] else 0) \
        + sum(1 for g in doc["findings"] if g.get("ladder"))
    shot = {"nginx-nagle.pcap": "report-nginx-nagle.png",
            "upload-rcvbuf4k.client.pcap": "report-small-receive-window.png"}.get(cap.rsplit("/", 1)[-1])
    cases.append({"html": html, "kind": f and f["kind"], "typical": f and fmt_ms(f["typical_delay_ms"]),
                  "charts": charts, "shot": shot, "hostile": cap.endswith("hostile.pcap")})
json.dump(cases, open(out, "w"))
PY
"$VENV/bin/python" "$HERE/html_check.py" "$WORK/cases.json" "$SHOTS"
echo "html: ok ($n reports; screenshots in $SHOTS)"

#!/usr/bin/env bash
# End to end for HTTPS in `load` and `diagnose`, with real parts: nginx with TLS (a self-signed
# certificate for the name "tls.test", and an IP-only one, made here with openssl) in one network
# namespace, tcpdoctor and wrk in another, real Linux TCP between them.
#   load -k https://IP/            responses, handshakes timed apart from the requests
#   load --cacert CA https://tls.test:8443/   the certificate verified by name (SNI) against the
#                                  test CA; the name resolves through a hosts file bound over
#                                  /etc/hosts in a private mount namespace
#   load https://IP/ (no -k)       the certificate is not trusted: exit 2, a message naming why
#   wrk https://                   answers on the same server (the comparison runs in bench/)
#   diagnose -k https://IP/        connect, TLS handshake and first byte timed; 200s
#   diagnose https://IP/ (no -k)   exit 2 and the certificate error
#   analyze, a certificate lookup  a server (tls_lookup_server.py, ECDSA key) whose handshakes wait
#                                  30 ms: its time found, the key named from the ServerHello's suite
# Needs root, nginx, openssl, wrk, curl, tcpdump, python3. Usage: tests/e2e/tls.sh [TCPDOCTOR]
set -euo pipefail
TD=${1:-${TCPDOCTOR:-target/release/tcpdoctor}}
TD=$(readlink -f "$TD")
P=tdfit-tls$$
. "$(dirname "$0")/lib.sh"
fail() { echo "e2e tls FAIL: $*" >&2; exit 1; }

e2e_netns "$P" 10.84.0
# A CA, and a server certificate it signs for tls.test and the server's address.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=tcpdoctor-test-ca \
  -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=tls.test \
  -keyout "$WORK/server.key" -out "$WORK/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:tls.test,IP:%s\n' "$SERVER_IP" > "$WORK/san.ext"
openssl x509 -req -in "$WORK/server.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" \
  -CAcreateserial -days 2 -extfile "$WORK/san.ext" -out "$WORK/server.pem" 2>/dev/null
python3 -c 'import sys; open(sys.argv[1], "w").write("<html><body>" + "tls end-to-end page. " * 28 + "</body></html>\n")' "$WORK/html/index.html"
e2e_nginx "  server { listen $SERVER_IP:8443 ssl; tcp_nodelay on; root $WORK/html;
    ssl_certificate $WORK/server.pem; ssl_certificate_key $WORK/server.key; }"
e2e_wait_port 8443
URL=https://$SERVER_IP:8443/

# 1. load -k: responses, and the handshakes timed on their own.
ip netns exec "$C" "$TD" load -k -c 8 -t 1 -d 1s --format json "$URL" > "$WORK/k.json" \
  || fail "load -k exited $?"
python3 - "$WORK/k.json" <<'PY' || fail "load -k report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["requests"] > 100, r["requests"]
assert r["status_codes"] == {"200": r["requests"]}, r["status_codes"]
t = r["tls"]
assert t["handshakes"] == 8, t
assert 0 < t["handshake_ms"]["p50"] < 500, t
assert t["error"] is None, t
print(f"e2e tls: load -k {r['requests_per_sec']:.0f} req/s, p50 {r['latency_ms']['p50']:.2f} ms, "
      f"{t['handshakes']} handshakes p50 {t['handshake_ms']['p50']:.2f} ms")
PY

# 2. Verification with the right CA, through the name (SNI and the certificate's DNS name).
cp /etc/hosts "$WORK/hosts"
echo "$SERVER_IP tls.test" >> "$WORK/hosts"
ip netns exec "$C" unshare -m sh -c "mount --bind '$WORK/hosts' /etc/hosts && \
  '$TD' load --cacert '$WORK/ca.pem' -c 2 -t 1 -d 300ms --format json https://tls.test:8443/" \
  > "$WORK/ca.json" || fail "load --cacert exited $?"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["requests"] > 0 and r["errors"]["total"] == 0, r' \
  "$WORK/ca.json" || fail "load --cacert: $(cat "$WORK/ca.json")"
echo "e2e tls: load --cacert verifies the certificate by name"

# 3. No -k, no CA: the self-signed chain is not trusted: exit 2, and the reason.
set +e
ip netns exec "$C" "$TD" load -c 2 -t 1 -d 300ms "$URL" > /dev/null 2> "$WORK/err"
rc=$?
set -e
[ "$rc" = 2 ] || fail "untrusted certificate: load exit $rc, not 2"
grep -qi "certificate" "$WORK/err" || fail "untrusted certificate: $(cat "$WORK/err")"
echo "e2e tls: an untrusted certificate is exit 2: $(head -c 200 "$WORK/err")"

# 4. wrk speaks HTTPS to the same server (bench/load-vs-wrk-tls.sh compares rates).
ip netns exec "$C" wrk -c 2 -t 1 -d 1s "$URL" > "$WORK/wrk.txt" 2>&1 || true
grep -q "Requests/sec" "$WORK/wrk.txt" || fail "wrk https: $(cat "$WORK/wrk.txt")"

# 5. diagnose https://: connect, TLS handshake, first byte.
ip netns exec "$C" "$TD" diagnose -k --format json "$URL" > "$WORK/d.json" \
  || fail "diagnose -k exited $?"
python3 - "$WORK/d.json" <<'PY' || fail "diagnose -k report"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["measured"]["sequential"]
setup = s["setup"]
for k in ("connect_ms", "tls_handshake_ms", "first_byte_ms"):
    assert setup[k] is not None and setup[k] > 0, (k, setup)
assert setup["alpn"] == "http/1.1", setup
# nginx answers at once: a first byte a delayed ACK late would be our own Nagle holding the
# request behind the handshake's last flight.
assert setup["first_byte_ms"] < 20, setup
assert set(s["statuses"]) == {200}, s["statuses"]
print(f"e2e tls: diagnose connect {setup['connect_ms']:.2f} ms, TLS {setup['tls_handshake_ms']:.2f} ms, "
      f"first byte {setup['first_byte_ms']:.2f} ms")
PY
ip netns exec "$C" "$TD" diagnose -k "$URL" | grep -q "TLS handshake" || fail "diagnose text has no TLS line"
set +e
ip netns exec "$C" "$TD" diagnose --format json "$URL" > /dev/null 2> "$WORK/err"
rc=$?
set -e
[ "$rc" = 2 ] || fail "diagnose, untrusted certificate: exit $rc, not 2"
grep -qi "certificate" "$WORK/err" || fail "diagnose, untrusted certificate: $(cat "$WORK/err")"

# 6. analyze names the certificate's key from the ServerHello's suite. A Python HTTPS server with
# an ECDSA P-256 certificate whose handshakes wait 30 ms on a certificate lookup (its SNI
# callback), 6 curls with TLS 1.2 and 6 with TLS 1.3, captured at the server: the server's time
# in the handshake is found, and the fix is not "an ECDSA certificate" (TLS 1.2: its suite says
# ECDSA) or is conditional on the key (TLS 1.3: the certificate travels encrypted). The server
# resets each connection when the client's close_notify follows its FIN: no request was lost.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=tls.test -keyout "$WORK/ec.key" -out "$WORK/ec.pem" 2>/dev/null
ip netns exec "$S" python3 "$(dirname "$0")/tls_lookup_server.py" "$SERVER_IP" 9443 \
  "$WORK/ec.pem" "$WORK/ec.key" 30 > "$WORK/lookup.out" 2>&1 &
PIDS+=($!)
e2e_wait_line "listening on" "$WORK/lookup.out"
for v in 1.2 1.3; do
  e2e_tcpdump "$S" "$WORK/lookup$v.pcap" 256 tcp port 9443
  for _ in 1 2 3 4 5 6; do
    ip netns exec "$C" curl -sk --tlsv"$v" --tls-max "$v" --resolve "tls.test:9443:$SERVER_IP" \
      -o /dev/null https://tls.test:9443/ || fail "curl TLS $v to the lookup server"
  done
  e2e_wait_closed "$S" 9443
  e2e_tcpdump_stop "$DUMP"
  "$TD" analyze --format json "$WORK/lookup$v.pcap" > "$WORK/lookup$v.json" || true
done
python3 - "$WORK/lookup1.2.json" "$WORK/lookup1.3.json" <<'PY' || fail "certificate key in tls_handshake"
import json, sys
for path, key in zip(sys.argv[1:], ("ecdsa", "encrypted")):
    r = json.load(open(path))
    f = [f for f in r["findings"] if f["kind"] == "tls_handshake"]
    assert f, (path, [(g["kind"], g["culprit"]) for g in r["findings"]])
    f = f[0]
    d = f["details"]
    assert f["culprit"]["role"] == "server" and d["cause"] == "key_exchange", (path, f["culprit"], d)
    assert d["handshakes"] >= 5 and 25 <= d["key_exchange_ms"] < 60, (path, d)
    assert d["certificate_key"] == key, (path, d)
    # The server closes its socket after each response, so the client's close_notify that
    # follows its FIN is answered by an RST: the request had its answer, none was lost.
    ended = [c["end"] for c in r["connections"]]
    assert ended.count("rst") >= 5, (path, ended)
    assert not [g for g in r["findings"] + r["minor_findings"] if g["kind"] == "connection_reset"], \
        (path, [(g["kind"], g["culprit"]) for g in r["findings"] + r["minor_findings"]])
    if key == "ecdsa":
        assert "sign with an ECDSA" not in f["fix"] and "ECDSA already" in f["fix"], f["fix"]
    else:
        assert "If it is RSA" in f["fix"] and "Server public key" in f["fix"], f["fix"]
    print(f"e2e tls: certificate lookup, TLS {'1.2' if key == 'ecdsa' else '1.3'}: "
          f"{d['handshakes']} handshakes, {d['key_exchange_ms']:.1f} ms the server's, key {key}")
PY
echo "e2e tls: PASS"

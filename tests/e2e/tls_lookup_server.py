#!/usr/bin/env python3
"""HTTPS server whose handshakes wait on a certificate lookup: as a TLS terminator that fetches
each site's certificate from a store when a ClientHello names the site (its SNI callback).

Usage: tls_lookup_server.py ADDR PORT CERT KEY LOOKUP_MS

Every ClientHello waits LOOKUP_MS milliseconds in the SNI callback before the server answers
(the handshake's ServerHello), then the certificate CERT/KEY (any key type) is used. Each
connection gets one `200 OK` with `Connection: close`. One thread per connection. Prints
`listening on ADDR:PORT` when ready.
"""
import socket
import ssl
import sys
import threading
import time


def serve(conn: socket.socket, tls: ssl.SSLContext) -> None:
    try:
        with tls.wrap_socket(conn, server_side=True) as s:
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = s.recv(4096)
                if not chunk:
                    return
                buf += chunk
            body = b"looked up\n"
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                      % len(body) + body)
    except (OSError, ssl.SSLError):
        pass


def main() -> None:
    addr, port, cert, key, lookup_ms = sys.argv[1:6]
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)

    def lookup(_sock, _name, _ctx):
        time.sleep(int(lookup_ms) / 1000)
        return None

    tls.sni_callback = lookup
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addr, int(port)))
    srv.listen(64)
    print(f"listening on {addr}:{port}", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, tls), daemon=True).start()


if __name__ == "__main__":
    main()

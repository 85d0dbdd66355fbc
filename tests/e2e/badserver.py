# HTTP servers that misbehave, for `tcpdoctor load` tests.
#   badserver.py ADDR PORT MODE
#   rst      read the request, then reset the connection (SO_LINGER 0)
#   midclose read the request, send the head and part of the body, close
#   silent   accept and read, never answer
import socket, struct, sys, threading

addr, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
srv = socket.socket(fam, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((addr, port))
srv.listen(512)
print("ready", flush=True)

def serve(c):
    try:
        while True:
            data = c.recv(65536)
            if not data:
                break
            if mode == "rst":
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                break
            if mode == "midclose":
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)
                break
    except OSError:
        pass
    finally:
        c.close()

while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()

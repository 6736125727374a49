#!/usr/bin/env python3
"""A forward proxy for the naming tests: CONNECT tunnels and absolute-form requests.

Every destination a client names is served by the one upstream given (--upstream
PORT on 127.0.0.1), whatever the name, so tests can use names nobody resolves and
never leave loopback.  Writes its port to --port-file; exits after --lifetime.
"""
import argparse
import os
import socket
import socketserver
import threading


def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = self.request.recv(4096)
            if not chunk:
                return
            head += chunk
        up = socket.create_connection(("127.0.0.1", self.server.upstream), timeout=10)
        up.settimeout(None)
        first, _, rest = head.partition(b"\r\n")
        method, target, version = first.split(b" ", 2)
        if method == b"CONNECT":
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            after = rest.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in rest else b""
            if after:
                up.sendall(after)
        else:
            # absolute-form: forward in origin-form
            path = b"/" + target.split(b"/", 3)[3] if target.count(b"/") >= 3 else b"/"
            up.sendall(b" ".join([method, path, version]) + b"\r\n" + rest)
        t = threading.Thread(target=pipe, args=(up, self.request), daemon=True)
        t.start()
        pipe(self.request, up)
        t.join(10)


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--upstream", type=int, required=True)
    ap.add_argument("--lifetime", type=float, default=240)
    args = ap.parse_args()
    srv = Server(("127.0.0.1", 0), Handler)
    srv.upstream = args.upstream
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, args.port_file)
    threading.Timer(args.lifetime, srv.shutdown).start()
    srv.serve_forever()


if __name__ == "__main__":
    main()

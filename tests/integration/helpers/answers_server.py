#!/usr/bin/env python3
"""A local HTTP/1.1 receiver that answers with rate-limit signals on cue.

Binds 127.0.0.1 on a free port (written to --port-file), HTTPS with --tls CERT KEY.
Every request's arrival is appended to --log as "REALTIME_NS PATH STATUS", stamped
when its request line is read (CLOCK_REALTIME, as the kernel witness stamps).  Answers:
  - /say/STATUS?Header=Value&...  that status with those headers (URL-decoded),
    logged again once written as "REALTIME_NS answered PATH", stamped just
    before the write (the client cannot have read it earlier);
  - anything else 200, or with --limit N a bare 429 (no header) when more than N
    requests came in the last second (the 429s are not counted);
  - HEAD answers with a Content-Length and no body.
Exits by itself after --lifetime seconds so a failed test never leaves it behind.
"""
import argparse
import collections
import http.server
import os
import ssl
import threading
import time
import urllib.parse


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _log(self, line):
        with self.server.lock:
            with open(self.server.log_path, "a") as f:
                f.write(line + "\n")

    def _answer(self, head=False):
        now = time.time_ns()
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        url = urllib.parse.urlsplit(self.path)
        status, headers = 200, []
        if url.path.startswith("/say/"):
            status = int(url.path.split("/")[2])
            headers = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
        elif self.server.limit:
            with self.server.lock:
                recent = self.server.recent
                while recent and recent[0] < now - 1_000_000_000:
                    recent.popleft()
                if len(recent) >= self.server.limit:
                    status = 429
                else:
                    recent.append(now)
        self._log("%d %s %d" % (now, url.path, status))
        body = ("%d %s\n" % (status, url.path)).encode()
        # Stamped before it is written: the client may read it, and start its
        # pause, before this thread runs again after the write.
        writing = time.time_ns()
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)
        self.wfile.flush()
        if url.path.startswith("/say/"):
            self._log("%d answered %s" % (writing, url.path))

    def do_GET(self):
        self._answer()

    def do_POST(self):
        self._answer()

    def do_HEAD(self):
        self._answer(head=True)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--lifetime", type=float, default=120)
    ap.add_argument("--also", action="append", default=[], metavar="ADDR",
                    help="serve the same port on this loopback address too (one log, one count)")
    a = ap.parse_args()
    lock, recent = threading.Lock(), collections.deque()
    servers = []
    for addr in ["127.0.0.1"] + a.also:
        srv = Server((addr, servers[0].server_address[1] if servers else 0), Handler)
        srv.log_path, srv.limit, srv.lock, srv.recent = a.log, a.limit, lock, recent
        if a.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(a.tls[0], a.tls[1])
            ctx.set_alpn_protocols(["http/1.1"])
            srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
        servers.append(srv)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(servers[0].server_address[1]))
    os.rename(tmp, a.port_file)
    threading.Timer(a.lifetime, lambda: os._exit(0)).start()
    for srv in servers[1:]:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    servers[0].serve_forever()


if __name__ == "__main__":
    main()

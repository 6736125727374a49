#!/usr/bin/env python3
"""A local HTTP receiver for sluice's tests and demo.

Binds 127.0.0.1 (or ::1 with --ipv6) on a free port, writes the port to --port-file,
and answers every GET, POST or PUT with a small body naming the path (and, for a
body it received - Content-Length or chunked - how many bytes); a path
/status/NNN is answered with status NNN, /slow/MS after MS ms and /stream/MS in
chunks over MS ms (each then logs "MONOTONIC_NS end PATH", the time read just
before its last bytes are written).  Each request's arrival is appended to
--log as "MONOTONIC_NS PATH" (time.monotonic_ns() reads CLOCK_MONOTONIC, the
clock the shim uses, so times compare directly).  Exits by
itself after --lifetime seconds so a failed test never leaves it behind.
"""
import argparse
import http.server
import os
import socket
import sys
import threading
import time


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self):
        now = time.monotonic_ns()
        length = int(self.headers.get("Content-Length") or 0)
        received = b""
        if length:
            received = self.rfile.read(length)
        elif "chunked" in (self.headers.get("Transfer-Encoding") or ""):
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                received += self.rfile.read(size)
                self.rfile.readline()
        body = ("hello %s\n" % self.path).encode()
        if received:
            body += b"got %d bytes\n" % len(received)
        if self.server.log_path:
            with self.server.log_lock, open(self.server.log_path, "a") as f:
                f.write("%d %s\n" % (now, self.path))
        # /slow/MS answers after MS ms; /stream/MS sends its headers at once and its
        # body in three chunks over MS ms.  Both log "NS end PATH" once the answer
        # is out, so a test can count the requests outstanding at the server.
        for kind in ("/slow/", "/stream/"):
            if self.path.startswith(kind) and self.path[len(kind):].isdigit():
                self._slow(kind, int(self.path[len(kind):]) / 1000.0)
                return
        # /status/NNN answers NNN (a 304 or 1xx-less 204 with no body).
        if self.path.startswith("/status/") and self.path[8:11].isdigit():
            status = int(self.path[8:11])
            if status in (204, 304):
                self.send_response(status)
                self.end_headers()
                return
            self.send_response(status)
        else:
            self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _slow(self, kind, seconds):
        # The end is read just before the answer's last bytes are written: the
        # client cannot have them earlier, so a request that arrives before this
        # instant really overlapped.  Read after the write, a server thread
        # preempted between the two would log its end late and make a request
        # sent on time look outstanding beside it.
        body = b"slow\n"
        if kind == "/slow/":
            time.sleep(seconds)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            end = time.monotonic_ns()
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            for _ in range(3):
                time.sleep(seconds / 3)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(body), body))
                self.wfile.flush()
            end = time.monotonic_ns()
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        if self.server.log_path:
            with self.server.log_lock, open(self.server.log_path, "a") as f:
                f.write("%d end %s\n" % (end, self.path))

    do_GET = _answer
    do_POST = _answer
    do_PUT = _answer

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request, client_address):
        # Clients that reset (connect loops) are not errors here; anything else
        # that closed a connection unanswered goes to LOG.errors, for a test
        # that sees a request fail to tell whose the failure was.
        err = sys.exc_info()[1]
        if isinstance(err, (ConnectionError, TimeoutError)) or not self.log_path:
            return
        with self.log_lock, open(self.log_path + ".errors", "a") as f:
            f.write("%d %s: %r\n" % (time.monotonic_ns(), client_address, err))


class Server6(Server):
    address_family = socket.AF_INET6


class TLSServer(Server):
    """HTTPS: each connection's handshake runs in its own thread."""
    tls = None

    def finish_request(self, request, client_address):
        try:
            request = self.tls.wrap_socket(request, server_side=True)
        except (OSError, ValueError):
            return
        super().finish_request(request, client_address)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log")
    ap.add_argument("--port", type=int, default=0, help="this port (default: any free one)")
    ap.add_argument("--ipv6", action="store_true")
    ap.add_argument("--lifetime", type=float, default=300)
    ap.add_argument("--dual", action="store_true",
                    help="also serve ::1 on the same port (for happy eyeballs)")
    ap.add_argument("--also", action="append", default=[], metavar="ADDR",
                    help="also serve this 127.0.0.0/8 address on the same port")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), help="serve HTTPS")
    ap.add_argument("--idle-timeout", type=float,
                    help="close a connection silent for this many seconds, as servers "
                         "with header timeouts do")
    args = ap.parse_args()
    if args.idle_timeout:
        Handler.timeout = args.idle_timeout
    cls = Server6 if args.ipv6 else TLSServer if args.tls else Server
    if args.tls:
        import ssl
        TLSServer.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        TLSServer.tls.load_cert_chain(*args.tls)
    srv = cls(("::1" if args.ipv6 else "127.0.0.1", args.port), Handler)
    servers = [srv]
    if args.dual:
        servers.append(Server6(("::1", srv.server_address[1]), Handler))
    for addr in args.also:
        if not addr.startswith("127."):
            ap.error("--also takes loopback addresses only")
        servers.append(Server((addr, srv.server_address[1]), Handler))
    lock = threading.Lock()  # one log, whichever family a request came by
    for x in servers:
        x.log_path = args.log
        x.log_lock = lock
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, args.port_file)
    for x in servers:
        threading.Timer(args.lifetime, x.shutdown).start()
    for x in servers[1:]:
        threading.Thread(target=x.serve_forever, daemon=True).start()
    srv.serve_forever()


if __name__ == "__main__":
    main()

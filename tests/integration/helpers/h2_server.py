#!/usr/bin/env python3
"""A local HTTP/2 receiver (python's h2) that stamps each request with the kernel's
receive time and answers with rate-limit signals on cue.

Binds 127.0.0.1 on a free port (written to --port-file): h2c with prior knowledge
or by an HTTP/1.1 Upgrade (the request that asks is stream 1), or with --tls CERT
KEY HTTPS offering only h2 (ALPN).  Each request (a HEADERS that
opens a stream) is appended to --log as "REALTIME_NS 4 SRCPORT PATH STATUS AUTHORITY": the
time is the kernel's receive stamp (SO_TIMESTAMPNS) of the read that completed its
HEADERS - the destination's witness, as arrivals.py reads it.  TLS is taken off
through a memory BIO, so that every read of the socket is this process's own.
Answers:
  - /say/STATUS?Header=Value&...  that status with those headers (URL-decoded), and
    the line "REALTIME_NS answered PATH" in --answered (default: --log) as its
    headers are handed to the kernel (the client cannot have read them earlier);
  - /wait/MS  200 "hello PATH", answered MS milliseconds later (other streams and
    connections are served meanwhile), with the line "REALTIME_NS done PATH" in
    --answered as its last frame is handed to the kernel;
  - anything else 200 "hello PATH".
With --ends FILE a request with a body (:method POST) is answered once its
stream ends, and that end - the read that completed its last frame - is appended
there as "REALTIME_NS 4 SRCPORT PATH": when the server has the whole request.
Serves any number of connections, one thread; exits after --lifetime seconds.
"""
import argparse
import selectors
import socket
import ssl
import struct
import time
import urllib.parse

import h2.config
import h2.connection
import h2.events

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS


LATER = []  # /wait/ answers: (due, conn, stream, headers, body, path)


class Conn:
    def __init__(self, sock, ctx, log, answered, ends=None):
        self.sock, self.log, self.answered, self.ends = sock, log, answered, ends
        self.posts = {}  # stream id -> (event, path) of a request whose body is coming
        self.port = sock.getpeername()[1]
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        self.tls = None
        if ctx:
            self.inb, self.outb = ssl.MemoryBIO(), ssl.MemoryBIO()
            self.tls = ctx.wrap_bio(self.inb, self.outb, server_side=True)
            self.handshaken = False
        self.pending = b""
        self.unit, self.unit_ns = b"", 0  # the TLS record or frame being read
        self.phase, self.upgraded = ("frames" if ctx else "start"), False  # h2c: an Upgrade may come first
        if ctx:
            self.h2.initiate_connection()
            self.flush_h2()

    def flush_h2(self):
        data = self.h2.data_to_send()
        if self.tls:
            if data and self.handshaken:
                self.tls.write(data)
            elif data:
                self.pending += data
            data = self.outb.read()
        if data:
            self.sock.sendall(data)

    def unit_len(self):
        """How long the unit being read is: a TLS record, an h2 frame, the first
        24 bytes of h2c (the preface, or the start of an HTTP/1.1 request); None
        while an HTTP/1.1 request's end is not known."""
        u = self.unit
        if self.tls:
            return 5 if len(u) < 5 else 5 + struct.unpack_from("!H", u, 3)[0]
        if self.phase in ("start", "preface"):
            return 24
        if self.phase == "h1":
            return None
        return 9 if len(u) < 9 else 9 + int.from_bytes(u[:3], "big")

    def read(self):
        """One read of the socket, never past the unit being read: each TLS record
        and each frame is stamped with the kernel's receive time of the read that
        brought its first byte (a read that took the end of one and the start of the
        next would give the next the first one's time).  False when it ended."""
        n = self.unit_len()
        want = max(1, n - len(self.unit)) if n else 65536
        try:
            data, anc, _, _ = self.sock.recvmsg(want, socket.CMSG_SPACE(16))
        except ConnectionError:
            return False
        if not data:
            return False
        ns = time.time_ns()
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(raw) >= 16:
                sec, nsec = struct.unpack_from("ll", raw)
                ns = sec * 1_000_000_000 + nsec
        if not self.unit:
            self.unit_ns = ns
        self.unit += data
        n = self.unit_len()
        if n and len(self.unit) < n:
            return True  # the rest of the unit is still to come
        data, ns, self.unit = self.unit, self.unit_ns, b""
        if self.tls:
            self.inb.write(data)
            if not self.handshaken:
                try:
                    self.tls.do_handshake()
                    self.handshaken = True
                    if self.pending:
                        self.tls.write(self.pending)
                        self.pending = b""
                except ssl.SSLWantReadError:
                    pass
                self.sock.sendall(self.outb.read())
                if not self.handshaken:
                    return True
            plain = b""
            while True:
                try:
                    chunk = self.tls.read(65536)
                except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
                    break
                if not chunk:
                    break
                plain += chunk
            data = plain
        if self.phase == "start" and data != PREFACE:
            self.phase, self.h1 = "h1", b""
        if self.phase == "h1":
            self.h1 += data
            if b"\r\n\r\n" not in self.h1:
                return True
            self.unit, self.unit_ns = self.upgrade(ns), ns  # the preface comes next
            self.phase = "preface"
            return True
        if self.phase in ("start", "preface"):
            if data != PREFACE:
                return False
            self.phase = "frames"
            if not self.upgraded:
                self.h2.initiate_connection()
        try:
            events = self.h2.receive_data(data) if data else []
        except Exception:  # a protocol error: the test sees the client fail
            return False
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                self.answer(ev, ns)
            elif isinstance(ev, h2.events.DataReceived):
                self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id in self.posts:
                req, path = self.posts.pop(ev.stream_id)
                if self.ends:
                    with open(self.ends, "a") as f:
                        f.write("%d 4 %d %s\n" % (ns, self.port, path))
                self.answer(req, ns, whole=True)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.flush_h2()
                return False
        self.flush_h2()
        return True

    def answer_late(self, stream_id, headers, body, path):
        """A /wait/ answer whose time came."""
        self.h2.send_headers(stream_id, headers)
        self.h2.send_data(stream_id, body, end_stream=True)
        with open(self.answered, "a") as f:
            f.write("%d done %s\n" % (time.time_ns(), path))
        self.flush_h2()

    def upgrade(self, ns):
        """h2c by an HTTP/1.1 request asking to Upgrade: answered 101, and then as
        stream 1.  Returns the bytes after the request."""
        head, rest = self.h1.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        fields = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
        self.sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
        self.h2.initiate_upgrade_connection(fields.get("http2-settings", "").encode())
        self.upgraded = True
        self.flush_h2()
        path = lines[0].split(" ")[1]
        ev = h2.events.RequestReceived()
        ev.stream_id, ev.headers = 1, [(":path", path), (":authority", fields.get("host", "-"))]
        self.answer(ev, ns)
        self.flush_h2()
        return rest

    def answer(self, ev, ns, whole=False):
        head = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                for k, v in ev.headers}
        url = urllib.parse.urlsplit(head.get(":path", "/"))
        if not whole and self.ends and head.get(":method") == "POST" and ev.stream_ended is None:
            self.posts[ev.stream_id] = (ev, url.path)  # answered at its end
            with open(self.log, "a") as f:
                f.write("%d 4 %d %s %d %s\n" % (ns, self.port, url.path, 0, head.get(":authority", "-").split(":")[0]))
            return
        if whole:
            return self.reply(ev, url, ns)
        with open(self.log, "a") as f:
            f.write("%d 4 %d %s %d %s\n" % (ns, self.port, url.path, self.status_of(url),
                                            head.get(":authority", "-").split(":")[0]))
        self.reply(ev, url, ns)

    @staticmethod
    def status_of(url):
        return int(url.path.split("/")[2]) if url.path.startswith("/say/") else 200

    def reply(self, ev, url, ns):
        status, extra = 200, []
        if url.path.startswith("/say/"):
            status = int(url.path.split("/")[2])
            extra = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
        body = ("hello %s\n" % url.path).encode()
        headers = [(":status", str(status)), ("content-length", str(len(body)))] + \
                  [(k.lower(), v) for k, v in extra]
        if url.path.startswith("/wait/"):
            due = time.monotonic() + int(url.path.split("/")[2]) / 1000
            LATER.append((due, self, ev.stream_id, headers, body, url.path))
            return
        self.h2.send_headers(ev.stream_id, headers)
        if extra or status != 200:
            with open(self.answered, "a") as f:
                f.write("%d answered %s\n" % (time.time_ns(), url.path))
        self.flush_h2()
        self.h2.send_data(ev.stream_id, body, end_stream=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--answered", help="where the answered lines go (default: --log)")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--lifetime", type=float, default=120)
    ap.add_argument("--ends", help="where a request's body end goes (REALTIME_NS 4 SRCPORT PATH)")
    args = ap.parse_args()
    ctx = None
    if args.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*args.tls)
        ctx.set_alpn_protocols(["h2"])
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # accepted sockets inherit it
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(128)
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ)
    with open(args.port_file, "w") as f:
        f.write("%d\n" % lsock.getsockname()[1])
    end = time.monotonic() + args.lifetime
    while time.monotonic() < end:
        now = time.monotonic()
        for item in sorted(LATER, key=lambda x: x[0]):
            if item[0] <= now:
                LATER.remove(item)
                try:
                    item[1].answer_late(*item[2:])
                except OSError:
                    pass
        wait = min([0.5] + [max(0, i[0] - now) for i in LATER])
        for key, _ in sel.select(timeout=wait):
            if key.fileobj is lsock:
                s, _ = lsock.accept()
                s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                sel.register(s, selectors.EVENT_READ, Conn(s, ctx, args.log, args.answered or args.log, args.ends))
                continue
            conn = key.data
            try:
                alive = conn.read()
            except OSError:  # the client went: its connection ends, the server goes on
                alive = False
            if not alive:
                sel.unregister(conn.sock)
                conn.sock.close()


if __name__ == "__main__":
    main()

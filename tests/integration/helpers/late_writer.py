#!/usr/bin/env python3
"""A non-blocking writer that comes late for some of its writes, as a program
busy between its poll and its write does (ssh filling its buffers).

  late_writer.py PORT BYTES --late-ms MS --every N

Sends an HTTP/1.1 POST of BYTES random bytes to 127.0.0.1:PORT on a
non-blocking socket, 64 KiB a write (the shim takes what it releases): it waits
for the socket to be writable with poll, and every Nth time that poll had to
wait (a piece was held until its slot) sleeps MS before it writes.  Reads the
answer and checks the server counted every byte.
"""
import argparse
import os
import select
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("bytes", type=int)
    ap.add_argument("--late-ms", type=float, default=10)
    ap.add_argument("--every", type=int, default=4)
    a = ap.parse_args()
    s = socket.create_connection(("127.0.0.1", a.port))
    s.setblocking(False)
    data = b"POST /late HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % a.bytes + os.urandom(a.bytes)
    p = select.poll()
    p.register(s, select.POLLOUT)
    sent, waits, deadline = 0, 0, time.monotonic() + 120
    while sent < len(data):
        if time.monotonic() > deadline:
            sys.exit("late_writer: not done in 120 s (%d of %d bytes)" % (sent, len(data)))
        before = time.monotonic()
        p.poll(1000)
        if time.monotonic() - before > 0.001:
            waits += 1
            if waits % a.every == 0:
                time.sleep(a.late_ms / 1000)
        try:
            sent += s.send(data[sent:sent + 65536])
        except BlockingIOError:
            pass
    s.setblocking(True)
    s.settimeout(30)
    reply = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        reply += chunk
    if not reply.endswith(b"got %d bytes\n" % a.bytes):
        sys.exit("late_writer: answer %r" % reply[-80:])


if __name__ == "__main__":
    main()

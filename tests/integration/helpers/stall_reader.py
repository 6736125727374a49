#!/usr/bin/env python3
"""An HTTP upload receiver that stops reading for a while mid-body, then reads
as fast as it can: the kernel's buffers on both sides fill, and what the sender's
kernel then holds unsent leaves at once when the window opens (t_bytes_drain.sh).

  stall_reader.py --port-file FILE [--after BYTES] [--pause S] [--rcvbuf BYTES]

Each connection: a request head with Content-Length, then the body - BYTES read,
a pause of S seconds, the rest - answered "got N bytes".  Exits after --lifetime.
"""
import argparse
import os
import socket
import threading
import time


def serve(c, after, pause):
    with c:
        data = b""
        while b"\r\n\r\n" not in data:
            more = c.recv(65536)
            if not more:
                return
            data += more
        head, body = data.split(b"\r\n\r\n", 1)
        want = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                want = int(v)
            if k.strip().lower() == b"expect" and b"100" in v:
                c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        got, paused = len(body), False
        while got < want:
            if not paused and got >= after:
                time.sleep(pause)
                paused = True
            more = c.recv(min(65536, max(1, after - got)) if not paused else 1 << 20)
            if not more:
                break
            got += len(more)
        reply = b"got %d bytes\n" % got
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                  % (len(reply), reply))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--after", type=int, default=256 * 1024)
    ap.add_argument("--pause", type=float, default=2.0)
    ap.add_argument("--rcvbuf", type=int, default=0)
    ap.add_argument("--lifetime", type=float, default=240)
    a = ap.parse_args()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if a.rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    with open(a.port_file + ".tmp", "w") as f:
        f.write("%d\n" % s.getsockname()[1])
    os.rename(a.port_file + ".tmp", a.port_file)
    s.settimeout(a.lifetime)
    deadline = time.monotonic() + a.lifetime
    while time.monotonic() < deadline:
        try:
            c, _ = s.accept()
        except socket.timeout:
            break
        threading.Thread(target=serve, args=(c, a.after, a.pause), daemon=True).start()


if __name__ == "__main__":
    main()

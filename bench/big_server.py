#!/usr/bin/env python3
"""big_server.py PORT_FILE MIB: serve one HTTP/1.1 GET at a time on 127.0.0.1 with a
body of MIB mebibytes (Content-Length framed, from memory), for make bench's
download through the shim (item 15).  Exits after 120 s."""
import os
import socket
import sys
import threading

mib = int(sys.argv[2])
chunk = b"x" * (1 << 20)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(8)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
threading.Timer(120, lambda: os._exit(0)).start()
while True:
    c, _ = s.accept()
    req = b""
    while b"\r\n\r\n" not in req:
        got = c.recv(4096)
        if not got:
            break
        req += got
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (mib << 20))
    for _ in range(mib):
        c.sendall(chunk)
    c.close()

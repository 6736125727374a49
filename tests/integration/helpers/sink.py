#!/usr/bin/env python3
"""A TCP sink on 127.0.0.1, for connect loops, concurrency tests and uploads.

  sink.py PORTFILE LIFETIME [hold]

Writes its port to PORTFILE and exits after LIFETIME seconds.  Without "hold" it
closes every connection at once; with it, it keeps each one open until its client
closes it, reading and discarding whatever is sent.
"""
import os
import socket
import sys
import threading


def drain(c):
    try:
        while c.recv(1 << 20):
            pass
    except OSError:
        pass
    c.close()


hold = len(sys.argv) > 3 and sys.argv[3] == "hold"
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(4096)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % s.getsockname()[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
threading.Timer(float(sys.argv[2]), lambda: os._exit(0)).start()
while True:
    c, _ = s.accept()
    if hold:
        threading.Thread(target=drain, args=(c,), daemon=True).start()
    else:
        c.close()

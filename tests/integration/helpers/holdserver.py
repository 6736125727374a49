#!/usr/bin/env python3
"""A TCP server on 127.0.0.1 that keeps every connection open until its client
closes it (reading and discarding what it sends), for concurrency tests.  Writes its
port to argv[1]; exits after argv[2] seconds."""
import os
import socket
import sys
import threading


def serve(c):
    try:
        while c.recv(65536):
            pass
    except OSError:
        pass
    c.close()


s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(256)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % s.getsockname()[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
threading.Timer(float(sys.argv[2]), lambda: os._exit(0)).start()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()

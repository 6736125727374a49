#!/usr/bin/env python3
"""Accept TCP connections on 127.0.0.1 and close them at once, for connect loops.
Writes its port to the file named by argv[1]; exits after argv[2] seconds."""
import socket
import sys
import threading
import os

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
    c.close()

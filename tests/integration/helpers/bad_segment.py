"""A segment server that hands out what no shim should use: a stand-in for a
broken, planted or future keeper (src/core/segsock.c's protocol).

    bad_segment.py PATH KIND SIZE READY_FILE

KIND is what "attach" is answered with:
  small     a sealed memfd of 64 bytes that starts like a segment
  junk      a sealed memfd of SIZE random bytes
  future    a sealed memfd of SIZE bytes whose header says layout 99
  unsealed  a memfd of SIZE bytes that anyone it is handed to could shrink
  file      a plain file of SIZE bytes (no seals to be had)
  nofd      "ok" with no descriptor at all
  garbage   a reply that is no reply
Serves until killed, or for 120 s.
"""
import os
import socket
import struct
import sys
import tempfile
import time

path, kind, size, ready = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
MAGIC = 0x45434C53


def memfd(data, sealed=True):
    fd = os.memfd_create("bad", os.MFD_ALLOW_SEALING if sealed else 0)
    os.write(fd, data)
    if sealed:
        import fcntl
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd


def make():
    if kind == "small":
        return memfd(struct.pack("<I", MAGIC) + b"\0" * 60)
    if kind == "junk":
        return memfd(os.urandom(size))
    head = struct.pack("<IHHQ", MAGIC, 99 if kind == "future" else 13, 0, size)
    data = head + b"\0" * (size - len(head))
    if kind == "future":
        return memfd(data)
    if kind == "unsealed":
        return memfd(data, sealed=False)
    if kind == "file":
        f = tempfile.TemporaryFile()
        f.write(data)
        f.flush()
        return os.dup(f.fileno())
    return None


fd = make()
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    os.unlink(path)
except FileNotFoundError:
    pass
srv.bind(path)
srv.listen(64)
srv.settimeout(1.0)
open(ready, "w").write("ready\n")
end = time.time() + 120
while time.time() < end:
    try:
        c, _ = srv.accept()
    except socket.timeout:
        continue
    with c:
        c.settimeout(2)
        try:
            c.recv(512)
            if kind == "garbage":
                c.sendall(b"\x00\x01\x02 not a reply")
            elif fd is None:
                c.sendall(b"ok mode=rw token=1 nonce=1\n")
            else:
                c.sendmsg([b"ok mode=rw token=1 nonce=1 id=1\n"],
                          [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))])
        except OSError:
            pass

"""The shared segment as the tests reach it, to read, scribble on or remove.

The segment is a sealed memfd that its keeper (or a `sluice run`) hands over on
its socket, DIR/NAME.segment beside the control socket (src/core/segsock.c); this
module asks for it as a program's shim does - "attach rw PID STAMP PIDNS" - so a
test that finds the segment here also checks the protocol, and the asking
process is entered in the roster under a token of its own (Segment.token,
Segment.nonce: what a test writes in a lock word to stand for a holder).
Segment(path) is file-like (seek, tell, read, write) over the mapped memory;
every access is bounded by the memfd's size.

    python3 segment.py remove PATH      stop the keeper at PATH (0 if none)
    python3 segment.py path INI         print the segment socket an ini names
"""
import array
import configparser
import errno
import mmap
import os
import socket
import struct
import sys

MAGIC = 0x45434C53  # "SLCE"


def ask(path, line, timeout=5.0):
    """One request to the server at path: (reply line, fd or None)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall(line.encode() + b"\n")
        fds = array.array("i")
        data = b""
        fd = None
        while b"\n" not in data:
            msg, anc, _flags, _addr = s.recvmsg(4096, socket.CMSG_SPACE(4 * fds.itemsize))
            if not msg:
                break
            data += msg
            for level, kind, blob in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    got = array.array("i")
                    got.frombytes(blob[: len(blob) - len(blob) % got.itemsize])
                    for f in got:
                        if fd is None:
                            fd = f
                        else:
                            os.close(f)
        return data.decode(errors="replace").split("\n")[0], fd
    finally:
        s.close()


def value(line, key):
    for word in line.split(" "):
        if word.startswith(key + "="):
            return word[len(key) + 1:]
    return None


class Segment:
    """The segment served at `path`, mapped read-write, this process entered in
    its roster (token, nonce).  enter=False: taken as its daemon takes it ("get",
    root or the keeper's user), entered nowhere - for a scribbler that attaches
    again and again."""

    def __init__(self, path, enter=True):
        line, fd = ask(path, "attach rw %d 0 0" % os.getpid() if enter else "get")
        if not line.startswith("ok") or fd is None:
            raise OSError(errno.EACCES, "%s: %s" % (path, line))
        try:
            self.size = os.fstat(fd).st_size
            self.map = mmap.mmap(fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self.token = int(value(line, "token") or 0)
        self.nonce = int(value(line, "nonce") or 0)
        self.pos = 0
        if struct.unpack_from("<I", self.map, 0)[0] != MAGIC:
            raise OSError(errno.EPROTO, "not a sluice segment: " + path)

    def seek(self, off, whence=0):
        self.pos = off if whence == 0 else self.pos + off if whence == 1 else self.size + off
        return self.pos

    def tell(self):
        return self.pos

    def read(self, n=-1):
        n = self.size - self.pos if n < 0 else min(n, self.size - self.pos)
        data = self.map[self.pos: self.pos + max(n, 0)]
        self.pos += len(data)
        return data

    def write(self, data):
        if self.pos < 0 or self.pos + len(data) > self.size:
            raise ValueError("write past the segment's end")
        self.map[self.pos: self.pos + len(data)] = data
        self.pos += len(data)
        return len(data)

    def close(self):
        if self.map:
            self.map.close()
            self.map = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


PATTERN_SIZE, INDEX_SLOT_SIZE, HOLDER_SIZE, PROC_SIZE = 288, 16, 16, 32
LOCK_OFFSET = 48


def _up(n, align):
    return (n + align - 1) & ~(align - 1)


def segment_path(work, shm_name):
    """The segment socket of a test config: shm_name's last part beside the
    control socket, in the test's directory `work`."""
    return os.path.join(work, (shm_name.rsplit("/", 1)[-1] or "sluice") + ".segment")


def layout(f):
    """Where each table of the segment open as f lies, from its header's sizes (as
    sl_shm_layout in src/core/shm.c): a dict of byte offsets, and the sizes.  Read
    it before a test scribbles on the header."""
    f.seek(20)
    section_size, sections_off, max_sections = struct.unpack("<III", f.read(12))
    f.seek(360)
    max_keys, _used, max_patterns, max_holders, index_slots = struct.unpack("<IIIII", f.read(20))
    f.seek(512)
    max_procs = struct.unpack("<I", f.read(4))[0]
    at = {"sections": sections_off, "section_size": section_size, "max_sections": max_sections,
          "max_patterns": max_patterns, "max_holders": max_holders, "max_keys": max_keys,
          "max_procs": max_procs}
    end = sections_off + max_sections * section_size
    at["patterns"] = _up(end, 64)
    at["index"] = _up(at["patterns"] + max_patterns * PATTERN_SIZE, 64)
    at["refs"] = _up(at["index"] + index_slots * INDEX_SLOT_SIZE, 64)
    at["holders"] = _up(at["refs"] + max_patterns * 4, 64)
    at["procs"] = _up(at["holders"] + max_holders * HOLDER_SIZE, 64)
    at["tags"] = _up(at["procs"] + max_procs * PROC_SIZE, 4096)
    at["keys"] = _up(at["tags"] + max_keys * 8, 64)
    return at


def exists(path):
    try:
        return ask(path, "info")[0].startswith("ok")
    except OSError:
        return False


def remove(path):
    """Stop the keeper serving at path; False when none answered."""
    try:
        line, fd = ask(path, "quit")
    except OSError:
        return False
    if fd is not None:
        os.close(fd)
    return line.startswith("ok")


def path_of(ini):
    """The segment socket a config names (src/core/segsock.c, sl_segsock_path)."""
    c = configparser.ConfigParser(inline_comment_prefixes=(";", "#"), strict=False)
    c.read(ini)
    g = c["sluice"] if c.has_section("sluice") else {}
    ctl = g.get("control_socket", "/run/sluice/sluice.sock")
    name = g.get("shm_name", "/sluice").rsplit("/", 1)[-1] or "sluice"
    return os.path.join(os.path.dirname(ctl), name + ".segment")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "remove":
        remove(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "path":
        print(path_of(sys.argv[2]))
    else:
        sys.exit(__doc__)

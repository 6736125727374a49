"""The shared segment as the tests reach it, to read, scribble on or remove.

The segment is a System V shared-memory segment whose key is a hash of its name
(src/core/shm.c, sl_shm_key); this module computes the same key, so a test that
finds the daemon's segment here also checks that the two agree.  Segment(name)
is file-like (seek, tell, read, write) over the attached memory; every access is
bounded by the segment's size.

    python3 segment.py remove NAME      mark the segment for removal (0 if none)
    python3 segment.py key NAME         print its key
"""
import ctypes
import errno
import os
import struct
import sys

_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
_libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
_libc.shmat.restype = ctypes.c_void_p
_libc.shmdt.argtypes = [ctypes.c_void_p]
_libc.shmctl.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]

IPC_CREAT, IPC_EXCL, IPC_RMID = 0o1000, 0o2000, 0
MAGIC = 0x45434C53  # "SLCE"


def key(name):
    h = 2166136261
    for b in b"sluice:" + name.encode():
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    if h in (0, 0xFFFFFFFF):
        h = 0x51CE0001
    return h - (1 << 32) if h >= 1 << 31 else h


IPC_STAT = 2
SHM_SEGSZ_OFFSET = 48  # struct shmid_ds on x86_64: shm_segsz follows the 48-byte ipc_perm


def _segment_size(shmid):
    buf = ctypes.create_string_buffer(256)
    if _libc.shmctl(shmid, IPC_STAT, buf) != 0:
        raise _oserror("shmctl IPC_STAT")
    return struct.unpack_from("<Q", buf.raw, SHM_SEGSZ_OFFSET)[0]


def _oserror(what):
    e = ctypes.get_errno()
    return OSError(e, "%s: %s" % (what, os.strerror(e)))


class Segment:
    """The segment `name`, attached read-write.  With create=SIZE, a new segment of
    SIZE bytes is made first (a test's stand-in for a stranger's or an old one)."""

    def __init__(self, name, create=None, mode=0o600):
        flags = IPC_CREAT | IPC_EXCL | mode if create else 0
        self.id = _libc.shmget(key(name), create or 0, flags)
        if self.id < 0:
            raise _oserror("shmget " + name)
        addr = _libc.shmat(self.id, None, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise _oserror("shmat " + name)
        self.addr, self.pos = addr, 0
        if create:
            self.size = create
        else:
            magic = struct.unpack("<I", ctypes.string_at(addr, 4))[0]
            if magic != MAGIC:
                raise OSError(errno.EPROTO, "not a sluice segment: " + name)
            # The kernel's size, not the header's (offset 8), which a scribble
            # may have changed: every access stays inside the mapping.
            self.size = _segment_size(self.id)

    def seek(self, off, whence=0):
        self.pos = off if whence == 0 else self.pos + off if whence == 1 else self.size + off
        return self.pos

    def tell(self):
        return self.pos

    def read(self, n=-1):
        n = self.size - self.pos if n < 0 else min(n, self.size - self.pos)
        data = ctypes.string_at(self.addr + self.pos, max(n, 0))
        self.pos += len(data)
        return data

    def write(self, data):
        if self.pos < 0 or self.pos + len(data) > self.size:
            raise ValueError("write past the segment's end")
        ctypes.memmove(self.addr + self.pos, data, len(data))
        self.pos += len(data)
        return len(data)

    def close(self):
        if self.addr:
            _libc.shmdt(self.addr)
            self.addr = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


PATTERN_SIZE, INDEX_SLOT_SIZE, HOLDER_SIZE = 288, 16, 16


def _up(n, align):
    return (n + align - 1) & ~(align - 1)


def layout(f):
    """Where each table of the segment open as f lies, from its header's sizes (as
    sl_shm_layout in src/core/shm.c): a dict of byte offsets, and the sizes.  Read
    it before a test scribbles on the header."""
    f.seek(20)
    section_size, sections_off, max_sections = struct.unpack("<III", f.read(12))
    f.seek(360)
    max_keys, _used, max_patterns, max_holders, index_slots = struct.unpack("<IIIII", f.read(20))
    at = {"sections": sections_off, "section_size": section_size, "max_sections": max_sections,
          "max_patterns": max_patterns, "max_holders": max_holders, "max_keys": max_keys}
    end = sections_off + max_sections * section_size
    at["patterns"] = _up(end, 64)
    at["index"] = _up(at["patterns"] + max_patterns * PATTERN_SIZE, 64)
    at["refs"] = _up(at["index"] + index_slots * INDEX_SLOT_SIZE, 64)
    at["holders"] = _up(at["refs"] + max_patterns * 4, 64)
    at["tags"] = _up(at["holders"] + max_holders * HOLDER_SIZE, 4096)
    at["keys"] = _up(at["tags"] + max_keys * 8, 64)
    return at


def get(name, size, flags=0):
    """shmget(key(name), size, flags): the id, or -1 (as the kernel refused)."""
    return _libc.shmget(key(name), size, flags)


def exists(name):
    return _libc.shmget(key(name), 0, 0) >= 0


def remove(name):
    """Mark the segment for removal; False when there was none."""
    sid = _libc.shmget(key(name), 0, 0)
    if sid < 0:
        return False
    if _libc.shmctl(sid, IPC_RMID, None) != 0:
        raise _oserror("shmctl IPC_RMID " + name)
    return True


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "remove":
        remove(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "key":
        print("0x%08x" % (key(sys.argv[2]) & 0xFFFFFFFF))
    else:
        sys.exit(__doc__)

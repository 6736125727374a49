#!/usr/bin/env bash
# tier: parallel
# A held (deferred) socket followed through dup, dup2 over it, and fork: a dup keeps
# the hold (the connect is made at the slot, seen through it), dup2 over a held fd gives its
# place back and leaves the new fd unheld, a child forked while the parent holds a
# socket neither releases nor returns the parent's place, fd 0 reused for a held
# socket works, os.closerange returns held places, and a socket() reusing the
# number of an fd closed behind the shim's back drops its stale hold.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/f.ini" <<EOF
[slow]
match = 127.0.0.1:$PORT
rate = 2/s
max_wait = 1m
EOF
start_witness syn "$PORT" "$T/arrivals"
SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log" "$SLUICE" run -c "$T/f.ini" -- python3 - "$PORT" "$SLUICE" <<'EOF' || fail "fd tracking"
import errno, json, os, select, socket, subprocess, sys, time
port, sluice = int(sys.argv[1]), sys.argv[2]

def stat():
    out = subprocess.run([sluice, "stat", "--segment", os.environ["SLUICE_SEGMENT"], "--json"],
                         capture_output=True, text=True, check=True).stdout
    return [x for x in json.loads(out)["sections"] if x["name"] == "slow"][0]

def held(tag):
    """A non-blocking connection deferred to its place (the first took the slot
    of now, so every later one within the test's few seconds waits)."""
    s = socket.socket()
    s.setblocking(False)
    assert s.connect_ex(("127.0.0.1", port)) == errno.EINPROGRESS
    if tag == "first":
        select.select([], [s], [], 5)
        s.send(b"GET /%s HTTP/1.0\r\n\r\n" % tag.encode())
        return s, True           # went at once
    # Deferred: not connected, and not shown to select.
    assert select.select([s], [s], [s], 0) == ([], [], []), "a deferred socket showed events"
    return s, False

def finish(fd, tag):
    """Write through fd when select says so; check the answer."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        select.select([], [fd], [], 2)
        try:
            os.write(fd, b"GET /%s HTTP/1.0\r\n\r\n" % tag.encode())
            break
        except BlockingIOError:
            continue
    else:
        sys.exit("write through fd %d never went" % fd)
    select.select([fd], [], [], 5)
    assert b"200 OK" in os.read(fd, 4096), tag

first, went = held("first")
assert went

# dup: the hold follows the duplicate; the original closes, the place stays.
s, went = held("dup")
assert not went
d = os.dup(s.fileno())
s.close()
finish(d, "dup")
os.close(d)

# dup2 over a held fd: its place goes back, the new fd is not held.
s, went = held("over")
assert not went
before = stat()["given_up"]
a, b = socket.socketpair()
os.dup2(a.fileno(), s.fileno())
assert stat()["given_up"] == before + 1, "dup2 over a held fd did not return its place"
os.write(s.fileno(), b"x")       # a socketpair now: goes at once
assert b.recv(1) == b"x"

# fork while the parent holds a socket: the child goes away, the parent's place
# is neither released nor returned by it.
s, went = held("fork")
assert not went
before = stat()
pid = os.fork()
if pid == 0:
    os.close(s.fileno())     # the child's copy of the table only
    os._exit(0)
os.waitpid(pid, 0)
after = stat()
assert after["given_up"] == before["given_up"] and after["admitted"] == before["admitted"], (before, after)
finish(s.fileno(), "fork")
print("  dup, dup2 and fork kept the holds right")

# fd 0 reused for a held socket: held and released like any other.
saved_stdin = os.dup(0)
os.close(0)
s, went = held("zero")
assert s.fileno() == 0 and not went, (s.fileno(), went)
finish(0, "zero")
s.close()
os.dup2(saved_stdin, 0)

# Bulk close: os.closerange (close_range) gives back the places of held fds.
x, went = held("range1")
assert not went
y, went = held("range2")
assert not went
lo, hi = sorted((x.fileno(), y.fileno()))
before = stat()["given_up"]
os.closerange(lo, hi + 1)
x.detach(), y.detach()
assert stat()["given_up"] == before + 2, "closerange did not return both places"

# A held fd closed behind the shim's back (a raw system call): the next socket()
# to get its number drops the stale hold, returning its place; the new socket is
# not held by it.  libc's own syscall(), looked up in libc itself: the program's
# (CDLL(None)) is the shim's, which routes SYS_close to the close hook.
import ctypes
libc = ctypes.CDLL("libc.so.6", use_errno=True)
s, went = held("raw")
assert not went
fd = s.fileno()
before = stat()["given_up"]
assert libc.syscall(3, fd) == 0   # SYS_close on x86-64
s.detach()
a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
assert a.fileno() == fd, (a.fileno(), fd)
assert stat()["given_up"] == before + 1, "socket() kept a stale hold"
a.close()
print("  fd 0 reuse, closerange and a raw close kept the holds right")
EOF
witnessed "$T/arrivals" --interval-ms 500 --expect 4 --what connects || fail "spacing"

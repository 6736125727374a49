#!/usr/bin/env bash
# tier: parallel
# Event loops never stall (docs/design.md, "Send paths and event loops"): python3 asyncio
# and uvloop (epoll, level-triggered) with many concurrent connections to a held destination keeps
# the spacing and keeps serving an unheld socket meanwhile; a deferred connect's
# edge-triggered epoll registration gets its edge at release; select() with many fds shows
# deferred sockets as not writable; a socket closed while deferred goes quietly; and a
# socket in two epoll sets is hidden in both, epoll_pwait2 waking at its release.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/l.ini" <<EOF
[held]
match = 127.0.0.1:$PORT
rate = 10/s
max_wait = 1m
EOF
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"

# 1. asyncio, on python's own loop and on uvloop (libuv's, Debian's python3): 15
#    connections at once, and an echo round trip on a socketpair every 20 ms
#    while they wait.  Every body intact; echoes served throughout.
/usr/bin/python3 -c 'import uvloop' || fail "python3-uvloop missing (scripts/deps.sh)"
cat >"$T/loop.py" <<'EOF'
import asyncio, os, socket, sys, time
port = int(sys.argv[1])
if os.environ.get("LOOP") == "uvloop":
    import uvloop
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

async def fetch(i):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"GET /a%d HTTP/1.0\r\n\r\n" % i)
    await w.drain()
    data = await r.read()
    w.close()
    assert data.endswith(b"hello /a%d\n" % i), data[-40:]
    return time.monotonic()

async def echo(stop):
    a, b = socket.socketpair()
    a.setblocking(False); b.setblocking(False)
    loop = asyncio.get_running_loop()
    trips, worst = 0, 0.0
    while not stop.is_set():
        t0 = time.monotonic()
        await loop.sock_sendall(a, b"ping")
        await loop.sock_recv(b, 4)
        worst = max(worst, time.monotonic() - t0)
        trips += 1
        await asyncio.sleep(0.02)
    return trips, worst

async def main():
    stop = asyncio.Event()
    e = asyncio.create_task(echo(stop))
    t0 = time.monotonic()
    done = await asyncio.gather(*(fetch(i) for i in range(15)))
    stop.set()
    trips, worst = await e
    span = max(done) - t0
    print("  %s: 15 fetches in %.2fs; %d echo round trips meanwhile, slowest %.1f ms"
          % (os.environ.get("LOOP", "asyncio"), span, trips, worst * 1000))
    assert trips >= 20, "the event loop stalled"

asyncio.run(main())
EOF
start_witness syn "$PORT" "$T/arrivals"
for loop in asyncio uvloop; do
	py=python3
	[ "$loop" = uvloop ] && py=/usr/bin/python3
	: >"$T/arrivals"
	LOOP=$loop "$SLUICE" run -c "$T/l.ini" -- "$py" "$T/loop.py" "$PORT" || fail "$loop client"
	witnessed "$T/arrivals" --interval-ms 100 --expect 15 --what "$loop connects" || fail "$loop spacing"
done

# 2. Edge-triggered epoll and select with many fds, in one process: a deferred
#    connect shows nothing until its release, then its edge comes by itself.
: >"$T/shim.log"
: >"$T/arrivals"
"$SLUICE" run -c "$T/l.ini" -- python3 - "$PORT" <<'EOF' || fail "epoll/select client"
import errno, select, socket, sys, time
port = int(sys.argv[1])

def nb_connect():
    s = socket.socket()
    s.setblocking(False)
    assert s.connect_ex(("127.0.0.1", port)) == errno.EINPROGRESS
    return s

# Take the first place so the next connection has to wait ~100 ms.
first = nb_connect()
select.select([], [first], [], 5)
first.send(b"GET /et0 HTTP/1.0\r\n\r\n")

s = nb_connect()
t0 = time.monotonic()
ep = select.epoll()
ep.register(s.fileno(), select.EPOLLOUT | select.EPOLLET)
assert not ep.poll(0), "a deferred connect showed an edge at once"
events = ep.poll(5)     # the edge must come at release, by itself
waited = time.monotonic() - t0
assert events, "edge-triggered registration never got its edge"
s.send(b"GET /et1 HTTP/1.0\r\n\r\n")   # not held again
print("  edge-triggered epoll: edge after %.0f ms" % (waited * 1000))
assert waited > 0.03, "the edge came before the release"

# select() over 40 unheld socketpairs and 3 deferred sockets: only the unheld show
# writable until the releases come.
pairs = [socket.socketpair() for _ in range(40)]
held = [nb_connect() for _ in range(3)]
fds = [p[0] for p in pairs] + held
_, w, _ = select.select([], fds, [], 0)
shown = [h for h in held if h in w]
print("  select: %d of 40 unheld writable, %d of 3 deferred shown writable" % (len(w) - len(shown), len(shown)))
assert len(w) - len(shown) == 40 and not shown
sent = set()
deadline = time.monotonic() + 5
while len(sent) < 3 and time.monotonic() < deadline:
    _, w, _ = select.select([], held, [], 2)
    for h in w:
        if h not in sent:
            h.send(b"GET /sel HTTP/1.0\r\n\r\n")
            sent.add(h)
assert len(sent) == 3, "select never showed the deferred sockets writable"

# A socket closed while its connect is deferred goes quietly, its place returned.
q = nb_connect()
q.close()
EOF
witnessed "$T/arrivals" --interval-ms 100 --slack-ms 0.1 --what connects || fail "epoll/select spacing"

# 3. One deferred socket in two epoll sets (a library's loop and the program's):
#    both hide it until its release, and epoll_pwait2 (called through ctypes, as
#    Python has no binding) wakes at the release by itself, with EPOLLOUT.
: >"$T/shim.log"
: >"$T/arrivals"
"$SLUICE" run -c "$T/l.ini" -- python3 - "$PORT" <<'EOF' || fail "two epoll sets / epoll_pwait2"
import ctypes, errno, select, socket, struct, sys, time
port = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)

class timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]

def nb_connect():
    s = socket.socket()
    s.setblocking(False)
    assert s.connect_ex(("127.0.0.1", port)) == errno.EINPROGRESS
    return s

first = nb_connect()
select.select([], [first], [], 5)
first.send(b"GET /ep0 HTTP/1.0\r\n\r\n")

s = nb_connect()
t0 = time.monotonic()
ep1, ep2 = select.epoll(), select.epoll()
ep1.register(s.fileno(), select.EPOLLOUT)
ep2.register(s.fileno(), select.EPOLLOUT | select.EPOLLIN)
assert not ep1.poll(0), "first epoll set shows the deferred socket"
assert not ep2.poll(0), "second epoll set shows the deferred socket"
events = (ctypes.c_uint8 * (12 * 4))()  # struct epoll_event is 12 bytes, packed
n = libc.epoll_pwait2(ep2.fileno(), events, 4, ctypes.byref(timespec(5, 0)), None)
waited = time.monotonic() - t0
assert n == 1, "epoll_pwait2 returned %d (errno %d)" % (n, ctypes.get_errno())
mask = struct.unpack_from("=I", events, 0)[0]
assert mask & select.EPOLLOUT, "woke without EPOLLOUT: %#x" % mask
assert 0.03 < waited < 2, "epoll_pwait2 woke after %.3f s" % waited
assert ep1.poll(1), "first epoll set never showed the socket writable"
s.send(b"GET /ep1 HTTP/1.0\r\n\r\n")
print("  two epoll sets: epoll_pwait2 woke after %.0f ms" % (waited * 1000))
EOF
witnessed "$T/arrivals" --interval-ms 100 --slack-ms 0.1 --expect 2 --what connects || fail "two-set spacing"

# 4. While the shim's thread has deferred connects to make, a wait hands out at
#    most 64 of the program's ready events (the epoll set's mutex is held while
#    the kernel copies them, and the thread's epoll_ctl waits for it:
#    docs/design.md, "Why nothing is made up"); level-triggered events left over
#    come in the next waits, none lost; once nothing waits, a wait hands out all.
#    Five deferred connects keep the thread busy for half a second; the waits
#    looked at are those of its first 0.3 s.
: >"$T/arrivals"
"$SLUICE" run -c "$T/l.ini" -- python3 - "$PORT" <<'EOF' || fail "events handed out while a connect waits"
import errno, select, socket, sys, time
port = int(sys.argv[1])
pairs = [socket.socketpair() for _ in range(200)]
ep = select.epoll()
for a, b in pairs:
    b.send(b"x")
    ep.register(a.fileno(), select.EPOLLIN)
first = socket.create_connection(("127.0.0.1", port))  # takes the slot now
t0 = time.monotonic()
socks = [socket.socket() for _ in range(5)]  # kept: a dropped one is closed
for s in socks:  # slots 100 ms apart: the thread has work for 0.5 s
    s.setblocking(False)
    assert s.connect_ex(("127.0.0.1", port)) == errno.EINPROGRESS
    ep.register(s.fileno(), select.EPOLLOUT)
held = [s.fileno() for s in socks]
seen, most, waits = set(), 0, 0
while len(seen) < 200 and time.monotonic() - t0 < 0.3:
    got = ep.poll(0, 1000)
    waits += 1
    most = max(most, len(got))
    seen.update(fd for fd, _ in got)
assert most <= 64, "a wait handed out %d events while connects waited" % most
assert len(seen) >= 200, "only %d of 200 ready sockets came in %d waits" % (len(seen), waits)
writable, deadline = set(), time.monotonic() + 10
while len(writable) < len(held) and time.monotonic() < deadline:
    writable.update(fd for fd, _ in ep.poll(0.5, 1000) if fd in held)
assert len(writable) == len(held), "%d of the deferred connects never became writable" % (len(held) - len(writable))
time.sleep(0.05)
got = ep.poll(0, 1000)
assert len(got) == 205, "with nothing waiting a wait handed out %d of 205" % len(got)
print("  while connects waited: at most %d events a wait, all 200 in %d waits" % (most, waits))
EOF
witnessed "$T/arrivals" --interval-ms 100 --slack-ms 0.1 --expect 6 --what connects || fail "batch spacing"

echo ok

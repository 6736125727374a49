#!/usr/bin/env bash
# tier: parallel
# Deferred connects (docs/design.md, "Send paths and event loops"): a non-blocking
# connect() to a matched destination whose slot is not now returns EINPROGRESS, and the
# real connect is made at the release.  Until then the socket shows no events to poll,
# select or epoll (level and edge), SO_ERROR says 0, getpeername ENOTCONN, a second
# connect EALREADY, a read EAGAIN; then it becomes writable as any connecting socket does,
# and its first write is not held again.  Closed or shut down before its release, it gives
# its place back.  Dup'ed and fork'ed, it is made once.  The witness is the kernel's SYN
# timestamps at the destination, not the shim's log.
. "$(dirname "$0")/lib.sh"

start_server
start_syn_witness "$PORT" "$T/syn.log"
write_config "$T/d.ini" <<EOF
[slow]
match = 127.0.0.1:$PORT
rate = 5/s
max_wait = 1m
EOF
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"

"$SLUICE" run -c "$T/d.ini" -- python3 - "$PORT" <<'EOF' || { tail -20 "$T/shim.log"; fail "deferred socket semantics"; }
import errno, os, select, socket, sys, time
port = int(sys.argv[1])
E = lambda c: errno.errorcode.get(c, str(c))

def nb():
    s = socket.socket()
    s.setblocking(False)
    rc = s.connect_ex(("127.0.0.1", port))
    assert E(rc) == "EINPROGRESS", E(rc)
    return s

def answer(s, tag):
    s.setblocking(True)
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    assert data.endswith(b"hello /%s\n" % tag.encode()), data[-60:]
    s.close()

def request(s, tag):
    s.setblocking(True)
    s.sendall(b"GET /%s HTTP/1.0\r\n\r\n" % tag.encode())
    answer(s, tag)

def wait_writable_poll(s, limit=5):
    p = select.poll()
    p.register(s, select.POLLOUT)
    t0 = time.monotonic()
    ev = p.poll(limit * 1000)
    return ev, time.monotonic() - t0

# 0. Takes the slot at t0: goes at once.
a = nb()
ev, _ = wait_writable_poll(a)
assert ev and ev[0][1] & select.POLLOUT, ev
request(a, "first")

# 1. poll: deferred ~200 ms; nothing shows at once; SO_ERROR 0, getpeername
#    ENOTCONN, connect again EALREADY, recv EAGAIN while it waits.
b = nb()
p = select.poll(); p.register(b, select.POLLOUT | select.POLLIN)
assert p.poll(0) == [], "a deferred socket showed events: %r" % p.poll(0)
assert b.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
try:
    b.getpeername(); sys.exit("getpeername answered on a deferred socket")
except OSError as e:
    assert e.errno == errno.ENOTCONN, e
assert E(b.connect_ex(("127.0.0.1", port))) == "EALREADY"
try:
    b.recv(10); sys.exit("recv returned on a deferred socket")
except BlockingIOError:
    pass
try:
    b.send(b"x"); sys.exit("send went on a deferred socket")
except BlockingIOError:
    pass
ev, waited = wait_writable_poll(b)
assert ev and ev[0][1] & select.POLLOUT and not ev[0][1] & (select.POLLHUP | select.POLLERR), (ev, waited)
assert b.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
assert E(b.connect_ex(("127.0.0.1", port))) in ("EISCONN", "0")  # CPython reports EISCONN as 0
print("  poll: writable after %.0f ms" % (waited * 1000))
assert waited > 0.1, waited
b.send(b"GET /poll HTTP/1.0\r\n\r\n")   # never held again: no EAGAIN
answer(b, "poll")

# 2. select over 40 unheld socketpairs and 2 deferred sockets.
pairs = [socket.socketpair() for _ in range(40)]
held = [nb(), nb()]
_, w, x = select.select(held, [p[0] for p in pairs] + held, held, 0)
assert len(w) == 40 and not set(held) & set(w), "select showed a deferred socket"
sent = 0
deadline = time.monotonic() + 5
while sent < 2 and time.monotonic() < deadline:
    _, w, _ = select.select([], held, [], 2)
    for h in w:
        h.send(b"GET /sel HTTP/1.0\r\n\r\n")
        held.remove(h); h.close(); sent += 1
assert sent == 2, "select never showed the deferred sockets writable"
for p in pairs:
    p[0].close(); p[1].close()

# 3. epoll level- and edge-triggered, registered after the connect.
lt, et = nb(), nb()
ep = select.epoll()
ep.register(lt.fileno(), select.EPOLLOUT)
ep.register(et.fileno(), select.EPOLLOUT | select.EPOLLET)
assert ep.poll(0) == [], "epoll showed a deferred socket"
seen = {}
t0 = time.monotonic()
while len(seen) < 2 and time.monotonic() - t0 < 5:
    for fd, mask in ep.poll(2):
        assert not mask & (select.EPOLLHUP | select.EPOLLERR), mask
        seen.setdefault(fd, time.monotonic() - t0)
assert len(seen) == 2, "epoll never reported the deferred sockets: %r" % seen
print("  epoll: level after %.0f ms, edge after %.0f ms" % (seen[lt.fileno()] * 1000, seen[et.fileno()] * 1000))
lt.send(b"GET /lt HTTP/1.0\r\n\r\n"); et.send(b"GET /et HTTP/1.0\r\n\r\n")
lt.close(); et.close(); ep.close()

# 4. Registered before the connect: the registration is kept out of the kernel
#    (an unconnected socket would show EPOLLHUP) and comes back at the release.
s = socket.socket(); s.setblocking(False)
ep = select.epoll(); ep.register(s.fileno(), select.EPOLLOUT | select.EPOLLIN)
assert E(s.connect_ex(("127.0.0.1", port))) == "EINPROGRESS"
assert ep.poll(0) == []
ev = ep.poll(5)
assert ev and ev[0][1] & select.EPOLLOUT and not ev[0][1] & select.EPOLLHUP, ev
s.send(b"GET /pre HTTP/1.0\r\n\r\n"); s.close(); ep.close()

# 5. Closed before its release (a happy-eyeballs loser): its place is given back,
#    so the next connection takes that slot, not one after it.
loser = nb(); loser.close()
t0 = time.monotonic()
c = nb()
ev, waited = wait_writable_poll(c)
request(c, "after-loser")
print("  after a loser closed: the next connect waited %.0f ms" % (waited * 1000))
assert waited < 0.35, "the closed socket kept its place: waited %.3f s" % waited

# 6. shutdown() before its release succeeds and gives the place back.  Made
#    right behind another connect, so that its own is deferred whatever the
#    time since the last (a first write held on its line makes that longer).
ahead = nb()
sd = nb()
assert select.select([], [sd], [], 0)[1] == [], "the connect to shut down was not deferred"
sd.shutdown(socket.SHUT_RDWR)
sd.close()
request(ahead, "ahead")

# 7. dup: both descriptors are one deferred socket, made once.
d1 = nb(); d2 = d1.dup()
ev, _ = wait_writable_poll(d2)
assert ev and ev[0][1] & select.POLLOUT, ev
d1.close()
request(d2, "dup")

# 8. fork: the child polls it and writes; the parent closes its copy.
f = nb()
pid = os.fork()
if pid == 0:
    try:
        ev, _ = wait_writable_poll(f)
        assert ev and ev[0][1] & select.POLLOUT, ev
        request(f, "fork")
        os._exit(0)
    except BaseException as e:
        print("child:", repr(e)); os._exit(1)
f.close()
_, status = os.waitpid(pid, 0)
assert status == 0, "fork child failed"

# 9. A socket made blocking after its deferred connect: its write waits for the
#    connection inside the kernel, as after any non-blocking connect.
g = nb()
request(g, "blocking-after")
print("  all deferred-socket calls answered as for a connect under way")
EOF

# The destination saw every connection at the rate (the closed and shut-down ones
# never reached it): kernel SYN times, burst 1 at 5/s.
python3 "$HELPERS/arrivals.py" "$T/syn.log" --interval-ms 200 --expect 12 --what connects ||
	fail "spacing at the destination"
grep -q "closed before its release; its place is given back" "$T/shim.log" || fail "no give-back logged"
grep -q "shut down before its release" "$T/shim.log" || fail "no shutdown give-back logged"
echo "ok"

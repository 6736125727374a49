#!/usr/bin/env bash
# Non-blocking connects (SPEC §5): connect() returns at once and the first write
# takes the place, so a connection that never writes (a happy-eyeballs loser) costs
# nothing.  connect() again on a connecting socket (EALREADY/EISCONN) is no new
# connection.  With no place within max_wait the connect itself is refused.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/n.ini" <<EOF
[once]
match = 127.0.0.1:$PORT
rate = 1/m
max_wait = 0
EOF
LD_PRELOAD="$PRELOAD" SLUICE_SHM=/sluice-absent-$$ SLUICE_CONFIG="$T/n.ini" python3 - "$PORT" <<'EOF' || fail "non-blocking connect semantics"
import errno, select, socket, sys
port = int(sys.argv[1])
name = lambda c: errno.errorcode.get(c, str(c))
# A connection that never writes takes no place, however often connect() is called.
s = socket.socket()
s.setblocking(False)
codes = [s.connect_ex(("127.0.0.1", port)), s.connect_ex(("127.0.0.1", port))]
select.select([], [s], [], 5)
codes.append(s.connect_ex(("127.0.0.1", port)))
print("  never-writing socket, connect_ex:", [name(c) for c in codes])
assert name(codes[0]) == "EINPROGRESS", codes
assert name(codes[1]) in ("EALREADY", "EISCONN", "EINPROGRESS", "0"), codes
assert name(codes[2]) == "EISCONN", codes
s.close()
# UDP connects are never held.
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.connect(("127.0.0.1", port)); u.connect(("127.0.0.1", port)); u.close()
# The one place is still free: a non-blocking connection that writes takes it.
w = socket.socket()
w.setblocking(False)
assert name(w.connect_ex(("127.0.0.1", port))) == "EINPROGRESS"
select.select([], [w], [], 5)
w.setblocking(True)
w.sendall(b"GET /first HTTP/1.0\r\n\r\n")
assert b"200 OK" in w.recv(4096)
w.close()
# Now no place is left within max_wait = 0: the next connects are refused at once.
for blocking in (True, False):
    t = socket.socket()
    t.setblocking(blocking)
    rc = t.connect_ex(("127.0.0.1", port))
    print("  after the place is spent, %s connect:" % ("blocking" if blocking else "non-blocking"), name(rc))
    assert name(rc) == "ECONNREFUSED", rc
    t.close()
EOF

#!/usr/bin/env bash
# tier: check
# Non-blocking connects (docs/design.md, "Send paths and event loops"): a connect whose
# slot is now goes at once; calling connect() again on a connecting socket
# (EALREADY/EISCONN) is no new connection and takes no place, nor does a UDP connect; with
# no place within max_wait the connect itself is refused, blocking or not, and nothing is
# charged for it.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/n.ini" <<EOF
[twice]
match = 127.0.0.1:$PORT
rate = 2/m
burst = 2
max_wait = 0
EOF
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT=none SLUICE_CONFIG="$T/n.ini" python3 - "$PORT" <<'EOF' || fail "non-blocking connect semantics"
import errno, select, socket, sys
port = int(sys.argv[1])
name = lambda c: errno.errorcode.get(c, str(c))

def fetch(s, tag):
    s.setblocking(True)
    s.sendall(b"GET /%s HTTP/1.0\r\n\r\n" % tag)
    assert b"200 OK" in s.recv(4096)
    s.close()

# The first place: connect() goes at once; asked again and again, no new place.
s = socket.socket()
s.setblocking(False)
codes = [s.connect_ex(("127.0.0.1", port)), s.connect_ex(("127.0.0.1", port))]
select.select([], [s], [], 5)
codes.append(s.connect_ex(("127.0.0.1", port)))
print("  repeated connect_ex:", [name(c) for c in codes])
assert name(codes[0]) == "EINPROGRESS", codes
assert name(codes[1]) in ("EALREADY", "EISCONN", "0"), codes
assert name(codes[2]) in ("EISCONN", "0"), codes  # CPython reports EISCONN as 0
fetch(s, b"first")
# UDP connects are never held.
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.connect(("127.0.0.1", port)); u.connect(("127.0.0.1", port)); u.close()
# The second place is still there.
w = socket.socket()
w.setblocking(False)
assert name(w.connect_ex(("127.0.0.1", port))) == "EINPROGRESS"
select.select([], [w], [], 5)
fetch(w, b"second")
# Now no place is left within max_wait = 0: the next connects are refused at once.
for blocking in (True, False, False):
    t = socket.socket()
    t.setblocking(blocking)
    rc = t.connect_ex(("127.0.0.1", port))
    print("  after the places are spent, %s connect:" % ("blocking" if blocking else "non-blocking"), name(rc))
    assert name(rc) == "ECONNREFUSED", rc
    t.close()
EOF
[ "$(wc -l <"$SERVER_LOG")" -eq 2 ] || fail "the server saw $(wc -l <"$SERVER_LOG") requests, expected 2"
echo "ok"

#!/usr/bin/env bash
# tier: parallel
# sendto(MSG_FASTOPEN) connects and sends at once: held as a new connection.
# Blocking, the call waits for the place and then goes; non-blocking and not due,
# the connect is deferred and the call fails with EINPROGRESS (what the kernel
# does itself without a Fast Open cookie); the connect is made at the release and
# the program's next send goes unheld.  Releases are checked for spacing; every
# response must be intact.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/f.ini" <<EOF
[tfo]
match = 127.0.0.1:$PORT
rate = 10/s
max_wait = 1m
EOF
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"
start_witness syn "$PORT" "$T/syns"
"$SLUICE" run -c "$T/f.ini" -- python3 -c '
import errno, select, socket, sys, time
addr = ("127.0.0.1", int(sys.argv[1]))

def response(s):
    data = b""
    end = time.monotonic() + 10
    while time.monotonic() < end:
        select.select([s], [], [], 1)
        try:
            chunk = s.recv(4096)
        except BlockingIOError:
            continue
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n\r\n", 1)[-1]

for i in range(3):  # blocking
    s = socket.socket()
    req = b"GET /b%d HTTP/1.0\r\n\r\n" % i
    assert s.sendto(req, socket.MSG_FASTOPEN, addr) == len(req)
    body = response(s)
    assert body == b"hello /b%d\n" % i, body
    s.close()

eagain = 0
for i in range(3):  # non-blocking
    s = socket.socket()
    s.setblocking(False)
    req = b"GET /n%d HTTP/1.0\r\n\r\n" % i
    try:
        s.sendto(req, socket.MSG_FASTOPEN, addr)
        sys.exit("non-blocking MSG_FASTOPEN to a held destination sent at once")
    except BlockingIOError as e:
        assert e.errno == errno.EINPROGRESS, e
    end = time.monotonic() + 10
    while time.monotonic() < end:
        select.select([], [s], [], 1)
        try:
            assert s.send(req) == len(req)
            break
        except BlockingIOError:
            eagain += 1
    body = response(s)
    assert body == b"hello /n%d\n" % i, body
    s.close()
print("EAGAIN seen %d times" % eagain)
assert eagain == 0, "a write after a deferred Fast Open connect was held"
' "$PORT" || fail "MSG_FASTOPEN client"
witnessed "$T/syns" --interval-ms 100 --expect 6 --what "Fast Open SYNs" || fail "spacing"
[ "$(grep -c ' fastopen .* go ' "$T/shim.log")" -eq 3 ] || fail "blocking MSG_FASTOPEN not held: $(cat "$T/shim.log")"
[ "$(grep -c 'fastopen .*non-blocking; deferred to its slot' "$T/shim.log")" -eq 3 ] ||
	fail "non-blocking MSG_FASTOPEN not deferred"
[ "$(wc -l <"$SERVER_LOG")" -eq 6 ] || fail "server saw $(wc -l <"$SERVER_LOG") requests"
# meter = requests over a Fast Open connection: the data of the sendto is the
# first request, and each later one on the connection is held too.
write_config "$T/r.ini" <<EOF
[tfo-requests]
match = 127.0.0.1:$PORT
meter = requests
rate = 10/s
max_wait = 1m
EOF
: >"$T/shim.log"
start_witness request "$PORT" "$T/requests"
"$SLUICE" run -c "$T/r.ini" -- python3 -c '
import socket, sys
s = socket.socket()
s.sendto(b"GET /f0 HTTP/1.1\r\nHost: x\r\n\r\n", socket.MSG_FASTOPEN, ("127.0.0.1", int(sys.argv[1])))
f = s.makefile("rb")
def answer():
    while f.readline() not in (b"\r\n", b""):
        pass
    return f.read(len(b"hello /f0\n"))
assert answer() == b"hello /f0\n"
for i in (1, 2):
    s.sendall(b"GET /f%d HTTP/1.1\r\nHost: x\r\n\r\n" % i)
    assert answer() == b"hello /f%d\n" % i
' "$PORT" || fail "MSG_FASTOPEN with meter = requests"
witnessed "$T/requests" --interval-ms 100 --expect 3 --what "requests, the first in the SYN" || fail "TFO requests: spacing"
echo "ok"

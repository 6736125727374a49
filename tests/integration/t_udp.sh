#!/usr/bin/env bash
# tier: parallel
# meter = datagrams: each datagram to a matched destination takes a place, whether
# it carries its own address (sendto, sendmsg, sendmmsg) or goes over a connected
# UDP socket (send, write).  Clients: python3 (blocking, connected, non-blocking
# asyncio, ctypes sendmmsg) and socat (UDP: connect+write; UDP-DATAGRAM: sendto).
# Asserted: releases never closer than the interval (a sender held up between its
# release and its send included), every datagram arrives, a
# connections section on the same destination does not touch datagrams, an
# unmatched port is not held, and a refusal fails the send with ECONNREFUSED.
. "$(dirname "$0")/lib.sh"

UDP_LOG="$T/udp.log"
start_helper uport "$T/udp.port" "UDP sink" \
	python3 "$HELPERS/udp_sink.py" --port-file "$T/udp.port" --log "$UDP_LOG"
start_helper uport2 "$T/udp2.port" "second UDP sink" \
	python3 "$HELPERS/udp_sink.py" --port-file "$T/udp2.port" --log "$T/udp2.log"

write_config "$T/u.ini" <<EOF
[udp]
match = 127.0.0.1:$uport
meter = datagrams
rate = 20/s
max_wait = 1m

; Connections to the same place: must never hold a datagram.
[tcp-only]
match = 127.0.0.1:$uport
rate = 1/s
EOF
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"
start_witness datagram "$uport" "$T/arrivals"
datagrams_spaced() { # NAME COUNT: COUNT datagrams, spaced at the sink (kernel times); COUNT arrived
	expect_spaced "$T/arrivals" 50 "$2" "$1 datagrams"
	[ "$(grep -c ' datagram .* go ' "$T/shim.log")" -eq "$2" ] || fail "$1: not held as datagrams"
	for _ in $(seq 50); do [ "$(wc -l <"$UDP_LOG")" -ge "$2" ] && break; sleep 0.1; done
	[ "$(wc -l <"$UDP_LOG")" -eq "$2" ] || fail "$1: $(wc -l <"$UDP_LOG") of $2 datagrams arrived"
	: >"$T/shim.log"
	: >"$UDP_LOG"
}
run() { "$SLUICE" run -c "$T/u.ini" -- "$@"; }

run python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(6):
    s.sendto(b"to%d" % i, ("127.0.0.1", int(sys.argv[1])))
for i in range(4):
    s.sendmsg([b"msg", b"%d" % i], [], 0, ("127.0.0.1", int(sys.argv[1])))
' "$uport" || fail "python3 sendto/sendmsg"
datagrams_spaced "sendto+sendmsg" 10

# A sender held up between its release and its sendto (an interposer between the
# shim and libc sleeps 20 ms before every other datagram): the next release counts
# from when the datagram went, not from its check - or it would reach the sink
# 30 ms after the late one, at an interval of 50.
cc -O1 -shared -fPIC -o "$T/slow_sendto.so" "$HELPERS/slow_sendto.c" -ldl ||
	fail "cannot build the slow sendto interposer"
LD_PRELOAD="$PRELOAD:$T/slow_sendto.so" run python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(6):
    s.sendto(b"late%d" % i, ("127.0.0.1", int(sys.argv[1])))
' "$uport" || fail "python3 sendto, held up before each other send"
datagrams_spaced "sendto held up after its release" 6

run python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("127.0.0.1", int(sys.argv[1])))
for i in range(5):
    s.send(b"c%d" % i)
' "$uport" || fail "python3 connected send"
datagrams_spaced "connected send" 5

# sendmmsg with 6 messages, each carrying the address: 6 places.
run python3 -c '
import ctypes, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(iovec)),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]
class mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
addr = ctypes.create_string_buffer(struct.pack("!HH4s8x", socket.AF_INET, int(sys.argv[1]),
                                               socket.inet_aton("127.0.0.1")), 16)
struct.pack_into("=H", addr, 0, socket.AF_INET)  # sa_family in host order
bufs = [ctypes.create_string_buffer(b"mm%d" % i) for i in range(6)]
iovs = [iovec(ctypes.cast(b, ctypes.c_void_p), 3) for b in bufs]
vec = (mmsghdr * 6)()
for i in range(6):
    vec[i].hdr = msghdr(ctypes.cast(addr, ctypes.c_void_p), 16, ctypes.pointer(iovs[i]), 1, None, 0, 0)
sent = 0
while sent < 6:
    n = libc.sendmmsg(s.fileno(), ctypes.byref(vec, sent * ctypes.sizeof(mmsghdr)), 6 - sent, 0)
    assert n > 0, ctypes.get_errno()
    sent += n
' "$uport" || fail "sendmmsg"
datagrams_spaced "sendmmsg" 6

# Non-blocking: asyncio queues what the socket refuses (EAGAIN) and sends it when
# epoll says writable, so nothing is lost and nothing goes early.
run python3 -c '
import asyncio, socket, sys
async def main():
    loop = asyncio.get_running_loop()
    tr, _ = await loop.create_datagram_endpoint(asyncio.DatagramProtocol,
                                                remote_addr=None, family=socket.AF_INET)
    t0 = loop.time()
    for i in range(8):
        tr.sendto(b"a%d" % i, ("127.0.0.1", int(sys.argv[1])))
    # The shim never slept in those calls: the held ones were refused (EAGAIN)
    # and asyncio buffered them.
    assert loop.time() - t0 < 0.04, "sendto slept on a non-blocking socket"
    assert tr.get_write_buffer_size() > 0, "nothing was held back"
    for _ in range(200):
        if tr.get_write_buffer_size() == 0:
            break
        await asyncio.sleep(0.01)
    assert tr.get_write_buffer_size() == 0, "datagrams still queued"
    tr.close()
asyncio.run(main())
' "$uport" || fail "asyncio datagrams"
datagrams_spaced "asyncio sendto (non-blocking)" 8

# socat: UDP (connect + write) and UDP-DATAGRAM (sendto), one process per datagram.
run sh -c 'for i in 1 2 3; do echo "s$i" | socat -u - "UDP:127.0.0.1:$1" || exit 1; done
	for i in 4 5 6; do echo "s$i" | socat -u - "UDP-DATAGRAM:127.0.0.1:$1" || exit 1; done' _ "$uport" ||
	fail "socat"
datagrams_spaced "socat" 6

# Unmatched port: not held, all there.
start=$(now_ms)
run python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(20):
    s.sendto(b"u%d" % i, ("127.0.0.1", int(sys.argv[1])))
' "$uport2" || fail "unmatched datagrams"
[ $(($(now_ms) - start)) -lt 5000 ] || fail "unmatched datagrams were slow"
! grep -q ' go ' "$T/shim.log" || fail "an unmatched datagram was held"
for _ in $(seq 50); do [ "$(wc -l <"$T/udp2.log")" -ge 20 ] && break; sleep 0.1; done
[ "$(wc -l <"$T/udp2.log")" -eq 20 ] || fail "unmatched: $(wc -l <"$T/udp2.log") of 20 arrived"

# Refusal: no place within max_wait fails the send, and sends nothing.
write_config "$T/r.ini" <<EOF
[tight]
match = 127.0.0.1:$uport
meter = datagrams
rate = 1/s
max_wait = 0
EOF
: >"$UDP_LOG"
"$SLUICE" run -c "$T/r.ini" -- python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b"first", ("127.0.0.1", int(sys.argv[1])))
try:
    s.sendto(b"second", ("127.0.0.1", int(sys.argv[1])))
    sys.exit("second datagram was not refused")
except ConnectionRefusedError:
    pass
' "$uport" || fail "refusal"
sleep 0.3
[ "$(cut -d" " -f2 "$UDP_LOG")" = "first" ] || fail "refusal: sink got $(cat "$UDP_LOG")"
echo "ok"

#!/usr/bin/env bash
# tier: serial
# meter = bytes is kept at the destination, not at the write: a receiver that stops
# reading for 2 s and then reads as fast as it can must not get, in any second,
# more than the rate and one piece - the kernel's send buffer may not hold a
# backlog the shim already released (docs/design.md, "Bytes at the destination").
# Clients: curl -T and python3 sendall (blocking), asyncio (non-blocking), each
# uploading 3 MiB at 1 MiB/s through a 2 s stall.  Witness: the kernel times of
# every payload segment at the receiver.
. "$(dirname "$0")/lib.sh"

start_helper PORT "$T/port" "stalling receiver" \
	python3 "$HELPERS/stall_reader.py" --port-file "$T/port" --after $((256 * 1024)) --pause 2
write_config "$T/b.ini" <<EOF2
[upload]
match = 127.0.0.1:$PORT
meter = bytes
rate = 1M/s
max_wait = 1m
EOF2
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"
start_witness bytes "$PORT" "$T/arrivals"
N=$((3 * 1024 * 1024))
# A release covers 20 ms of the rate (src/shim/held.c, piece_for): 20,971 bytes.
# 5 ms of slack: a writer preempted between its release and its write puts that
# piece closer to the next at the destination (docs/design.md, "Bytes"); the
# backlog this test is about was 63 ms of the rate (1,133,515 bytes in a second).
drained() { # NAME
	sleep 0.3
	out=$(python3 "$HELPERS/bytes_check.py" "$T/arrivals" --rate $((1024 * 1024)) --piece 20971 \
		--span 1 --slack-ms 5 --expect-bytes "$N") || fail "$1: $out"
	note "$1: $out"
	: >"$T/shim.log"
	: >"$T/arrivals"
}

head -c "$N" /dev/urandom >"$T/up.bin"
"$SLUICE" run -c "$T/b.ini" -- curl -sS -T "$T/up.bin" "http://127.0.0.1:$PORT/curl" >"$T/curl.out" ||
	fail "curl -T"
grep -q "got $N bytes" "$T/curl.out" || fail "curl upload: $(cat "$T/curl.out")"
drained "curl -T through a 2 s stall"

"$SLUICE" run -c "$T/b.ini" -- python3 -c '
import os, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /py HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % n + os.urandom(n))
reply = s.makefile("rb").read()
assert reply.endswith(b"got %d bytes\n" % n), reply[-60:]
' "$PORT" "$N" || fail "python3 sendall"
drained "python3 sendall through a 2 s stall"

"$SLUICE" run -c "$T/b.ini" -- python3 -c '
import asyncio, os, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
async def main():
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % n)
    w.write(os.urandom(n))
    await w.drain()
    reply = await r.read()
    assert reply.endswith(b"got %d bytes\n" % n), reply[-60:]
asyncio.run(main())
' "$PORT" "$N" || fail "asyncio upload"
drained "asyncio through a 2 s stall"
echo "ok"

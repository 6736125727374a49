#!/usr/bin/env bash
# tier: serial
# meter = bytes: outgoing payload shaped to the rate, large writes released in
# pieces - a short write on a non-blocking socket, consecutive releases inside one
# blocking call.  Checked strictly at the destination (never more bytes than one
# piece plus rate x time since the first arrived); every upload must arrive whole.
# Clients: python3 sendall (blocking), one os.write of 1 MiB on a blocking socket
# (must return 1 MiB), writev and sendmsg (whole vectors), asyncio (non-blocking;
# its loop keeps ticking), curl -T.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/b.ini" <<EOF
[upload]
match = 127.0.0.1:$PORT
meter = bytes
rate = 512K/s
max_wait = 1m
EOF
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"
# The bytes as the server received them: kernel times of every payload segment.
# A release covers 20 ms of the rate (src/shim/held.c, piece_for): 10,485 bytes.
start_witness bytes "$PORT" "$T/arrivals"
bytes_seen() { # NAME BYTES
	sleep 0.3
	out=$(python3 "$HELPERS/bytes_check.py" "$T/arrivals" --rate $((512 * 1024)) \
		--piece 10485 --expect-bytes "$2") || fail "$1: $out"
	note "$1: $out"
	: >"$T/shim.log"
	: >"$T/arrivals"
}
post() { # python3 expression for the body sender; $1 = N bytes
	cat <<EOF
import os, socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
body = os.urandom(n)
s = socket.create_connection(("127.0.0.1", port))
head = b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % n
EOF
}

# python3 sendall, blocking: 1 MiB at 512 KiB/s.
"$SLUICE" run -c "$T/b.ini" -- python3 -c "$(post)
s.sendall(head + body)
reply = s.makefile('rb').read()
assert reply.endswith(b'got %d bytes\n' % n), reply[-60:]
" "$PORT" $((1024 * 1024)) || fail "sendall"
bytes_seen "python3 sendall 1 MiB" $((1024 * 1024))

# One blocking write of 1 MiB: released piece by piece inside the call, all of it
# returned at once, as a blocking send would.
"$SLUICE" run -c "$T/b.ini" -- python3 -c "$(post)
os.write(s.fileno(), head)
t = time.monotonic()
w = os.write(s.fileno(), body)
took = time.monotonic() - t
assert w == n, 'one blocking write returned %d of %d' % (w, n)
reply = s.makefile('rb').read()
assert reply.endswith(b'got %d bytes\n' % n), reply[-60:]
print('  one write of %d bytes took %.2f s' % (n, took))
assert took > 1.5, 'not shaped'
" "$PORT" $((1024 * 1024)) || fail "one blocking write"
bytes_seen "one blocking os.write" $((1024 * 1024))

# writev and sendmsg on a blocking socket: the same, whole vectors at once.
"$SLUICE" run -c "$T/b.ini" -- python3 -c "$(post)
half = n // 2
w = os.writev(s.fileno(), [head, body[:half]])
assert w == len(head) + half, 'writev returned %d' % w
w = s.sendmsg([body[half:half + 1000], body[half + 1000:]])
assert w == n - half, 'sendmsg returned %d' % w
reply = s.makefile('rb').read()
assert reply.endswith(b'got %d bytes\n' % n), reply[-60:]
" "$PORT" $((512 * 1024)) || fail "writev/sendmsg"
bytes_seen "writev + sendmsg" $((512 * 1024))

# Non-blocking: asyncio; the loop ticks every 10 ms throughout.
"$SLUICE" run -c "$T/b.ini" -- python3 -c '
import asyncio, os, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
async def main():
    gaps, stop = [], asyncio.Event()
    async def tick():
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic(); gaps.append(now - last); last = now
    t = asyncio.create_task(tick())
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % n)
    w.write(os.urandom(n))
    await w.drain()
    reply = await r.read()
    stop.set(); await t
    assert reply.endswith(b"got %d bytes\n" % n), reply[-60:]
    print("  asyncio: longest loop tick %.0f ms during the upload" % (max(gaps) * 1000))
    assert max(gaps) < 0.25, "the event loop stalled"
asyncio.run(main())
' "$PORT" $((768 * 1024)) || fail "asyncio upload"
bytes_seen "asyncio 768 KiB" $((768 * 1024))

# curl -T: a real uploader.
head -c $((1024 * 1024)) /dev/urandom >"$T/up.bin"
"$SLUICE" run -c "$T/b.ini" -- curl -sS -T "$T/up.bin" "http://127.0.0.1:$PORT/curl" >"$T/curl.out" ||
	fail "curl -T"
grep -q "got $((1024 * 1024)) bytes" "$T/curl.out" || fail "curl upload: $(cat "$T/curl.out")"
bytes_seen "curl -T 1 MiB" $((1024 * 1024))
echo "ok"

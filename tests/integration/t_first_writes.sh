#!/usr/bin/env bash
# tier: parallel
# The first write of a deferred connect on time (issue 48, item 7; docs/design.md,
# "First writes on time"): event loops that open many connections at once at
# 500/s - python3 aiohttp and node fetch (undici), and two aiohttp processes
# sharing the limit - have their connects made at their slots by the kicker, but
# write each request when their loop gets to it: as they start (and after any
# stall) thirty requests reached the server within a millisecond (62 within ten
# intervals).  Judged at the destination: the SYNs an interval apart (strict),
# every request there, and never more than 10 + 12 requests in any ten intervals:
# 11-14 here, the rest room for the kicker (which sends them) coming late on a
# busy machine.  Their rates are make bench's (bench/clients.sh).
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/ev.ini" <<EOF2
[ev]
match = 127.0.0.1:$PORT
rate = 500/s
max_wait = 1m
EOF2
export PORT # the aiohttp function below runs in a shell of its own too
start_witness syn "$PORT" "$T/syn"
start_witness first "$PORT" "$T/first"

aiohttp() { # N
	/usr/bin/python3 -c '
import asyncio, aiohttp, sys
async def main():
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, force_close=True)) as s:
        async def one(i):
            async with s.get("http://127.0.0.1:%s/a%d" % (sys.argv[1], i)) as r:
                assert r.status == 200, r.status
                await r.read()
        await asyncio.gather(*(one(i) for i in range(int(sys.argv[2]))))
asyncio.run(main())' "$PORT" "$1"
}
judged() { # COUNT WHAT
	sleep 0.3
	expect_spaced "$T/syn" 2 "$1" "$2: SYNs"
	out=$(python3 "$HELPERS/first_writes.py" "$T/first" --interval-ms 2 --expect "$1" --slack 12 --what "$2") ||
		fail "$out"
	note "$out"
	: >"$T/first"
}

"$SLUICE" run -q -c "$T/ev.ini" -- bash -c "$(declare -f aiohttp); aiohttp 600" || fail "aiohttp"
judged 600 "aiohttp, 600 at once"

"$SLUICE" run -q -c "$T/ev.ini" -- node -e '
Promise.all(Array.from({length: 600}, (_, i) => fetch(`http://127.0.0.1:${process.argv[1]}/n${i}`,
	{headers: {connection: "close"}}).then(r => r.text()))).catch(e => { console.error(e); process.exit(1); });' \
	"$PORT" || fail "node fetch"
judged 600 "node fetch (undici), 600 at once"

# A first write too large to be kept (over 8 KiB) on poll(): told EAGAIN until its
# slot, the socket shown not writable until then - not a poll that spins.  Ten
# connections at 20/s, all written once all are made; the client's CPU time while
# it writes says whether it spun.  The first connect was not deferred (its slot
# was now) and keeps no place on the line: its write may go with the line's first
# (hence the slack of one).
write_config "$T/slow.ini" <<EOF2
[slow]
match = 127.0.0.1:$PORT
rate = 20/s
max_wait = 1m
EOF2
"$SLUICE" run -q -c "$T/slow.ini" -- /usr/bin/python3 -c '
import resource, select, socket, sys, time
port = int(sys.argv[1])
socks = []
for i in range(10):
    s = socket.socket(); s.setblocking(False); s.connect_ex(("127.0.0.1", port)); socks.append(s)
body = b"x" * 9000
todo = {s.fileno(): [s, b"POST /big%d HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % (i, len(body)) + body]
        for i, s in enumerate(socks)}
p = select.poll()
for fd in todo: p.register(fd, select.POLLOUT)
# Every connect made first (their own line, 50 ms apart), then every first write
# at once: the first writes line spaces them.
made, deadline = set(), time.monotonic() + 20
while len(made) < len(todo) and time.monotonic() < deadline:
    for fd, ev in p.poll(1000):
        made.add(fd); p.modify(fd, 0)
assert len(made) == len(todo), "not all connected"
for fd in todo: p.modify(fd, select.POLLOUT)
t0 = resource.getrusage(resource.RUSAGE_SELF)
while todo and time.monotonic() < deadline:
    for fd, ev in p.poll(1000):
        s, data = todo[fd]
        try:
            n = s.send(data)
        except BlockingIOError:
            continue
        todo[fd][1] = data[n:]
        if not todo[fd][1]:
            p.unregister(fd); del todo[fd]
assert not todo, "not all written"
for s in socks:
    s.setblocking(True); s.settimeout(10)
    while s.recv(4096): pass
u = resource.getrusage(resource.RUSAGE_SELF)
print("cpu %.3f" % (u.ru_utime + u.ru_stime - t0.ru_utime - t0.ru_stime))
' "$PORT" >"$T/big.out" || fail "first writes of 9 KiB on poll"
sleep 0.3
: >"$T/syn"
out=$(python3 "$HELPERS/first_writes.py" "$T/first" --interval-ms 50 --expect 10 --window 4 --slack 1 \
	--what "9 KiB first writes on poll") || fail "$out"
note "$out; the client's $(cat "$T/big.out") s"
awk '{ exit !($2 < 0.1) }' "$T/big.out" || fail "the client spun in poll: $(cat "$T/big.out") s of CPU"
: >"$T/first"

# Two processes, one line: the segment keeps it for every process of the section.
"$SLUICE" run -q -c "$T/ev.ini" -- bash -c "$(declare -f aiohttp); aiohttp 250 & aiohttp 250; wait \$!" ||
	fail "two aiohttp processes"
judged 500 "two aiohttp processes, 250 each at once"
echo "ok"

#!/usr/bin/env bash
# The first write of a deferred connect on time (issue 48, item 7; docs/design.md,
# "First writes on time"): event loops that open many connections at once at
# 500/s - python3 aiohttp and node fetch (undici), and two aiohttp processes
# sharing the limit - have their connects made at their slots by the kicker, but
# write each request when their loop gets to it: as they start (and after any
# stall) thirty requests reached the server within a millisecond.  Judged at the
# destination: the SYNs an interval apart (strict), every request there, and never
# more than 10 + 3 requests in any ten intervals.  Their rates are make bench's
# (bench/clients.sh).
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
	out=$(python3 "$HELPERS/first_writes.py" "$T/first" --interval-ms 2 --expect "$1" --what "$2") ||
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

# Two processes, one line: the segment keeps it for every process of the section.
"$SLUICE" run -q -c "$T/ev.ini" -- bash -c "$(declare -f aiohttp); aiohttp 250 & aiohttp 250; wait \$!" ||
	fail "two aiohttp processes"
judged 500 "two aiohttp processes, 250 each at once"
echo "ok"

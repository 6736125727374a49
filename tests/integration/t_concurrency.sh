#!/usr/bin/env bash
# tier: parallel
# concurrency = N: never more than N connections open at once, across threads and
# processes; a waiter goes as soon as a place frees (futex, not polling); close, exit
# and kill -9 all give places back; a non-blocking connect to a full limit is not
# made until a place frees while its event loop keeps running; max_wait refuses.
# Overlap is checked strictly on client-side intervals [connected, closing]: a
# place is taken before the connect is made and given back after the close.
. "$(dirname "$0")/lib.sh"

start_helper hport "$T/hold.port" "hold server" python3 "$HELPERS/sink.py" "$T/hold.port" 240 hold

write_config "$T/c.ini" <<EOF
[two]
match = 127.0.0.1:$hport
concurrency = 2
max_wait = 1m
EOF
start_daemon "$T/c.ini"

# 1. Blocking connects from 5 threads and 2 processes.
"$SLUICE" run -c "$T/c.ini" -- python3 - "$hport" >"$T/blocking.iv" <<'EOF' || fail "blocking clients"
import os, socket, sys, threading, time
port = int(sys.argv[1])
def one():
    s = socket.create_connection(("127.0.0.1", port))
    t = time.monotonic_ns()
    s.sendall(b"x")
    time.sleep(0.3)
    os.write(1, b"%d %d\n" % (t, time.monotonic_ns()))  # one write: lines never mix
    s.close()
pids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        one(); os._exit(0)
    pids.append(pid)
ts = [threading.Thread(target=one) for _ in range(5)]
for t in ts: t.start()
for t in ts: t.join()
for p in pids: os.waitpid(p, 0)
EOF
python3 "$HELPERS/overlap.py" 2 <"$T/blocking.iv" || fail "blocking: more than 2 open at once"
[ "$(wc -l <"$T/blocking.iv")" -eq 7 ] || fail "blocking: $(wc -l <"$T/blocking.iv") of 7 connections"

# 2. Non-blocking (asyncio): 6 at once, limit 2; the loop keeps ticking meanwhile.
"$SLUICE" run -c "$T/c.ini" -- python3 - "$hport" >"$T/async.iv" <<'EOF' || fail "asyncio clients"
import asyncio, sys, time
port = int(sys.argv[1])
gaps = []
async def ticker(stop):
    last = time.monotonic()
    while not stop.is_set():
        await asyncio.sleep(0.01)
        now = time.monotonic(); gaps.append(now - last); last = now
async def one():
    r, w = await asyncio.open_connection("127.0.0.1", port)
    t = time.monotonic_ns()
    w.write(b"x"); await w.drain()
    await asyncio.sleep(0.3)
    print(t, time.monotonic_ns(), flush=True)
    w.close(); await w.wait_closed()
async def main():
    stop = asyncio.Event()
    tick = asyncio.create_task(ticker(stop))
    await asyncio.wait_for(asyncio.gather(*(one() for _ in range(6))), 30)
    stop.set(); await tick
    print("  event loop: longest tick %.0f ms while connects waited" % (max(gaps) * 1000), file=sys.stderr)
    assert max(gaps) < 0.25, "the event loop stalled"
asyncio.run(main())
EOF
python3 "$HELPERS/overlap.py" 2 <"$T/async.iv" || fail "asyncio: more than 2 open at once"
[ "$(wc -l <"$T/async.iv")" -eq 6 ] || fail "asyncio: $(wc -l <"$T/async.iv") of 6 connections"

# 3. A freed place reaches the waiter at once; kill -9 of a holder frees its place
#    within the daemon's heartbeat; max_wait refuses.
write_config "$T/one.ini" <<EOF
[one]
match = 127.0.0.1:$hport
concurrency = 1
max_wait = 1m
EOF
kill "$DAEMON_PID" 2>/dev/null; wait "$DAEMON_PID" 2>/dev/null
start_daemon "$T/one.ini"
"$SLUICE" run -c "$T/one.ini" -- python3 "$HELPERS/handover.py" "$hport" 1 0.5 --max-ms 500 ||
	fail "hand-over after close"

"$SLUICE" run -c "$T/one.ini" -- python3 -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print("held", flush=True)
time.sleep(60)
' "$hport" >"$T/holder.out" &
holder=$!
BG_PIDS+=($holder)
for _ in $(seq 100); do grep -q held "$T/holder.out" 2>/dev/null && break; sleep 0.1; done
grep -q held "$T/holder.out" || fail "holder did not connect"
"$SLUICE" stat -c "$T/one.ini" --json >"$T/stat.json" || fail "stat"
[ "$(json_field "$T/stat.json" one open)" -eq 1 ] || fail "stat: open = $(json_field "$T/stat.json" one open)"
[ "$(json_field "$T/stat.json" one concurrency)" -eq 1 ] || fail "stat: concurrency"
# kill -9 the holder while another waits.
"$SLUICE" run -c "$T/one.ini" -- python3 -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print(time.monotonic_ns(), flush=True)
' "$hport" >"$T/after.out" &
waiter=$!
sleep 0.5
[ ! -s "$T/after.out" ] || fail "the waiter did not wait for the holder"
killed=$(python3 -c 'import time; print(time.monotonic_ns())')
pkill -9 -f "time.sleep\(60\)"
wait "$waiter" || fail "waiter failed after kill -9"
python3 -c '
import sys
lat = (int(open(sys.argv[1]).read()) - int(sys.argv[2])) / 1e6
print("  place of a process killed -9 given back after %.0f ms" % lat)
sys.exit(0 if 0 <= lat < 3000 else 1)
' "$T/after.out" "$killed" || fail "kill -9 did not free the place in time"

# max_wait: with the one place taken, the next connection is refused after it.
write_config "$T/tight.ini" <<EOF
[tight]
match = 127.0.0.1:$hport
concurrency = 1
max_wait = 300ms
EOF
"$SLUICE" run -c "$T/tight.ini" -- python3 -c '
import socket, sys, time
a = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
t = time.monotonic()
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    sys.exit("not refused")
except ConnectionRefusedError:
    w = time.monotonic() - t
    print("  refused after %.0f ms (max_wait 300 ms)" % (w * 1000))
    sys.exit(0 if w >= 0.3 else "refused before max_wait")
' "$hport" || fail "max_wait refusal"
echo "ok"

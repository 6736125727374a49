#!/usr/bin/env bash
# tier: parallel
# A connect waiting in the queue while signals arrive: the handler runs, the wait
# resumes towards the same absolute deadline, and the connection goes at its slot,
# neither early nor failed with EINTR.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/s.ini" <<EOF
[slow]
match = 127.0.0.1:$PORT
rate = 1/s
EOF
start_witness syn "$PORT" "$T/arrivals"
SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log" "$SLUICE" run -c "$T/s.ini" -- python3 - "$PORT" <<'EOF' || fail "client failed"
import os, signal, socket, sys, time
port = int(sys.argv[1])
# Python runs its own handlers only between bytecodes, but its C-level handler
# writes one byte per delivered signal to the wakeup fd: that counts them.
r, w = os.pipe()
os.set_blocking(r, False)
os.set_blocking(w, False)
signal.set_wakeup_fd(w)
signal.signal(signal.SIGALRM, lambda *a: None)
socket.create_connection(("127.0.0.1", port)).close()   # takes the first slot
signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)          # 20 signals a second
t0 = time.monotonic()
socket.create_connection(("127.0.0.1", port)).close()   # waits ~1 s for its slot
waited = time.monotonic() - t0
signal.setitimer(signal.ITIMER_REAL, 0, 0)
hits = len(os.read(r, 4096))
print("waited %.3f s through %d signals" % (waited, hits))
sys.exit(0 if hits >= 5 and waited >= 0.9 else 1)
EOF
witnessed "$T/arrivals" --interval-ms 1000 --expect 2 --what connects || fail "released early"

# A handler that siglongjmps out every 300 us (the classic alarm() timeout around
# connect), in a program connecting as fast as it may: no jump may leave the segment
# lock held.  The shim runs the program's handlers through its trampoline, so none
# runs inside a critical section; a second program connecting meanwhile is never
# kept waiting for the lock, and no call goes undecided.
cc -O1 -D_GNU_SOURCE -Wno-deprecated-declarations -o "$T/sigjump" "$HELPERS/sigjump.c" ||
	fail "cannot build the signal helper"
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT=none "$T/sigjump" semantics >"$T/sem.out" ||
	fail "handlers under the shim: $(cat "$T/sem.out")"
# The jumper connects to a port where nothing listens (refused at once, so no
# accept queue overflows and no SYN is sent again a second later), matched by the
# same section as the server the other client uses: one lock for both.
closed=$((PORT == 65535 ? PORT - 1 : PORT + 1))
write_config "$T/j.ini" <<EOF2
[busy]
match = 127.0.0.1
rate = 1000000/s
burst = 1000000
max_wait = 10s
EOF2
start_daemon "$T/j.ini"
for how in sigaction signal; do
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 60 "$T/sigjump" "$closed" 3 $how >"$T/jump-$how.out" &
	jumper=$!
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 60 python3 - "$PORT" >"$T/steady-$how.out" <<'EOF2' || fail "$how: the steady client failed"
import socket, sys, time
worst, end = 0.0, time.monotonic() + 3
while time.monotonic() < end:
    t = time.monotonic()
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30).close()
    worst = max(worst, time.monotonic() - t)
    time.sleep(0.02)
print("%.3f" % worst)
EOF2
	wait "$jumper" || fail "$how: the jumping client failed"
	read -r made jumped <"$T/jump-$how.out"
	worst=$(cat "$T/steady-$how.out")
	note "$how: $made connects through $jumped jumps out of a SIGALRM handler; the other client's slowest connect $worst s"
	[ "$jumped" -ge 100 ] && [ "$made" -ge 100 ] || fail "$how: $made connects, $jumped jumps"
	awk -v w="$worst" 'BEGIN { exit !(w < 1.0) }' || fail "$how: a connect waited $worst s: the lock was left held"
done
"$SLUICE" stat -c "$T/j.ini" --json >"$T/j.json"
[ "$(json_field "$T/j.json" busy undecided)" -eq 0 ] || fail "calls went undecided: $(cat "$T/j.json")"
[ "$(json_field "$T/j.json" - lock_recoveries)" -eq 0 ] || fail "the lock was taken over from a holder"
echo "ok"

#!/usr/bin/env bash
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

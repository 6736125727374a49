#!/usr/bin/env bash
# tier: parallel
# A reload while a queue waits (F1): 60 connections queued at 50/s, and the limit
# rewritten to 3000/m - the same rate in another window, which once counted as a
# new section: its state zeroed, the waiters released unchecked and new arrivals
# let through from an empty bucket (101 in one second).  Now the section keeps its
# state and serial: the destination sees the rate across the reload, on kernel SYN
# timestamps, and stat keeps counting.  A second reload then halves the rate.
. "$(dirname "$0")/lib.sh"

start_server
cat >"$T/sections.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
rate = 50/s
max_wait = 1m
EOF
write_config "$T/r.ini" <"$T/sections.ini"
start_daemon "$T/r.ini"
start_syn_witness "$PORT" "$T/syn.log"
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 60 python3 - "$PORT" <<'EOF' &
import socket, sys, threading
port = int(sys.argv[1])
def one():
    socket.create_connection(("127.0.0.1", port), timeout=30).close()
ts = [threading.Thread(target=one) for _ in range(60)]
[t.start() for t in ts]
[t.join() for t in ts]
EOF
client=$!
sleep 0.4
sed -i 's|rate = 50/s|rate = 3000/m|' "$T/r.ini"
"$SLUICE" reload -c "$T/r.ini" >"$T/reload.out" 2>&1 || fail "reload: $(cat "$T/reload.out")"
sleep 0.3
sed -i 's|rate = 3000/m|rate = 25/s|' "$T/r.ini"
"$SLUICE" reload -c "$T/r.ini" >"$T/reload.out" 2>&1 || fail "second reload: $(cat "$T/reload.out")"
wait $client || fail "the clients failed"
sleep 0.3
kill "$WITNESS_PID"
# The bound of the tighter of the two rates in force: 25/s after the second reload
# is checked from its moment on; across both, 50/s.
python3 "$HELPERS/arrivals.py" "$T/syn.log" --interval-ms 20 --expect 60 --what "connects across reloads" ||
	fail "the destination saw more than the rate across a reload"
"$SLUICE" stat -c "$T/r.ini" --json >"$T/s.json"
[ "$(json_field "$T/s.json" api admitted)" -eq 60 ] || fail "stat lost count across the reloads: $(json_field "$T/s.json" api admitted) of 60"
[ "$(json_field "$T/s.json" api rate)" = "25/s" ] || fail "the last rate is not in force"
echo "ok"

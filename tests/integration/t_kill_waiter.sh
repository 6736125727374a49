#!/usr/bin/env bash
# tier: parallel
# (e) A process killed -9 while it waits in the queue does not disturb the others:
# they keep their spacing, finish, and nothing is left locked.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/e.ini" <<EOF
[q]
match = 127.0.0.1:$PORT
rate = 10/s
max_wait = 1m
EOF
start=$(now_ms)
start_witness syn "$PORT" "$T/arrivals"
SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log" "$SLUICE" run -c "$T/e.ini" -- bash -c '
	port=$1 dir=$2 t=$3
	python3 "$dir/fetch.py" "http://127.0.0.1:$port/a" 10 & a=$!
	python3 "$dir/fetch.py" "http://127.0.0.1:$port/b" 10 & b=$!
	sleep 0.5
	# These queue behind a and b; kill them while they wait.
	python3 "$dir/fetch.py" "http://127.0.0.1:$port/victim" 5 3 & v=$!
	python3 "$dir/fetch.py" "http://127.0.0.1:$port/victim2" 5 & v2=$!
	sleep 0.5
	kill -9 $v $v2
	python3 "$dir/fetch.py" "http://127.0.0.1:$port/c" 10 & c=$!
	rc=0
	for p in $a $b $c; do wait $p || rc=1; done
	exit $rc
' _ "$PORT" "$HELPERS" "$T" || fail "a surviving client failed"
elapsed=$(($(now_ms) - start))
note "survivors finished in $elapsed ms"
survivors=$(grep -c -E ' /(a|b|c)/' "$SERVER_LOG")
[ "$survivors" -eq 30 ] || fail "survivors made $survivors requests, not 30"
grep -q "/victim" "$SERVER_LOG" && note "(victims got $(grep -c /victim "$SERVER_LOG") through before the kill)"
witnessed "$T/arrivals" --interval-ms 100 --slack-ms 1 --what connects || fail "spacing"

# A waiter holding the last slot dies before its turn: within a second the daemon
# hands its slot back, so the next caller gets that slot, not the one after it.
write_config "$T/e2.ini" <<EOF
[slow]
match = 127.0.0.1:$PORT
rate = 1/2s
max_wait = 1m
EOF
: >"$T/shim2.log"
SLUICE_DEBUG=1 SLUICE_LOG="$T/shim2.log" "$SLUICE" run -c "$T/e2.ini" -- bash -c '
	port=$1
	code="import socket, sys; socket.create_connection((\"127.0.0.1\", int(sys.argv[1]))).close()"
	one() { exec python3 -c "$code" "$port"; }
	(one)                     # slot t0
	(one) & sleep 0.2         # slot t0+2s
	(one) & victim=$!; sleep 0.3   # slot t0+4s: the last one handed out
	kill -9 $victim
	sleep 1.2                 # the daemon beats every 0.5 s
	(one)                     # gets t0+4s back, not t0+6s
	wait
' _ "$PORT" || fail "refund scenario failed"
python3 - "$T/shim2.log" <<'EOF' || fail "the dead waiter's slot was not returned"
import re, sys
slots = sorted(int(m.group(1)) for m in re.finditer(r": go .*slot=(\d+)", open(sys.argv[1]).read()))
print("  released slots, seconds after the first:", [round((s - slots[0]) / 1e9, 3) for s in slots])
sys.exit(0 if len(slots) == 3 and abs((slots[2] - slots[0]) / 1e9 - 4.0) < 0.01 else 1)
EOF

#!/usr/bin/env bash
# tier: parallel
# (d) sluiced killed -9 mid-run: the processes keep being shaped (they never need the
# daemon), and a restarted daemon re-attaches the segment with the queue intact:
# connections started after the restart queue behind the ones already waiting.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/d.ini" <<EOF
[q]
match = 127.0.0.1:$PORT
rate = 10/s
max_wait = 1m
EOF
start_daemon "$T/d.ini"
"$SLUICE" stat -c "$T/d.ini" --json >"$T/before.json" || fail "stat"
# A second daemon for the same segment (another control socket) must not take it over.
sed "s|^control_socket = .*|control_socket = $T/other.sock|" "$T/d.ini" >"$T/other.ini"
"$SLUICED" -f -c "$T/other.ini" 2>"$T/other.err"
[ $? -eq 1 ] || fail "a second daemon on the same segment started"
grep -q "belongs to a running sluiced" "$T/other.err" || fail "second daemon said: $(cat "$T/other.err")"
gen_before=$(json_field "$T/before.json" - generation)

export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"
# sluice run joins the running daemon's segment (no embedded daemon).
start_witness syn "$PORT" "$T/arrivals"
"$SLUICE" run -c "$T/d.ini" -- python3 "$HELPERS/fetch.py" "http://127.0.0.1:$PORT/a" 15 &
a=$!
"$SLUICE" run -c "$T/d.ini" -- python3 "$HELPERS/fetch.py" "http://127.0.0.1:$PORT/b" 15 &
b=$!
for _ in $(seq 50); do
	n=$(grep -c "attached segment $SHM_NAME" "$T/shim.log" 2>/dev/null)
	[ "${n:-0}" -ge 2 ] && break
	sleep 0.1
done
[ "$(grep -c "attached segment $SHM_NAME" "$T/shim.log")" -ge 2 ] || fail "sluice run did not join the daemon's segment"
sleep 0.5
kill -9 "$DAEMON_PID"
note "killed sluiced (pid $DAEMON_PID) with 30 connections in flight"
# While the daemon is dead, a burst of 10 (one per thread) queues up at once.
"$SLUICE" run -c "$T/d.ini" -- python3 "$HELPERS/fetch.py" "http://127.0.0.1:$PORT/c" 1 10 &
c=$!
sleep 0.5
start_daemon "$T/d.ini"
grep -q "re-attached segment $SHM_NAME" "$T/sluiced.log" || fail "restarted daemon did not re-attach: $(tail -2 "$T/sluiced.log")"
# Right after the restart, more connections: with the queue intact they go last.
"$SLUICE" run -c "$T/d.ini" -- python3 "$HELPERS/fetch.py" "http://127.0.0.1:$PORT/d" 5 &
d=$!
for p in $a $b $c $d; do wait $p || fail "a client failed"; done
unset SLUICE_DEBUG SLUICE_LOG

witnessed "$T/arrivals" --interval-ms 100 --slack-ms 1 --expect 45 --what connects || fail "spacing across the restart"
"$SLUICE" stat -c "$T/d.ini" --json >"$T/after.json" || fail "stat after restart"
admitted=$(json_field "$T/after.json" q admitted)
[ "$admitted" -eq 45 ] || fail "the segment counted $admitted admissions, not 45: state was lost"
gen_after=$(json_field "$T/after.json" - generation)
[ "$gen_after" -gt "$gen_before" ] || fail "generation $gen_before -> $gen_after"
# d's first connection came after every one of the burst that was already queued.
last_c=$(grep -n ' /c/' "$SERVER_LOG" | tail -1 | cut -d: -f1)
first_d=$(grep -n ' /d/' "$SERVER_LOG" | head -1 | cut -d: -f1)
[ "$first_d" -gt "$last_c" ] || fail "a connection made after the restart jumped the queue (line $first_d, burst ended at $last_c)"

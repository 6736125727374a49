#!/usr/bin/env bash
# tier: serial
# (g) A multi-threaded client: python3 with 8 threads, 6 connections each, at 20/s.
# The threads share the process's place in the queue like separate processes do.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/g.ini" <<EOF
[threads]
match = 127.0.0.1:$PORT
rate = 20/s
EOF
start=$(now_ms)
start_witness syn "$PORT" "$T/arrivals"
SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log" "$SLUICE" run -c "$T/g.ini" -- \
	python3 "$HELPERS/fetch.py" "http://127.0.0.1:$PORT/th" 6 8 || fail "threads failed"
elapsed=$(($(now_ms) - start))
note "48 connections from 8 threads in $elapsed ms"
[ "$(wc -l <"$SERVER_LOG")" -eq 48 ] || fail "server saw $(wc -l <"$SERVER_LOG") requests"
witnessed "$T/arrivals" --interval-ms 50 --slack-ms 1 --expect 48 --what connects || fail "spacing"
[ "$elapsed" -ge 2350 ] || fail "48 connections at 20/s in $elapsed ms"


# Threads that defer their first connects at the same instant start the kicker
# together: one starts it, the others wait for it (a heap used before it was
# mapped once killed such a program: SIGSEGV in sl_kicker_due).  Fresh
# processes, each 8 threads racing; none may die of a signal.
write_config "$T/race.ini" <<EOF
[threads]
match = 127.0.0.1:$PORT
rate = 400/s
max_wait = 1m
EOF
start_daemon "$T/race.ini"
for i in $(seq 80); do
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" python3 "$HELPERS/fetch.py" "http://127.0.0.1:$PORT/r$i" 1 8 \
		>"$T/race.out" 2>&1
	rc=$?
	[ $rc -lt 128 ] || fail "run $i: a client of 8 racing threads died of signal $((rc - 128))"
	[ $rc -eq 0 ] || fail "run $i: $(tail -2 "$T/race.out")"
done
note "80 processes of 8 threads racing their first deferred connects: none crashed"

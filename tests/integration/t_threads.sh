#!/usr/bin/env bash
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

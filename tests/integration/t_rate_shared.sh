#!/usr/bin/env bash
# tier: parallel
# (a) Four processes, 25 connections each, to one destination limited to 10/s,
# burst 1: one shared queue, so no two releases closer than 100 ms (minus 1 ms of
# clock reading) and the whole run takes at least 9.9 s.  Two of the processes are
# curl loops, two are python3 urllib; every response body must arrive intact.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/a.ini" <<EOF
[local-api]
match = 127.0.0.1:$PORT
rate = 10/s
burst = 1
max_wait = 1m
EOF

start=$(now_ms)
start_witness syn "$PORT" "$T/arrivals"
SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log" "$SLUICE" run -c "$T/a.ini" -- bash -c '
	port=$1 dir=$2
	curl_loop() {
		for i in $(seq 25); do
			body=$(curl -sS --max-time 60 "http://127.0.0.1:$port/c$1/$i") || exit 1
			[ "$body" = "hello /c$1/$i" ] || { echo "bad body: $body"; exit 1; }
		done
	}
	curl_loop 1 & a=$!
	curl_loop 2 & b=$!
	python3 "$dir/fetch.py" "http://127.0.0.1:$port/p1" 25 & c=$!
	python3 "$dir/fetch.py" "http://127.0.0.1:$port/p2" 25 & d=$!
	rc=0
	for p in $a $b $c $d; do wait $p || rc=1; done
	exit $rc
' _ "$PORT" "$HELPERS" || fail "a client failed"
elapsed=$(($(now_ms) - start))
note "100 connections in ${elapsed} ms"

[ "$(wc -l <"$SERVER_LOG")" -eq 100 ] || fail "server saw $(wc -l <"$SERVER_LOG") requests, not 100"
witnessed "$T/arrivals" --interval-ms 100 --slack-ms 1 --expect 100 --what connects || fail "spacing"
[ "$elapsed" -ge 9900 ] || fail "finished in $elapsed ms, faster than 10/s allows"

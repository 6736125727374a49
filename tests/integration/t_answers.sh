#!/usr/bin/env bash
# tier: parallel
# Signals from the destination (docs/shaping.md "Signals from the destination"): four
# python3 processes share one 100/s queue to a local server that answers one
# request, on cue, with a signal; the destination's kernel record (request
# arrivals) must show what the answer asked, for every process at once:
#  - 429 with Retry-After: 2: nothing for 2 s, then resumed spread out;
#  - Retry-After as an HTTP-date; GitHub's 403 with X-RateLimit-Remaining: 0 and
#    an epoch reset; RateLimit "p";r=0;t=3 (3 s); r=10;t=5 (at most 10 in 5 s);
#  - Retry-After: 999999 cut to max_pause (2 s);
#  - a 429 with a positive Age, and a malformed Retry-After: no pause.
. "$(dirname "$0")/lib.sh"

pf="$T/port.answers"
start_helper PORT "$pf" "answers server" \
	python3 "$HELPERS/answers_server.py" --port-file "$pf" --log "$T/server.log" --lifetime 170
write_config "$T/a.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
rate = 100/s
max_wait = 1m
max_pause = 2s
EOF
sed -e 's/^max_pause = 2s/max_pause = 5m/' "$T/a.ini" >"$T/long.ini"
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"
start_witness request "$PORT" "$T/arrivals"
run() {
	"$SLUICE" run -c "$1" -- python3 "$HELPERS/answers_client.py" "http://127.0.0.1:$PORT" "${@:2}" \
		>>"$T/client.out" 2>&1 || { cat "$T/client.out"; fail "the clients failed"; }
}
answers_seen() { sleep 0.3; python3 "$HELPERS/answers_check.py" "$T/arrivals" "$T/server.log" "$@"; }
date_in() { python3 -c 'import email.utils, sys, time; print(email.utils.formatdate(time.time() + float(sys.argv[1]), usegmt=True))' "$1"; }
enc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$1"; }

# --- Retry-After: 2 (max_pause is 2 s too: at the clamp's edge, not past it) ---
run "$T/a.ini" 5 --cue "1.5:/say/429?Retry-After=2"
answers_seen --pause "/say/429=2" || fail "Retry-After: 2 did not pause every process for 2 s"
grep -q "answer on fd .*429 (retry-after): pause 2000ms" "$T/shim.log" || fail "no debug line for the pause"

# --- Retry-After as an HTTP-date 4 s ahead: whole seconds, so 3 s at least from
# the answer, cut to max_pause (2 s) ---
run "$T/a.ini" 5 --cue "1:/say/503?Retry-After=$(enc "$(date_in 4)")"
answers_seen --pause "/say/503=2" || fail "Retry-After as an HTTP-date"

# --- GitHub: 403, X-RateLimit-Remaining: 0, an epoch reset 3 s ahead (whole
# seconds: 2 s at least) ---
run "$T/long.ini" 5 --cue "1:/say/403?X-RateLimit-Remaining=0&X-RateLimit-Reset=$(($(date +%s) + 4))"
answers_seen --pause "/say/403=2" --late 1.3 || fail "GitHub's 403 with an epoch reset"

# --- the IETF draft: r=0;t=3 pauses 3 s; r=10;t=5 lets 10 go in 5 s ---
run "$T/long.ini" 5 --cue "1:/say/200?RateLimit=$(enc '"default";r=0;t=3')"
answers_seen --pause "/say/200=3" || fail "RateLimit r=0;t=3 did not pause for 3 s"
run "$T/long.ini" 8 --cue "1:/say/201?RateLimit=$(enc '"default";r=10;t=5')"
answers_seen --budget "/say/201=10/5" || fail "RateLimit r=10;t=5 let more than 10 go in 5 s"

# --- Retry-After: 999999 cut to max_pause ---
run "$T/a.ini" 5 --cue "1:/say/429?Retry-After=999999&clamped=1"
grep -q "pause 999999000ms" "$T/shim.log" || fail "the long Retry-After was not read"
answers_seen --pause "/say/429=2" || fail "Retry-After: 999999 was not cut to max_pause"

# --- ignored: a cached answer (Age above zero), a malformed Retry-After ---
run "$T/a.ini" 3 --cue "1:/say/429?Retry-After=3&Age=5"
answers_seen --goes-on "/say/429" || fail "a 429 with a positive Age paused the queue"
run "$T/a.ini" 3 --cue "1:/say/503?Retry-After=soonish"
answers_seen --goes-on "/say/503" || fail "a malformed Retry-After paused the queue"

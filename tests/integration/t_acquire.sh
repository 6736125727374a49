#!/usr/bin/env bash
# tier: parallel
# sluice acquire: a shell loop takes places in the same queue the shim uses.  A loop
# of `sluice acquire` and a shaped python3 client share one 10/s queue; together
# their releases keep the spacing.  Refusal exits 1, interruption returns the place.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/q.ini" <<EOF
[api]
match = 127.0.0.1:$PORT, api.local.test
rate = 10/s
max_wait = 1m
[slow]
match = 127.0.0.3
rate = 1/2s
[never]
match = 127.0.0.2:9
rate = 1/m
max_wait = 0
EOF
start_daemon "$T/q.ini"
start_witness syn "$PORT" "$T/arrivals"
SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log" "$SLUICE" run -c "$T/q.ini" -- \
	python3 "$HELPERS/fetch.py" "http://127.0.0.1:$PORT/py" 10 &
py=$!
for i in $(seq 5); do "$SLUICE" acquire -c "$T/q.ini" -v api 2>>"$T/shim.log" || fail "acquire by section"; done
for i in $(seq 5); do "$SLUICE" acquire -c "$T/q.ini" -v "127.0.0.1:$PORT" 2>>"$T/shim.log" || fail "acquire by address"; done
wait $py || fail "python client failed"
# The python client's connects, at the destination: spaced, and spread over the
# time the queue took for all 20 (so the acquires were in it between them).
witnessed "$T/arrivals" --interval-ms 100 --expect 10 --what "shimmed connects" || fail "spacing at the destination"
span=$(awk 'NR == 1 { a = $1 } { b = $1 } END { printf "%d", (b - a) / 1e6 }' "$T/arrivals")
[ "$span" -ge 1200 ] || fail "10 connects in $span ms: the acquires did not take their turns between them"
# An acquire sends nothing anywhere: its release is known only from its own word
# (-v), so here the joint queue is also read from the releases the two logged.
python3 "$HELPERS/releases.py" "$T/shim.log" --interval-ms 100 --expect 20 || fail "acquire and the shim do not share the queue"

# By name (a name pattern), inside sluice run (SLUICE_SEGMENT), and with no match at all.
"$SLUICE" run -c "$T/q.ini" -- "$SLUICE" acquire api.local.test:443 || fail "acquire by name inside sluice run"
"$SLUICE" acquire -c "$T/q.ini" unlimited.example.org 2>"$T/err" || fail "unmatched host should exit 0"
grep -q "no section limits" "$T/err" || fail "unmatched: $(cat "$T/err")"

# Refusal: max_wait = 0 and the place taken -> exit 1, at once.
"$SLUICE" acquire -c "$T/q.ini" never || fail "first acquire of [never]"
"$SLUICE" acquire -c "$T/q.ini" 127.0.0.2:9 2>"$T/err"
[ $? -eq 1 ] || fail "refused acquire should exit 1"
grep -q "refused" "$T/err" || fail "refusal: $(cat "$T/err")"

# Bad arguments.
"$SLUICE" acquire -c "$T/q.ini" nosuchsection 2>/dev/null; [ $? -eq 2 ] || fail "unknown section should exit 2"
"$SLUICE" acquire -c "$T/q.ini" "host:99999" 2>/dev/null; [ $? -eq 2 ] || fail "bad port should exit 2"
"$SLUICE" acquire --segment "$T/absent.segment" api 2>/dev/null; [ $? -eq 1 ] || fail "missing segment should exit 1"

# Interrupted while waiting: the last place goes back to the queue at once.
others=()
for i in 1 2 3; do
	"$SLUICE" acquire -c "$T/q.ini" slow &
	others+=($!)
done
sleep 0.3
"$SLUICE" acquire -c "$T/q.ini" slow &
victim=$!
sleep 0.3
"$SLUICE" stat -c "$T/q.ini" --json >"$T/s1.json"
kill -INT $victim
wait $victim
[ $? -eq 130 ] || fail "interrupted acquire should exit 130"
"$SLUICE" stat -c "$T/q.ini" --json >"$T/s2.json"
q1=$(json_field "$T/s1.json" slow queued) q2=$(json_field "$T/s2.json" slow queued)
note "slow queue: $q1 waiting before the interrupt, $q2 after"
[ "$q1" -eq 3 ] && [ "$q2" -eq 2 ] || fail "the interrupted place was not returned ($q1 -> $q2)"
kill -TERM "${others[@]}" 2>/dev/null
for p in "${others[@]}"; do wait "$p" 2>/dev/null || true; done

#!/usr/bin/env bash
# tier: serial
# Redis's answers are untrusted (issue 11): a machine holding a lease from a real
# Redis meets, on the same port, a fake that answers badly in a dozen ways (garbage
# bytes, wrong types and lengths, numbers past 64 bits or far above the limit, deep
# nesting, a 2 GB string announced, a replica's ROLE).  The daemon logs,
# never calls a server that says it is no master, keeps its lease and
# its shaping, and does not crash; when a real Redis comes back, it renews.
# (Silence is another matter: the lease lapses - t_fleet_late.sh.)
. "$(dirname "$0")/fleet_lib.sh"

start_server --also 127.0.1.1
start_redis
fleet_config 1 "$T/m1.ini" <<EOF2
[api]
match = 127.0.1.0/24:$PORT
rate = 30/s
scope = fleet
max_wait = 30s
EOF2
start_machine 1
sleep 2.5 # the settling time of an empty Redis
WITNESS_KEY=dst start_syn_witness "$PORT" "$T/syn.log"
offer 1 60 26
sleep 2
share=$(machine_json 1 api share)
note "share from the real Redis: $share/s"
python3 -c "import sys; sys.exit(0 if abs(float(sys.argv[1]) - 30) < 0.01 else 1)" "$share" ||
	fail "one machine alone should hold the whole grid of 30/s, not $share"

kill_redis
python3 "$HELPERS/fake_redis.py" "$REDIS_PORT" 18 >"$T/fake.out" 2>&1 &
FAKE_PID=$!
BG_PIDS+=($FAKE_PID)
t0=$(now_ns)
wait "$FAKE_PID"
t1=$(now_ns)
note "fake Redis: $(cat "$T/fake.out")"
kill -0 "$M_PID_1" 2>/dev/null || fail "sluiced died on bad answers: $(tail -5 "$T/sluiced-1.log")"
n=$(grep -o '^[0-9]*' "$T/fake.out")
[ "${n:-0}" -ge 8 ] || fail "the daemon came back to the fake only ${n:-0} times"
for what in "not the lease script's" "out of the lease script's range" "cannot load the lease script" \
	"not a master (ROLE)"; do
	grep -q "$what" "$T/sluiced-1.log" || fail "no log line for an answer that was $what"
done
[ "$(machine_json 1 api share)" = "$share" ] || fail "the lease changed on bad answers: $(machine_json 1 api share)"
[ "$(machine_json 1 api lease_lapsed)" = False ] || fail "the lease lapsed while the daemon lives"

# A real Redis again, empty: the lease is renewed.
start_redis "$REDIS_PORT"
wait "$O_PID_1"
t2=$(now_ns)
sleep 0.3
python3 "$HELPERS/fleet_check.py" "$T/syn.log" --from "$t0" --to "$t1" --what "among bad answers" \
	--max-per-second 31 --share 127.0.1.1=30/5 || fail "shaping changed among bad answers"
[ "$(redis_field 1 state)" = up ] ||
	fail "not back on the real Redis"
echo "ok"

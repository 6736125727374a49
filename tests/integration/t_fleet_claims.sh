#!/usr/bin/env bash
# tier: serial
# Claims through the real shim and daemon (docs/design.md, "Claims"): a machine
# alone on a fleet rate of 20/s - an equal part of five requests a round, under
# six - holds no ranks and claims each slot a waiting caller asks for.  Four
# blocking python clients offer 40/s for 6 s: the destination sees never more
# than 22 in any second (the grid's bound, R·(S + ε) + 2) and the rate within
# 15% (the target is make bench's); the daemon claimed (its debug log), and it
# runs a thread for the claims' bell.
# Reloaded with `claims = off`, the thread is gone, the machine holds ranks
# (stat's share) and claims no more, and the rate holds: the switch needs no
# restart.
. "$(dirname "$0")/fleet_lib.sh"

start_server --also 127.0.1.1
start_redis
fleet_config 1 "$T/m1.ini" <<EOF2
[api]
match = 127.0.1.0/24:$PORT
rate = 20/s
scope = fleet
max_wait = 60s
EOF2
start_machine 1
sleep 2.5 # the settling time of an empty Redis
threads() { ls "/proc/$M_PID_1/task" | wc -l; }
with_claims=$(threads)

WITNESS_KEY=dst start_syn_witness "$PORT" "$T/syn.log"
t0=$(now_ns)
offer 1 40 6
wait "$O_PID_1"
t1=$(now_ns)
python3 "$HELPERS/fleet_check.py" "$T/syn.log" --from "$t0" --to "$t1" --what "one machine by claims" \
	--max-per-second 22 --rate 20 --within 15 --arrivals-span || fail "claims did not keep to 20/s"
came=$(grep -c "claims came" "$T/sluiced-1.log")
[ "$came" -gt 10 ] || fail "the daemon claimed $came times for 120 requests: $(grep -i claim "$T/sluiced-1.log" | tail -3)"
note "claims came $came times"

# claims = off at reload: the bell thread stops, ranks serve the machine.
sed -i 's/^claims = .*//; s/^\[sluice\]$/[sluice]\nclaims = off/' "$T/m1.ini"
grep -q "^claims = off" "$T/m1.ini" || fail "the config was not changed: $(cat "$T/m1.ini")"
"$SLUICE" reload -c "$T/m1.ini" >"$T/reload.out" 2>&1 || fail "reload: $(cat "$T/reload.out")"
for _ in $(seq 50); do
	[ "$(threads)" -lt "$with_claims" ] && break
	sleep 0.1
done
[ "$(threads)" -lt "$with_claims" ] || fail "claims = off left the daemon's $with_claims threads running"
came=$(grep -c "claims came" "$T/sluiced-1.log")
t0=$(now_ns)
offer 1 40 5
sleep 2
s=$(machine_json 1 api share)
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 19 else 1)' "$s" ||
	fail "with claims off the machine alone holds $s/s of 20/s"
wait "$O_PID_1"
t1=$(now_ns)
python3 "$HELPERS/fleet_check.py" "$T/syn.log" --from "$t0" --to "$t1" --what "one machine by ranks" \
	--max-per-second 22 --rate 20 --within 15 --arrivals-span || fail "ranks did not keep to 20/s"
now=$(grep -c "claims came" "$T/sluiced-1.log")
[ "$now" -le $((came + 1)) ] || fail "claims = off, and $((now - came)) more claims came"
echo "ok"

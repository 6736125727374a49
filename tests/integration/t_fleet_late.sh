#!/usr/bin/env bash
# tier: serial
# A Redis that is reached but does not answer is no outage (docs/design.md,
# "Late"): it may be answering the other machines, and giving them this one's
# share once its entry expires, so a machine must not shape on past what it was
# granted.  One machine holds the whole of 30/s; Redis is stopped (SIGSTOP: its
# port still takes connections, nothing answers).  Within a lease life the lease
# lapses, stat says "late", and the destination sees nothing more until a Redis
# answers again.  Killed -9 while stopped, Redis refuses connections: still no
# lease (it lapsed, and its share may be another machine's by now).  A new Redis
# on the same port answers: the shaping resumes.  Then Redis is killed -9 with the
# machine in good standing (a connection refused: an outage) and the lease is
# kept, as before.
. "$(dirname "$0")/fleet_lib.sh"

start_server --also 127.0.1.1
start_redis
fleet_config 1 "$T/m1.ini" <<EOF2
[api]
match = 127.0.1.0/24:$PORT
rate = 30/s
scope = fleet
max_wait = 60s
EOF2
start_machine 1
sleep 2.5 # the settling time of an empty Redis
WITNESS_KEY=dst start_syn_witness "$PORT" "$T/syn.log"
offer 1 60 26
sleep 3

t_stop=$(now_ns)
kill -STOP "$REDIS_PID"
sleep 4
state=$(redis_field 1 state)
lapsed=$(machine_json 1 api lease_lapsed)
note "Redis stopped 4 s: state $state, lease lapsed $lapsed"
[ "$state" = late ] || fail "stat does not say Redis answers late: $state"
[ "$lapsed" = True ] || fail "the lease was kept while Redis, reachable, did not answer"
grep -q "no answer in time; the leases lapse" "$T/sluiced-1.log" || fail "no log line for the late answer"
kill_redis
sleep 2.5
state=$(redis_field 1 state)
lapsed=$(machine_json 1 api lease_lapsed)
note "then killed 2.5 s: state $state, lease lapsed $lapsed"
[ "$lapsed" = True ] || fail "a lapsed lease came back when Redis, late before, refused connections"
t_cont=$(now_ns)
start_redis "$REDIS_PORT"
sleep 4.5 # an empty Redis's settling, and the lease's return
[ "$(redis_field 1 state)" = up ] || fail "not back on Redis after it answered again: $(redis_field 1 state)"

t_kill=$(now_ns)
kill_redis
sleep 3
state=$(redis_field 1 state)
lapsed=$(machine_json 1 api lease_lapsed)
t_end=$(now_ns)
note "Redis killed 3 s: state $state, lease lapsed $lapsed"
[ "$state" = down ] || fail "stat does not say Redis is down: $state"
[ "$lapsed" = False ] || fail "the lease lapsed in an outage, with its daemon alive"
wait "$O_PID_1" # its clients offer for longer than the test's steps take

# The lease's call left before the stop, and the lease lives 1 s from then:
# nothing may arrive from then until Redis answers again (0.5 s more for a
# release decided at the last moment to reach the destination on a busy machine).
python3 "$HELPERS/fleet_check.py" "$T/syn.log" --from $((t_stop + 1500000000)) --to "$t_cont" \
	--what "Redis stopped, then gone" --at-least 0 --max-per-second 0 || fail "releases on a lease Redis may have given away"
python3 "$HELPERS/fleet_check.py" "$T/syn.log" --from $((t_cont + 3000000000)) --to "$t_kill" \
	--what "Redis answering again" --at-least 20 --max-per-second 31 || fail "the shaping did not resume"
python3 "$HELPERS/fleet_check.py" "$T/syn.log" --from $((t_kill + 500000000)) --to "$t_end" \
	--what "Redis killed" --at-least 45 --max-per-second 31 || fail "the shaping stopped in an outage"
echo "ok"

#!/usr/bin/env bash
# tier: serial
# Redis goes away and comes back empty (issue 11): three daemons share 100/s, their
# clients offering 80/s each.  Redis is killed -9 for 20 s in the middle: the
# machines shape on the leases in hand (stat says so), no second above 102 at the
# destination.  Redis then restarts empty (no epoch, no holdings, no script): the
# daemons load the script again, report what they hold before anyone is granted
# more, and the rate is back near what it was before the outage within 2 s (5%:
# a recovery that failed shows as half; the noise of a loaded 2-core machine,
# once 2.1%, must not fail it - make bench keeps the figures), never above.  A section that never had a lease (machine 1 reloads a config
# with it during the outage) gets the fleet's limit over `hosts`.  Redis's scripts
# flushed later (SCRIPT FLUSH): loaded again, shaping unchanged.
. "$(dirname "$0")/fleet_lib.sh"

start_server --also 127.0.1.1 --also 127.0.1.2 --also 127.0.1.3 --also 127.0.2.1
start_redis
for n in 1 2 3; do
	fleet_config $n "$T/m$n.ini" <<EOF2
[api]
match = 127.0.1.0/24:$PORT
rate = 100/s
scope = fleet
max_wait = 30s
EOF2
	start_machine $n
done
sleep 2.5 # Redis started empty: the settling time
WITNESS_KEY=dst start_syn_witness "$PORT" "$T/syn.log"
fleet_syns() { python3 "$HELPERS/fleet_check.py" "$T/syn.log" "$@"; }

t0=$(now_ns)
for n in 1 2 3; do offer $n 80 38; done
sleep 8
t_kill=$(now_ns)
kill_redis
sleep 3
[ "$(redis_field 1 state)" = down ] || fail "stat does not say Redis is down: $(redis_field 1 state)"
note "3 s into the outage: machine 1's share $(machine_json 1 api share)/s, lease lapsed: $(machine_json 1 api lease_lapsed)"
[ "$(machine_json 1 api lease_lapsed)" = False ] || fail "the lease lapsed in an outage, with its daemon alive"
# A new fleet section on machine 1, never leased: 30/s over hosts = 3 is 10/s.
cat >>"$T/m1.ini" <<EOF2

[late]
match = 127.0.2.1/32:$PORT
rate = 30/s
scope = fleet
max_wait = 30s
EOF2
kill -HUP "$M_PID_1"
sleep 1
[ "$(machine_json 1 late outage_share)" = True ] || fail "a section with no lease got no outage share"
t_late=$(now_ns)
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$T/${SHM_NAME#/}-1.segment" timeout 60 python3 "$HELPERS/offer.py" 127.0.2.1 "$PORT" 40 8 \
	>"$T/offer-late.out" 2>&1 &
LATE_PID=$!
BG_PIDS+=($LATE_PID)
wait "$LATE_PID"
t_late_end=$(now_ns)
sleep 8
t_back=$(now_ns)
start_redis "$REDIS_PORT"
sleep 5
redis-cli -p "$REDIS_PORT" SCRIPT FLUSH >/dev/null
wait "$O_PID_1" "$O_PID_2" "$O_PID_3"
t1=$(now_ns)
sleep 0.3
[ "$(redis_field 1 state)" = up ] || fail "not back on Redis: $(redis_field 1 state)"
grep -q "shaping on the leases in hand" "$T/sluiced-1.log" || fail "no log line for the outage"

# From its first arrival to its last: the client's python starts and exits inside
# [t_late, t_late_end), and its start-up is not the shaper's to deliver.
python3 "$HELPERS/fleet_check.py" "$T/syn.log" --from "$t_late" --to "$t_late_end" --what "never leased" \
	--only 127.0.2.1 --arrivals-span --share 127.0.2.1=10/5 ||
	fail "a section never leased did not get its limit over hosts in the outage"
fleet_syns() { python3 "$HELPERS/fleet_check.py" "$T/syn.log" --exclude 127.0.2.1 "$@"; }
fleet_syns --from $((t0 + 1000000000)) --to "$t1" --what "the whole run (api)" --max-per-second 102 ||
	fail "a second above 102 around the outage"
before=$(fleet_syns --from $((t0 + 1000000000)) --to "$t_kill" --what "before" | sed -n 's/.* = \([0-9.]*\)\/s.*/\1/p')
fleet_syns --from "$t_kill" --to "$t_back" --what "Redis down" --rate "$before" --within 5 ||
	fail "shaping did not go on as before while Redis was down"
fleet_syns --from $((t_back + 2000000000)) --to "$t1" --what "Redis back, 2 s on" --rate "$before" --within 5 \
	--share 127.0.1.1=33.17/6 --share 127.0.1.2=33.17/6 --share 127.0.1.3=33.17/6 ||
	fail "not back within 5% of the rate before, 2 s after Redis came back empty"
echo "ok"

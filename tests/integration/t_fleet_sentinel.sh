#!/usr/bin/env bash
# tier: serial
# The fleet on Redis Sentinel (issue 29): a master, a replica and three Sentinels
# on loopback, the master and replica with one password and the Sentinels with
# another; three daemons find the master through the Sentinels (redis_sentinels,
# redis_master, redis_auth, redis_sentinel_auth) and share 30/s, each machine's
# clients offering 20/s.  A wrong Sentinel password is refused, and said.  `sluice check --redis` names the master each Sentinel gives.  The master
# is killed -9 mid-run: the Sentinels promote the replica; every daemon follows
# it within 10 s of the kill (sluice stat --json names it, found by sentinels,
# and Redis is up again), settles as on a Redis come back empty (the log says
# so), and at the destination no second ever holds more than the fleet's bound
# (docs/design.md, "Across machines": R·S + the machines' bursts = 33).
# SENTINEL_KILL=STOP (make chaos) hangs the master instead (SIGSTOP): the daemons'
# leases lapse while it does not answer (docs/design.md, "Late") and they follow
# the promoted replica all the same.
. "$(dirname "$0")/fleet_lib.sh"

start_server --also 127.0.1.1 --also 127.0.1.2 --also 127.0.1.3
MASTER_PASS="mp$$" SENTINEL_PASS="sp$$"
NODE_PASS=$MASTER_PASS
echo "$MASTER_PASS" >"$T/redis.pass"
echo "$SENTINEL_PASS" >"$T/sentinel.pass"
MASTER_PORT=$(free_port)
start_redis_node master "$MASTER_PORT" --requirepass "$MASTER_PASS" --masterauth "$MASTER_PASS"
REPLICA_PORT=$(free_port)
start_redis_node replica "$REPLICA_PORT" --replicaof 127.0.0.1 "$MASTER_PORT" --requirepass "$MASTER_PASS" \
	--masterauth "$MASTER_PASS"
S1=$(free_port) S2=$(free_port) S3=$(free_port)
NAME="m$$"
start_sentinels "$NAME" "$MASTER_PORT" "$S1" "$S2" "$S3"
scli() { redis-cli --no-auth-warning -a "$SENTINEL_PASS" "$@"; }
# Until the Sentinels know the replica and each other, a failover cannot happen.
for _ in $(seq 200); do
	n=$(scli -p "$S1" SENTINEL replicas "$NAME" 2>/dev/null | grep -c "^127.0.0.1$")
	o=$(scli -p "$S1" SENTINEL sentinels "$NAME" 2>/dev/null | grep -c "^127.0.0.1$")
	[ "$n" -ge 1 ] && [ "$o" -ge 2 ] && break
	sleep 0.1
done
[ "$n" -ge 1 ] && [ "$o" -ge 2 ] || fail "the Sentinels did not find the replica and each other"

FLEET_REDIS_CONF="redis_sentinels = 127.0.0.1:$S1 127.0.0.1:$S2 127.0.0.1:$S3
redis_master = $NAME
redis_auth = $T/redis.pass
redis_sentinel_auth = $T/sentinel.pass"
for n in 1 2 3; do
	fleet_config $n "$T/m$n.ini" <<EOF2
[api]
match = 127.0.1.0/24:$PORT
rate = 30/s
scope = fleet
max_wait = 60s
EOF2
done

# check --redis: each Sentinel's answer, then the master itself.
"$SLUICE" check -c "$T/m1.ini" --redis >"$T/check.out" 2>&1 || fail "check --redis: $(cat "$T/check.out")"
for s in "$S1" "$S2" "$S3"; do
	grep -q "^sentinel 127.0.0.1:$s: master $NAME is 127.0.0.1:$MASTER_PORT$" "$T/check.out" ||
		fail "check --redis does not give sentinel $s's answer: $(cat "$T/check.out")"
done
grep -q "^redis 127.0.0.1:$MASTER_PORT: version .*found by sentinels$" "$T/check.out" ||
	fail "check --redis did not reach the master: $(cat "$T/check.out")"
# A name the Sentinels do not know: check says so and fails.
sed "s/^redis_master = .*/redis_master = nosuch/" "$T/m1.ini" >"$T/bad.ini"
"$SLUICE" check -c "$T/bad.ini" --redis >"$T/bad.out" 2>&1 && fail "check --redis passed an unknown master name"
grep -q "does not know the master by that name" "$T/bad.out" || fail "check --redis: $(cat "$T/bad.out")"
# The Sentinels' password wrong: each refuses, and check says so.
echo "wrong" >"$T/wrong.pass"
sed "s|^redis_sentinel_auth = .*|redis_sentinel_auth = $T/wrong.pass|" "$T/m1.ini" >"$T/bad.ini"
"$SLUICE" check -c "$T/bad.ini" --redis >"$T/bad.out" 2>&1 && fail "check --redis passed a wrong Sentinel password"
grep -q "^sentinel 127.0.0.1:$S1: authentication refused" "$T/bad.out" || fail "check --redis: $(cat "$T/bad.out")"

for n in 1 2 3; do start_machine $n; done
on_master "127.0.0.1:$MASTER_PORT sentinels up" 50 1 >/dev/null ||
	fail "machine 1 is not on the master: $(master_of 1)"
"$SLUICE" stat -c "$T/m1.ini" | grep -q "^redis: master 127.0.0.1:$MASTER_PORT (found by sentinels) since " ||
	fail "sluice stat does not say which master: $("$SLUICE" stat -c "$T/m1.ini" | grep redis)"
sleep 2 # the settling of an empty start
WITNESS_KEY=dst start_syn_witness "$PORT" "$T/syn.log"

t0=$(now_ns)
for n in 1 2 3; do offer $n 20 24; done
sleep 6
if [ "${SENTINEL_KILL:-KILL}" = STOP ]; then
	kill -STOP "$NODE_PID_master" # killed -9 at the end, as every process the test started
else
	kill -9 "$NODE_PID_master"
	wait "$NODE_PID_master" 2>/dev/null
fi
t_kill=$(now_ns)
followed=$(on_master "127.0.0.1:$REPLICA_PORT sentinels up" 120 1 2 3)
[ -n "$followed" ] || fail "the daemons did not follow the promoted replica: $(for n in 1 2 3; do master_of $n; done)"
took=$(( (followed - t_kill) / 1000000 ))
note "all three daemons on the promoted replica $took ms after the master was $( [ "${SENTINEL_KILL:-KILL}" = STOP ] && echo hung || echo killed)"
[ "$took" -le 10000 ] || fail "the daemons took $took ms to follow the failover (at most 10 s)"
grep -q "moved master $NAME to 127.0.0.1:$REPLICA_PORT\|another master than before" "$T"/sluiced-*.log ||
	fail "no daemon logged the failover"
grep -q "another master than before" "$T"/sluiced-*.log || fail "no daemon settled on the new master"
wait "$O_PID_1" "$O_PID_2" "$O_PID_3"
t1=$(now_ns)
sleep 0.3
fleet_syns() { python3 "$HELPERS/fleet_check.py" "$T/syn.log" "$@"; }
fleet_syns --from $((t0 + 1000000000)) --to "$t1" --what "around the failover" --max-per-second 33 ||
	fail "a second above the fleet's bound around the failover"
# On the new master the fleet shares again: a generous floor (make bench has figures).
fleet_syns --from $((followed + 3000000000)) --to "$t1" --what "after the failover" --rate 30 --within 20 ||
	fail "the fleet did not share 30/s on the promoted replica"
echo "ok"
